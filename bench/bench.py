"""Throughput benchmark of the Episode sandbox on CartPole-v1 (`make bench`).

Prints, for each figure, the value and how it was measured. All figures of
one invocation come from the same machine state, so ratios are meaningful
even on a shared, noisy machine.
"""

from __future__ import annotations

import argparse
import secrets
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from epg.v1 import runner_pb2
from orchestrator.backends.engine import DockerEngine
from orchestrator.backends.labels import LabelSet, owner_id
from orchestrator.backends.sandbox import DockerSandbox, SandboxImages
from orchestrator.images.builder import ImageBuilder
from orchestrator.images.catalogue import resolve_benchmark
from orchestrator.kernel.evaluation import evaluate_program
from orchestrator.kernel.program import capture_program
from orchestrator.runtimes.episode_loop import EpisodeLimits
from orchestrator.sdk.testing import run_local_episode

BALANCING = """
class Policy:
    def act(self, observation):
        return 1 if observation[2] + 0.5 * observation[3] > 0 else 0

def make_policy(context):
    return Policy()
"""

ALWAYS_LEFT = """
class Policy:
    def act(self, observation):
        return 0

def make_policy(context):
    return Policy()
"""


def write_program(root: Path, name: str, source: str) -> Path:
    directory = root / name
    directory.mkdir()
    (directory / "policy.py").write_text(textwrap.dedent(source))
    return directory


def report(label: str, value: float, unit: str, note: str = "") -> None:
    print(f"{label:<58} {value:>10.2f} {unit:<12} {note}", flush=True)


def sandbox_figures(sandbox: DockerSandbox, balancing: Path, left: Path, episodes: int) -> dict[str, float]:
    figures = {}
    for name, directory in (("balancing", balancing), ("always-left", left)):
        program = capture_program(directory)
        began = time.perf_counter()
        evaluation = evaluate_program(sandbox, program, split="train", seed=0, episodes=episodes)
        wall = time.perf_counter() - began
        outcomes = evaluation.feedback.episodes
        steps = sum(o.steps for o in outcomes)
        assert all(o.failure is None for o in outcomes), [o.reason for o in outcomes if o.failure]
        figures[f"{name}.eps"] = episodes / wall
        figures[f"{name}.steps"] = steps / episodes
        figures[f"{name}.us_per_step"] = sum(o.loop_seconds for o in outcomes) / steps * 1e6
        figures[f"{name}.policy_us"] = sum(o.policy_seconds for o in outcomes) / steps * 1e6
        figures[f"{name}.env_us"] = sum(o.environment_seconds for o in outcomes) / steps * 1e6
    return figures


def local_figures(benchmark_entry: str, balancing: Path, left: Path, episodes: int) -> dict[str, float]:
    from orchestrator.runtimes.runner import load_benchmark

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "environments" / "cartpole"))
    benchmark = load_benchmark(benchmark_entry)
    figures = {}
    limits = EpisodeLimits()
    for name, directory in (("balancing", balancing), ("always-left", left)):
        payloads = benchmark.plan("train", 0, episodes)
        began = time.perf_counter()
        records = [
            run_local_episode(benchmark, runner_pb2.EpisodeSpec(split="train", index=i, payload=p), directory, 0, limits)
            for i, p in enumerate(payloads)
        ]
        wall = time.perf_counter() - began
        steps = sum(r.steps for r in records)
        figures[f"{name}.eps"] = episodes / wall
        figures[f"{name}.us_per_step"] = sum(r.loop_seconds for r in records) / steps * 1e6
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=16, help="Episodes per measurement")
    args = parser.parse_args()

    engine = DockerEngine.connect()
    builder = ImageBuilder(engine.client, progress=lambda m: print(m, file=sys.stderr))
    package, _, entry = resolve_benchmark("CartPole-v1", builder.packages())
    tags = {r.name: r.tag for r in builder.ensure(["policy-runtime", package.image])}
    images = SandboxImages(environment=tags[package.image], policy_runtime=tags["policy-runtime"], benchmark_entry=entry)

    with tempfile.TemporaryDirectory(prefix="epg-bench-") as tmp:
        root = Path(tmp)
        balancing = write_program(root, "balancing", BALANCING)
        left = write_program(root, "always-left", ALWAYS_LEFT)
        labels = LabelSet(session=secrets.token_hex(6), owner=owner_id(), scope="bench")
        print(f"CartPole-v1, {args.episodes} Episodes per figure, one fresh policy container per Episode\n")
        with DockerSandbox(engine, images, labels=labels) as sandbox:
            boxed = sandbox_figures(sandbox, balancing, left, args.episodes)
        local = local_figures(entry, balancing, left, args.episodes)

    report("500-step Episodes: us per step, all in (sandbox)", boxed["balancing.us_per_step"], "us/step",
           f"policy {boxed['balancing.policy_us']:.1f} + env {boxed['balancing.env_us']:.1f} + runner rest")
    report("500-step Episodes: us per step (plain local process)", local["balancing.us_per_step"], "us/step")
    report("500-step Episodes per second (sandbox)", boxed["balancing.eps"], "Episodes/s")
    report("500-step Episodes per second (plain local process)", local["balancing.eps"], "Episodes/s")
    report(f"~{boxed['always-left.steps']:.0f}-step Episodes per second (sandbox)", boxed["always-left.eps"], "Episodes/s")
    report(f"~{boxed['always-left.steps']:.0f}-step Episodes per second (plain local process)", local["always-left.eps"], "Episodes/s")
    report("isolation overhead, 500-step Episodes (local/sandbox rate)", local["balancing.eps"] / boxed["balancing.eps"], "x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
