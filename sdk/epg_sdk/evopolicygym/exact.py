"""Exact policy/v2 values to and from the `epg.v1.Value` message, for the adapter's payloads and evidence.

EvoPolicyGym values are exact Python carriers: None, bool, int (signed or
unsigned 64-bit), finite float, str, bytes, `evopolicygym.policy.TensorValue`,
list, tuple (kept apart from list) and str-keyed dict. `epg_sdk.protocol.values`
owns the codec (`encode_exact`, `decode_exact`); this module names it for the
adapter and chooses a Benchmark's codec by its Program ABI.
"""

from __future__ import annotations

from typing import Any, Callable

from epg.v1 import values_pb2 as pb
from epg_sdk.protocol import values
from epg_sdk.protocol.values import decode_exact, encode_exact

__all__ = ["decode_exact", "encode_exact", "encoder_for"]


def encoder_for(program_abi: str) -> Callable[[Any], pb.Value]:
    """Return the codec of a Benchmark's public values and observations: encode_exact for "policy/v2"
    (EvoPolicyGym's exact values), values.encode for ours."""
    return encode_exact if program_abi == values.POLICY_V2_ABI else values.encode
