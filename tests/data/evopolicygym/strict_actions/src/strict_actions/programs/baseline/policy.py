"""Baseline: answer the hint's last digit, always an int in 0..9."""

from evopolicygym.policy import PolicyContext, PolicyValue


class LastDigit:
    def act(self, observation: PolicyValue) -> PolicyValue:
        assert isinstance(observation, dict)
        hint = observation["hint"]
        assert isinstance(hint, int)
        return hint % 10


def make_policy(context: PolicyContext) -> LastDigit:
    del context
    return LastDigit()
