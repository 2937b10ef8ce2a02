"""evopolicygym: an independent implementation of EvoPolicyGym 0.3's public authoring and policy/v2 Program interfaces.

The top level loads its names lazily, so `import evopolicygym.policy` in a Policy loads only the ABI.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

__version__ = "0.3.0"

if TYPE_CHECKING:
    from .benchmark import Benchmark
    from .evaluation import EvaluationConfig, evaluate
    from .program import Program
    from .results import EvaluationResult, RunResult

_LAZY = {
    "Benchmark": ".benchmark",
    "EvaluationConfig": ".evaluation",
    "EvaluationResult": ".results",
    "Program": ".program",
    "RunResult": ".results",
    "evaluate": ".evaluation",
}

__all__ = ["Benchmark", "EvaluationConfig", "EvaluationResult", "Program", "RunResult", "__version__", "evaluate"]


def __getattr__(name: str) -> object:
    owner = _LAZY.get(name)
    if owner is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(owner, __name__), name)
    globals()[name] = value
    return value
