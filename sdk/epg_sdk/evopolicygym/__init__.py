"""EvoPolicyGym 0.3 Benchmarks served by our environment runner: the adapter, discovery and the entries.

`EvoPolicyGymBenchmark` wraps one of their Benchmark objects as ours
(`adapter`); `discover` lists what one of their packages exports, with the
entries `runner.load_benchmark` takes (`discovery`); `python -m
epg_sdk.evopolicygym discover MODULE` prints that list as JSON. Their
`evopolicygym` package is imported only when one of their Benchmarks is wrapped.
"""

from __future__ import annotations

from epg_sdk.evopolicygym.adapter import FAILURE_CODES, PROGRAM_ABI, EvidenceError, EvoPolicyGymBenchmark, is_structural_benchmark
from epg_sdk.evopolicygym.discovery import EntryError, construct, discover, load, parse_entry

__all__ = [
    "FAILURE_CODES",
    "PROGRAM_ABI",
    "EntryError",
    "EvidenceError",
    "EvoPolicyGymBenchmark",
    "construct",
    "discover",
    "is_structural_benchmark",
    "load",
    "parse_entry",
]
