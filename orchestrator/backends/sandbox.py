"""The Docker Episode sandbox: one environment runner container, one fresh policy container per Episode."""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import grpc
from docker.models.containers import Container

from epg.v1 import runner_pb2, runner_pb2_grpc
from orchestrator.backends.container_spec import BindMount, ContainerSpec
from orchestrator.backends.engine import DockerEngine
from orchestrator.backends.labels import LabelSet, selector
from orchestrator.kernel.codes import InfraErrorCode, InfrastructureError, RunnerOutcome
from orchestrator.kernel.outcomes import ContainerExit, EpisodeOutcome, classify_episode
from orchestrator.kernel.ports import BenchmarkInfo, EvaluationFeedback, PlannedEpisode
from orchestrator.kernel.program import Program
from orchestrator.kernel.seeds import policy_seed
from orchestrator.protocol import values
from orchestrator.protocol.records import OUTCOMES, outcome_to_proto_record
from orchestrator.runtimes.episode_loop import EpisodeLimits

log = logging.getLogger(__name__)

POLICY_UID = "10001:10001"
IO_MOUNT = "/epg/io"
PROGRAM_MOUNT = "/epg/program"
EXCHANGE_MOUNT = "/exchange"
RUNNER_READY_S = 60.0
EXIT_WAIT_S = 5.0


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxLimits:
    """Resource limits of a policy container and the deadlines of its Episode."""

    memory_bytes: int = 512 * 1024 * 1024
    cpus: float = 1.0
    pids: int = 64
    # Pin the runner and its policy containers to one CPU. The runner and the
    # policy take turns (a step is a ping-pong), and on one CPU the kernel hands
    # over directly instead of waking an idle CPU: about half the step latency.
    pin_cpu: bool = True
    tmpfs_bytes: int = 64 * 1024 * 1024
    episode: EpisodeLimits = EpisodeLimits()


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxImages:
    environment: str
    policy_runtime: str
    benchmark_entry: str


