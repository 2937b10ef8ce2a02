"""The Kubernetes Episode sandbox: one single-use Episode Pod per Episode, a control Pod, a deny-all NetworkPolicy.

Implements the kernel's PooledSandbox as DockerSandbox does, with the same
pre-starting pool and lane threads; results are stored by job index, so
Feedback does not depend on placement or concurrency. Opening it also starts
the sandbox's heartbeat Lease (owners.py), pins the images to digests
(digests.py) and refuses a cluster whose NetworkPolicy lets a Pod of the
sandbox reach the API server (a probe Pod tries).
"""

from __future__ import annotations

import logging
import secrets
import shutil
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Any, Callable, Sequence

import grpc

from epg.v1 import runner_pb2, runner_pb2_grpc
from epg_sdk.codes import EpisodeStatus, FailureCode, RunnerOutcome
from epg_sdk.outcomes import ContainerExit
from orchestrator.backends.kubernetes.cluster import Cluster
from orchestrator.backends.kubernetes.digests import Resolve, pin_images, registry_resolver
from orchestrator.backends.kubernetes.hardening import hardening_problems
from orchestrator.backends.kubernetes.manifests import (
    CONTROL_ROLE,
    EPISODE_ROLE,
    EXCHANGE_MOUNT,
    HEARTBEAT_ROLE,
    OUTPUT_FILE,
    POLICY_CONTAINER,
    PROBE_CONTAINER,
    PROBE_REACHED,
    PROBE_ROLE,
    PROGRAM_MOUNT,
    RUNNER_CONTAINER,
    RUNNER_OUTPUT_MOUNT,
    RUNNER_PROGRAM_MOUNT,
    SLOT,
    ClusterSettings,
    PolicyResources,
    control_pod,
    deny_all_network_policy,
    episode_pod,
    label_selector,
    probe_pod,
)
from orchestrator.backends.kubernetes.owners import Heartbeat, process_owner
from orchestrator.backends.kubernetes.relay import ExecRelay, read_tail, upload_program
from orchestrator.backends.labels import LabelSet
from orchestrator.backends.lanes import episode_budget_s, run_over_lanes, runner_channel
from orchestrator.backends.pool import ContainerPool, Slot
from orchestrator.backends.settings import SandboxImages, SandboxLimits, SandboxTuning, benchmark_limits
from orchestrator.backends.workdirs import make_work_dir
from orchestrator.kernel.infrastructure import InfraErrorCode, InfrastructureError
from orchestrator.kernel.outcomes import EpisodeOutcome
from orchestrator.kernel.ports import BenchmarkInfo, EpisodeJob, EvaluationFeedback, PlannedEpisode
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

POD_RUNNING_S = 300.0  # image pulls on a fresh node take a while
RUNNER_READY_S = 60.0
# How long a dying policy container may take to show as terminated: a kubelet reports container deaths on its next
# relist (about a second), then the API server's watch; the Docker engine's wait answers at once (3 s there).
EXIT_WAIT_S = 10.0
PROBE_S = 120.0  # the probe Pod's start (its image is the policy runtime's, pulled once per node) and its attempts
# The emptyDirs the policy writes: an eviction for one of them is the policy's doing (evictions.py).
POLICY_VOLUMES = ("policy-tmp", "shm", "output")


class NetworkPolicyNotEnforced(InfrastructureError):
    """A Pod under the sandbox's deny-all NetworkPolicy reached the API server: the cluster does not enforce it."""


@dataclass(slots=True, kw_only=True)
class _PodLink:
    """A Pod's runner as the Host reaches it: the local relay socket and a gRPC stub over it."""

    pod: str
    relay: ExecRelay
    channel: grpc.Channel
    stub: runner_pb2_grpc.EnvironmentRunnerStub

    def close(self) -> None:
        self.channel.close()
        self.relay.close()


