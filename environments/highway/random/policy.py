"""Uniform-random Program: every action drawn uniformly from the action space, seeded by the Episode's policy seed.

A Box action is drawn uniformly within its bounds, element by element, in its dtype; a
Discrete one uniformly among its n values. context.rng is seeded with context.seed, so a
replayed Episode gets the same actions. This is the reference row of the published tables.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class UniformBox:
    def __init__(self, rng: np.random.Generator, space: dict[str, Any]) -> None:
        self._rng = rng
        self._low = np.asarray(space["low"], dtype=np.float64)
        self._high = np.asarray(space["high"], dtype=np.float64)
        self._dtype = np.dtype(space["dtype"])
        self._typed_low, self._typed_high = self._low.astype(self._dtype), self._high.astype(self._dtype)
        if not (np.isfinite(self._low).all() and np.isfinite(self._high).all()):
            raise ValueError("a uniform draw needs a Box with finite bounds")

    def act(self, observation: Any) -> np.ndarray:
        # uniform() draws from [low, high); the clip keeps a float32 rounding of high within the Box.
        value = self._rng.uniform(self._low, self._high).astype(self._dtype)
        return np.clip(value, self._typed_low, self._typed_high, out=value)


class UniformDiscrete:
    def __init__(self, rng: np.random.Generator, space: dict[str, Any]) -> None:
        self._rng = rng
        self._start = int(space.get("start", 0))
        self._n = int(space["n"])

    def act(self, observation: Any) -> int:
        return self._start + int(self._rng.integers(self._n))


def make_policy(context: Any) -> Any:
    space = context.action_space
    if space["type"] == "box":
        return UniformBox(context.rng, space)
    if space["type"] == "discrete":
        return UniformDiscrete(context.rng, space)
    raise ValueError(f"no uniform draw for action spaces of type {space['type']!r}")
