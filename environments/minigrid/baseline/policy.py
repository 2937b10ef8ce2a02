"""Baseline MiniGrid Program: head for what the mission names when it is in view, else wander.

One rule for all four Benchmarks, weak on purpose. It reads the mission for its target (the goal
square, or the object of "pick up the COLOUR TYPE"), steers towards it when it is in the 7x7
view, opens closed (not locked) doors in front of it, and otherwise walks forward, turning at
random at obstacles and now and then in the open. It knows nothing of keys, locked doors, boxes
or balls in the way. Randomness comes from context.rng (seeded with the Episode's policy seed).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

LEFT, RIGHT, FORWARD, PICKUP, TOGGLE = 0, 1, 2, 3, 5

# Object and state codes of the image's channels 0 and 2 (also in context.parameters).
EMPTY, FLOOR, DOOR, GOAL = 1, 3, 4, 8
OPEN, CLOSED = 0, 1

# The agent sits at column 3 of the bottom row of its 7x7 view, facing row 0.
AGENT_X, AGENT_Y = 3, 6
FORWARD_PROBABILITY = 0.8
PICK_UP = re.compile(r"pick up the (\w+) (\w+)")


def mission_target(mission: str, parameters: dict[str, Any]) -> tuple[int, int | None]:
    """(object code, colour code or None) of what the mission asks for: the named object, else the goal square."""
    match = PICK_UP.search(mission)
    if match is None:
        return GOAL, None
    color, kind = match.groups()
    return int(parameters["object_codes"][kind]), int(parameters["color_codes"][color])


def nearest(image: np.ndarray, kind: int, color: int | None) -> tuple[int, int] | None:
    """The cell of the view holding an object of kind (and color) nearest to the agent, or None."""
    cells = np.argwhere((image[:, :, 0] == kind) & ((image[:, :, 1] == color) if color is not None else True))
    if len(cells) == 0:
        return None
    distances = np.abs(cells[:, 0] - AGENT_X) + (AGENT_Y - cells[:, 1])
    x, y = cells[int(np.argmin(distances))]
    return int(x), int(y)


class MissionFollower:
    def __init__(self, parameters: dict[str, Any], rng: np.random.Generator) -> None:
        self._parameters = parameters
        self._rng = rng
        self._target: tuple[int, int | None] | None = None

    def act(self, observation: dict[str, Any]) -> int:
        if self._target is None:
            self._target = mission_target(observation["mission"], self._parameters)
        image = observation["image"]
        front_kind, front_state = int(image[AGENT_X, AGENT_Y - 1, 0]), int(image[AGENT_X, AGENT_Y - 1, 2])
        passable = front_kind in (EMPTY, FLOOR, GOAL) or (front_kind == DOOR and front_state == OPEN)
        kind, color = self._target
        if front_kind == kind and (color is None or int(image[AGENT_X, AGENT_Y - 1, 1]) == color):
            return FORWARD if kind == GOAL else PICKUP
        if front_kind == DOOR and front_state == CLOSED:
            return TOGGLE
        target = nearest(image, kind, color)
        if target is not None:
            x, y = target
            if y < AGENT_Y - (x == AGENT_X) and passable:
                return FORWARD  # still ahead: close the distance first
            if x != AGENT_X:
                return LEFT if x < AGENT_X else RIGHT  # level with the agent: face it
        if passable and self._rng.random() < FORWARD_PROBABILITY:
            return FORWARD
        return LEFT if self._rng.random() < 0.5 else RIGHT


def make_policy(context: Any) -> MissionFollower:
    return MissionFollower(context.parameters, context.rng)
