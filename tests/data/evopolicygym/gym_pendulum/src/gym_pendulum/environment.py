"""One seeded Gymnasium Pendulum-v1 per Episode; observations are lists of three Python floats."""

from __future__ import annotations

import math

import gymnasium
from evopolicygym.authoring import EpisodeSpec, InvalidAction, Step
from evopolicygym.policy import PolicyValue

HORIZON = 50
MAX_TORQUE = 2.0


class PendulumEnvironment:
    """Pendulum-v1 truncated after HORIZON steps; an action is one finite float in [-2, 2]."""

    def __init__(self, episode: EpisodeSpec) -> None:
        if episode.scenario is not None:
            raise ValueError("Pendulum Episodes carry no scenario")
        self._seed = episode.environment_seed
        self._environment = gymnasium.make("Pendulum-v1", max_episode_steps=HORIZON)

    def reset(self) -> PolicyValue:
        # Gymnasium seeds take at most 2**64 - 1; the environment seed is an unsigned 64-bit integer.
        observation, _ = self._environment.reset(seed=self._seed)
        return [float(value) for value in observation]

    def step(self, action: PolicyValue) -> Step:
        if type(action) is not float or not math.isfinite(action) or not -MAX_TORQUE <= action <= MAX_TORQUE:
            raise InvalidAction()
        observation, reward, terminated, truncated, _ = self._environment.step([action])
        cos_theta, sin_theta, _velocity = (float(value) for value in observation)
        return Step(
            observation=[float(value) for value in observation],
            reward=float(reward),
            terminated=bool(terminated),
            truncated=bool(truncated),
            metrics={"angle": math.atan2(sin_theta, cos_theta), "torque": action},
        )

    def close(self) -> None:
        self._environment.close()


__all__ = ["HORIZON", "PendulumEnvironment"]
