"""Throughput benchmark of the Episode sandbox on CartPole-v1 (`make bench`): warm pool, cold start, local reference; then per Benchmark.

Prints, for each figure, the value and how it was measured. All figures of
one invocation come from the same machine state, so ratios are meaningful
even on a shared, noisy machine. The one-lane step latency and the 500-step
cold-start rate are also measured with gVisor (runsc) policy containers, their
samples interleaved with runc's (`--runtimes runc` leaves them out). Then the
fixed cost of a command stage by stage (bench/fixed_cost.py), and whole
commands, as users compare them: `epg-orchestrate evaluate` of --command-episodes
cold CartPole Episodes, under each isolation mode, against a fresh plain `python` per Episode with JSON over
pipes (bench/reference.py), alternating, with the ratio; and each phase of a
published-protocol CartPole Run (bench/run_phases.py), without and with
pre-starting and forked, beside the plain process. Forked isolation's own figures (bench/forked.py): CPU per
sandbox and a lane's memory. Then,
for each Benchmark of --benchmarks (default: the Core16 ones beyond classic
control that the catalogue holds), its random Program's figures: the environment's own step time, our
per-step overhead beyond it, and Episodes/s on a warm pool (bench/per_benchmark.py).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
import textwrap
import time
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from statistics import median

from fixed_cost import print_fixed_cost
from forked import measure as measure_forked
from forked import print_forked
from per_benchmark import CORE16_OTHERS, known, measure, print_figures
from reference import run_reference
from run_phases import run_phase_figures

from epg.v1 import runner_pb2
from epg_sdk.runtime.episode_loop import EpisodeLimits
from epg_sdk.testing import run_local_episode
from orchestrator.backends.container_spec import RUNTIMES
from orchestrator.backends.engine import DockerEngine
from orchestrator.backends.labels import LabelSet, owner_id, selector
from orchestrator.backends.sandbox import DockerSandbox
from orchestrator.backends.settings import SandboxImages, SandboxTuning
from orchestrator.images.builder import ImageBuilder
from orchestrator.images.catalogue import resolve_benchmark
from orchestrator.kernel.evaluation import evaluate_program
from orchestrator.kernel.program import capture_program

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
    print(f"{label:<60} {value:>9.2f} {unit:<11} {note}", flush=True)


def timed_batch(sandbox: DockerSandbox, program_dir: Path, episodes: int) -> tuple[float, list]:
    program = capture_program(program_dir)
    began = time.perf_counter()
    evaluation = evaluate_program(sandbox, program, split="train", seed=0, episodes=episodes)
    wall = time.perf_counter() - began
    outcomes = evaluation.feedback.episodes
    assert all(o.failure is None for o in outcomes), [o.reason for o in outcomes if o.failure]
    return episodes / wall, list(outcomes)


def busy_jiffies() -> tuple[int, int]:
    """(busy, total) CPU time of the whole machine so far, from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:8]]
    return sum(fields) - fields[3] - fields[4], sum(fields)


def samples(values: list[float]) -> str:
    return f"median of {len(values)}: " + " ".join(f"{v:.2f}" for v in values)


def settle(quiet: float = 0.15, longest_s: float = 60.0) -> None:
    """Wait until the machine is quiet: the engine's clean-up (container removal, namespace teardown)
    outlives its API calls and would otherwise be charged to the next figure."""
    began = time.monotonic()
    calm = 0
    busy, total = busy_jiffies()
    while calm < 2 and time.monotonic() - began < longest_s:
        time.sleep(0.5)
        now_busy, now_total = busy_jiffies()
        share = (now_busy - busy) / max(1, now_total - total)
        busy, total = now_busy, now_total
        calm = calm + 1 if share < quiet else 0


def idle_container_memory(engine: DockerEngine, sandbox: DockerSandbox) -> float:
    """Memory (MiB) charged to one pooled container waiting for its Episode."""
    containers = engine.client.containers.list(filters={"label": selector(sandbox=sandbox.labels.sandbox, role="policy")})
    usages = []
    for container in containers[:4]:
        stats = container.stats(stream=False)["memory_stats"]
        usage = stats.get("usage", 0) - stats.get("stats", {}).get("cache", 0)
        usages.append(usage / 2**20)
    return sum(usages) / len(usages) if usages else float("nan")


def ratio(figures: dict[str, list[float]], runtime: str) -> str:
    return f"({median(figures[runtime]) / median(figures['runc']):.2f} x runc)"


