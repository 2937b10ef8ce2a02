"""The CartPole-v1 Benchmark: gymnasium's cart-pole balancing task behind the epg SDK."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym

from orchestrator.sdk.benchmark import Benchmark
from orchestrator.sdk.gym_adapter import GymnasiumBenchmark

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
        parameters=_physics(),
        readme=_readme(),
    )


def _physics() -> dict[str, Any]:
    env = gym.make(BENCHMARK_ID, disable_env_checker=True).unwrapped
    try:
        return {name: float(getattr(env, name)) for name in _PHYSICS_ATTRIBUTES}
    finally:
        env.close()


def _readme() -> str:
    # The image builder copies README.md into the module directory; in a source
    # checkout it sits at the package root, one level up.
    here = Path(__file__).resolve().parent
    for candidate in (here / "README.md", here.parent / "README.md"):
        if candidate.is_file():
            return candidate.read_text(encoding="utf-8")
    return ""
