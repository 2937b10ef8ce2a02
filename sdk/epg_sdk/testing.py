"""Evaluate a Program against a Benchmark in local processes, without containers, and the other helpers of authors' tests.

For Benchmark authors' tests and for measuring the cost of isolation: the same
runner loop and policy runtime as in the sandbox, but the policy is a plain
subprocess with no isolation at all. Never use it for untrusted code. Beside it:
summary_values (one summary value of each Episode of a Feedback),
drive_environment (one Episode stepped in-process), entry_point_ids and
locked_pins (what an environment package declares), run_python (a fresh
interpreter with the package importable), and the two pytest hooks of a package's
tests/image/conftest.py (pytest_configure, pytest_collection_modifyitems).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from importlib import import_module
from pathlib import Path
from typing import Any

from epg.v1 import runner_pb2
from epg_sdk.benchmark import Benchmark, Environment, Feedback, StepResult
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


def summary_values(feedback: Feedback, key: str) -> list[Any]:
    """The value of key in each Episode's summary, in plan order, of a Feedback laid out like Benchmark.feedback's (values["episodes"][i]["summary"])."""
    return [row["summary"][key] for row in feedback.values["episodes"]]


def drive_environment(
    benchmark: Benchmark, payload: bytes, choose: Callable[[Any, int], Any], limit: int | None = None
) -> tuple[Environment, list[Any], list[StepResult]]:
    """Step a fresh Environment of payload in this process with choose(observation, step) -> action, each action validated.

    Stops when a step terminates or truncates the Episode, or after limit steps
    (default: the spec's horizon). Returns the Environment, still open (the caller
    reads its summary and closes it), the observations (the reset's first) and
    the step results. Raises what the Benchmark raises, InvalidAction included.
    """
    environment = benchmark.make_environment(payload)
    observations = [environment.reset()]
    results: list[StepResult] = []
    while len(results) < (limit or benchmark.spec.horizon):
        result = environment.step(benchmark.validate_action(choose(observations[-1], len(results))))
        observations.append(result.observation)
        results.append(result)
        if result.terminated or result.truncated:
            break
    return environment, observations, results


def entry_point_ids(package_root: Path) -> dict[str, str]:
    """Each Benchmark id the package's pyproject.toml registers (`epg.benchmarks` entry points) -> the spec id its factory makes.

    Imports each factory's module (the package must be importable) and calls the
    factory; a package whose entry points are right maps every id to itself.
    Raises KeyError when the pyproject.toml has no such entry points.
    """
    project = tomllib.loads((Path(package_root) / "pyproject.toml").read_text())
    made = {}
    for benchmark_id, entry in project["project"]["entry-points"]["epg.benchmarks"].items():
        module, _, factory = entry.partition(":")
        made[benchmark_id] = getattr(import_module(module), factory)().spec.id
    return made


def locked_pins(package_root: Path) -> dict[str, str]:
    """Distribution -> version of every `name==version` line of the package's requirements.lock (comments and blank lines skipped)."""
    lines = (Path(package_root) / "requirements.lock").read_text().splitlines()
    return dict(line.split("==") for line in lines if line and not line.startswith("#"))


def run_python(code: str, package_root: Path, *, unset: Iterable[str] = (), timeout_s: float = 120.0) -> subprocess.CompletedProcess[str]:
    """Run code in a fresh interpreter with package_root, then this interpreter's path, on PYTHONPATH; return the finished process.

    The environment is this process's without the variables named in unset;
    stdout and stderr are captured as text. Raises subprocess.TimeoutExpired
    when it runs longer than timeout_s.
    """
    removed = set(unset)
    environment = {key: value for key, value in os.environ.items() if key not in removed}
    environment["PYTHONPATH"] = os.pathsep.join([str(package_root), *sys.path])
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment, timeout=timeout_s)


# What an image test says it needs where the orchestrator's pytest plugin (`epg`) is not loaded.
NEEDS_PLUGIN = ("image test: needs the epg pytest plugin and a Docker engine "
                "(pip install 'epg-orchestrator[pytest]', then run pytest where Docker answers)")


def pytest_configure(config: Any) -> None:
    """A pytest hook for a package's tests/image/conftest.py: declares the `docker` mark its tests carry."""
    config.addinivalue_line("markers", "docker: needs the real Docker engine")


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    """A pytest hook for a package's tests/image/conftest.py: where the `epg` plugin is not loaded (a venv with the SDK
    and the package alone), every test in a tests/image directory is skipped with NEEDS_PLUGIN as its reason; where it
    is loaded, nothing changes (a missing engine then fails those tests)."""
    if config.pluginmanager.hasplugin("epg"):
        return
    import pytest  # only where pytest runs this hook

    for item in items:
        if item.path.parent.name == "image" and item.path.parent.parent.name == "tests":
            item.add_marker(pytest.mark.skip(reason=NEEDS_PLUGIN))
