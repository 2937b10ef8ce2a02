"""Uniform-random MiniGrid Program: each step one of the 7 actions with equal probability.

The reference row of the published tables. The numbers come from context.rng, a NumPy Generator
seeded with the Episode's policy seed, so an Episode replays identically.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class UniformRandom:
    def __init__(self, rng: np.random.Generator, start: int, count: int) -> None:
        self._rng = rng
        self._start = start
        self._count = count

    def act(self, observation: Any) -> int:
        return self._start + int(self._rng.integers(self._count))


def make_policy(context: Any) -> UniformRandom:
    space = context.action_space
    return UniformRandom(context.rng, int(space.get("start", 0)), int(space["n"]))
