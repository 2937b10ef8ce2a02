"""gymnasium-robotics' FetchPush-v4 and FetchPickAndPlace-v4 behind the epg SDK: two Benchmarks of one package.

The Fetch ids exist in gymnasium's registry only after gymnasium_robotics is handed to
gym.register_envs, which this module does before anything makes an environment.
"""

from __future__ import annotations

import gymnasium as gym
import gymnasium_robotics

from epg_env_fetch.fetch_benchmark import (
    END_CAUSES,
    FETCH_FAILURE_RETURN,
    FETCH_HORIZON,
    PICK_AND_PLACE_ID,
    PUSH_ID,
    make_pick_and_place_benchmark,
    make_push_benchmark,
)

gym.register_envs(gymnasium_robotics)

__all__ = [
    "END_CAUSES",
    "FETCH_FAILURE_RETURN",
    "FETCH_HORIZON",
    "PICK_AND_PLACE_ID",
    "PUSH_ID",
    "make_pick_and_place_benchmark",
    "make_push_benchmark",
]
