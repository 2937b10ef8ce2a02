"""What a sandbox of any backend is given: the policy's limits, the throughput tuning and the images it runs.

Neutral ground between the backends: it imports neither docker-py nor the Kubernetes client, so the Docker and
the Kubernetes sandbox (and whoever opens one) share these values without loading each other's client.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Literal, get_args

from epg_sdk.runtime.episode_loop import EpisodeLimits
from orchestrator.kernel.ports import BenchmarkInfo

# The OCI runtimes a sandboxed container may run under: runc (Linux namespaces
# and cgroups) or runsc (gVisor: a user-space kernel between the container and
# the host's; registered with the engine by scripts/ensure-docker.sh).
ContainerRuntime = Literal["runc", "runsc"]
RUNTIMES: tuple[str, ...] = get_args(ContainerRuntime)
# How each Episode is isolated: a policy container of its own ("container", the default), or a sandbox of fresh
# namespaces forked inside its lane's hardened container from a runtime that has already imported everything
# ("forked"; ARCHITECTURE.md, "Forked Episode sandboxes").
SandboxIsolation = Literal["container", "forked"]
ISOLATIONS: tuple[str, ...] = get_args(SandboxIsolation)


def default_concurrency() -> int:
    """One lane per CPU this process may use."""
    return max(1, len(os.sched_getaffinity(0)))


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxLimits:
    """Resource limits of a policy container and the deadlines of its Episode."""

    memory_bytes: int = 512 * 1024 * 1024
    cpus: float = 1.0
    pids: int = 64
    tmpfs_bytes: int = 64 * 1024 * 1024
    shm_bytes: int = 16 * 1024 * 1024
    episode: EpisodeLimits = EpisodeLimits()
    # The deadlines of episode the user chose ("step_deadline_s", "episode_deadline_s"): a Benchmark's own time
    # limits replace the others (`benchmark_limits`).
    chosen_deadlines: frozenset[str] = frozenset()
    # Pin each lane's runner and its policy containers to one CPU. A step is a
    # ping-pong; on one CPU the kernel hands over directly instead of waking an
    # idle CPU: about half the step latency.
    pin_cpu: bool = True


def benchmark_limits(limits: SandboxLimits, benchmark: BenchmarkInfo | None) -> EpisodeLimits:
    """The deadlines an Episode of benchmark runs under: limits.episode, its step and Episode deadlines replaced by
    the Benchmark's own time limits (step_seconds, episode_seconds, when above 0) unless the user chose them
    (limits.chosen_deadlines)."""
    episode = limits.episode
    if benchmark is None:
        return episode
    if benchmark.step_seconds > 0 and "step_deadline_s" not in limits.chosen_deadlines:
        episode = replace(episode, step_deadline_s=benchmark.step_seconds)
    if benchmark.episode_seconds > 0 and "episode_deadline_s" not in limits.chosen_deadlines:
        episode = replace(episode, episode_deadline_s=benchmark.episode_seconds)
    return episode


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxTuning:
    """Throughput and isolation settings. concurrency 0 means one lane per CPU; pool_size 0 disables pre-starting.

    episodes, when known (a command that runs one batch), is the most Episodes the sandbox will serve: the container
    pool starts no container beyond them (but one per further lane, when lanes take their jobs unevenly). 0: not known
    (a Run, whose container pool the driver sizes phase by phase).
    keep_used: used containers a batch keeps until it ends, at the most (about 18 MiB each); a longer batch removes
    the ones beyond as it goes.

    runtime is the OCI runtime of the untrusted containers (policy and agent);
    the trusted environment runner always runs under runc. isolation is how each Episode is isolated
    (SandboxIsolation).
    """

    concurrency: int = 0
    pool_size: int = 16
    starters: int = 2
    runtime: ContainerRuntime = "runc"
    isolation: SandboxIsolation = "container"
    episodes: int = 0
    keep_used: int = 64

    def lanes(self) -> int:
        """The number of lanes: concurrency, or one per CPU this process may use when it is 0."""
        return self.concurrency or default_concurrency()


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxImages:
    """The images a sandbox runs (a repo:tag, an image id, or a full registry reference on a cluster) and the
    factory entry of the Benchmark inside the environment image."""

    environment: str
    policy_runtime: str
    benchmark_entry: str
