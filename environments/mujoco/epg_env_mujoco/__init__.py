"""gymnasium's MuJoCo HalfCheetah-v5, Ant-v5, Pusher-v5 and Reacher-v5 behind the epg SDK: four Benchmarks of one package.

State observations only. The replay Episode (index 0 of a plan) renders a contact sheet offscreen where
libOSMesa is installed (epg_env_mujoco.replay, imported first so that it can set MUJOCO_GL before MuJoCo loads).
"""

from __future__ import annotations

from epg_env_mujoco import replay  # noqa: F401  (first: it selects MuJoCo's GL backend)
from epg_env_mujoco.mujoco_benchmark import END_CAUSES, NOT_ENDED, POLICY_FAILURE, TIME_LIMIT, UNHEALTHY
from epg_env_mujoco.tasks import (
    ANT_ID,
    FAILURE_RETURNS,
    HALFCHEETAH_ID,
    HORIZONS,
    PUSHER_ID,
    REACHER_ID,
    make_ant_benchmark,
    make_halfcheetah_benchmark,
    make_pusher_benchmark,
    make_reacher_benchmark,
)

__all__ = [
    "ANT_ID",
    "END_CAUSES",
    "FAILURE_RETURNS",
    "HALFCHEETAH_ID",
    "HORIZONS",
    "NOT_ENDED",
    "POLICY_FAILURE",
    "PUSHER_ID",
    "REACHER_ID",
    "TIME_LIMIT",
    "UNHEALTHY",
    "make_ant_benchmark",
    "make_halfcheetah_benchmark",
    "make_pusher_benchmark",
    "make_reacher_benchmark",
]
