"""Baseline: step towards the target, then hold still (0) once on it."""

from evopolicygym.policy import PolicyContext, PolicyValue

type Move = int


class TowardsTarget:
    def act(self, observation: PolicyValue) -> PolicyValue:
        assert isinstance(observation, dict)
        position, target = observation["position"], observation["target"]
        assert isinstance(position, int) and isinstance(target, int)
        move: Move = (target > position) - (target < position)
        return move


def make_policy(context: PolicyContext) -> TowardsTarget:
    del context
    return TowardsTarget()
