"""Baseline: push against x, as far as the action bound allows."""

from evopolicygym.policy import PolicyContext, PolicyValue


class PushBack:
    def act(self, observation: PolicyValue) -> PolicyValue:
        assert isinstance(observation, dict)
        x = observation["x"]
        assert isinstance(x, float)
        return max(-1.0, min(1.0, -x))


def make_policy(context: PolicyContext) -> PushBack:
    del context
    return PushBack()
