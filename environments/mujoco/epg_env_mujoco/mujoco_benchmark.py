"""What the four MuJoCo Benchmarks share: one Environment that records each Episode's public summary, and the Feedback."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Callable

import gymnasium as gym
import numpy as np

from epg_env_mujoco.replay import REPLAY_ARTIFACT, Replay
from epg_sdk.benchmark import (
    EpisodeRecord,
    Feedback,
    StepResult,
    count_ends,
    mean_steps,
    shorten_summaries,
)
from epg_sdk.gym_adapter import GymnasiumBenchmark
from epg_sdk.trace import BoundedTrace

# Why an Episode ended: a closed set, the value of every Episode summary's `end`.
TIME_LIMIT = "time_limit"  # the Episode ran its horizon to the end
UNHEALTHY = "unhealthy"  # Ant: the torso left the healthy height range (or the state stopped being finite)
POLICY_FAILURE = "policy_failure"  # the Program failed (crash, timeout, invalid action); set by feedback()
NOT_ENDED = "not_ended"  # what an Environment says when asked before its Episode ended
END_CAUSES = (TIME_LIMIT, UNHEALTHY, POLICY_FAILURE)

# Feedback keeps the whole summary, trace included, of this many Episodes (in plan order); the
# summaries of later Episodes keep only SHORT_SUMMARY_KEYS, so that Feedback stays bounded.
MAX_DETAILED_EPISODES = 128
SHORT_SUMMARY_KEYS = ("end", "steps")


@dataclass(frozen=True)
class Task:
    """How one Benchmark reads its simulator: the per-step measurements, the summary values and the trace tokens.

    measure(env, info) -> {name: float} is called after reset (info of the reset) and
    after every step; summarize(first, last, totals, minima, steps) -> the task's summary
    values, where first/last are the measurements after reset and after the last step,
    totals sums every step's measurements and minima holds their smallest values; token(measure, step) is one trace token, taken every
    trace_every steps and after the last step.
    """

    measure: Callable[[Any, dict[str, Any]], dict[str, float]]
    summarize: Callable[[dict[str, float], dict[str, float], dict[str, float], dict[str, float], int], dict[str, Any]]
    token: Callable[[dict[str, float], int], str]
    trace_every: int
    summary_columns: tuple[str, ...]


class MujocoEnvironment:
    """One Episode of a gymnasium MuJoCo environment, seeded by the Episode's hidden seed, with its bounded summary."""

    def __init__(self, env: gym.Env, seed: int, *, task: Task, horizon: int, replay: bool = False) -> None:
        self._env = env
        self._seed = seed
        self._task = task
        self._horizon = horizon
        self._wants_replay = replay
        self._replay: Replay | None = None
        self._sheet: dict[str, bytes] = {}
        self._steps = 0
        self._terminated = False
        self._first: dict[str, float] = {}
        self._last: dict[str, float] = {}
        self._totals: dict[str, float] = {}
        self._minima: dict[str, float] = {}
        self._trace = BoundedTrace()
        self._last_traced = -1

    def reset(self) -> np.ndarray:
        observation, info = self._env.reset(seed=self._seed)
        self._first = self._last = self._task.measure(self._env, info)
        if self._wants_replay:
            self._replay = Replay(self._env, self._horizon)
            self._replay.capture(0)
        return np.array(observation, dtype=np.float64)

    def step(self, action: np.ndarray) -> StepResult:
        observation, reward, terminated, truncated, info = self._env.step(action)
        self._steps += 1
        self._terminated = bool(terminated)
        self._last = self._task.measure(self._env, info)
        for name, value in self._last.items():
            self._totals[name] = self._totals.get(name, 0.0) + value
            self._minima[name] = min(self._minima.get(name, math.inf), value)
        if self._steps % self._task.trace_every == 0:
            self._add_token()
        if self._replay is not None and self._steps % self._replay.every == 0:
            self._replay.capture(self._steps)
        return StepResult(observation=np.array(observation, dtype=np.float64), reward=float(reward),
                          terminated=bool(terminated), truncated=bool(truncated))

    def summary(self) -> dict[str, Any]:
        """The end cause, the steps, the task's measurements and the compact trace; bounded, never a seed.

        The replay Episode (plan index 0) also says what its replay holds, or why it has none.
        """
        if self._steps and self._last_traced != self._steps:
            self._add_token()
        trace, truncated = self._trace.render()
        values = self._task.summarize(self._first, self._last, self._totals, self._minima, self._steps)
        summary = {"end": self._end(), "steps": self._steps, **{k: _rounded(v) for k, v in values.items()},
                   "trace": trace, "trace_truncated": truncated}
        if self._replay is not None:
            self._replay.capture(self._steps)  # the last state
            self._sheet = self._replay.artifacts()
            summary["replay"] = self._replay.summary()
        return summary

    def artifacts(self) -> dict[str, bytes]:
        """The replay Episode's contact sheet (REPLAY_ARTIFACT), where rendering works; called after summary()."""
        return self._sheet

    def close(self) -> None:
        if self._replay is not None:
            self._replay.close()
        self._env.close()

    def _end(self) -> str:
        if self._terminated:
            return UNHEALTHY
        if self._steps >= self._horizon:
            return TIME_LIMIT
        return NOT_ENDED

    def _add_token(self) -> None:
        self._trace.add(self._task.token(self._last, self._steps))
        self._last_traced = self._steps


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 4) if math.isfinite(value) else None
    return value


