"""One dial per Episode: each step shows a hint and takes a digit 0..9; anything else raises InvalidAction."""

from __future__ import annotations

import random

from evopolicygym.authoring import EpisodeSpec, InvalidAction, Step
from evopolicygym.policy import PolicyValue

HORIZON = 20
DIGITS = range(10)


class DialEnvironment:
    """Reward 1 when the digit equals the hint's last digit, else 0. The action is validated inside step."""

    def __init__(self, episode: EpisodeSpec) -> None:
        self._random = random.Random(episode.environment_seed)
        self._hint = self._random.randrange(1_000)
        self._steps = 0

    def reset(self) -> PolicyValue:
        return {"hint": self._hint, "remaining": HORIZON}

    def step(self, action: PolicyValue) -> Step:
        # bool is an int subclass: an exact int is required, as the action space says.
        if type(action) is not int or action not in DIGITS:
            raise InvalidAction()
        reward = 1.0 if action == self._hint % 10 else 0.0
        self._steps += 1
        self._hint = self._random.randrange(1_000)
        return Step(
            observation={"hint": self._hint, "remaining": HORIZON - self._steps},
            reward=reward,
            terminated=False,
            truncated=self._steps >= HORIZON,
            metrics={"matched": reward == 1.0},
        )

    def close(self) -> None:
        pass


__all__ = ["DIGITS", "DialEnvironment", "HORIZON"]
