"""Random torques in [-2, 2], seeded by the Episode's policy seed."""

import random

from evopolicygym.policy import PolicyContext, PolicyValue


class RandomTorque:
    def __init__(self, seed: int) -> None:
        self._random = random.Random(seed)

    def act(self, observation: PolicyValue) -> PolicyValue:
        del observation
        return self._random.uniform(-2.0, 2.0)


def make_policy(context: PolicyContext) -> RandomTorque:
    return RandomTorque(context.policy_seed)
