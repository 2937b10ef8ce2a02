"""Per-step figures of `make bench`: our overhead per step beyond the environment's own, one lane, socket and shared memory.

A Benchmark whose Environment returns one constant observation (no work of its
own) is driven by the runner's step loop (`drive_episode`) against the policy
runtime in a local process over a Unix socket, the transport of both Episode
isolation modes (a policy container, or a forked sandbox that serves in
process). The policy answers 0 at once. So what a step costs is ours: the
observation's encoding, framing, the socket, the runtime's decoding, act(),
the action back. Each row runs twice in the same run, the socket path forced
("before") and the path the runner chooses ("after": large tensors through the
Episode's shared memory), in alternating repetitions; the median is printed.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from epg.v1 import runner_pb2
from epg_sdk.benchmark import Benchmark, BenchmarkSpec, StepResult
from epg_sdk.runtime.episode_loop import EpisodeLimits, drive_episode
from epg_sdk.testing import local_policy_runtime

FRAME_TARGET_US, VECTOR_TARGET_US = 100.0, 30.0
FRAME, VECTOR = np.zeros((96, 96, 3), dtype=np.uint8), np.zeros(17, dtype=np.float64)


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    name: str
    observation: np.ndarray
    environment_us: float  # CPU the Environment's step burns in the runner's process (caches and scheduler go cold)
    target_us: float
    steps_divisor: int = 1  # a long environment step: fewer steps


ROWS = (
    Row(name="96x96x3 uint8 frame", observation=FRAME, environment_us=0.0, target_us=FRAME_TARGET_US),
    Row(name="  after a 7 ms env step", observation=FRAME, environment_us=7000.0, target_us=FRAME_TARGET_US, steps_divisor=10),
    Row(name="17-float vector", observation=VECTOR, environment_us=0.0, target_us=VECTOR_TARGET_US),
    Row(name="  after a 75 us env step", observation=VECTOR, environment_us=75.0, target_us=VECTOR_TARGET_US),
)
PROGRAM = "class Policy:\n    def act(self, observation):\n        return 0\n\n\ndef make_policy(context):\n    return Policy()\n"


class _Still:
    def __init__(self, observation: np.ndarray, busy_s: float) -> None:
        self._observation = observation
        self._busy_s = busy_s

    def reset(self) -> np.ndarray:
        return self._observation

    def step(self, action: Any) -> StepResult:
        if self._busy_s:
            until = time.perf_counter() + self._busy_s
            while time.perf_counter() < until:
                pass
        return StepResult(observation=self._observation, reward=0.0, terminated=False)

    def summary(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        pass


class _StillBenchmark(Benchmark):
    def __init__(self, observation: np.ndarray, horizon: int, busy_s: float) -> None:
        self._observation = observation
        self._busy_s = busy_s
        self._spec = BenchmarkSpec(
            id="Still-v0", description="one constant observation", horizon=horizon, failure_return=0.0,
            observation_space={"type": "box", "shape": list(observation.shape), "dtype": observation.dtype.name},
            action_space={"type": "discrete", "n": 2},
        )

    @property
    def spec(self) -> BenchmarkSpec:
        return self._spec

    def make_environment(self, payload: bytes) -> _Still:
        return _Still(self._observation, self._busy_s)

    def validate_action(self, action: Any) -> Any:
        return action


def overhead_us(observation: np.ndarray, steps: int, shared_memory: bool, program_dir: Path, environment_us: float = 0.0) -> float:
    """Microseconds per step of the runner's loop beyond the environment's step, one Episode of steps."""
    limits = EpisodeLimits(step_deadline_s=10.0, episode_deadline_s=3600.0)
    with local_policy_runtime(limits.startup_deadline_s, limits.max_frame_bytes) as (channel, _):
        record = drive_episode(_StillBenchmark(observation, steps, environment_us / 1e6), runner_pb2.EpisodeSpec(index=0), channel, limits, 1,
                               str(program_dir), shared_memory=shared_memory)
    if record.outcome != runner_pb2.RUNNER_OUTCOME_COMPLETED or record.steps != steps:
        raise RuntimeError(f"the step-loop Episode failed: {record.message}")
    return (record.loop_seconds - record.environment_seconds) / steps * 1e6


def measure(steps: int, repeats: int) -> list[tuple[str, float, float, float]]:
    """(row name, socket us, shared us, target us) per row: medians of alternating repetitions."""
    figures = []
    with tempfile.TemporaryDirectory(prefix="epg-step-bench-") as tmp:
        program_dir = Path(tmp)
        (program_dir / "policy.py").write_text(PROGRAM)
        for row in ROWS:
            count = max(50, steps // row.steps_divisor)
            before, after = [], []
            for _ in range(repeats):
                before.append(overhead_us(row.observation, count, False, program_dir, row.environment_us))
                after.append(overhead_us(row.observation, count, True, program_dir, row.environment_us))
            figures.append((row.name, statistics.median(before), statistics.median(after), row.target_us))
    return figures


def print_rows(rows: list[tuple[str, float, float, float]]) -> None:
    print(f"{'per-step overhead, one lane':<28} {'socket us':>10} {'shared us':>10} {'target':>12}", flush=True)
    for name, before, after, target in rows:
        verdict = "ok" if after <= target else "OVER"
        print(f"{name:<28} {before:>10.1f} {after:>10.1f} {f'<={target:.0f} {verdict}':>12}", flush=True)
    print("(the runner's step loop against the policy runtime over a Unix socket, no container; socket: every observation "
          "on the socket; shared: tensors of 4 KiB or more through the Episode's sealed memfd; 'after an env step': the "
          "Environment burns that much CPU first, as CarRacing and HalfCheetah do; medians)", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print_rows(measure(args.steps, args.repeats))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
