"""Probe Benchmarks without gymnasium: known-answer tasks for testing the runner, runtimes and images."""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np

from epg_sdk.benchmark import Benchmark, BenchmarkSpec, InvalidAction, StepResult
from epg_sdk.readme import package_readme

__all__ = [
    "CRASH_MESSAGE",
    "ProbeBenchmark",
    "ProbeEnvironment",
    "make_benchmark",
    "make_crash_benchmark",
    "make_slow_benchmark",
]

PERIOD = 3  # the rewarded action at step i is i % PERIOD
SEED_MODULUS = 1000  # the observation shows the Episode seed modulo this
FAILURE_RETURN = 0.0
CRASH_MESSAGE = "simulator exploded"


class ProbeEnvironment:
    """One Probe Episode: observation ``[step_index, seed % 1000]``, reward 1.0 for action ``step_index % 3``.

    step_delay seconds are slept in every step; with crash_at_step set, that
    step (counted from 1) raises RuntimeError before doing anything else.
    """

    def __init__(self, seed: int, *, step_delay: float = 0.0, crash_at_step: int | None = None) -> None:
        self._seed_view = float(seed % SEED_MODULUS)
        self._step_delay = step_delay
        self._crash_at_step = crash_at_step
        self._index = 0
        self._hits = 0

    def reset(self) -> np.ndarray:
        self._index = 0
        self._hits = 0
        return self._observation()

    def step(self, action: Any) -> StepResult:
        if self._crash_at_step is not None and self._index + 1 == self._crash_at_step:
            raise RuntimeError(CRASH_MESSAGE)
        if self._step_delay > 0:
            time.sleep(self._step_delay)
        hit = int(action) == self._index % PERIOD
        if hit:
            self._hits += 1
        self._index += 1
        # Never terminates: the runner truncates the Episode at the horizon.
        return StepResult(observation=self._observation(), reward=1.0 if hit else 0.0, terminated=False)

    def summary(self) -> dict[str, Any]:
        return {"hits": self._hits}

    def close(self) -> None:
        pass

    def _observation(self) -> np.ndarray:
        return np.array([self._index, self._seed_view], dtype=np.float32)


class ProbeBenchmark(Benchmark):
    """A Probe Benchmark: Box(2,) float32 observations, Discrete(3) actions, default seed planning."""

    def __init__(
        self,
        *,
        benchmark_id: str,
        description: str,
        horizon: int,
        step_delay: float = 0.0,
        crash_at_step: int | None = None,
        readme: str = "",
    ) -> None:
        self._step_delay = step_delay
        self._crash_at_step = crash_at_step
        self._spec = BenchmarkSpec(
            id=benchmark_id,
            description=description,
            # Same description format as epg_sdk.gym_adapter.describe_space.
            observation_space={
                "type": "box",
                "shape": [2],
                "dtype": "float32",
                "low": np.zeros(2, dtype=np.float32),
                "high": np.array([horizon, SEED_MODULUS - 1], dtype=np.float32),
            },
            action_space={"type": "discrete", "n": PERIOD, "start": 0},
            horizon=horizon,
            failure_return=FAILURE_RETURN,
            parameters={},
            readme=readme,
        )

    @property
    def spec(self) -> BenchmarkSpec:
        return self._spec

    def make_environment(self, payload: bytes) -> ProbeEnvironment:
        seed = int(json.loads(payload)["seed"])
        return ProbeEnvironment(seed, step_delay=self._step_delay, crash_at_step=self._crash_at_step)

    def validate_action(self, action: Any) -> int:
        """Return the action as an int in [0, 3). Raises InvalidAction for anything but an integer in range."""
        if isinstance(action, np.ndarray) and action.shape == () and np.issubdtype(action.dtype, np.integer):
            action = action[()]
        # bool is an int subclass; a policy returning True is almost surely a bug.
        if isinstance(action, (bool, np.bool_)) or not isinstance(action, (int, np.integer)):
            raise InvalidAction(f"expected an integer in [0, {PERIOD}), got {_short(action)}")
        value = int(action)
        if not 0 <= value < PERIOD:
            raise InvalidAction(f"action {value} is outside [0, {PERIOD})")
        return value


def make_benchmark() -> Benchmark:
    """Return Probe-v0: horizon 20, perfect score 20."""
    return ProbeBenchmark(
        benchmark_id="Probe-v0",
        description="Return step_index % 3, read from observation[0]; reward 1.0 per correct step, 20 steps.",
        horizon=20,
        readme=package_readme(__file__),
    )


def make_slow_benchmark() -> Benchmark:
    """Return ProbeSlow-v0: horizon 4, every environment step sleeps 0.5 s."""
    return ProbeBenchmark(
        benchmark_id="ProbeSlow-v0",
        description="Probe-v0 with 4 steps, each taking 0.5 s on the environment side.",
        horizon=4,
        step_delay=0.5,
        readme=package_readme(__file__),
    )


def make_crash_benchmark() -> Benchmark:
    """Return ProbeCrash-v0: the environment raises RuntimeError in its 3rd step."""
    return ProbeBenchmark(
        benchmark_id="ProbeCrash-v0",
        description="Probe-v0 whose environment raises RuntimeError in its 3rd step.",
        horizon=20,
        crash_at_step=3,
        readme=package_readme(__file__),
    )


def _short(action: Any, limit: int = 80) -> str:
    text = repr(action)
    return text if len(text) <= limit else text[: limit - 3] + "..."
