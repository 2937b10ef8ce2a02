"""The fixed cost of a command: from a fresh interpreter to its first Episode and from its last to its exit.

Paid by every `evaluate`, every `env test` and every Run. Each sample is a new
process that goes through the stages `evaluate` goes through, with one
CartPole Episode of the package's baseline Program, and times each stage:
importing the CLI, connecting to the engine, reaping leftovers of dead
processes, resolving the Benchmark and its images, starting the sandbox (the
runner lanes), the Episode (its container start included) and closing.
Prints the median of each stage (`python bench/fixed_cost.py`, also part of
`make bench`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from statistics import median

STAGES = ("import the CLI", "connect to the engine", "reap leftovers", "resolve images", "start the sandbox",
          "first Episode", "close")
REPO = Path(__file__).resolve().parents[1]


def child(program_dir: str) -> None:
    marks = [time.perf_counter()]
    import orchestrator.cli.app  # noqa: F401  (what every command imports)
    from orchestrator.backends.engine import DockerEngine
    from orchestrator.backends.labels import LabelSet, owner_id
    from orchestrator.backends.sandbox import DockerSandbox, SandboxImages, SandboxLimits, SandboxTuning
    from orchestrator.compose import reap_orphans
    from orchestrator.images.builder import ImageBuilder
    from orchestrator.images.catalogue import resolve_benchmark
    from orchestrator.kernel.evaluation import evaluate_program
    from orchestrator.kernel.program import capture_program

    marks.append(time.perf_counter())
    engine = DockerEngine.connect()
    marks.append(time.perf_counter())
    reap_orphans(engine)
    marks.append(time.perf_counter())
    builder = ImageBuilder(engine.client)
    package, _, entry = resolve_benchmark("CartPole-v1", builder.packages())
    tags = {r.name: r.tag for r in builder.ensure(["policy-runtime", package.image])}
    images = SandboxImages(environment=tags[package.image], policy_runtime=tags["policy-runtime"], benchmark_entry=entry)
    program = capture_program(Path(program_dir))
    marks.append(time.perf_counter())
    labels = LabelSet(session=os.urandom(6).hex(), owner=owner_id(), scope="bench")
    sandbox = DockerSandbox(engine, images, SandboxLimits(), labels, tuning=SandboxTuning(episodes=1))
    with sandbox:
        marks.append(time.perf_counter())
        evaluation = evaluate_program(sandbox, program, split="train", seed=0, episodes=1)
        marks.append(time.perf_counter())
    marks.append(time.perf_counter())
    (episode,) = evaluation.feedback.episodes
    assert episode.failure is None and episode.steps > 0, episode
    print(json.dumps([b - a for a, b in zip(marks, marks[1:], strict=False)]))


def fixed_cost(program_dir: Path, samples: int) -> dict[str, float]:
    """Median seconds of each stage over samples fresh processes."""
    runs = []
    for _ in range(samples):
        result = subprocess.run([sys.executable, __file__, "--child", str(program_dir)], capture_output=True, text=True, cwd=REPO)
        if result.returncode != 0:
            raise RuntimeError(f"fixed-cost sample failed: {result.stderr[-2000:]}")
        runs.append(json.loads(result.stdout.splitlines()[-1]))
    return {stage: median(run[i] for run in runs) for i, stage in enumerate(STAGES)}


def print_fixed_cost(program_dir: Path, samples: int) -> None:
    stages = fixed_cost(program_dir, samples)
    print(f"\nfixed cost of a command, median of {samples} fresh processes, one CartPole Episode of the baseline\n", flush=True)
    for stage, seconds in stages.items():
        print(f"  {stage:<58} {1000 * seconds:>9.0f} ms", flush=True)
    total = sum(stages.values()) - stages["first Episode"]
    print(f"  {'all but the Episode':<58} {1000 * total:>9.0f} ms", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return 0
    print_fixed_cost(REPO / "environments" / "cartpole" / "baseline", args.samples)
    return 0


if __name__ == "__main__":
    sys.exit(main())
