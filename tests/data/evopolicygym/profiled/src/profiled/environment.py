"""One drifting point per Episode: keep x near 0 with a push in [-1, 1] against a profile's drift and noise."""

from __future__ import annotations

import math
import random

from evopolicygym.authoring import EpisodeSpec, InvalidAction, Step
from evopolicygym.policy import PolicyValue

from .config import ProfiledConfig


class DriftEnvironment:
    """x' = x + drift + noise + push; reward -|x'|; truncated after the profile's horizon."""

    def __init__(self, episode: EpisodeSpec, config: ProfiledConfig) -> None:
        self._config = config
        self._random = random.Random(episode.environment_seed)
        self._x = self._random.uniform(-1.0, 1.0)
        self._steps = 0

    def reset(self) -> PolicyValue:
        return {"x": self._x, "steps_left": float(self._config.horizon)}

    def step(self, action: PolicyValue) -> Step:
        if type(action) is not float or not math.isfinite(action) or not -1.0 <= action <= 1.0:
            raise InvalidAction()
        noise = self._random.uniform(-self._config.noise, self._config.noise)
        self._x += self._config.drift + noise + action
        self._steps += 1
        return Step(
            observation={"x": self._x, "steps_left": float(self._config.horizon - self._steps)},
            reward=-abs(self._x),
            terminated=False,
            truncated=self._steps >= self._config.horizon,
            metrics={"noise": noise},
        )

    def close(self) -> None:
        pass


__all__ = ["DriftEnvironment"]
