"""highway-env's parking-v0 and roundabout-v0 behind the epg SDK: two Benchmarks of one package.

Importing highway-env imports pygame, which prints a banner on stdout unless
PYGAME_HIDE_SUPPORT_PROMPT is set. The conformance checks print their report on
stdout, and nothing of this package may write there, so the variable is set here,
first: this module runs before any of its submodules imports highway_env.
"""

from __future__ import annotations

import os

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

import gymnasium as gym  # noqa: E402  (after the variable above, on purpose)
import highway_env  # noqa: E402

from epg_env_highway.parking import (  # noqa: E402
    PARKING_FAILURE_RETURN,
    PARKING_HORIZON,
    PARKING_ID,
    make_parking_benchmark,
)
from epg_env_highway.roundabout import (  # noqa: E402
    ROUNDABOUT_FAILURE_RETURN,
    ROUNDABOUT_HORIZON,
    ROUNDABOUT_ID,
    make_roundabout_benchmark,
)

# highway-env registers its gymnasium ids when it is imported; this call only says so.
gym.register_envs(highway_env)

__all__ = [
    "PARKING_FAILURE_RETURN",
    "PARKING_HORIZON",
    "PARKING_ID",
    "ROUNDABOUT_FAILURE_RETURN",
    "ROUNDABOUT_HORIZON",
    "ROUNDABOUT_ID",
    "make_parking_benchmark",
    "make_roundabout_benchmark",
]
