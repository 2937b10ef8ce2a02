"""The Acrobot-v1 Benchmark: gymnasium's two-link swing-up task behind the epg SDK."""

from __future__ import annotations

from gymnasium.envs.classic_control.acrobot import AcrobotEnv

from epg_sdk.benchmark import Benchmark
from epg_sdk.gym_adapter import GymnasiumBenchmark
from epg_sdk.readme import package_readme

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
# name each one has in the public parameters. The public names differ from the
# attribute names, so GymnasiumBenchmark's public_attributes cannot publish them;
# they are class constants of AcrobotEnv, read without building an environment.
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
        parameters={
            **{public: float(getattr(AcrobotEnv, attribute)) for public, attribute in _PHYSICS_ATTRIBUTES.items()},
            "torques": [float(t) for t in AcrobotEnv.AVAIL_TORQUE],
            "dynamics": str(AcrobotEnv.book_or_nips),
        },
        readme=package_readme(__file__),
    )
