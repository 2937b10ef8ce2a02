"""Uniform-random Acrobot-v1 Program: each step one of the three torques (-1, 0, +1) with equal probability.

The reference row of the published tables (the orchestrator's `random` agent submits it). The
draws come from context.rng, a NumPy Generator seeded with the Episode's policy seed, so a
replayed Episode gets the same actions.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class UniformDiscrete:
    def __init__(self, rng: np.random.Generator, start: int, count: int) -> None:
        self._rng = rng
        self._start = start
        self._count = count

    def act(self, observation: Any) -> int:
        return self._start + int(self._rng.integers(self._count))


def make_policy(context: Any) -> UniformDiscrete:
    space = context.action_space
    return UniformDiscrete(context.rng, int(space.get("start", 0)), int(space["n"]))
