"""Per-Benchmark figures of `make bench`: the environment's own step time, our overhead beyond it, Episodes/s on a warm pool.

Each Benchmark runs its package's uniform-random Program (random/), the
published tables' reference policy, whose own cost is small. The environment's
own step is what the runner's clock gives Environment.step in the same
Episodes (the Benchmark's bookkeeping and a replay Episode's rendering
included); what the runner's loop spends per step beyond it is ours: the
observation's encoding, framing, the socket, the policy's act() in its
container, the action's decoding and validation. For reference the same step
is also timed in this process (the Benchmark made from its package, random
actions, env.step alone on the clock).

Targets for ours, on one lane: at most 100 us a step for a pixel observation
(CarRacing's 96x96x3 uint8 frame, 27 KiB), at most 30 us for a vector. Below
the table, the same overhead of the step loop alone (bench/step_overhead.py:
a constant observation, no container), with every observation on the socket
and with large tensors through shared memory, side by side.
"""

from __future__ import annotations

import secrets
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from step_overhead import FRAME_TARGET_US, VECTOR_TARGET_US, print_rows
from step_overhead import measure as measure_step_loop

from orchestrator.backends.engine import DockerEngine
from orchestrator.backends.labels import LabelSet, owner_id
from orchestrator.backends.sandbox import DockerSandbox
from orchestrator.backends.settings import SandboxImages, SandboxTuning
from orchestrator.images.builder import ImageBuilder
from orchestrator.images.catalogue import resolve_benchmark
from orchestrator.kernel.evaluation import evaluate_program
from orchestrator.kernel.program import capture_program

# The Core16 Benchmarks beyond the classic-control ones, in the published order; those the catalogue
# does not hold are left out of the default.
CORE16_OTHERS = (
    "BipedalWalker-v3", "CarRacing-v3", "HalfCheetah-v5", "Ant-v5", "Pusher-v5", "Reacher-v5",
    "MiniGrid-DoorKey-16x16-v0", "MiniGrid-KeyCorridorS4R3-v0", "MiniGrid-FourRooms-v0", "MiniGrid-ObstructedMaze-1Q-v1",
    "parking-v0", "roundabout-v0", "FetchPush-v4", "FetchPickAndPlace-v4",
)


def known(builder: ImageBuilder, wanted: tuple[str, ...]) -> list[str]:
    """The Benchmarks of wanted that the catalogue holds."""
    ids = {benchmark_id for package in builder.packages() for benchmark_id in package.table.benchmarks}
    return [benchmark for benchmark in wanted if benchmark in ids]


PIXEL_TARGET_US, VECTOR_TARGET_US = FRAME_TARGET_US, VECTOR_TARGET_US


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchmarkFigures:
    benchmark: str
    steps_per_episode: float
    environment_us: float  # the environment's own step, as the runner timed it in the same Episodes
    local_environment_us: float  # the same step timed in this process, env.step alone (a reference)
    policy_us: float  # the policy round trip the runner waits for: the observation out, act(), the action back
    all_in_us: float  # the runner's whole loop per step, one lane
    warm_rate: float  # Episodes/s from a filled pool, every lane busy
    pixels: bool  # the observation is an image (a uint8 Box of rank 3)

    @property
    def overhead_us(self) -> float:
        """Per step, everything beyond the environment's own step (the policy's act() included)."""
        return self.all_in_us - self.environment_us

    @property
    def target_us(self) -> float:
        return PIXEL_TARGET_US if self.pixels else VECTOR_TARGET_US


def local_step_us(package_root, entry: str, episodes: int, seed: int = 0) -> float:
    """Microseconds of the environment's own step: Episodes of the Benchmark made here, random actions, env.step timed alone."""
    from epg_sdk.runtime.runner import load_benchmark

    sys.path.insert(0, str(package_root))
    benchmark = load_benchmark(entry)
    rng = np.random.default_rng(seed)
    space = benchmark.spec.action_space
    spent, steps = 0.0, 0
    for payload in benchmark.plan("train", seed, episodes):
        environment = benchmark.make_environment(payload)
        environment.reset()
        for _ in range(benchmark.spec.horizon):
            action = benchmark.validate_action(_random_action(space, rng))
            began = time.perf_counter()
            result = environment.step(action)
            spent += time.perf_counter() - began
            steps += 1
            if result.terminated or result.truncated:
                break
        environment.close()
    return spent / steps * 1e6


