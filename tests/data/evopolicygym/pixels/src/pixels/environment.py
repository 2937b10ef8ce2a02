"""One grid per Episode: a green cell walks to a red one; every observation is a 16x16x3 uint8 frame."""

from __future__ import annotations

from evopolicygym.authoring import EpisodeSpec, InvalidAction, Step
from evopolicygym.policy import PolicyValue, TensorValue

SIZE = 16
HORIZON = 40
FRAME_SHAPE = (SIZE, SIZE, 3)
FRAME_BYTES = SIZE * SIZE * 3
BACKGROUND, AGENT, TARGET = (16, 16, 16), (0, 255, 0), (255, 0, 0)
# stay, up, down, left, right
MOVES = ((0, 0), (0, -1), (0, 1), (-1, 0), (1, 0))


def render(agent: tuple[int, int], target: tuple[int, int]) -> TensorValue:
    """The frame with the agent's cell green, the target's red and the rest dark (row-major, RGB)."""
    pixels = bytearray(bytes(BACKGROUND) * (SIZE * SIZE))
    for (x, y), colour in ((target, TARGET), (agent, AGENT)):
        offset = (y * SIZE + x) * 3
        pixels[offset:offset + 3] = bytes(colour)
    return TensorValue(dtype="uint8", shape=FRAME_SHAPE, data=bytes(pixels))


class GridEnvironment:
    """Reach the target within HORIZON steps: -0.05 a step, +1 on arrival (which ends the Episode)."""

    def __init__(self, episode: EpisodeSpec) -> None:
        scenario = episode.scenario
        if type(scenario) is not tuple or len(scenario) != 4 or any(type(v) is not int or not 0 <= v < SIZE for v in scenario):
            raise ValueError("the grid's scenario is (agent x, agent y, target x, target y)")
        self._agent = (scenario[0], scenario[1])
        self._target = (scenario[2], scenario[3])
        self._visits = bytearray(SIZE * SIZE)
        self._steps = 0

    def reset(self) -> PolicyValue:
        self._visit()
        return self._observation()

    def step(self, action: PolicyValue) -> Step:
        if type(action) is not int or not 0 <= action < len(MOVES):
            raise InvalidAction()
        dx, dy = MOVES[action]
        self._agent = (min(max(self._agent[0] + dx, 0), SIZE - 1), min(max(self._agent[1] + dy, 0), SIZE - 1))
        self._steps += 1
        self._visit()
        arrived = self._agent == self._target
        return Step(
            observation=self._observation(),
            reward=(1.0 if arrived else 0.0) - 0.05,
            terminated=arrived,
            truncated=not arrived and self._steps >= HORIZON,
            metrics={
                "visits": TensorValue(dtype="uint8", shape=(SIZE, SIZE), data=bytes(self._visits)),
                "distance": abs(self._agent[0] - self._target[0]) + abs(self._agent[1] - self._target[1]),
            },
        )

    def close(self) -> None:
        pass

    def _visit(self) -> None:
        index = self._agent[1] * SIZE + self._agent[0]
        self._visits[index] = min(self._visits[index] + 1, 255)

    def _observation(self) -> dict[str, PolicyValue]:
        return {"frame": render(self._agent, self._target), "step": self._steps}


__all__ = ["FRAME_BYTES", "FRAME_SHAPE", "GridEnvironment", "HORIZON", "SIZE", "render"]
