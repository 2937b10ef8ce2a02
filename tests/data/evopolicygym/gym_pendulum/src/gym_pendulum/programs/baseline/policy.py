"""Baseline: pump energy with full torque along the swing, then hold the top with a PD controller near upright."""

import math

from evopolicygym.policy import PolicyContext, PolicyValue


class SwingUp:
    def __init__(self, bound: float) -> None:
        self._bound = bound

    def act(self, observation: PolicyValue) -> PolicyValue:
        assert isinstance(observation, list)
        cos_theta, sin_theta, velocity = observation
        assert isinstance(cos_theta, float) and isinstance(sin_theta, float) and isinstance(velocity, float)
        if cos_theta > 0.85:
            torque = -10.0 * math.atan2(sin_theta, cos_theta) - 2.0 * velocity
            return max(-self._bound, min(self._bound, torque))
        return self._bound if velocity >= 0.0 else -self._bound


def make_policy(context: PolicyContext) -> SwingUp:
    space = context.action_space
    bound = space.get("maximum") if isinstance(space, dict) else None
    return SwingUp(bound if isinstance(bound, float) else 2.0)
