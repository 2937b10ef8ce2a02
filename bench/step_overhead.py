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

Beside each row, the protocol's floor on this machine: the same observation and
action frames between two separate interpreters pinned to one CPU, as a lane's
runner and policy are, each side doing only what any implementation of the
protocol in Python must (encode, one send, one receive, parse, decode) with no
framing class, deadline, bookkeeping or check. A target below its floor cannot
be met by any runner and runtime written in Python on this machine.
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from epg.v1 import policy_pb2, runner_pb2
from epg_sdk.benchmark import Benchmark, BenchmarkSpec, StepResult
from epg_sdk.protocol import values
from epg_sdk.protocol.framing import HEADER
from epg_sdk.runtime.episode_loop import EpisodeLimits, drive_episode
from epg_sdk.testing import local_policy_runtime, local_runtime_env

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


_ENVIRONMENT_CPU = [0.0]  # CPU seconds the Environments burnt, subtracted from the CPU figures


class _Still:
    def __init__(self, observation: np.ndarray, busy_s: float) -> None:
        self._observation = observation
        self._busy_s = busy_s

    def reset(self) -> np.ndarray:
        return self._observation

    def step(self, action: Any) -> StepResult:
        if self._busy_s:  # CPU time, not wall time: the same work however loaded the machine is
            began = time.process_time()
            while time.process_time() - began < self._busy_s:
                pass
            _ENVIRONMENT_CPU[0] += time.process_time() - began
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


@dataclass(frozen=True, slots=True, kw_only=True)
class Figures:
    wall_us: float  # the runner's loop per step beyond the environment's step
    cpu_us: float  # CPU of both processes per step beyond the environment's step: what the machine's load does not inflate


def _episode(observation: np.ndarray, steps: int, shared_memory: bool, program_dir: Path, busy_s: float) -> tuple[runner_pb2.EpisodeRecord, float]:
    """One Episode against a local policy runtime: its record and the CPU seconds both processes spent beyond the Environment's."""
    limits = EpisodeLimits(step_deadline_s=10.0, episode_deadline_s=3600.0)
    _ENVIRONMENT_CPU[0] = 0.0
    cpu = time.process_time() + resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime + resource.getrusage(resource.RUSAGE_CHILDREN).ru_stime
    with local_policy_runtime(limits.startup_deadline_s, limits.max_frame_bytes) as (channel, _):
        record = drive_episode(_StillBenchmark(observation, steps, busy_s), runner_pb2.EpisodeSpec(index=0), channel, limits, 1,
                               str(program_dir), shared_memory=shared_memory)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = time.process_time() + children.ru_utime + children.ru_stime - cpu - _ENVIRONMENT_CPU[0]
    if record.outcome != runner_pb2.RUNNER_OUTCOME_COMPLETED or record.steps != steps:
        raise RuntimeError(f"the step-loop Episode failed: {record.message}")
    return record, cpu


def overhead(observation: np.ndarray, steps: int, shared_memory: bool, program_dir: Path, environment_us: float = 0.0) -> Figures:
    """Per step of one Episode of steps, beyond the environment's step: wall time of the runner's loop, and CPU.

    The CPU of a one-step Episode (the runtime's start-up, the Program's import) is subtracted.
    """
    busy_s = environment_us / 1e6
    _, fixed_cpu = _episode(observation, 1, shared_memory, program_dir, busy_s)
    record, cpu = _episode(observation, steps, shared_memory, program_dir, busy_s)
    return Figures(wall_us=(record.loop_seconds - record.environment_seconds) / steps * 1e6,
                   cpu_us=(cpu - fixed_cpu) / (steps - 1) * 1e6)


# The policy's side of the floor: answer each observation frame (4-byte length, PolicyFrame) with action 0. An empty
# frame starts its CPU clock and is answered with one; at the end of the stream it sends the CPU seconds spent since,
# as a double. One frame at a time in each direction: the runner waits for each answer.
_FLOOR_POLICY = """
import socket, struct, sys, time
from epg.v1 import policy_pb2
from epg_sdk.protocol import values
from epg_sdk.protocol.framing import HEADER
peer = socket.socket(fileno=int(sys.argv[1]))
buffer = bytearray(1 << 20)
view = memoryview(buffer)
mark = time.process_time()
while True:
    received = peer.recv_into(buffer)
    if not received:
        peer.sendall(struct.pack("<d", time.process_time() - mark))
        break
    if received == HEADER.size and HEADER.unpack_from(buffer)[0] == 0:
        mark = time.process_time()
        peer.sendall(HEADER.pack(0))
        continue
    while received < HEADER.size or received < HEADER.size + HEADER.unpack_from(buffer)[0]:
        received += peer.recv_into(view[received:])
    (length,) = HEADER.unpack_from(buffer)
    frame = policy_pb2.PolicyFrame()
    frame.ParseFromString(view[HEADER.size:HEADER.size + length])
    values.decode(frame.observation.value)
    answer = policy_pb2.RuntimeFrame()
    values.encode_into(answer.action.value, 0)
    data = answer.SerializeToString()
    peer.sendall(HEADER.pack(len(data)) + data)
"""