def local_rate(entry: str, program_dir: Path, episodes: int) -> tuple[float, list]:
    from epg_sdk.runtime.runner import load_benchmark

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "environments" / "cartpole"))
    benchmark = load_benchmark(entry)
    payloads = benchmark.plan("train", 0, episodes)
    began = time.perf_counter()
    records = [
        run_local_episode(benchmark, runner_pb2.EpisodeSpec(split="train", index=i, payload=p), program_dir, 0, EpisodeLimits())
        for i, p in enumerate(payloads)
    ]
    return episodes / (time.perf_counter() - began), records


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=64, help="Episodes per figure")
    parser.add_argument("--concurrency", type=int, default=0, help="lanes (0: one per CPU)")
    parser.add_argument("--starters", type=int, default=SandboxTuning().starters, help="parallel container starts (default: the sandbox's)")
    parser.add_argument("--repeats", type=int, default=3, help="samples of the cold-start and one-lane figures (the median is shown)")
    parser.add_argument("--runtimes", default="runc,runsc",
                        help="policy container runtimes of the one-lane and cold-start figures (runc first: the other figures use it)")
    parser.add_argument("--benchmarks", default=None,
                        help="Benchmarks for the per-Benchmark figures, comma-separated ('' for none; default: the Core16 "
                             "Benchmarks beyond classic control that the catalogue holds)")
    parser.add_argument("--benchmark-episodes", type=int, default=16, help="Episodes of each per-Benchmark warm-pool figure")
    parser.add_argument("--only-benchmarks", action="store_true", help="skip the CartPole figures")
    parser.add_argument("--run-think-s", type=float, default=10.0,
                        help="seconds the Run-phase figure's agent thinks after each Submission (negative: no Run figure)")
    parser.add_argument("--run-prestart-mib", type=int, default=None,
                        help="sandbox.prestart_memory_mib of the Run-phase figure's second Run (default: the spec's default)")
    parser.add_argument("--command-episodes", type=int, default=256,
                        help="Episodes of each whole-command figure: `evaluate` against a plain process per Episode (0: none)")
    args = parser.parse_args()
    runtimes = [r for r in args.runtimes.split(",") if r]
    if not runtimes or runtimes[0] != "runc" or not set(runtimes) <= set(RUNTIMES):
        parser.error(f"--runtimes: a comma-separated list of {', '.join(RUNTIMES)} starting with runc")

    engine = DockerEngine.connect()
    builder = ImageBuilder(engine.client, progress=lambda m: print(m, file=sys.stderr))
    if not args.only_benchmarks:
        cartpole_figures(engine, builder, args, runtimes)
        print("\nforked isolation: a lane's zygote, CartPole-v1 Episodes ending at their first act, one at a time\n", flush=True)
        print_forked(measure_forked(engine, builder, 32, args.repeats, settle), report, SandboxTuning(concurrency=args.concurrency).lanes())
        print_fixed_cost(Path(__file__).resolve().parents[1] / "environments" / "cartpole" / "baseline", args.repeats)
        if args.command_episodes:
            command_figures(builder, args)
        if args.run_think_s >= 0:
            phase_figures(builder, args)
    wanted = known(builder, CORE16_OTHERS) if args.benchmarks is None else [b for b in args.benchmarks.split(",") if b]
    if wanted:
        print(f"\nper Benchmark: its uniform-random Program, {args.benchmark_episodes} Episodes on a warm pool\n", flush=True)
        print_figures([measure(engine, builder, b, args.benchmark_episodes, settle) for b in wanted])
    return 0