class MujocoBenchmark(GymnasiumBenchmark):
    """A GymnasiumBenchmark (gymnasium's default keyword arguments) whose Episodes carry a Task's summary
    and whose Feedback adds the end causes and the means of the summary values."""

    def __init__(self, *, env_id: str, description: str, horizon: int, failure_return: float,
                 parameters: dict[str, Any], readme: str, task: Task) -> None:
        self._task = task
        super().__init__(env_id=env_id, description=description, horizon=horizon, failure_return=failure_return,
                         parameters=parameters, readme=readme, failure_summary={"end": POLICY_FAILURE},
                         summary_columns=("end", *task.summary_columns))

    def plan(self, split: str, seed: int, count: int) -> list[bytes]:
        """The SDK's seeds, the Episode at index 0 of every plan marked as the replay Episode (it renders, where it can)."""
        payloads = super().plan(split, seed, count)
        if payloads:
            payloads[0] = json.dumps({**json.loads(payloads[0]), "replay": True}).encode()
        return payloads

    def make_environment(self, payload: bytes) -> MujocoEnvironment:
        scenario = json.loads(payload)
        return MujocoEnvironment(self._make(), int(scenario["seed"]), task=self._task, horizon=self.spec.horizon,
                                 replay=scenario.get("replay") is True)

    def feedback(self, records: list[EpisodeRecord]) -> Feedback:
        """The SDK's default Feedback, plus `ends` (count per end cause), `mean_steps`, `means` (the mean of
        every numeric summary value over the completed Episodes), `shortened_summaries` and `replay`:
        the replay Episode's contact sheet published as the REPLAY_ARTIFACT artifact, or why there is none.

        A failed Episode's summary says `end: policy_failure`. Episodes after the first
        MAX_DETAILED_EPISODES keep only SHORT_SUMMARY_KEYS in their summary; `episodes.csv`
        has every Episode's summary values but the trace.
        """
        base = super().feedback(records)
        episodes = base.values["episodes"]
        completed = [row for row in episodes if row["status"] == "completed"]
        means = {}
        for name in self._task.summary_columns:
            numbers = [row["summary"][name] for row in completed if isinstance(row["summary"].get(name), (int, float))]
            means[name] = round(sum(numbers) / len(numbers), 4) if numbers else None
        values = {
            **base.values,
            "episodes": shorten_summaries(episodes, detailed=MAX_DETAILED_EPISODES, keys=SHORT_SUMMARY_KEYS),
            "ends": count_ends(episodes, END_CAUSES),
            "mean_steps": mean_steps(episodes),
            "means": means,
            "shortened_summaries": max(0, len(episodes) - MAX_DETAILED_EPISODES),
            "replay": _replay_of(records),
        }
        artifacts = dict(base.artifacts)
        sheet = next((r.artifacts[REPLAY_ARTIFACT] for r in records if REPLAY_ARTIFACT in r.artifacts), None)
        if sheet is not None:
            artifacts[REPLAY_ARTIFACT] = sheet
        return Feedback(score=base.score, values=values, artifacts=artifacts)


def _replay_of(records: list[EpisodeRecord]) -> dict[str, Any]:
    """What Feedback says of the replay: the Episode whose sheet is published, or why there is none."""
    for record in records:
        said = record.summary.get("replay")
        if isinstance(said, dict):
            available = said.get("available") is True and REPLAY_ARTIFACT in record.artifacts
            reason = "" if available else str(said.get("reason") or record.summary.get("artifacts_error") or "the sheet did not arrive")
            return {"available": available, "episode": record.index, **({"artifact": REPLAY_ARTIFACT} if available else {"reason": reason})}
    return {"available": False, "reason": "this evaluation did not run the replay Episode (index 0 of its split)"}