def protocol_floor(observation: np.ndarray, steps: int) -> Figures:
    """The protocol's floor per step for observation (see the module's doc): wall time and CPU of both sides."""
    runner, policy = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    child = subprocess.Popen([sys.executable, "-c", _FLOOR_POLICY, str(policy.fileno())], pass_fds=[policy.fileno()],
                             env=local_runtime_env())
    policy.close()
    buffer = bytearray(4096)

    def step(index: int) -> None:
        frame = policy_pb2.PolicyFrame()
        values.encode_into(frame.observation.value, observation)
        frame.observation.step = index
        data = frame.SerializeToString()
        runner.sendall(HEADER.pack(len(data)) + data)
        received = runner.recv_into(buffer)
        answer = policy_pb2.RuntimeFrame()
        answer.ParseFromString(memoryview(buffer)[HEADER.size:received])  # type: ignore[arg-type]  # upb takes any buffer
        values.decode(answer.action.value)

    try:
        for index in range(min(steps, 200)):  # both sides' first steps (caches, allocators) are not the floor
            step(index)
        runner.sendall(HEADER.pack(0))  # the policy's side starts its clock, and says so
        if runner.recv_into(buffer) != HEADER.size:
            raise RuntimeError("the floor's policy side did not answer the start of its clock")
        began, cpu = time.perf_counter(), time.process_time()
        for index in range(steps):
            step(index)
        wall, cpu = time.perf_counter() - began, time.process_time() - cpu
        runner.shutdown(socket.SHUT_WR)
        said = b""
        while len(said) < 8 and (chunk := runner.recv(8 - len(said))):
            said += chunk
        (policy_cpu,) = struct.unpack("<d", said)
    finally:
        runner.close()
        child.wait(timeout=30)
    return Figures(wall_us=wall / steps * 1e6, cpu_us=(cpu + policy_cpu) / steps * 1e6)


Measured = tuple[str, Figures, Figures, float, Figures]  # row name, socket path, shared memory, target us, floor


def measure(steps: int, repeats: int) -> list[Measured]:
    """Per row: the socket path forced and the runner's own choice, medians of alternating repetitions, and the target."""
    # One lane's processes share one CPU, as a sandbox pins a lane's runner and its policy (SandboxLimits.pin_cpu):
    # a step then wakes the other process on the same CPU, not across CPUs (an inter-processor interrupt, which a
    # virtual machine pays dearly for). The policy runtime inherits the affinity.
    affinity = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {max(affinity)})
    try:
        return _measure(steps, repeats)
    finally:
        os.sched_setaffinity(0, affinity)


def _median(figures: list[Figures]) -> Figures:
    return Figures(wall_us=statistics.median(f.wall_us for f in figures), cpu_us=statistics.median(f.cpu_us for f in figures))


def _measure(steps: int, repeats: int) -> list[Measured]:
    figures = []
    floors: dict[int, Figures] = {}  # by the observation's id: the rows after an env step share their row's floor
    with tempfile.TemporaryDirectory(prefix="epg-step-bench-") as tmp:
        program_dir = Path(tmp)
        (program_dir / "policy.py").write_text(PROGRAM)
        for row in ROWS:
            count = max(50, steps // row.steps_divisor)
            samples: dict[bool, list[Figures]] = {False: [], True: []}
            floor_samples: list[Figures] = []
            for _ in range(repeats):
                for shared_memory in (False, True):
                    samples[shared_memory].append(overhead(row.observation, count, shared_memory, program_dir, row.environment_us))
                if id(row.observation) not in floors:
                    floor_samples.append(protocol_floor(row.observation, count))
            if floor_samples:
                floors[id(row.observation)] = _median(floor_samples)
            figures.append((row.name, _median(samples[False]), _median(samples[True]), row.target_us, floors[id(row.observation)]))
    return figures


def print_rows(rows: list[Measured]) -> None:
    print(f"{'per-step overhead, one lane':<28} {'socket us':>10} {'shared us':>10} {'target':>12} {'socket CPU':>11} {'shared CPU':>11}"
          f" {'floor us':>9} {'floor CPU':>10}", flush=True)
    for name, before, after, target, floor in rows:
        verdict = "ok" if after.wall_us <= target else "OVER"
        print(f"{name:<28} {before.wall_us:>10.1f} {after.wall_us:>10.1f} {f'<={target:.0f} {verdict}':>12} "
              f"{before.cpu_us:>11.1f} {after.cpu_us:>11.1f} {floor.wall_us:>9.1f} {floor.cpu_us:>10.1f}", flush=True)
    print("(the runner's step loop against the policy runtime over a Unix socket, no container, both on one CPU as a lane's are; socket: every observation "
          "on the socket; shared: tensors of 4 KiB or more through the Episode's sealed memfd; 'after an env step': the "
          "Environment burns that much CPU first, as CarRacing and HalfCheetah do; us: wall time per step beyond the "
          "environment's; CPU: us of CPU per step of both processes beyond the environment's, which a loaded machine "
          "does not inflate; floor: the same frames on the socket between two interpreters on the same CPU, each side "
          "only encoding, sending, receiving, parsing and decoding, what any Python runner and runtime pay; medians)", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print_rows(measure(args.steps, args.repeats))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