class KubernetesSandbox:
    """Implements the kernel's PooledSandbox (an EpisodeSandbox with its container pool) on a Kubernetes namespace.

    Use as a context manager: entering creates the sandbox's NetworkPolicy and
    control Pod and starts the pool of Episode Pods; leaving drains the pool
    and deletes every object of this sandbox by label, whatever happened.
    Entering raises InfrastructureError: CONTAINER_FAILED when the API server
    refuses an object or a Pod does not run, RUNNER_FAILED when a runner does
    not answer, IMAGE_MISSING when a registry image does not resolve to a
    digest, NetworkPolicyNotEnforced (ENGINE_UNAVAILABLE) when
    the probe Pod reached the API server. The lock guards the Pod counter only.

    The owner label of everything it creates is this process's (owners.process_owner,
    unique per process), whatever labels.owner says.
    """

    def __init__(self, cluster: Cluster, images: SandboxImages, limits: SandboxLimits = SandboxLimits(), labels: LabelSet | None = None,
                 tuning: SandboxTuning = SandboxTuning(), settings: ClusterSettings | None = None, workdir: Path | None = None,
                 resolve: Resolve | None = None) -> None:
        self._cluster = cluster
        self._images = images
        self._resolve = resolve
        self._limits = limits
        self._tuning = tuning
        self._settings = settings or ClusterSettings(namespace=cluster.namespace)
        self._labels = replace(labels or LabelSet(sandbox=secrets.token_hex(6), owner=""), owner=process_owner())
        self._heartbeat: Heartbeat | None = None
        self._workdir = workdir
        self._root: Path | None = None  # made on entering (backends.workdirs.make_work_dir): the relays' sockets
        self._lock = threading.Lock()
        self._counter = 0
        self._lanes = tuning.lanes()
        self._control: _PodLink | None = None
        self._container_pool: ContainerPool | None = None
        self._image_ids: dict[str, str] = {"environment": "", "policy_runtime": ""}
        self._benchmark: BenchmarkInfo | None = None  # described once: its time limits apply to every Episode

    @property
    def labels(self) -> LabelSet:
        return self._labels

    @property
    def images(self) -> SandboxImages:
        return self._images

    @property
    def _work(self) -> Path:
        assert self._root is not None, "use KubernetesSandbox as a context manager"
        return self._root

    @property
    def cluster(self) -> Cluster:
        return self._cluster

    def image_ids(self) -> dict[str, str]:
        """The image ids the cluster reported for the environment and policy-runtime images ("" until a Pod ran)."""
        return dict(self._image_ids)

    @property
    def container_pool(self) -> ContainerPool:
        assert self._container_pool is not None, "use KubernetesSandbox as a context manager"
        return self._container_pool

    # lifecycle ---------------------------------------------------------------

    def __enter__(self) -> KubernetesSandbox:
        try:
            self._root = make_work_dir("k8s", self._workdir)
            sandbox_id = self._labels.sandbox
            self._images = pin_images(self._images, self._resolve or registry_resolver())
            self._heartbeat = Heartbeat(self._cluster, name=f"epg-hb-{sandbox_id}", labels=self._labels.for_role(HEARTBEAT_ROLE),
                                        owner=self._labels.owner)
            self._heartbeat.start()
            self._cluster.create(deny_all_network_policy(name=f"epg-deny-{sandbox_id}", labels=self._labels.for_role("network"),
                                                         namespace=self._settings.namespace))
            probe = f"epg-probe-{sandbox_id}"
            self._create_pod(probe_pod(name=probe, labels=self._labels.for_role(PROBE_ROLE), images=self._images,
                                       settings=self._settings, targets=[t for t in [self._cluster.server_address()] if t]),
                             wait=False)
            name = f"epg-ctl-{sandbox_id}"
            self._create_pod(control_pod(name=name, labels=self._labels.for_role(CONTROL_ROLE), images=self._images,
                                         settings=self._settings))
            self._check_probe(probe)
            self._control = self._link(name)
            self._container_pool = ContainerPool.for_tuning(self._tuning, lanes=self._lanes, start_slot=self._start_slot,
                                                            destroy=self._destroy_slot)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Drain the pool, stop the heartbeat, delete every object of this sandbox by label (the heartbeat Lease last),
        remove the relay directory."""
        if self._container_pool is not None:
            self._container_pool.close()
            self._container_pool = None
        if self._control is not None:
            self._control.close()
            self._control = None
        if self._heartbeat is not None:
            self._heartbeat.stop()
            self._heartbeat = None
        try:
            report = self._cluster.reap(label_selector(sandbox=self._labels.sandbox))
            for error in report.errors:
                log.error("leaked after reaping: %s", error)
        except InfrastructureError as exc:
            log.error("could not reap the sandbox's objects (`epg-orchestrate gc --backend kubernetes` will): %s", exc)
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

    def _create_pod(self, manifest: dict[str, Any], wait: bool = True) -> None:
        problems = hardening_problems(manifest, runtime_class_name=self._settings.runtime_class_name)
        if problems:  # a bug of ours: never create a Pod weaker than the Docker sandbox's containers
            raise InfrastructureError(InfraErrorCode.CONTAINER_FAILED, "refusing an unhardened Pod", evidence="\n".join(problems))
        self._cluster.create(manifest)
        if not wait:
            return
        pod = self._cluster.wait_running(manifest["metadata"]["name"], POD_RUNNING_S)
        for status in (pod.status.container_statuses or []) if pod.status else []:
            key = "environment" if status.name == RUNNER_CONTAINER else "policy_runtime"
            self._image_ids[key] = status.image_id or self._image_ids[key]

    def _check_probe(self, name: str) -> None:
        """Wait for the probe Pod's verdict and delete it; raise NetworkPolicyNotEnforced when it reached the API server,
        InfrastructureError(CONTAINER_FAILED) when it gave no verdict."""
        try:
            code = self._cluster.run_to_end(name, PROBE_CONTAINER, PROBE_S)
            said = self._cluster.logs_tail(name, PROBE_CONTAINER, 4096).decode("utf-8", "replace").strip()
        finally:
            self._cluster.delete_pod(name)
        if code == PROBE_REACHED:
            raise NetworkPolicyNotEnforced(
                InfraErrorCode.ENGINE_UNAVAILABLE,
                f"the cluster does not enforce NetworkPolicy in namespace {self._settings.namespace!r}: a Pod under the sandbox's "
                f"deny-all NetworkPolicy reached the API server ({said}); Episodes would run with network access. Use a CNI "
                "that enforces NetworkPolicy (Calico, Cilium) or another namespace",
                evidence=said)
        if code != 0:
            raise InfrastructureError(InfraErrorCode.CONTAINER_FAILED, f"the NetworkPolicy probe Pod {name} gave no verdict "
                                      f"(exit status {code})", evidence=said)

    def _link(self, pod: str) -> _PodLink:
        """Open the relay to pod's runner and wait until the runner answers."""
        relay = ExecRelay(self._cluster, pod, RUNNER_CONTAINER, f"{EXCHANGE_MOUNT}/runner.sock", self._work / f"{pod}.sock")
        channel = runner_channel(f"unix:{relay.path}")
        link = _PodLink(pod=pod, relay=relay, channel=channel, stub=runner_pb2_grpc.EnvironmentRunnerStub(channel))
        try:
            grpc.channel_ready_future(channel).result(timeout=RUNNER_READY_S)
        except grpc.FutureTimeoutError:
            link.close()
            logs = self._cluster.logs_tail(pod, RUNNER_CONTAINER, 16 * 1024).decode("utf-8", "replace")
            raise InfrastructureError(InfraErrorCode.RUNNER_FAILED, f"the environment runner of Pod {pod} did not answer in time",
                                      evidence=f"--- runner log tail ---\n{logs}") from None
        return link

    def _call(self, link: _PodLink, method: str, request: object, timeout: float) -> Any:
        try:
            return getattr(link.stub, method)(request, timeout=timeout)
        except grpc.RpcError as exc:
            logs = self._cluster.logs_tail(link.pod, RUNNER_CONTAINER, 16 * 1024).decode("utf-8", "replace")
            raise InfrastructureError(InfraErrorCode.RUNNER_FAILED, f"the environment runner failed in {method}: {exc.code().name}",
                                      evidence=f"{exc.details() or ''}\n--- runner log tail ---\n{logs}") from None

    def _control_link(self) -> _PodLink:
        assert self._control is not None, "use KubernetesSandbox as a context manager"
        return self._control

    # EpisodeSandbox ----------------------------------------------------------

    def describe(self) -> BenchmarkInfo:
        self._benchmark = benchmark_info(self._call(self._control_link(), "Describe", runner_pb2.DescribeRequest(), 30))
        return self._benchmark

    def plan(self, split: str, seed: int, count: int) -> list[PlannedEpisode]:
        response = self._call(self._control_link(), "PlanEpisodes", runner_pb2.PlanRequest(split=split, seed=seed, count=count), 60)
        return planned_episodes(response, seed)

    def feedback(self, outcomes: list[EpisodeOutcome]) -> EvaluationFeedback:
        request, evidence_dropped = feedback_request(outcomes)
        return evaluation_feedback(self._call(self._control_link(), "BuildFeedback", request, 120), outcomes, evidence_dropped)

    def run_episodes(self, jobs: Sequence[EpisodeJob],
                     on_episode: Callable[[EpisodeOutcome], None] | None = None) -> list[EpisodeOutcome]:
        """Run the jobs over all lanes; return outcomes in job order. Raises the first InfrastructureError."""
        if self._benchmark is None:
            self.describe()  # the Benchmark's own time limits, before any Episode starts
        return run_over_lanes(self.container_pool, jobs, self._lanes, self._run_in_pod, on_episode, "epg-k8s-lane")

    # one Episode in one Pod ------------------------------------------------------

    def _run_in_pod(self, lane: int, job: EpisodeJob) -> EpisodeOutcome:
        slot = self.container_pool.take(lane)
        link: _PodLink = slot.container
        limits = benchmark_limits(self._limits, self._benchmark)
        outcome: RunnerOutcome | None = None
        try:
            upload_program(self._cluster, link.pod, RUNNER_CONTAINER, RUNNER_PROGRAM_MOUNT, job.program)
            try:
                record = self._call(link, "RunEpisode", episode_request(job, limits, SLOT, PROGRAM_MOUNT), episode_budget_s(limits))
            except InfrastructureError:
                # The runner went with its Pod: evicted for what the policy used, it is the policy's failure, not a refund.
                reason = self._cluster.policy_eviction(link.pod, POLICY_CONTAINER, POLICY_VOLUMES, EXIT_WAIT_S)
                if reason is None:
                    raise
                return _evicted_outcome(job, reason)
            outcome = runner_outcome(job, record)
            tail = record.output_tail
            exit_status: ContainerExit | None = None
            if outcome is not RunnerOutcome.COMPLETED:
                # A dying policy is waited for (how did it end?); one still running is deleted with its Pod below.
                wait = EXIT_WAIT_S if outcome is RunnerOutcome.POLICY_DISCONNECTED else 0.0
                exit_status = self._cluster.container_exit(link.pod, POLICY_CONTAINER, wait)
                if not tail:  # what the policy's descriptors 1 and 2 got, from the bounded output file
                    tail = read_tail(self._cluster, link.pod, RUNNER_CONTAINER, f"{RUNNER_OUTPUT_MOUNT}/{OUTPUT_FILE}",
                                     limits.output_tail_bytes)
            return episode_outcome(job, record, outcome, exit_status, tail)
        finally:
            if outcome is not RunnerOutcome.COMPLETED:
                self._cluster.delete_pod(link.pod)  # a misbehaving policy may still be burning CPU
            self.container_pool.discard(slot)

    # slots ---------------------------------------------------------------------

    def _start_slot(self, lane: int) -> Slot:
        """Create an Episode Pod, wait until it runs and its runner answers, prepare its slot (called by the pool)."""
        with self._lock:
            self._counter += 1
            name = f"epg-ep-{self._labels.sandbox}-{self._counter:06d}-{secrets.token_hex(2)}"
        limits = self._limits
        policy = PolicyResources(memory_bytes=limits.memory_bytes, cpu_millis=max(1, int(limits.cpus * 1000)),
                                 tmp_bytes=limits.tmpfs_bytes, shm_bytes=limits.shm_bytes)
        slot = Slot(lane=lane, name=name, io_dir=None, program_dir=None)
        try:
            self._create_pod(episode_pod(name=name, labels=self._labels.for_role(EPISODE_ROLE), images=self._images, policy=policy,
                                         settings=self._settings))
            slot.container = self._link(name)
            self._call(slot.container, "PrepareSlot", runner_pb2.PrepareSlotRequest(slot=SLOT), 30)
        except BaseException:
            self._destroy_slot(slot)
            raise
        return slot

    def _destroy_slot(self, slot: Slot) -> None:
        if slot.container is not None:
            slot.container.close()
        if not self._cluster.delete_pod(slot.name):
            log.error("Episode Pod %s could not be deleted; `epg-orchestrate gc --backend kubernetes` will reap it", slot.name)


def _evicted_outcome(job: EpisodeJob, reason: str) -> EpisodeOutcome:
    """The scored policy failure of an Episode whose Pod the cluster evicted for what the policy used (its runner went
    too, so nothing of the Episode is known but that)."""
    episode = job.episode
    return EpisodeOutcome(index=episode.index, split=episode.split, status=EpisodeStatus.POLICY_FAILURE, failure=FailureCode.CRASHED,
                          reason=reason, steps=0, reward=0.0, terminated=False, truncated=False, policy_seconds=0.0,
                          environment_seconds=0.0)