def cartpole_figures(engine: DockerEngine, builder: ImageBuilder, args: argparse.Namespace, runtimes: list[str]) -> None:
    n = args.episodes
    package, _, entry = resolve_benchmark("CartPole-v1", builder.packages())
    tags = {r.name: r.tag for r in builder.ensure(["policy-runtime", package.image])}
    images = SandboxImages(environment=tags[package.image], policy_runtime=tags["policy-runtime"], benchmark_entry=entry)
    tuning = SandboxTuning(concurrency=args.concurrency, pool_size=n, starters=args.starters)

    def labels() -> LabelSet:
        return LabelSet(sandbox=secrets.token_hex(6), owner=owner_id(), scope="bench")

    with tempfile.TemporaryDirectory(prefix="epg-bench-") as tmp:
        root = Path(tmp)
        balancing = write_program(root, "balancing", BALANCING)
        left = write_program(root, "always-left", ALWAYS_LEFT)
        print(f"CartPole-v1, {n} Episodes per figure, {tuning.lanes()} lanes, one fresh policy container per Episode\n", flush=True)

        # Step latency on one lane: no other Episode shares the machine. One
        # sandbox per runtime, open side by side (a waiting pool costs no CPU),
        # their samples interleaved.
        lone_us: dict[str, list[float]] = {r: [] for r in runtimes}
        idle_memory: dict[str, float] = {}
        with ExitStack() as stack:
            singles = {
                r: stack.enter_context(DockerSandbox(engine, images, labels=labels(),
                                                     tuning=SandboxTuning(concurrency=1, pool_size=16, starters=args.starters, runtime=r)))
                for r in runtimes
            }
            for _ in range(args.repeats):
                for runtime, sandbox in singles.items():
                    for other in singles.values():
                        other.container_pool.wait_until_settled(600)
                    settle()
                    if runtime not in idle_memory:
                        idle_memory[runtime] = idle_container_memory(engine, sandbox)
                    _, lone = timed_batch(sandbox, balancing, 16)
                    lone_us[runtime].append(sum(o.loop_seconds for o in lone) / sum(o.steps for o in lone) * 1e6)
        settle()

        with DockerSandbox(engine, images, labels=labels(), tuning=tuning) as sandbox:
            sandbox.container_pool.wait_until_settled(600)
            settle()
            memory = idle_container_memory(engine, sandbox)
            warm_long, outcomes = timed_batch(sandbox, balancing, n)
            sandbox.container_pool.wait_until_settled(600)
            settle()
            warm_short, short_outcomes = timed_batch(sandbox, left, n)
        steps = sum(o.steps for o in outcomes)
        us_step = sum(o.loop_seconds for o in outcomes) / steps * 1e6
        policy_us = sum(o.policy_seconds for o in outcomes) / steps * 1e6
        env_us = sum(o.environment_seconds for o in outcomes) / steps * 1e6
        short_steps = sum(o.steps for o in short_outcomes) / n

        def cold(program: Path, under: list[str]) -> dict[str, list[float]]:
            """Each sample: a new sandbox (runners up, pool empty) and at once the batch, pool starts included."""
            rates: dict[str, list[float]] = {r: [] for r in under}
            for _ in range(args.repeats):
                for runtime in under:
                    with DockerSandbox(engine, images, labels=labels(), tuning=replace(tuning, runtime=runtime)) as sandbox:
                        rates[runtime].append(timed_batch(sandbox, program, n)[0])
                    settle()
            return rates

        settle()
        cold_long = cold(balancing, runtimes)
        # runc only: under gVisor the two cold figures move together (0.32 and
        # 0.36 x runc in one run), and each of its cold samples costs about 40 s.
        cold_short = cold(left, ["runc"])

        local_long, local_records = local_rate(entry, balancing, n)
        local_short, _ = local_rate(entry, left, n)
        local_us = sum(r.loop_seconds for r in local_records) / sum(r.steps for r in local_records) * 1e6

    report("warm pool: 500-step Episodes per second", warm_long, "Episodes/s", "(target >= 17)")
    report(f"warm pool: ~{short_steps:.0f}-step Episodes per second", warm_short, "Episodes/s", "(target >= 16)")
    report("cold start: 500-step Episodes per second", median(cold_long["runc"]), "Episodes/s", f"(target >= 5.7) {samples(cold_long['runc'])}")
    report(f"cold start: ~{short_steps:.0f}-step Episodes per second", median(cold_short["runc"]), "Episodes/s", samples(cold_short["runc"]))
    report("us per step, all in, 500-step Episodes, one lane", median(lone_us["runc"]), "us/step", f"(target < 60) {samples(lone_us['runc'])}")
    for runtime in runtimes[1:]:
        report(f"{runtime}: cold start: 500-step Episodes per second", median(cold_long[runtime]), "Episodes/s",
               f"{ratio(cold_long, runtime)} {samples(cold_long[runtime])}")
        report(f"{runtime}: us per step, all in, 500-step Episodes, one lane", median(lone_us[runtime]), "us/step",
               f"{ratio(lone_us, runtime)} {samples(lone_us[runtime])}")
    report(f"us per step, all in, 500-step Episodes, {tuning.lanes()} lanes at once", us_step, "us/step",
           f"(policy {policy_us:.1f} + env {env_us:.1f} + runner rest)")
    report("plain local process: 500-step Episodes per second", local_long, "Episodes/s")
    report(f"plain local process: ~{short_steps:.0f}-step Episodes per second", local_short, "Episodes/s")
    report("plain local process: us per step, 500-step Episodes", local_us, "us/step")
    report("isolation overhead, 500-step (local rate / warm sandbox rate)", local_long / warm_long, "x", "(< 1: the sandbox is faster)")
    report(f"isolation overhead, ~{short_steps:.0f}-step (local rate / warm sandbox rate)", local_short / warm_short, "x")
    report("memory of one idle pooled container", memory, "MiB")
    for runtime in runtimes[1:]:
        report(f"{runtime}: memory of one idle pooled container", idle_memory[runtime], "MiB", f"(runc, one lane: {idle_memory['runc']:.2f})")


