"""One MiniGrid Episode, recorded for Feedback: success, termination cause, events and a bounded trace."""

from __future__ import annotations

from collections import deque
from typing import Any

from epg_sdk.benchmark import StepResult

ACTION_NAMES = ("left", "right", "forward", "pickup", "drop", "toggle", "done")
DIRECTION_NAMES = ("east", "south", "west", "north")  # 0..3: +x, +y (down), -x, -y (up)
TOGGLE = ACTION_NAMES.index("toggle")

# The trace keeps the first TRACE_HEAD and the last TRACE_TAIL steps of an Episode, with one
# marker entry between them for the steps left out: at most TRACE_HEAD + TRACE_TAIL + 1 entries.
TRACE_HEAD = 32
TRACE_TAIL = 32
# Events (pickups, drops, doors and boxes opened) beyond EVENT_LIMIT are counted in one marker entry.
EVENT_LIMIT = 32

GOAL_REACHED = "goal_reached"
TIME_LIMIT = "time_limit"
STOPPED = "stopped"


def _position(env: Any) -> tuple[int, int, int]:
    x, y = env.agent_pos
    return int(x), int(y), int(env.agent_dir)


def _describe(obj: Any) -> str:
    return f"{obj.color} {obj.type}"


def _trace_entry(step: int, action: int, x: int, y: int, direction: int) -> str:
    return f"{step} {ACTION_NAMES[action]} {x},{y} {DIRECTION_NAMES[direction]}"


class MiniGridEpisode:
    """One MiniGrid environment (unwrapped) seeded for one Episode; implements the SDK's Environment.

    horizon is the Benchmark's step limit (the runner truncates there; the
    environment's own max_steps may be larger), so the summary can tell a time
    limit from an Episode stopped early by a policy failure.
    """

    def __init__(self, env: Any, seed: int, *, horizon: int) -> None:
        self._env = env
        self._seed = seed
        self._horizon = horizon
        self._steps = 0
        self._terminated = False
        self._truncated = False
        self._start: tuple[int, int, int] = (0, 0, 0)
        self._head: list[tuple[int, int, int, int, int]] = []
        self._tail: deque[tuple[int, int, int, int, int]] = deque(maxlen=TRACE_TAIL)
        self._events: list[str] = []
        self._event_count = 0

    def reset(self) -> dict[str, Any]:
        observation, _info = self._env.reset(seed=self._seed)
        self._start = _position(self._env)
        return observation

    def step(self, action: Any) -> StepResult:
        env = self._env
        action = int(action)
        carried = env.carrying
        front = env.grid.get(*env.front_pos) if action == TOGGLE else None
        front_state = (front.type, getattr(front, "is_open", False), getattr(front, "is_locked", False)) if front is not None else None
        observation, reward, terminated, truncated, _info = env.step(action)
        self._steps += 1
        self._note_events(action, carried, front, front_state)
        entry = (self._steps, action, *_position(env))
        if len(self._head) < TRACE_HEAD:
            self._head.append(entry)
        else:
            self._tail.append(entry)
        self._terminated = self._terminated or bool(terminated)
        self._truncated = self._truncated or bool(truncated)
        return StepResult(observation=observation, reward=float(reward), terminated=bool(terminated), truncated=bool(truncated))

    def _note_events(self, action: int, carried: Any, front: Any, front_state: tuple[str, bool, bool] | None) -> None:
        env = self._env
        if env.carrying is not carried:
            if carried is not None:
                self._event(f"dropped {_describe(carried)}")
            if env.carrying is not None:
                self._event(f"picked up {_describe(env.carrying)}")
        if front is None or front_state is None:
            return
        kind, was_open, was_locked = front_state
        if kind == "door" and front.is_open != was_open:
            self._event(f"{'unlocked' if was_locked else 'opened' if front.is_open else 'closed'} {_describe(front)}")
        elif kind == "box" and env.grid.get(*env.front_pos) is not front:
            self._event(f"opened {_describe(front)}")

    def _event(self, text: str) -> None:
        self._event_count += 1
        if len(self._events) < EVENT_LIMIT:
            self._events.append(f"{self._steps}: {text}")

    def termination(self) -> str:
        """GOAL_REACHED (the mission was accomplished), TIME_LIMIT (the horizon or the environment's own
        step limit), or STOPPED (the Episode ended before either: the policy failed)."""
        if self._terminated:
            return GOAL_REACHED
        if self._truncated or self._steps >= self._horizon:
            return TIME_LIMIT
        return STOPPED

    def trace(self) -> list[str]:
        """The bounded trace: "STEP ACTION X,Y DIRECTION" per step, the agent's cell and heading after the step."""
        entries = [_trace_entry(*entry) for entry in self._head]
        omitted = self._steps - len(self._head) - len(self._tail)
        if omitted > 0:
            entries.append(f"... {omitted} steps omitted ...")
        entries.extend(_trace_entry(*entry) for entry in self._tail)
        return entries

    def summary(self) -> dict[str, Any]:
        env = self._env
        events = list(self._events)
        if self._event_count > len(events):
            events.append(f"... {self._event_count - len(events)} more events")
        x, y, direction = _position(env)
        sx, sy, sdirection = self._start
        return {
            "mission": str(env.mission),
            "success": self._terminated,
            "termination": self.termination(),
            "steps": self._steps,
            "start": {"x": sx, "y": sy, "direction": DIRECTION_NAMES[sdirection]},
            "end": {"x": x, "y": y, "direction": DIRECTION_NAMES[direction]},
            "carrying": _describe(env.carrying) if env.carrying is not None else None,
            "events": events,
            "trace": self.trace(),
        }

    def close(self) -> None:
        self._env.close()
