"""The Docker Episode sandbox: runner lanes, each pinned to a CPU, and single-use policy containers.

A lane is one environment runner container (one process: no GIL shared
between lanes) with its own exchange directory; its policy containers run on
the same CPU. With forked isolation (tuning.isolation "forked") a lane has a
lane container instead, whose zygote forks each Episode's sandbox
(orchestrator.backends.zygote). Episodes of a batch are spread over the lanes
and their results returned in job order, so Feedback does not depend on the
concurrency.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Callable, Sequence

import grpc
from docker.errors import DockerException

from epg.v1 import runner_pb2, runner_pb2_grpc
from epg_sdk.codes import RunnerOutcome
from epg_sdk.outcomes import ContainerExit
from orchestrator.backends.container_spec import BindMount, ContainerSpec
from orchestrator.backends.engine import DockerEngine
from orchestrator.backends.labels import LabelSet, selector
from orchestrator.backends.lanes import episode_budget_s, run_over_lanes, runner_channel
from orchestrator.backends.pool import ContainerPool, Slot
from orchestrator.backends.settings import SandboxImages, SandboxLimits, SandboxTuning, benchmark_limits
from orchestrator.backends.workdirs import make_work_dir
from orchestrator.backends.zygote import ForkedSlot, LaneZygote, lane_spec
from orchestrator.kernel.infrastructure import InfraErrorCode, InfrastructureError
from orchestrator.kernel.outcomes import EpisodeOutcome
from orchestrator.kernel.ports import BenchmarkInfo, EpisodeJob, EvaluationFeedback, PlannedEpisode
from orchestrator.kernel.program import Program
from orchestrator.protocol.runner_messages import (
    benchmark_info,
    episode_outcome,
    episode_request,
    evaluation_feedback,
    feedback_request,
    planned_episodes,
    runner_outcome,
)

log = logging.getLogger(__name__)

POLICY_UID = "10001:10001"
IO_MOUNT = "/epg/io"
PROGRAM_MOUNT = "/epg/program"
EXCHANGE_MOUNT = "/exchange"
RUNNER_READY_S = 120.0  # a slow start on a loaded machine; a runner that exits is seen within RUNNER_ALIVE_CHECK_S
RUNNER_ALIVE_CHECK_S = 0.25
# How long a policy container that is dying (its socket closed, or killed) may take to stop before its exit is read:
# gVisor tears a sandbox down in seconds on loaded cores, and an exit read too early loses the OOM flag. The same
# bound as the Kubernetes backend's.
EXIT_WAIT_S = 10.0
CPU_BACKSTOP_MIN_S = 3600


@dataclass(slots=True, kw_only=True)
class _Lane:
    index: int
    cpu: str
    runner: Any = None
    channel: grpc.Channel | None = None
    stub: runner_pb2_grpc.EnvironmentRunnerStub | None = None
    zygote: LaneZygote | None = None  # forked isolation only


class DockerSandbox:
    """Implements the kernel's PooledSandbox (an EpisodeSandbox with its container pool) with the Docker engine.

    Use as a context manager: entering starts the runner lanes and the
    container pool; leaving drains the pool, stops the runners and reaps every
    container of this sandbox by label, whatever happened. Entering raises
    InfrastructureError: ENGINE_UNAVAILABLE when the engine lacks
    tuning.runtime (or forked isolation is asked for under another runtime
    than runc), RUNNER_FAILED when a runner does not come up, CONTAINER_FAILED
    when a lane container's zygote does not come up or the engine or kernel
    refuses its sandboxes. The lock guards the slot counter only.
    """

    def __init__(
        self,
        engine: DockerEngine,
        images: SandboxImages,
        limits: SandboxLimits = SandboxLimits(),
        labels: LabelSet | None = None,
        workdir: Path | None = None,
        tuning: SandboxTuning = SandboxTuning(),
    ) -> None:
        self._engine = engine
        self._images = images
        self._limits = limits
        self._tuning = tuning
        self._labels = labels or LabelSet(sandbox=secrets.token_hex(6), owner="")
        self._workdir = workdir
        # Made on entering (backends.workdirs.make_work_dir): the Host's own (0700), so each slot's policy.sock below admits the
        # first connection and no other local user may be it. Containers reach their parts through bind mounts, which
        # need no path through here.
        self._root: Path | None = None
        self._lock = threading.Lock()
        self._counter = 0
        cpus = sorted(os.sched_getaffinity(0), reverse=True)
        self._lanes = [_Lane(index=i, cpu=str(cpus[i % len(cpus)]) if limits.pin_cpu else "") for i in range(tuning.lanes())]
        self._container_pool: ContainerPool | None = None
        self._benchmark: BenchmarkInfo | None = None  # described once: its time limits apply to every Episode

    @property
    def labels(self) -> LabelSet:
        return self._labels

    @property
    def images(self) -> SandboxImages:
        return self._images

    def image_ids(self) -> dict[str, str]:
        """The engine's id of the environment and policy-runtime images ("" for one it does not hold)."""
        found = {name: self._engine.image_labels(tag) for name, tag in
                 (("environment", self._images.environment), ("policy_runtime", self._images.policy_runtime))}
        return {name: labels[0] if labels else "" for name, labels in found.items()}

    @property
    def zygotes(self) -> list[LaneZygote]:
        """The lanes' zygotes (forked isolation; empty otherwise)."""
        return [lane.zygote for lane in self._lanes if lane.zygote is not None]

    @property
    def container_pool(self) -> ContainerPool:
        assert self._container_pool is not None, "use DockerSandbox as a context manager"
        return self._container_pool

    # lifecycle ---------------------------------------------------------------

    def __enter__(self) -> DockerSandbox:
        try:
            self._require_runtime()
            self._root = make_work_dir("sandbox", self._workdir)
            self._programs.mkdir(mode=0o755)
            os.chmod(self._programs, 0o755)
            for exchange in map(self._exchange, self._lanes):
                exchange.mkdir(mode=0o755)
                os.chmod(exchange, 0o755)
            # A lane's runner and its lane container (forked isolation) start side by side: neither needs the other.
            starts: list[Callable[[_Lane], None]] = [self._start_runner]
            if self._forked:
                starts.append(self._start_zygote)
            with ThreadPoolExecutor(max_workers=len(self._lanes) * len(starts)) as starting:
                list(starting.map(lambda task: task[0](task[1]), [(start, lane) for lane in self._lanes for start in starts]))
            self._container_pool = ContainerPool.for_tuning(self._tuning, lanes=len(self._lanes), start_slot=self._start_slot,
                                                            destroy=self._destroy_slot)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Drain the pool, stop the runners, reap every container of this sandbox, remove the work directory."""
        if self._container_pool is not None:
            self._container_pool.close()
            self._container_pool = None
        for lane in self._lanes:
            if lane.zygote is not None:
                lane.zygote.close()
                lane.zygote = None
            if lane.channel is not None:
                lane.channel.close()
                lane.channel = None
        report = self._engine.reap(selector(sandbox=self._labels.sandbox))
        for error in report.errors:
            log.error("leaked after reaping: %s", error)
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

    @property
    def _work(self) -> Path:
        assert self._root is not None, "use DockerSandbox as a context manager"
        return self._root

    @property
    def _programs(self) -> Path:
        return self._work / "programs"

    def _exchange(self, lane: _Lane) -> Path:
        return self._work / f"lane{lane.index}"

    def _require_runtime(self) -> None:
        """Raise InfrastructureError(ENGINE_UNAVAILABLE) when the engine lacks the requested runtime, or when forked
        isolation is asked for under another runtime than runc."""
        runtime = self._tuning.runtime
        if self._forked and runtime != "runc":
            raise InfrastructureError(
                InfraErrorCode.ENGINE_UNAVAILABLE,
                f"forked isolation runs its lane containers under runc, not {runtime!r}: the sandboxes it forks need the "
                "host kernel's user namespaces; choose sandbox isolation \"container\" to run policies under "
                f"{runtime!r}",
            )
        try:
            registered = set(self._engine.client.info().get("Runtimes") or {})
        except (DockerException, OSError) as exc:
            raise InfrastructureError(InfraErrorCode.ENGINE_UNAVAILABLE, "the Docker engine did not answer `docker info`", str(exc)) from exc
        if runtime not in registered:
            raise InfrastructureError(
                InfraErrorCode.ENGINE_UNAVAILABLE,
                f"the Docker engine has no runtime {runtime!r} (it has: {', '.join(sorted(registered)) or 'none'}); "
                "run scripts/ensure-docker.sh as root to install and register it",
            )

    @property
    def _forked(self) -> bool:
        return self._tuning.isolation == "forked"

    def _start_zygote(self, lane: _Lane) -> None:
        control = self._work / f"control{lane.index}"
        control.mkdir(mode=0o777)
        os.chmod(control, 0o777)  # the zygote (POLICY_UID) makes its socket here; the Host's 0700 root guards the path
        spec = lane_spec(image=self._images.policy_runtime, labels=self._labels.for_role("lane"),
                         name=f"epg-lane-{self._labels.sandbox}-{lane.index}", exchange=self._exchange(lane),
                         programs=self._programs, control=control, limits=self._limits, cpu=lane.cpu,
                         tail_bytes=self._limits.episode.output_tail_bytes)
        lane.zygote = LaneZygote.start(self._engine, spec, control)

    def _start_runner(self, lane: _Lane) -> None:
        spec = ContainerSpec(
            image=self._images.environment,
            # No -O: the images hold the bytecode of the default optimisation level only, and -O would make the
            # runner compile NumPy, gRPC and gymnasium from source at every start (0.6-0.8 s a lane, measured) to save
            # the simulators' per-step asserts (CartPole's: 6 us).
            command=("python3", "-m", "epg_sdk.runtime.runner", "--entry", self._images.benchmark_entry, "--exchange", EXCHANGE_MOUNT),
            labels=self._labels.for_role("runner"),
            user=f"{os.getuid()}:{os.getgid()}",
            mounts=(BindMount(source=str(self._exchange(lane)), target=EXCHANGE_MOUNT, read_only=False),),
            memory_bytes=2 * 1024 * 1024 * 1024,
            nano_cpus=0,
            cpuset_cpus=lane.cpu,
            pids_limit=256,
            # The root is read-only: a simulator that writes beside itself (ViZDoom's ./_vizdoom.ini) writes to /tmp.
            working_dir="/tmp",
            hostname="runner",
            name=f"epg-runner-{self._labels.sandbox}-{lane.index}",
        )
        lane.runner = self._engine.start(spec)
        socket_path = self._exchange(lane) / "runner.sock"
        deadline = time.monotonic() + RUNNER_READY_S
        next_check = 0.0
        while not socket_path.exists():
            now = time.monotonic()
            if now >= next_check:  # each check is an engine call, whose CPU the runner's own start needs
                self._runner_alive_or_raise(lane)
                next_check = now + RUNNER_ALIVE_CHECK_S
            if now > deadline:
                raise self._runner_error(lane, "the environment runner did not open its socket in time")
            time.sleep(0.02)
        lane.channel = runner_channel(f"unix:{socket_path}")
        lane.stub = runner_pb2_grpc.EnvironmentRunnerStub(lane.channel)
        try:
            grpc.channel_ready_future(lane.channel).result(timeout=max(1.0, deadline - time.monotonic()))
        except grpc.FutureTimeoutError:
            raise self._runner_error(lane, "the environment runner did not answer in time") from None

    def _runner_alive_or_raise(self, lane: _Lane) -> None:
        running, _ = self._engine.state(lane.runner)
        if not running:
            raise self._runner_error(lane, "the environment runner exited during start-up")

    def _runner_error(self, lane: _Lane, message: str, detail: str = "") -> InfrastructureError:
        logs = self._engine.logs_tail(lane.runner, 16 * 1024).decode("utf-8", "replace") if lane.runner else ""
        return InfrastructureError(InfraErrorCode.RUNNER_FAILED, message, evidence=f"{detail}\n--- runner log tail ---\n{logs}")

    def _call(self, lane: _Lane, method: str, request: object, timeout: float) -> Any:
        assert lane.stub is not None, "use DockerSandbox as a context manager"
        try:
            return getattr(lane.stub, method)(request, timeout=timeout)
        except grpc.RpcError as exc:
            raise self._runner_error(lane, f"the environment runner failed in {method}: {exc.code().name}", exc.details() or "") from None

    # EpisodeSandbox ----------------------------------------------------------

    def describe(self) -> BenchmarkInfo:
        self._benchmark = benchmark_info(self._call(self._lanes[0], "Describe", runner_pb2.DescribeRequest(), 30))
        return self._benchmark

    def plan(self, split: str, seed: int, count: int) -> list[PlannedEpisode]:
        response = self._call(self._lanes[0], "PlanEpisodes", runner_pb2.PlanRequest(split=split, seed=seed, count=count), 60)
        return planned_episodes(response, seed)

    def run_episodes(
        self, jobs: Sequence[EpisodeJob], on_episode: Callable[[EpisodeOutcome], None] | None = None
    ) -> list[EpisodeOutcome]:
        """Run the jobs over all lanes; return outcomes in job order. Raises the first InfrastructureError.

        One batch at a time: a call made while another batch runs waits until it has ended (the pool's
        begin_batch), so two batches never share the lanes; container_pool.cancel_batch() stops the running one.
        """
        if self._benchmark is None:
            self.describe()  # the Benchmark's own time limits, before any Episode starts
        return run_over_lanes(self.container_pool, jobs, len(self._lanes), lambda lane, job: self._run_on_lane(self._lanes[lane], job),
                              on_episode, "epg-lane")

    def run_episode(self, episode: PlannedEpisode, program: Program) -> EpisodeOutcome:
        """Run one Episode (a batch of one)."""
        (outcome,) = self.run_episodes([EpisodeJob(episode=episode, program=program)])
        return outcome

    def feedback(self, outcomes: list[EpisodeOutcome]) -> EvaluationFeedback:
        request, evidence_dropped = feedback_request(outcomes)
        return evaluation_feedback(self._call(self._lanes[0], "BuildFeedback", request, 120), outcomes, evidence_dropped)

    def _run_on_lane(self, lane: _Lane, job: EpisodeJob) -> EpisodeOutcome:
        slot = self.container_pool.take(lane.index)
        limits = benchmark_limits(self._limits, self._benchmark)
        outcome: RunnerOutcome | None = None
        exit_status: ContainerExit | None = None
        try:
            if isinstance(slot.container, ForkedSlot) and slot.container.ended.is_set():
                # Before its Episode no Program has run in it: its end is the sandbox's fault, never the policy's.
                raise InfrastructureError(InfraErrorCode.CONTAINER_FAILED, f"the forked sandbox {slot.name} ended before its Episode",
                                          f"{slot.container.exit}\n{slot.container.tail.decode('utf-8', 'replace')}")
            job.program.write_to(slot.program_dir)  # visible read-only inside the waiting container
            record = self._call(lane, "RunEpisode", episode_request(job, limits, slot.name, PROGRAM_MOUNT), episode_budget_s(limits))
            outcome = runner_outcome(job, record)
            tail = record.output_tail
            if outcome is not RunnerOutcome.COMPLETED:
                exit_status = self._exit_of(slot, outcome)
                if not tail:
                    tail = self._tail_of(slot, limits.output_tail_bytes)
            return episode_outcome(job, record, outcome, exit_status, tail)
        finally:
            still_running = exit_status is None or exit_status.exit_code is None
            if outcome is not RunnerOutcome.COMPLETED and still_running:
                self._kill(slot)  # a misbehaving policy may still be burning CPU
            self.container_pool.discard(slot)

    def _exit_of(self, slot: Slot, outcome: RunnerOutcome) -> ContainerExit:
        if outcome is not RunnerOutcome.POLICY_DISCONNECTED:  # else it is dying by itself: how?
            self._kill(slot)
        if isinstance(slot.container, ForkedSlot):
            return self._zygote_of(slot).exit_of(slot.container, EXIT_WAIT_S)
        return self._engine.exit_of(slot.container, EXIT_WAIT_S)

    def _kill(self, slot: Slot) -> None:
        if isinstance(slot.container, ForkedSlot):
            self._zygote_of(slot).kill(slot.container)
        else:
            self._engine.kill(slot.container)

    def _tail_of(self, slot: Slot, max_bytes: int) -> bytes:
        """What the policy wrote to its descriptors 1 and 2, when the runtime could not report its own tail."""
        if isinstance(slot.container, ForkedSlot):
            return slot.container.tail[-max_bytes:] if max_bytes else b""
        return self._engine.logs_tail(slot.container, max_bytes)

    def _zygote_of(self, slot: Slot) -> LaneZygote:
        zygote = self._lanes[slot.lane].zygote
        assert zygote is not None, "a forked slot belongs to a lane with a zygote"
        return zygote

    # slots ---------------------------------------------------------------------

    def _start_slot(self, lane_index: int) -> Slot:
        """Prepare a slot on the lane's runner and start its policy container (called by the pool)."""
        lane = self._lanes[lane_index]
        with self._lock:
            self._counter += 1
            name = f"ep{self._counter:06d}-{secrets.token_hex(3)}"
        slot = Slot(lane=lane_index, name=name, io_dir=self._exchange(lane) / name, program_dir=self._programs / name)
        slot.io_dir.mkdir(mode=0o755)
        os.chmod(slot.io_dir, 0o755)
        slot.program_dir.mkdir(mode=0o755)
        os.chmod(slot.program_dir, 0o755)
        self._call(lane, "PrepareSlot", runner_pb2.PrepareSlotRequest(slot=name), 30)
        if lane.zygote is not None:
            slot.container = lane.zygote.spawn(name, cpu_seconds=self._cpu_backstop_s())
        else:
            slot.container = self._engine.start(self._policy_spec(lane, slot))
        return slot

    def _cpu_backstop_s(self) -> int:
        """A forked sandbox's RLIMIT_CPU: only a backstop behind the runner's deadlines and the Host's kill, so generous
        (the runtime's CPU also runs while the environment steps, and a sandbox may be forked before the Benchmark's
        own time limits are known)."""
        return int(max(CPU_BACKSTOP_MIN_S, 2 * episode_budget_s(benchmark_limits(self._limits, self._benchmark))))

    def _destroy_slot(self, slot: Slot) -> None:
        if isinstance(slot.container, ForkedSlot):
            zygote = self._lanes[slot.lane].zygote
            if zygote is not None:
                try:
                    zygote.forget(slot.container)
                except InfrastructureError as exc:  # the zygote is gone, and its sandboxes with it (PDEATHSIG)
                    log.error("forked sandbox %s: %s", slot.name, exc.message)
        elif slot.container is not None and not self._engine.remove(slot.container):
            log.error("policy container %s could not be removed; `epg-orchestrate gc` will reap it", slot.container.short_id)
        shutil.rmtree(slot.program_dir, ignore_errors=True)
        shutil.rmtree(slot.io_dir, ignore_errors=True)

    def _policy_spec(self, lane: _Lane, slot: Slot) -> ContainerSpec:
        limits = self._limits
        return ContainerSpec(
            image=self._images.policy_runtime,
            command=("python3", "-m", "epg_sdk.runtime.policy_runtime", "--linger", f"{IO_MOUNT}/policy.sock"),
            labels=self._labels.for_role("policy"),
            user=POLICY_UID,
            tmpfs={"/tmp": f"rw,nosuid,nodev,size={limits.tmpfs_bytes}"},
            shm_bytes=limits.shm_bytes,
            mounts=(
                BindMount(source=str(slot.io_dir), target=IO_MOUNT, read_only=True),
                BindMount(source=str(slot.program_dir), target=PROGRAM_MOUNT, read_only=True),
            ),
            memory_bytes=limits.memory_bytes,
            # A pinned container cannot use more than its one CPU; a quota on top
            # only adds scheduler accounting to every step.
            nano_cpus=0 if lane.cpu and limits.cpus >= 1 else int(limits.cpus * 1e9),
            cpuset_cpus=lane.cpu,
            pids_limit=limits.pids,
            # One BLAS thread: the container has one CPU, and OpenBLAS's thread pool
            # costs start-up time.
            environment={"HOME": "/tmp", "PYTHONDONTWRITEBYTECODE": "1", "OPENBLAS_NUM_THREADS": "1"},
            working_dir=PROGRAM_MOUNT,
            hostname="policy",
            name=f"epg-policy-{self._labels.sandbox}-{slot.name}",
            runtime=self._tuning.runtime,
        )