def command_figures(builder: ImageBuilder, args: argparse.Namespace) -> None:
    """Whole commands, side by side and alternating: `epg-orchestrate evaluate` (cold: every container started for
    its Episode, the command's fixed cost included) against the reference users compare with, a fresh plain
    process per Episode (bench/reference.py), both on every lane."""
    lanes = SandboxTuning(concurrency=args.concurrency).lanes()
    builder.ensure(["policy-runtime", "env-cartpole"])
    print(f"\nwhole commands, cold, {lanes} lanes each: `evaluate` against a fresh plain process per Episode (JSON over pipes)\n", flush=True)
    with tempfile.TemporaryDirectory(prefix="epg-bench-") as tmp:
        root = Path(tmp)
        # (label, Program, Episodes, target of a container per Episode, target of forked sandboxes), as x the plain process
        cases = [("500-step", write_program(root, "balancing", BALANCING), args.command_episodes, 1.5, 5.0),
                 ("~10-step", write_program(root, "always-left", ALWAYS_LEFT), max(16, args.command_episodes // 4), 1.0, 3.0)]
        for label, program, episodes, container_target, forked_target in cases:
            rates: dict[str, list[float]] = {"container": [], "forked": []}
            theirs: list[float] = []
            cpu: list[float] = []
            for _ in range(max(1, args.repeats - 1)):
                settle()
                reference = run_reference(program, episodes, lanes)
                theirs.append(reference.rate)
                cpu.append(reference.cpu_ms_per_episode)
                for isolation in rates:
                    settle()
                    rates[isolation].append(episodes / timed_evaluate(program, episodes, args.concurrency, isolation))
            report(f"plain process per Episode: {label} Episodes per second", median(theirs), "Episodes/s",
                   f"({median(cpu):.0f} ms CPU per Episode; {episodes} Episodes) {samples(theirs)}")
            for isolation, target in (("container", container_target), ("forked", forked_target)):
                ours = rates[isolation]
                report(f"`evaluate --isolation {isolation}`: {label} Episodes per second", median(ours), "Episodes/s",
                       f"({median(ours) / median(theirs):.2f} x the plain process; target >= {target:.1f} x) {samples(ours)}")


def phase_figures(builder: ImageBuilder, args: argparse.Namespace) -> None:
    """Each phase of a published-protocol CartPole Run, without and with pre-starting, beside the plain process."""
    builder.ensure(["policy-runtime", "env-cartpole", "agent-base"])
    lanes = SandboxTuning(concurrency=args.concurrency).lanes()
    print(f"\na Run of the published protocol on CartPole-v1 (128 train, 64 x candidates Validation, 2 x 256 Assessment "
          f"Episodes), an agent thinking {args.run_think_s:g} s after each of its 4 Submissions\n", flush=True)
    with tempfile.TemporaryDirectory(prefix="epg-bench-") as tmp:
        program = write_program(Path(tmp), "balancing", BALANCING)
        settle()
        plain = run_reference(program, 64, lanes).rate
        settle()
        runs = run_phase_figures(program, args.run_think_s, args.run_prestart_mib)
    report("plain process per Episode: 500-step Episodes per second", plain, "Episodes/s", "(64 Episodes, the reference of the ratios)")
    for label, phases in runs.items():
        for phase in phases.values():
            if phase.name == "close":
                report(f"{label}: close (the end of the Assessment to the exit)", phase.seconds, "s")
                continue
            target = " target >= 3.0 x" if phase.name in ("validation", "assessment") and "pre-start" in label else ""
            kind = "" if phase.name == "whole Run" else " phase"
            report(f"{label}: {phase.name}{kind}, {phase.episodes} Episodes in {phase.seconds:.1f} s", phase.rate, "Episodes/s",
                   f"({phase.rate / plain:.2f} x the plain process{target})")


def timed_evaluate(program: Path, episodes: int, concurrency: int, isolation: str = "container") -> float:
    """Wall seconds of `epg-orchestrate evaluate` as a user runs it (a new process, its images already built)."""
    command = [sys.executable, "-m", "orchestrator.cli.app", "evaluate", str(program), "-b", "CartPole-v1", "-n", str(episodes),
               "--concurrency", str(concurrency), "--isolation", isolation, "--json"]
    began = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1],
                            env={**os.environ, "EPG_SCOPE": "bench"})
    wall = time.perf_counter() - began
    if result.returncode != 0:
        raise RuntimeError(f"evaluate failed ({result.returncode}): {result.stderr[-2000:]}")
    evaluation = json.loads(result.stdout)
    if evaluation["values"]["policy_failures"]:
        raise RuntimeError(f"evaluate: {evaluation['values']['policy_failures']} policy failures")
    return wall


if __name__ == "__main__":
    sys.exit(main())
