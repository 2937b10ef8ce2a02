"""A random mover, seeded by the Episode's policy seed."""

import random

from evopolicygym.policy import PolicyContext, PolicyValue

type Move = int


class RandomMoves:
    def __init__(self, seed: int) -> None:
        self._random = random.Random(seed)

    def act(self, observation: PolicyValue) -> PolicyValue:
        del observation
        move: Move = self._random.choice((-1, 0, 1))
        return move


def make_policy(context: PolicyContext) -> RandomMoves:
    return RandomMoves(context.policy_seed)
