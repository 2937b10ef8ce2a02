"""The Acrobot-v1 Benchmark: gymnasium's two-link swing-up task behind the epg SDK."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym

from orchestrator.sdk.benchmark import Benchmark
from orchestrator.sdk.gym_adapter import GymnasiumBenchmark

__all__ = ["BENCHMARK_ID", "FAILURE_RETURN", "HORIZON", "make_benchmark"]

BENCHMARK_ID = "Acrobot-v1"
HORIZON = 500
FAILURE_RETURN = -500.0

DESCRIPTION = (
    "Swing the free end of a two-link pendulum above the bar by applying torque "
    "-1 (0), 0 (1) or +1 (2) at the middle joint. Reward -1.0 per step until the "
    "tip rises one link length above the pivot; at most 500 steps."
)

# Simulator constants (published so a policy can model the dynamics) and the
# name each one has in the public parameters.
_PHYSICS_ATTRIBUTES = {
    "dt": "dt",
    "link_length_1": "LINK_LENGTH_1",
    "link_length_2": "LINK_LENGTH_2",
    "link_mass_1": "LINK_MASS_1",
    "link_mass_2": "LINK_MASS_2",
    "link_com_pos_1": "LINK_COM_POS_1",
    "link_com_pos_2": "LINK_COM_POS_2",
    "link_moi": "LINK_MOI",
    "max_vel_1": "MAX_VEL_1",
    "max_vel_2": "MAX_VEL_2",
}


def make_benchmark() -> Benchmark:
    """Return the Acrobot-v1 Benchmark (horizon 500, failure_return -500.0)."""
    return GymnasiumBenchmark(
        env_id=BENCHMARK_ID,
        description=DESCRIPTION,
        horizon=HORIZON,
        failure_return=FAILURE_RETURN,
        parameters=_physics(),
        readme=_readme(),
    )


def _physics() -> dict[str, Any]:
    # Typed as Any: the constants are attributes of AcrobotEnv, not of gymnasium.Env.
    env: Any = gym.make(BENCHMARK_ID, disable_env_checker=True).unwrapped
    try:
        parameters: dict[str, Any] = {public: float(getattr(env, attribute)) for public, attribute in _PHYSICS_ATTRIBUTES.items()}
        parameters["torques"] = [float(t) for t in env.AVAIL_TORQUE]
        parameters["dynamics"] = str(env.book_or_nips)
        return parameters
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