def _random_action(space: dict, rng: np.random.Generator):
    if space["type"] == "discrete":
        return int(space.get("start", 0)) + int(rng.integers(int(space["n"])))
    if space["type"] == "box":
        return rng.uniform(np.asarray(space["low"], dtype=np.float64), np.asarray(space["high"], dtype=np.float64))
    raise ValueError(f"no random action for a {space['type']} space")


def measure(engine: DockerEngine, builder: ImageBuilder, benchmark: str, episodes: int, settle: Callable[[], None]) -> BenchmarkFigures:
    """Run benchmark's random Program: per-step figures on one lane, then the warm-pool rate on every lane."""
    package, benchmark_id, entry = resolve_benchmark(benchmark, builder.packages())
    tags = {r.name: r.tag for r in builder.ensure(["policy-runtime", package.image])}
    images = SandboxImages(environment=tags[package.image], policy_runtime=tags["policy-runtime"], benchmark_entry=entry)
    program = capture_program(package.root / "random")

    def labels() -> LabelSet:
        return LabelSet(sandbox=secrets.token_hex(6), owner=owner_id(), scope="bench")

    lone = max(4, episodes // 2)
    with DockerSandbox(engine, images, labels=labels(), tuning=SandboxTuning(concurrency=1, pool_size=lone)) as sandbox:
        sandbox.container_pool.wait_until_settled(600)
        settle()
        evaluation = evaluate_program(sandbox, program, split="train", seed=0, episodes=lone)
        # A replay Episode (MuJoCo's index 0) renders: its renderer's start-up, at reset, lies outside the step loop.
        outcomes = [o for o in _completed(evaluation) if "replay" not in o.summary]
    steps = sum(o.steps for o in outcomes)
    settle()
    environment_us = local_step_us(package.root, entry, lone)
    settle()
    with DockerSandbox(engine, images, labels=labels(), tuning=SandboxTuning(pool_size=episodes)) as sandbox:
        sandbox.container_pool.wait_until_settled(600)
        settle()
        began = time.perf_counter()
        _completed(evaluate_program(sandbox, program, split="train", seed=1, episodes=episodes))
        rate = episodes / (time.perf_counter() - began)
    settle()
    space = evaluation.benchmark.observation_space
    return BenchmarkFigures(
        benchmark=benchmark_id,
        steps_per_episode=steps / len(outcomes),
        environment_us=sum(o.environment_seconds for o in outcomes) / steps * 1e6,
        local_environment_us=environment_us,
        pixels=space.get("type") == "box" and len(space.get("shape", ())) == 3 and space.get("dtype") == "uint8",
        policy_us=sum(o.policy_seconds for o in outcomes) / steps * 1e6,
        all_in_us=sum(o.loop_seconds for o in outcomes) / steps * 1e6,
        warm_rate=rate,
    )


def _completed(evaluation) -> list:
    outcomes = list(evaluation.feedback.episodes)
    failed = [o.reason for o in outcomes if o.failure is not None]
    if failed:
        raise RuntimeError(f"the random Program failed on {evaluation.benchmark.id}: {failed[:3]}")
    return outcomes


def print_figures(figures: list[BenchmarkFigures]) -> None:
    header = (f"{'benchmark':<32} {'steps/Ep':>9} {'env us/step':>12} {'env here':>9} {'policy us':>10} {'all-in us':>10} "
              f"{'ours us':>9} {'target':>7} {'warm Ep/s':>10}")
    print(header, flush=True)
    for f in figures:
        verdict = "ok" if f.overhead_us <= f.target_us else "OVER"
        print(f"{f.benchmark:<32} {f.steps_per_episode:>9.1f} {f.environment_us:>12.1f} {f.local_environment_us:>9.1f} "
              f"{f.policy_us:>10.1f} {f.all_in_us:>10.1f} {f.overhead_us:>9.1f} {f'<={f.target_us:.0f} {verdict}':>7} "
              f"{f.warm_rate:>10.2f}", flush=True)
    print("(env: Environment.step as the runner timed it; env here: env.step alone in this process; policy and all-in: one "
          "lane in the sandbox; ours = all-in - env, the random policy's act() included; target: ours per step, 100 us for "
          "a pixel frame, 30 us for a vector; warm: a filled pool, every lane busy)", flush=True)
    print(flush=True)
    print_rows(measure_step_loop(steps=3000, repeats=3))
