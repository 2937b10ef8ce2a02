"""Baseline Program for FetchPush-v4 and FetchPickAndPlace-v4 (context.benchmark_id says which); numbers in params.json.

Both steer the gripper proportionally (gain) at a waypoint, the displacement clipped to [-1, 1].
Push: rise, move above a point behind the block (on the far side from the goal), descend, then
drive through the block towards the goal. Pick and place: hover above the block with open
fingers, descend, close them for a few steps, then carry the block to the goal.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np


def _toward(gain: float, target: np.ndarray, grip: np.ndarray, fingers: float) -> np.ndarray:
    move = np.clip(gain * (target - grip), -1.0, 1.0)
    return np.array([*move, fingers], dtype=np.float32)


class Pusher:
    """Approach a point behind_m behind the block from clearance_m above it, then push along the block-to-goal line."""

    def __init__(self, gain: float, params: dict[str, float]) -> None:
        self._gain = gain
        self._behind = float(params["behind_m"])
        self._clearance = float(params["clearance_m"])
        self._aligned = float(params["aligned_m"])
        self._through = float(params["through_m"])
        self._pushing = False

    def act(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        state = observation["observation"]
        grip, block, goal = state[0:3], state[3:6], observation["desired_goal"]
        line = goal[:2] - block[:2]
        distance = float(np.linalg.norm(line))
        direction = line / distance if distance > 1e-6 else np.zeros(2)
        start = np.array([*(block[:2] - self._behind * direction), block[2]])
        if not self._pushing:
            offset = float(np.linalg.norm(grip[:2] - start[:2]))
            if offset > self._aligned:
                height = block[2] + self._clearance
                if grip[2] < height - self._aligned:  # rise in place first: moving round the block goes above it
                    return _toward(self._gain, np.array([grip[0], grip[1], height]), grip, -1.0)
                return _toward(self._gain, np.array([start[0], start[1], height]), grip, -1.0)
            if grip[2] - block[2] > self._aligned:
                return _toward(self._gain, start, grip, -1.0)
            self._pushing = True
        # Move the gripper by the block's remaining error, sideways corrections included, at the block's height.
        target = np.array([*(grip[:2] + (goal[:2] - block[:2]) + self._through * direction), block[2]])
        if float(np.linalg.norm(grip[:2] - block[:2])) > 2 * self._behind:
            self._pushing = False  # lost the block: go round again
        return _toward(self._gain, target, grip, -1.0)


class Picker:
    """Hover above the block with open fingers, descend, close for close_steps steps, then carry it to the goal."""

    def __init__(self, gain: float, params: dict[str, float]) -> None:
        self._gain = gain
        self._hover = float(params["hover_m"])
        self._aligned = float(params["aligned_m"])
        self._grasp_height = float(params["grasp_height_m"])
        self._close_steps = int(params["close_steps"])
        self._closed = 0

    def act(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        state = observation["observation"]
        grip, block, goal = state[0:3], state[3:6], observation["desired_goal"]
        offset = float(np.linalg.norm(grip[:2] - block[:2]))
        if self._closed == 0:
            if offset > self._aligned:
                return _toward(self._gain, block + np.array([0.0, 0.0, self._hover]), grip, 1.0)
            if grip[2] - block[2] > self._grasp_height:
                return _toward(self._gain, block, grip, 1.0)
        if self._closed < self._close_steps:
            self._closed += 1
            return np.array([0.0, 0.0, 0.0, -1.0], dtype=np.float32)
        if offset > 2 * self._aligned + 0.02 or abs(grip[2] - block[2]) > 0.05:
            self._closed = 0  # dropped it: start over
            return np.array([0.0, 0.0, 0.0, 1.0], dtype=np.float32)
        return _toward(self._gain, goal + (grip - block), grip, -1.0)


def make_policy(context: Any) -> Any:
    """The controller of the Benchmark named by context.benchmark_id, with its numbers from params.json."""
    params = json.loads((context.program_dir / "params.json").read_text(encoding="utf-8"))
    if context.benchmark_id.startswith("FetchPush"):
        return Pusher(params["gain"], params["push"])
    if context.benchmark_id.startswith("FetchPickAndPlace"):
        return Picker(params["gain"], params["pick_and_place"])
    raise ValueError(f"this baseline drives FetchPush-v4 and FetchPickAndPlace-v4, not {context.benchmark_id}")
