"""The fixed cost of a command: from a fresh interpreter to its first Episode and from its last to its exit.

Paid by every `evaluate`, every `env test` and every Run. Each sample is a new
process that goes through the stages `evaluate` goes through, with one
CartPole Episode of the package's baseline Program, and times each stage:
importing the CLI, connecting to the engine, reaping leftovers of dead
processes, resolving the Benchmark and its images, starting the sandbox (the
runner lanes), the Episode (its container start included) and closing.
Prints the median of each stage (`python bench/fixed_cost.py`, also part of
`make bench`).

Before them, the start of the CLI itself: the wall time of `epg-orchestrate
--help` and of `epg-orchestrate run --help` from a fresh interpreter, and how
many modules each has loaded when it exits, side by side with `python -c pass`
(`--start-only` prints these alone: they need no engine).
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
    from orchestrator.backends.sandbox import DockerSandbox
    from orchestrator.backends.settings import SandboxImages, SandboxLimits, SandboxTuning
    from orchestrator.images.builder import ImageBuilder
    from orchestrator.images.catalogue import resolve_benchmark
    from orchestrator.kernel.evaluation import evaluate_program
    from orchestrator.kernel.program import capture_program
    from orchestrator.orphans import reap_orphans

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
    labels = LabelSet(sandbox=os.urandom(6).hex(), owner=owner_id(), scope="bench")
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


# What each start figure runs after the interpreter is up; the hook reports the modules loaded at exit.
_AT_EXIT = "import atexit, sys; atexit.register(lambda: sys.stderr.write(f'\\nmodules loaded: {len(sys.modules)}\\n'))"
STARTS = {
    "python -c pass": ([], "pass"),
    "epg-orchestrate --help": (["--help"], "from orchestrator.cli.app import main; main()"),
    "epg-orchestrate run --help": (["run", "--help"], "from orchestrator.cli.app import main; main()"),
}


def start_cost(samples: int) -> dict[str, tuple[float, int]]:
    """Median wall seconds and the modules loaded at exit of each of STARTS, over samples fresh processes each
    (the samples of the commands interleaved, so a busy moment of the machine weighs on all of them)."""
    times: dict[str, list[float]] = {name: [] for name in STARTS}
    modules: dict[str, int] = {}
    for _ in range(samples):
        for name, (argv, code) in STARTS.items():
            began = time.perf_counter()
            result = subprocess.run([sys.executable, "-c", f"{_AT_EXIT}; {code}", *argv], capture_output=True, text=True, cwd=REPO)
            times[name].append(time.perf_counter() - began)
            if result.returncode != 0:
                raise RuntimeError(f"{name} failed: {result.stderr[-2000:]}")
            modules[name] = int(result.stderr.rsplit("modules loaded: ", 1)[1].split()[0])
    return {name: (median(times[name]), modules[name]) for name in STARTS}


def print_start_cost(samples: int) -> None:
    figures = start_cost(samples)
    reference, reference_modules = figures["python -c pass"]
    print(f"\nstart of the CLI, median of {samples} fresh processes: wall time, modules loaded at exit, "
          "and both against `python -c pass`\n", flush=True)
    for name, (seconds, modules) in figures.items():
        print(f"  {name:<34} {1000 * seconds:>7.0f} ms {seconds / reference:>6.1f} x   {modules:>5} modules "
              f"{modules / reference_modules:>6.1f} x", flush=True)


def print_fixed_cost(program_dir: Path, samples: int) -> None:
    print_start_cost(max(samples, 5))
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
    parser.add_argument("--start-only", action="store_true", help="only the start of the CLI (no engine needed)")
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return 0
    if args.start_only:
        print_start_cost(args.samples)
        return 0
    print_fixed_cost(REPO / "environments" / "cartpole" / "baseline", args.samples)
    return 0


if __name__ == "__main__":
    sys.exit(main())
