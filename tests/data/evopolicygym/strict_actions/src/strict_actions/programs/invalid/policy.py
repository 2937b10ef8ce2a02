"""Acts out of range: answers 10, one past the last digit, so the Environment raises InvalidAction at the first step."""

from evopolicygym.policy import PolicyContext, PolicyValue


class OutOfRange:
    def act(self, observation: PolicyValue) -> PolicyValue:
        del observation
        return 10


def make_policy(context: PolicyContext) -> OutOfRange:
    del context
    return OutOfRange()
