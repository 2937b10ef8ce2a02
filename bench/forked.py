"""Forked isolation's own figures: the CPU a sandbox costs from its fork to the Program's first act, and a lane's
memory, idle and with sandboxes waiting (bench/bench.py prints them beside the others).

The CPU is read from the outside: the lane container's cgroup CPU time over Episodes whose Program ends the
sandbox in its first act, divided by their number. It holds the zygote's clone, the sandbox's set-up, the runtime's
Start and make_policy, and its exit; the runner's side of the Episode is in another container and not counted.
"""

from __future__ import annotations

import secrets
import tempfile
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any, Callable

from orchestrator.backends.engine import DockerEngine
from orchestrator.backends.labels import LabelSet, owner_id
from orchestrator.backends.sandbox import DockerSandbox
from orchestrator.backends.settings import SandboxImages, SandboxLimits, SandboxTuning
from orchestrator.backends.zygote import ZYGOTE_MEMORY_BYTES
from orchestrator.images.builder import ImageBuilder
from orchestrator.images.catalogue import resolve_benchmark
from orchestrator.kernel.program import capture_program

FIRST_ACT_ENDS = """
import os

class Policy:
    def act(self, observation):
        os._exit(0)  # the sandbox's work ends at the first act

def make_policy(context):
    return Policy()
"""


@dataclass(frozen=True, slots=True)
class ForkedFigures:
    cpu_ms: list[float]  # per sample: lane CPU per sandbox
    zygote_rss_mib: float
    idle_lane_mib: float  # the lane container's memory with `waiting` sandboxes forked ahead
    waiting: int
    lane_limit_mib: float


def _cpu_ns(container: Any) -> int:
    return int(container.stats(stream=False)["cpu_stats"]["cpu_usage"]["total_usage"])


def _memory_mib(container: Any) -> float:
    stats = container.stats(stream=False)["memory_stats"]
    return (stats.get("usage", 0) - stats.get("stats", {}).get("cache", 0)) / 2**20


def measure(engine: DockerEngine, builder: ImageBuilder, episodes: int, repeats: int, settle: Callable[[], None]) -> ForkedFigures:
    package, _, entry = resolve_benchmark("CartPole-v1", builder.packages())
    tags = {r.name: r.tag for r in builder.ensure(["policy-runtime", package.image])}
    images = SandboxImages(environment=tags[package.image], policy_runtime=tags["policy-runtime"], benchmark_entry=entry)
    limits = SandboxLimits()
    waiting = 16
    with tempfile.TemporaryDirectory(prefix="epg-bench-") as tmp:
        (Path(tmp) / "policy.py").write_text(FIRST_ACT_ENDS)
        program = capture_program(Path(tmp))
        labels = LabelSet(sandbox=secrets.token_hex(6), owner=owner_id(), scope="bench")
        tuning = SandboxTuning(concurrency=1, pool_size=waiting, isolation="forked")
        with DockerSandbox(engine, images, limits, labels, tuning=tuning) as sandbox:
            (zygote,) = sandbox.zygotes
            sandbox.container_pool.wait_until_settled(120)
            settle()
            idle_lane = _memory_mib(zygote.container)
            rss = zygote.status()["rss_bytes"] / 2**20
            sandbox.container_pool.resize(1)  # one forked ahead: each Episode's sandbox is forked in the window
            plan = sandbox.plan("train", 0, episodes)
            samples = []
            for _ in range(repeats):
                sandbox.container_pool.wait_until_settled(120)
                settle()
                before = _cpu_ns(zygote.container)
                for episode in plan:
                    sandbox.run_episode(episode, program)
                sandbox.container_pool.wait_until_settled(120)
                samples.append((_cpu_ns(zygote.container) - before) / 1e6 / episodes)
    return ForkedFigures(cpu_ms=samples, zygote_rss_mib=rss, idle_lane_mib=idle_lane, waiting=waiting,
                         lane_limit_mib=(limits.memory_bytes + ZYGOTE_MEMORY_BYTES) / 2**20)


def print_forked(figures: ForkedFigures, report: Callable[..., None], lanes: int) -> None:
    report("forked: CPU per sandbox, fork to the first act (lane cgroup)", median(figures.cpu_ms), "ms",
           "(target <= 15) median of " + f"{len(figures.cpu_ms)}: " + " ".join(f"{v:.2f}" for v in figures.cpu_ms))
    report("forked: the zygote's resident memory, idle", figures.zygote_rss_mib, "MiB")
    report(f"forked: one lane's memory, {figures.waiting} sandboxes waiting", figures.idle_lane_mib, "MiB",
           f"(bounded: each lane at most {figures.lane_limit_mib:.0f} MiB, {lanes} lanes {lanes * figures.lane_limit_mib:.0f} MiB)")
