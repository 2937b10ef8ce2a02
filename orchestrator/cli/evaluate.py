"""`epg-orchestrate evaluate`: one Program on N Episodes, each in a fresh policy container."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from epg_sdk.planning import SPLITS
from orchestrator.cli.common import err, fail, fail_infrastructure, json_mode, out, parse_size, print_json, require_extra, usage, with_built_benchmarks
from orchestrator.cli.options import (
    Backend,
    Base,
    Concurrency,
    Environments,
    Isolation,
    Json,
    KubeContext,
    KubeNamespace,
    OutputDir,
    PoolSize,
    RegistryPrefix,
    Runtime,
    RuntimeClass,
    Scope,
    environment_roots,
)
from orchestrator.cli.terminal import plain
from orchestrator.kernel.infrastructure import InfrastructureError
from orchestrator.kernel.program import Program, ProgramError, capture_program

if TYPE_CHECKING:
    from orchestrator.images.catalogue import EnvironmentPackage
    from orchestrator.kernel.evaluation import Evaluation
    from orchestrator.kernel.outcomes import EpisodeOutcome
    from orchestrator.sandbox_opening import SandboxOptions

def evaluate(
    program_dir: Annotated[Path, typer.Argument(help="Directory holding the Program (policy.py and its files).", show_default=False,
                                                exists=True, file_okay=False)],
    benchmark: Annotated[str, typer.Option("--benchmark", "-b", help="Benchmark id or alias, e.g. CartPole-v1 or cartpole.")],
    episodes: Annotated[int, typer.Option("--episodes", "-n", "--count", min=1, max=100_000, help="Number of Episodes.")] = 10,
    split: Annotated[str, typer.Option("--split", help=f"Episode split: {', '.join(SPLITS)}.")] = "train",
    seed: Annotated[int, typer.Option("--seed", min=0, max=2**64 - 1, help="Seed of the Episode plan and the policy seeds.")] = 0,
    reproduce: Annotated[bool, typer.Option(
        "--reproduce",
        help="Reproduction mode: the Episodes EvoPolicyGym 0.3's own evaluate plans for --seed, --split and --count "
        "(passed unchanged to the Benchmark's planning) and its policy seeds, so that per-Episode returns, written in "
        "plan order, compare one to one with its results. Runs never use this mode: their Episodes stay secret.")] = False,
    out_dir: OutputDir = None,
    as_json: Json = False,
    memory: Annotated[str, typer.Option("--memory", help="Memory limit of each policy container.")] = "512m",
    cpus: Annotated[float, typer.Option("--cpus", min=0.05, help="CPU limit of each policy container.")] = 1.0,
    pids: Annotated[int, typer.Option("--pids", min=8, help="Process limit of each policy container.")] = 64,
    step_deadline: Annotated[Optional[float], typer.Option(
        "--step-deadline", min=0.001, show_default=False,
        help="Seconds allowed for one act() [default: the Benchmark's own step limit, else 1.0].")] = None,
    episode_deadline: Annotated[Optional[float], typer.Option(
        "--episode-deadline", min=0.01, show_default=False,
        help="Seconds of policy time per Episode [default: the Benchmark's own Episode limit, else 300].")] = None,
    startup_deadline: Annotated[float, typer.Option("--startup-deadline", min=0.1, help="Seconds for start-up and make_policy().")] = 30.0,
    concurrency: Concurrency = 0,
    pool_size: PoolSize = 4,
    runtime: Runtime = "runc",
    isolation: Isolation = "container",
    backend: Backend = "docker",
    context: KubeContext = "",
    namespace: KubeNamespace = "default",
    registry_prefix: RegistryPrefix = "",
    runtime_class: RuntimeClass = "",
    base: Base = "auto",
    environments: Environments = None,
    scope: Scope = "",
) -> None:
    """Evaluate PROGRAM_DIR on a benchmark; every Episode runs in a fresh, hardened container.

    --output DIR writes feedback.json, evaluation.json and artifacts/ there (--out is the same option).
    --reproduce plans and seeds the Episodes as EvoPolicyGym 0.3's evaluate does, to compare per-Episode returns with
    its results; Runs never use it (their Episodes stay secret).
    Exit status: 0 evaluated (whatever the policy did), 1 bad Program or Benchmark, 2 usage, 3 infrastructure.
    """
    # Loaded here, not with the CLI: --help would pay for the engine's client, grpc and pydantic.
    from epg_sdk.runtime.episode_loop import EpisodeLimits
    from orchestrator.backends.kubernetes.manifests import ClusterTarget
    from orchestrator.backends.settings import SandboxLimits, SandboxTuning
    from orchestrator.images.catalogue import CatalogueError, resolve_benchmark
    from orchestrator.records.atomic import write_json
    from orchestrator.records.feedback import evaluation_json, feedback_json, publish_feedback
    from orchestrator.records.provenance import timing, utc_now
    from orchestrator.sandbox_opening import KubernetesOptions, SandboxOptions

    json_mode(as_json)
    if split not in SPLITS:
        usage(f"--split must be one of {', '.join(SPLITS)}, not {split!r}")
    if backend == "kubernetes":
        require_extra("kubernetes", "--backend kubernetes")
        if isolation == "forked":
            usage("--isolation forked runs on the Docker backend only")
    try:
        program = capture_program(program_dir)
    except ProgramError as exc:
        fail(f"invalid Program: {exc.message}")
    defaults = EpisodeLimits()
    limits = SandboxLimits(
        memory_bytes=parse_size(memory),
        cpus=cpus,
        pids=pids,
        episode=EpisodeLimits(step_deadline_s=step_deadline or defaults.step_deadline_s,
                              episode_deadline_s=episode_deadline or defaults.episode_deadline_s, startup_deadline_s=startup_deadline),
        chosen_deadlines=frozenset(name for name, given in (("step_deadline_s", step_deadline), ("episode_deadline_s", episode_deadline))
                                   if given is not None),
    )
    roots = environment_roots(environments)
    try:
        packages = with_built_benchmarks(base, environments)  # their Benchmarks are named by their images' labels
        package, _, _ = resolve_benchmark(benchmark, packages)
    except CatalogueError as exc:
        fail(str(exc))
    tuning = SandboxTuning(concurrency=concurrency, pool_size=pool_size, runtime=runtime, isolation=isolation, episodes=episodes)
    kubernetes = (KubernetesOptions(target=ClusterTarget(context=context, namespace=namespace), registry_prefix=registry_prefix,
                                    runtime_class_name=runtime_class) if backend == "kubernetes" else None)
    options = SandboxOptions(benchmark=benchmark, limits=limits, tuning=tuning, scope=scope, base=base, environments=roots,
                             kubernetes=kubernetes)
    started, clock = utc_now(), time.monotonic()
    try:
        evaluation, produced_by = _run(options, package, program, split, seed, episodes, quiet=as_json, reproduce=reproduce)
    except ProgramError as exc:
        fail(f"invalid Program: {exc.message}")
    except CatalogueError as exc:
        fail(str(exc))
    except InfrastructureError as exc:
        fail_infrastructure(exc, out_dir / "diagnostics" if out_dir else None)
    document = evaluation_json(evaluation, {**produced_by, "episodes_run": len(evaluation.feedback.episodes),
                                            **timing(started, time.monotonic() - clock)})
    if out_dir is not None:
        publish_feedback(out_dir, feedback_json(evaluation.feedback, program.digest), evaluation.feedback.artifacts)
        write_json(out_dir / "evaluation.json", document)
    if as_json:
        print_json(document)
    else:
        _print_report(evaluation, out_dir)


def _run(options: SandboxOptions, package: EnvironmentPackage, program: Program, split: str, seed: int, episodes: int,
         quiet: bool, reproduce: bool = False) -> tuple[Evaluation, dict[str, object]]:
    from orchestrator.kernel.evaluation import evaluate_program
    from orchestrator.sandbox_opening import open_benchmark_sandbox, sandbox_provenance

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True, disable=quiet) as progress:
        task = progress.add_task("preparing the sandbox", total=episodes)

        def note(message: str) -> None:
            if not quiet:
                err.print(plain(message, "dim"))

        def advance(outcome: EpisodeOutcome) -> None:
            progress.update(task, advance=1, description=f"Episodes ({outcome.status.value})")

        with open_benchmark_sandbox(options, progress=note) as sandbox:
            progress.update(task, description="Episodes")
            evaluation = evaluate_program(sandbox, program, split=split, seed=seed, episodes=episodes, on_episode=advance,
                                          reproduce=reproduce)
            return evaluation, sandbox_provenance(sandbox, package)


def _print_report(evaluation: Evaluation, out_dir: Path | None) -> None:
    """Print the per-Episode table, each failure's reason, the digest and the score.

    Every text the Benchmark or the policy chose (ids, names, reasons) is printed as plain text with its
    control characters visible (`cli.terminal`): never as markup, never raw to the terminal.
    """
    feedback = evaluation.feedback
    title = plain(f"{evaluation.benchmark.id} · {evaluation.split} · seed {evaluation.seed}")
    table = Table(title=title, title_justify="left")
    for column in ("Episode", "status", "failure", "steps", "reward", "policy s"):
        table.add_column(column, justify="right" if column in ("Episode", "steps", "reward", "policy s") else "left")
    for e in feedback.episodes:
        style = "" if e.failure is None else "red"
        cells = (str(e.index), e.status.value, e.failure.value if e.failure else "-", str(e.steps), f"{e.reward:.2f}", f"{e.policy_seconds:.3f}")
        table.add_row(*(Text(cell) for cell in cells), style=style)
    out.print(table)
    for e in feedback.episodes:
        if e.failure is not None:
            out.print(Text.assemble((f"Episode {e.index}", "red"), f": {e.failure.value}: ", plain(e.reason)))
    if evaluation.reproduction_seeds:
        returns = ", ".join("failed" if e.failure is not None else repr(e.reward) for e in feedback.episodes)
        out.print(plain(f"reproduction of EvoPolicyGym 0.3's evaluate (seed {evaluation.seed}, split {evaluation.split}, "
                        f"count {len(feedback.episodes)}); returns in plan order: {returns}"))
    out.print(f"Program {evaluation.program.digest}")
    out.print(Text.assemble(plain(f"score ({evaluation.benchmark.primary_metric}): "), f"{feedback.score:.4f}", style="bold"))
    if out_dir is not None:
        out.print(plain(f"Feedback written to {out_dir / 'feedback.json'}"))