class DockerSandbox:
    """Implements the kernel's EpisodeSandbox with the Docker engine.

    Use as a context manager: entering starts the environment runner
    container; leaving stops it and reaps every container of this session by
    label, whatever happened. The lock guards the slot counter only.
    """

    def __init__(
        self,
        engine: DockerEngine,
        images: SandboxImages,
        limits: SandboxLimits = SandboxLimits(),
        labels: LabelSet | None = None,
        workdir: Path | None = None,
    ) -> None:
        self._engine = engine
        self._images = images
        self._limits = limits
        self._labels = labels or LabelSet(session=secrets.token_hex(6), owner="")
        self._root = Path(tempfile.mkdtemp(prefix="epg-", dir=workdir))
        os.chmod(self._root, 0o755)
        self._exchange = self._root / "exchange"
        self._programs = self._root / "programs"
        self._lock = threading.Lock()
        self._counter = 0
        self._cpuset = str(max(os.sched_getaffinity(0))) if limits.pin_cpu else ""
        self._runner: Container | None = None
        self._channel: grpc.Channel | None = None
        self._stub: runner_pb2_grpc.EnvironmentRunnerStub | None = None

    @property
    def labels(self) -> LabelSet:
        return self._labels

    # lifecycle ---------------------------------------------------------------

    def __enter__(self) -> DockerSandbox:
        try:
            self._start_runner()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Stop the runner, reap every container of this session, remove the work directory."""
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        report = self._engine.reap(selector(session=self._labels.session))
        for error in report.errors:
            log.error("leaked after reaping: %s", error)
        shutil.rmtree(self._root, ignore_errors=True)

    def _start_runner(self) -> None:
        for directory in (self._exchange, self._programs):
            directory.mkdir(mode=0o755)
            os.chmod(directory, 0o755)
        spec = ContainerSpec(
            image=self._images.environment,
            # -O: Benchmarks validate actions before the simulator sees them, so
            # the simulators' own per-step asserts are dead weight (CartPole's: 6 us).
            command=("python3", "-O", "-m", "orchestrator.runtimes.runner", "--entry", self._images.benchmark_entry, "--exchange", EXCHANGE_MOUNT),
            labels=self._labels.for_role("runner"),
            user=f"{os.getuid()}:{os.getgid()}",
            mounts=(BindMount(source=str(self._exchange), target=EXCHANGE_MOUNT, read_only=False),),
            memory_bytes=2 * 1024 * 1024 * 1024,
            nano_cpus=0,
            cpuset_cpus=self._cpuset,
            pids_limit=256,
            hostname="runner",
        )
        self._runner = self._engine.start(spec)
        socket_path = self._exchange / "runner.sock"
        deadline = time.monotonic() + RUNNER_READY_S
        while not socket_path.exists():
            self._runner_alive_or_raise()
            if time.monotonic() > deadline:
                raise self._runner_error("the environment runner did not open its socket in time")
            time.sleep(0.02)
        self._channel = grpc.insecure_channel(f"unix:{socket_path}")
        self._stub = runner_pb2_grpc.EnvironmentRunnerStub(self._channel)
        try:
            grpc.channel_ready_future(self._channel).result(timeout=max(1.0, deadline - time.monotonic()))
        except grpc.FutureTimeoutError:
            raise self._runner_error("the environment runner did not answer in time") from None

    def _runner_alive_or_raise(self) -> None:
        assert self._runner is not None
        self._runner.reload()
        if self._runner.status in ("exited", "dead"):
            raise self._runner_error("the environment runner exited during start-up")

    def _runner_error(self, message: str, detail: str = "") -> InfrastructureError:
        logs = self._engine.logs_tail(self._runner, 16 * 1024).decode("utf-8", "replace") if self._runner else ""
        return InfrastructureError(InfraErrorCode.RUNNER_FAILED, message, evidence=f"{detail}\n--- runner log tail ---\n{logs}")

    def _call(self, method: str, request: object, timeout: float) -> object:
        assert self._stub is not None, "use DockerSandbox as a context manager"
        try:
            return getattr(self._stub, method)(request, timeout=timeout)
        except grpc.RpcError as exc:
            raise self._runner_error(f"the environment runner failed in {method}: {exc.code().name}", exc.details() or "") from None

    # EpisodeSandbox ----------------------------------------------------------

    def describe(self) -> BenchmarkInfo:
        d = self._call("Describe", runner_pb2.DescribeRequest(), 30)
        return BenchmarkInfo(
            id=d.id,
            description=d.description,
            observation_space=values.decode(d.observation_space),
            action_space=values.decode(d.action_space),
            horizon=d.horizon,
            primary_metric=d.primary_metric,
            direction="minimize" if d.direction == runner_pb2.METRIC_DIRECTION_MINIMIZE else "maximize",
            parameters=values.decode(d.parameters),
            failure_return=d.failure_return,
            readme=d.readme,
        )

    def plan(self, split: str, seed: int, count: int) -> list[PlannedEpisode]:
        response = self._call("PlanEpisodes", runner_pb2.PlanRequest(split=split, seed=seed, count=count), 60)
        return [
            PlannedEpisode(split=e.split, index=e.index, payload=e.payload, policy_seed=policy_seed(seed, e.split, e.index))
            for e in response.episodes
        ]

    def run_episode(self, episode: PlannedEpisode, program: Program) -> EpisodeOutcome:
        slot = self._new_slot()
        io_dir = self._exchange / slot
        program_dir = self._programs / slot
        io_dir.mkdir(mode=0o755)
        os.chmod(io_dir, 0o755)
        program.write_to(program_dir)
        container: Container | None = None
        try:
            self._call("PrepareSlot", runner_pb2.PrepareSlotRequest(slot=slot), 30)
            container = self._engine.start(self._policy_spec(slot, io_dir, program_dir))
            limits = self._limits.episode
            request = runner_pb2.RunEpisodeRequest(
                slot=slot,
                episode=runner_pb2.EpisodeSpec(split=episode.split, index=episode.index, payload=episode.payload),
                policy_seed=episode.policy_seed,
                limits=limits.to_proto(),
                program_dir=PROGRAM_MOUNT,
            )
            budget = limits.startup_deadline_s * 2 + limits.episode_deadline_s + 60
            record = self._call("RunEpisode", request, budget)
            outcome = OUTCOMES[record.outcome]
            if outcome is RunnerOutcome.ENVIRONMENT_ERROR:
                raise InfrastructureError(
                    InfraErrorCode.ENVIRONMENT_ERROR,
                    f"the {episode.split} Episode {episode.index} failed inside the environment (not the policy's fault)",
                    evidence=record.traceback,
                )
            exit_status = None
            tail = record.output_tail
            if outcome is not RunnerOutcome.COMPLETED:
                exit_status = self._engine.exit_of(container, EXIT_WAIT_S)
                if not tail:
                    tail = self._engine.logs_tail(container, limits.output_tail_bytes)
            verdict = classify_episode(outcome, record.message, exit_status)
            return EpisodeOutcome(
                index=episode.index,
                split=episode.split,
                status=verdict.status,
                failure=verdict.failure,
                reason=verdict.reason,
                steps=record.steps,
                reward=record.total_reward,
                terminated=record.terminated,
                truncated=record.truncated,
                policy_seconds=record.policy_seconds,
                environment_seconds=record.environment_seconds,
                loop_seconds=record.loop_seconds,
                output_tail=tail.decode("utf-8", "replace"),
                traceback=record.traceback,
                summary=values.decode(record.summary) or {},
            )
        finally:
            if container is not None and not self._engine.remove(container):
                log.error("policy container %s could not be removed; `epg-orchestrate gc` will reap it", container.short_id)
            shutil.rmtree(program_dir, ignore_errors=True)
            shutil.rmtree(io_dir, ignore_errors=True)

    def feedback(self, outcomes: list[EpisodeOutcome]) -> EvaluationFeedback:
        request = runner_pb2.FeedbackRequest(records=[outcome_to_proto_record(o) for o in outcomes])
        response = self._call("BuildFeedback", request, 120)
        return EvaluationFeedback(
            score=response.score,
            values=values.decode(response.values) or {},
            artifacts={a.name: a.data for a in response.artifacts},
            episodes=tuple(outcomes),
        )

    # policy containers --------------------------------------------------------

    def _new_slot(self) -> str:
        with self._lock:
            self._counter += 1
            return f"ep{self._counter:06d}-{secrets.token_hex(3)}"

    def _policy_spec(self, slot: str, io_dir: Path, program_dir: Path) -> ContainerSpec:
        limits = self._limits
        return ContainerSpec(
            image=self._images.policy_runtime,
            command=("python3", "-m", "orchestrator.runtimes.policy_runtime", f"{IO_MOUNT}/policy.sock"),
            labels=self._labels.for_role("policy"),
            user=POLICY_UID,
            tmpfs={"/tmp": f"rw,nosuid,nodev,size={limits.tmpfs_bytes}"},
            mounts=(
                BindMount(source=str(io_dir), target=IO_MOUNT, read_only=True),
                BindMount(source=str(program_dir), target=PROGRAM_MOUNT, read_only=True),
            ),
            memory_bytes=limits.memory_bytes,
            # A pinned container cannot use more than its one CPU; a quota on top
            # only adds scheduler accounting to every step.
            nano_cpus=0 if self._cpuset and limits.cpus >= 1 else int(limits.cpus * 1e9),
            cpuset_cpus=self._cpuset,
            pids_limit=limits.pids,
            environment={"HOME": "/tmp", "PYTHONDONTWRITEBYTECODE": "1"},
            working_dir=PROGRAM_MOUNT,
            hostname="policy",
            name=f"epg-policy-{self._labels.session}-{slot}",
        )
