"""The EvoPolicyGym Benchmark SDK: what an environment package implements, and what runs inside the containers.

A Benchmark owns the domain: its public spec, deterministic Episode planning
per split, a fresh Environment per Episode, action validation and Feedback.
The runner (epg_sdk.runtime.runner) drives it; the policy never sees it.

Example (a gymnasium environment in a few lines)::

    from epg_sdk.gym_adapter import GymnasiumBenchmark

    def make_benchmark():
        return GymnasiumBenchmark(
            env_id="CartPole-v1",
            description="Balance a pole on a cart.",
            horizon=500,
            failure_return=0.0,
        )

The names below are loaded on first use, so that importing a pure submodule
(`epg_sdk.codes`, `epg_sdk.outcomes`, `epg_sdk.planning`) loads neither NumPy
nor protobuf: the orchestrator's kernel imports those.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "Artifact": "epg_sdk.benchmark",
    "Benchmark": "epg_sdk.benchmark",
    "BenchmarkSpec": "epg_sdk.benchmark",
    "Environment": "epg_sdk.benchmark",
    "EpisodeRecord": "epg_sdk.benchmark",
    "Feedback": "epg_sdk.benchmark",
    "InvalidAction": "epg_sdk.benchmark",
    "StepResult": "epg_sdk.benchmark",
    "CheckReport": "epg_sdk.checks",
    "check_benchmark": "epg_sdk.checks",
    "SPLITS": "epg_sdk.planning",
    "plan_seeds": "epg_sdk.planning",
    "agent_section": "epg_sdk.readme",
    "package_readme": "epg_sdk.readme",
}

__all__ = sorted(_EXPORTS)

def __getattr__(name: str) -> Any:
    """Load an exported name from its module on first access. Raises AttributeError for any other name."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'epg_sdk' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
