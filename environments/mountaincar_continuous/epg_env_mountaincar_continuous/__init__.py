"""The MountainCarContinuous-v0 Benchmark: gymnasium's continuous hill-climb task behind the epg SDK."""

from __future__ import annotations

from epg_sdk.benchmark import Benchmark
from epg_sdk.gym_adapter import GymnasiumBenchmark
from epg_sdk.readme import package_readme

__all__ = ["BENCHMARK_ID", "FAILURE_RETURN", "HORIZON", "make_benchmark"]

BENCHMARK_ID = "MountainCarContinuous-v0"
HORIZON = 999
FAILURE_RETURN = -100.0

DESCRIPTION = (
    "Drive an underpowered car out of a valley to the flag at position 0.45 by "
    "choosing a force in [-1, 1] each step. Reward +100 on reaching the flag, "
    "minus 0.1 * force**2 per step; at most 999 steps."
)

# Simulator constants, published so that a policy can model the dynamics.
_PHYSICS_ATTRIBUTES = (
    "power",
    "min_position",
    "max_position",
    "max_speed",
    "goal_position",
    "goal_velocity",
    "min_action",
    "max_action",
)


def make_benchmark() -> Benchmark:
    """Return the MountainCarContinuous-v0 Benchmark (horizon 999, failure_return -100.0)."""
    return GymnasiumBenchmark(
        env_id=BENCHMARK_ID,
        description=DESCRIPTION,
        horizon=HORIZON,
        failure_return=FAILURE_RETURN,
        public_attributes=_PHYSICS_ATTRIBUTES,
        readme=package_readme(__file__),
    )
