"""Uniform-random pushes in [-1, 1], seeded by the Episode's policy seed (the random agent's Program)."""

import random

from evopolicygym.policy import PolicyContext, PolicyValue


class RandomPushes:
    def __init__(self, seed: int) -> None:
        self._random = random.Random(seed)

    def act(self, observation: PolicyValue) -> PolicyValue:
        del observation
        return self._random.uniform(-1.0, 1.0)


def make_policy(context: PolicyContext) -> RandomPushes:
    return RandomPushes(context.policy_seed)
