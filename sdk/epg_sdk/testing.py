"""Evaluate a Program against a Benchmark in local processes, without containers.

For Benchmark authors' tests and for measuring the cost of isolation: the same
runner loop and policy runtime as in the sandbox, but the policy is a plain
subprocess with no isolation at all. Never use it for untrusted code.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from epg.v1 import runner_pb2
from epg_sdk.benchmark import Benchmark, Feedback
from epg_sdk.codes import RunnerOutcome
from epg_sdk.outcomes import ContainerExit, classify_episode
from epg_sdk.planning import policy_seed
from epg_sdk.protocol.codes import OUTCOMES, failure_to_proto
from epg_sdk.protocol.framing import DEFAULT_MAX_FRAME_BYTES, STEP_SPIN, FramedSocket
from epg_sdk.runtime.episode_loop import EpisodeLimits, drive_episode, feedback_records

# The directory holding epg_sdk and epg: sdk/ in a checkout, site-packages when installed.
_SDK_ROOT = Path(__file__).resolve().parents[1]


def local_runtime_env() -> dict[str, str]:
    """The environment of a local policy runtime process: the SDK on its path, nothing else of ours."""
    return {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(_SDK_ROOT), "PYTHONDONTWRITEBYTECODE": "1"}


@contextmanager
def local_policy_runtime(
    startup_timeout_s: float, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
) -> Iterator[tuple[FramedSocket, subprocess.Popen[bytes]]]:
    """Start the policy runtime as a plain local subprocess; yield its connected channel and the process.

    On leaving, the channel is closed and the process waited for (killed after 2 s), so
    its exit status is known. Raises socket.timeout when it does not connect in time.
    """
    with tempfile.TemporaryDirectory(prefix="epg-local-") as tmp:
        path = os.path.join(tmp, "policy.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(1)
        process = subprocess.Popen(
            [sys.executable, "-m", "epg_sdk.runtime.policy_runtime", path],
            env=local_runtime_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            listener.settimeout(startup_timeout_s)
            connection, _ = listener.accept()
            listener.close()
            channel = FramedSocket(connection, max_frame_bytes, spin=STEP_SPIN)
            try:
                yield channel, process
            finally:
                channel.close()
        finally:
            if process.poll() is None:
                try:
                    process.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def run_local_episode(
    benchmark: Benchmark,
    episode: runner_pb2.EpisodeSpec,
    program_dir: Path,
    seed: int,
    limits: EpisodeLimits,
) -> runner_pb2.EpisodeRecord:
    """Run one Episode with the policy runtime in a local subprocess; return the classified record.

    Raises RuntimeError when the Benchmark itself fails (an environment error).
    """
    with local_policy_runtime(limits.startup_deadline_s, limits.max_frame_bytes) as (channel, process):
        record = drive_episode(benchmark, episode, channel, limits, policy_seed(seed, episode.split, episode.index), str(program_dir.resolve()))
    outcome = OUTCOMES[record.outcome]
    if outcome is RunnerOutcome.ENVIRONMENT_ERROR:
        raise RuntimeError(f"environment error in Episode {episode.index}:\n{record.traceback}")
    verdict = classify_episode(outcome, record.message, ContainerExit(exit_code=process.returncode))
    record.failure = failure_to_proto(verdict.failure)
    return record


def evaluate_locally(
    benchmark: Benchmark,
    program_dir: Path | str,
    *,
    episodes: int = 3,
    split: str = "train",
    seed: int = 0,
    limits: EpisodeLimits | None = None,
) -> Feedback:
    """Evaluate the Program in program_dir on `episodes` planned Episodes; return the Benchmark's Feedback."""
    limits = limits or EpisodeLimits()
    payloads = benchmark.plan(split, seed, episodes)
    records = [
        run_local_episode(benchmark, runner_pb2.EpisodeSpec(split=split, index=i, payload=p), Path(program_dir), seed, limits)
        for i, p in enumerate(payloads)
    ]
    return benchmark.feedback(feedback_records(records))
