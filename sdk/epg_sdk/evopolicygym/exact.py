"""Exact policy/v2 values to and from the `epg.v1.Value` message, for the adapter's payloads and evidence.

EvoPolicyGym values are exact Python carriers: None, bool, int (signed or
unsigned 64-bit), finite float, str, bytes, `evopolicygym.policy.TensorValue`,
list, tuple (kept apart from list) and str-keyed dict. `epg_sdk.protocol.values`
owns the codec (`encode_exact`, `decode_exact`); while an SDK without them is
installed, the small fallback here does the same on the same message kinds.
"""

from __future__ import annotations

import importlib
import math
from typing import Any, Callable

from epg.v1 import values_pb2 as pb
from epg_sdk.protocol import values

MAX_DEPTH = 32

_DTYPE_CODES: dict[str, pb.DType.ValueType] = {
    "bool": pb.DTYPE_BOOL,
    "int8": pb.DTYPE_INT8,
    "int16": pb.DTYPE_INT16,
    "int32": pb.DTYPE_INT32,
    "int64": pb.DTYPE_INT64,
    "uint8": pb.DTYPE_UINT8,
    "uint16": pb.DTYPE_UINT16,
    "uint32": pb.DTYPE_UINT32,
    "uint64": pb.DTYPE_UINT64,
    "float16": pb.DTYPE_FLOAT16,
    "float32": pb.DTYPE_FLOAT32,
    "float64": pb.DTYPE_FLOAT64,
}
_DTYPE_NAMES = {code: name for name, code in _DTYPE_CODES.items()}


def _fallback_encode(obj: Any) -> pb.Value:
    value = pb.Value()
    _fill(value, obj, 0)
    return value


def _fill(value: pb.Value, obj: Any, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise values.ValueCodecError("value nested too deeply")
    kind = type(obj)
    if obj is None:
        value.none.SetInParent()
    elif kind is bool:
        value.boolean = obj
    elif kind is int:
        if -(2**63) <= obj < 2**63:
            value.int64 = obj
        elif 2**63 <= obj < 2**64:
            value.uint64 = obj
        else:
            raise values.ValueCodecError(f"integer {obj} fits in neither a signed nor an unsigned 64-bit integer")
    elif kind is float:
        if not math.isfinite(obj):
            raise values.ValueCodecError(f"float {obj} is not finite")
        value.float64 = obj
    elif kind is str:
        value.text = obj
    elif kind is bytes:
        value.raw = obj
    elif kind is list or kind is tuple:
        container = value.list if kind is list else value.tuple
        container.SetInParent()
        for item in obj:
            _fill(container.items.add(), item, depth + 1)
    elif kind is dict:
        value.map.SetInParent()
        for key, item in obj.items():
            if type(key) is not str:
                raise values.ValueCodecError(f"map keys must be exact strings, not {type(key).__name__}")
            _fill(value.map.entries[key], item, depth + 1)
    elif kind.__name__ == "TensorValue" and kind.__module__.startswith("evopolicygym"):
        code = _DTYPE_CODES.get(obj.dtype)
        if code is None:
            raise values.ValueCodecError(f"unsupported tensor dtype {obj.dtype!r}")
        value.tensor.dtype = code
        value.tensor.shape.extend(obj.shape)
        value.tensor.data = obj.data
    else:
        raise values.ValueCodecError(f"cannot encode a value of type {kind.__name__} exactly")


def _fallback_decode(value: pb.Value, depth: int = 0) -> Any:
    if depth > MAX_DEPTH:
        raise values.ValueCodecError("value nested too deeply")
    kind = value.WhichOneof("kind")
    if kind == "tensor":
        # Imported by name: `evopolicygym` is installed beside the SDK only where their Programs or Benchmarks run.
        TensorValue = importlib.import_module("evopolicygym.policy").TensorValue
        name = _DTYPE_NAMES.get(value.tensor.dtype)
        if name is None:
            raise values.ValueCodecError(f"unknown tensor dtype code {value.tensor.dtype}")
        try:
            return TensorValue(dtype=name, shape=tuple(value.tensor.shape), data=value.tensor.data)
        except (TypeError, ValueError) as exc:
            raise values.ValueCodecError(f"malformed tensor: {exc}") from None
    if kind in ("list", "tuple"):
        items = [_fallback_decode(item, depth + 1) for item in getattr(value, kind).items]
        return items if kind == "list" else tuple(items)
    if kind == "map":
        return {key: _fallback_decode(item, depth + 1) for key, item in value.map.entries.items()}
    if kind is None or kind == "none":
        return None
    if kind == "float64" and not math.isfinite(value.float64):
        raise values.ValueCodecError(f"float {value.float64} is not finite")
    return getattr(value, kind)


encode_exact: Callable[[Any], pb.Value] = getattr(values, "encode_exact", _fallback_encode)
"""Return the Value message of an exact policy/v2 value. Raises ValueCodecError for any other carrier."""

decode_exact: Callable[[pb.Value], Any] = getattr(values, "decode_exact", _fallback_decode)
"""Return the exact policy/v2 value of a Value message (tensors as TensorValue). Raises ValueCodecError."""


def encoder_for(program_abi: str) -> Callable[[Any], pb.Value]:
    """Return the codec of a Benchmark's public values and observations: encode_exact for "policy/v2"
    (EvoPolicyGym's exact values), values.encode for ours."""
    return encode_exact if program_abi == "policy/v2" else values.encode
