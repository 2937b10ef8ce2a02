"""The CartPole-v1 Benchmark: gymnasium's cart-pole balancing task behind the epg SDK."""

from __future__ import annotations

from epg_sdk.benchmark import Benchmark
from epg_sdk.gym_adapter import GymnasiumBenchmark
from epg_sdk.readme import package_readme

__all__ = ["BENCHMARK_ID", "FAILURE_RETURN", "HORIZON", "make_benchmark"]

BENCHMARK_ID = "CartPole-v1"
HORIZON = 500
FAILURE_RETURN = 0.0

DESCRIPTION = (
    "Balance a pole hinged on a cart by pushing the cart left (0) or right (1). "
    "Reward 1.0 per step; the Episode ends when the pole tilts past 12 degrees, "
    "the cart leaves [-2.4, 2.4], or after 500 steps."
)

# Physical constants of the simulator, published so that a policy can model the
# dynamics instead of rediscovering them.
_PHYSICS_ATTRIBUTES = (
    "gravity",
    "masscart",
    "masspole",
    "length",
    "force_mag",
    "tau",
    "theta_threshold_radians",
    "x_threshold",
)


def make_benchmark() -> Benchmark:
    """Return the CartPole-v1 Benchmark (horizon 500, failure_return 0.0)."""
    return GymnasiumBenchmark(
        env_id=BENCHMARK_ID,
        description=DESCRIPTION,
        horizon=HORIZON,
        failure_return=FAILURE_RETURN,
        public_attributes=_PHYSICS_ATTRIBUTES,
        readme=package_readme(__file__),
    )
