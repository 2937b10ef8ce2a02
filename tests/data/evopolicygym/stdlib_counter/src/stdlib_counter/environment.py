"""One counter per Episode: a position on a bounded line, moved by -1, 0 or +1 towards a target, with seeded gusts."""

from __future__ import annotations

import random

from evopolicygym.authoring import EpisodeSpec, InvalidAction, Step
from evopolicygym.policy import PolicyValue

type Position = int
type Bounds = tuple[Position, Position]

HORIZON = 30
LOWER, UPPER = 0, 20
MOVES = (-1, 0, 1)
GUST_EVERY = 7


def scenario_parts(scenario: PolicyValue) -> tuple[Position, Position, int]:
    """The (start, target, gust seed) a scenario tuple holds. Raises ValueError for any other shape."""
    if type(scenario) is not tuple or len(scenario) != 3 or any(type(part) is not int for part in scenario):
        raise ValueError("the counter's scenario is a tuple (start, target, gust seed) of three ints")
    start, target, gust_seed = scenario
    if not (LOWER <= start <= UPPER and LOWER <= target <= UPPER and 0 <= gust_seed <= 2**64 - 1):
        raise ValueError("the counter's scenario is out of its bounds")
    return start, target, gust_seed


class CounterEnvironment:
    """A fresh counter for one Episode: reset once, then step until the target is held or the horizon ends."""

    def __init__(self, episode: EpisodeSpec) -> None:
        self._start, self._target, gust_seed = scenario_parts(episode.scenario)
        # The Environment's randomness comes from both seeds, so two Episodes with one scenario still differ.
        self._gusts = random.Random(gust_seed ^ episode.environment_seed)
        self._position: Position = self._start
        self._moves: tuple[int, ...] = ()
        self._steps = 0
        self._started = False
        self._done = False

    def reset(self) -> PolicyValue:
        if self._started:
            raise RuntimeError("the counter is reset once")
        self._started = True
        return self._observation()

    def step(self, action: PolicyValue) -> Step:
        if not self._started or self._done:
            raise RuntimeError("step before reset or after the Episode ended")
        if type(action) is not int or action not in MOVES:
            raise InvalidAction()
        self._steps += 1
        self._position = min(max(self._position + action, LOWER), UPPER)
        gust = 0
        if self._steps % GUST_EVERY == 0:
            gust = self._gusts.choice((-1, 1))
            self._position = min(max(self._position + gust, LOWER), UPPER)
        self._moves = (*self._moves, action)[-3:]
        distance = abs(self._target - self._position)
        terminated = distance == 0 and action == 0
        truncated = not terminated and self._steps >= HORIZON
        self._done = terminated or truncated
        return Step(
            observation=self._observation(),
            reward=-float(distance),
            terminated=terminated,
            truncated=truncated,
            metrics={"distance": distance, "gust": gust, "bounds": self._bounds()},
        )

    def close(self) -> None:
        self._done = True

    def _bounds(self) -> Bounds:
        return (LOWER, UPPER)

    def _observation(self) -> dict[str, PolicyValue]:
        return {
            "position": self._position,
            "target": self._target,
            "bounds": self._bounds(),
            "last_moves": self._moves,
            "steps_left": HORIZON - self._steps,
        }


__all__ = ["CounterEnvironment", "HORIZON", "scenario_parts"]
