"""Benchmark authoring SDK: what an environment image implements for the runner.

A Benchmark owns the domain: its public spec, deterministic Episode planning
per split, a fresh Environment per Episode, action validation and Feedback.
The runner (orchestrator.runtimes.runner) drives it; the policy never sees it.

Example (a gymnasium environment in a few lines)::

    from orchestrator.sdk.gym_adapter import GymnasiumBenchmark

    def make_benchmark():
        return GymnasiumBenchmark(
            env_id="CartPole-v1",
            description="Balance a pole on a cart.",
            horizon=500,
            failure_return=0.0,
        )
"""

from orchestrator.sdk.benchmark import (
    Benchmark,
    BenchmarkSpec,
    Environment,
    EpisodeRecord,
    Feedback,
    InvalidAction,
    StepResult,
)
from orchestrator.sdk.checks import CheckReport, check_benchmark
from orchestrator.sdk.planning import SPLITS, plan_seeds
from orchestrator.sdk.readme import package_readme

__all__ = [
    "SPLITS",
    "CheckReport",
    "check_benchmark",
    "package_readme",
    "Benchmark",
    "BenchmarkSpec",
    "Environment",
    "EpisodeRecord",
    "Feedback",
    "InvalidAction",
    "StepResult",
    "plan_seeds",
]
