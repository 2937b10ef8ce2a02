"""Uniform-random MountainCarContinuous-v0 Program: each step a force drawn uniformly in [-1, 1].

The reference row of the published tables (the orchestrator's `random` agent submits it). The
draws come from context.rng, a NumPy Generator seeded with the Episode's policy seed, so a
replayed Episode gets the same actions.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class UniformBox:
    def __init__(self, rng: np.random.Generator, space: dict[str, Any]) -> None:
        self._rng = rng
        self._dtype = np.dtype(space["dtype"])
        self._low = np.asarray(space["low"], dtype=np.float64)
        self._high = np.asarray(space["high"], dtype=np.float64)
        self._bounds = self._low.astype(self._dtype), self._high.astype(self._dtype)

    def act(self, observation: Any) -> np.ndarray:
        # uniform() draws from [low, high); the clip keeps a rounding to float32 inside the Box.
        value = self._rng.uniform(self._low, self._high).astype(self._dtype)
        return np.clip(value, *self._bounds, out=value)


def make_policy(context: Any) -> UniformBox:
    return UniformBox(context.rng, context.action_space)
