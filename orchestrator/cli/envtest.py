"""`epg-orchestrate env test NAME`: an environment image checked in isolation."""

from __future__ import annotations

import json
import secrets
from typing import Annotated

import typer
from rich.table import Table

from orchestrator.backends.container_spec import ContainerSpec
from orchestrator.backends.engine import DockerEngine
from orchestrator.backends.labels import LabelSet, owner_id
from orchestrator.cli.common import err, fail, fail_infrastructure, out
from orchestrator.cli.options import Base, Environments, Scope, environment_roots
from orchestrator.compose import SandboxOptions, open_sandbox
from orchestrator.images.builder import ImageBuilder
from orchestrator.images.catalogue import CatalogueError, resolve_benchmark
from orchestrator.kernel.codes import InfrastructureError
from orchestrator.kernel.evaluation import evaluate_program
from orchestrator.kernel.program import ProgramError, capture_program

app = typer.Typer(help="Check environment images.", no_args_is_help=True)
CHECK_TIMEOUT_S = 600.0


@app.command("test")
def env_test(
    benchmark: Annotated[str, typer.Argument(help="Benchmark id or alias (its environment image is built if needed).")],
    episodes: Annotated[int, typer.Option("--episodes", "-n", min=1, help="Episodes of the baseline run.")] = 3,
    base: Base = "auto",
    environments: Environments = None,
    scope: Scope = "",
) -> None:
    """Conformance of the Benchmark inside its own image, then its baseline Program through the sandbox."""
    roots = environment_roots(environments)
    try:
        engine = DockerEngine.connect()
        builder = ImageBuilder(engine.client, base=base, environments=roots, progress=lambda m: err.print(f"[dim]{m}[/]", highlight=False))
        package, benchmark_id, entry = resolve_benchmark(benchmark, builder.packages())
        (image,) = [r.tag for r in builder.ensure([package.image])]
        report = _report_in_image(engine, image, entry, scope)
        baseline = capture_program(package.baseline_dir)
    except CatalogueError as exc:
        fail(str(exc))
    except ProgramError as exc:
        fail(f"baseline Program: {exc.message}")
    except InfrastructureError as exc:
        fail_infrastructure(exc)
    check = _baseline_check(SandboxOptions(benchmark=benchmark_id, scope=scope, base=base, environments=roots), baseline, episodes)
    checks = report["checks"] + [check]
    table = Table(title=f"{benchmark_id} in {image}", title_justify="left")
    for column in ("check", "result", "detail"):
        table.add_column(column)
    for check in checks:
        table.add_row(check["name"], "[green]ok[/]" if check["ok"] else "[red]FAILED[/]", check["detail"])
    out.print(table)
    if not all(check["ok"] for check in checks):
        raise typer.Exit(1)


def _baseline_check(options: SandboxOptions, baseline, episodes: int) -> dict:
    """The package's baseline Program through the real sandbox: every Episode must complete."""
    name = f"baseline runs through the sandbox ({episodes} Episodes)"
    try:
        with open_sandbox(options) as sandbox:
            evaluation = evaluate_program(sandbox, baseline, split="train", seed=0, episodes=episodes)
    except InfrastructureError as exc:
        last = (exc.evidence.strip().splitlines() or [""])[-1]
        return {"name": name, "ok": False, "detail": f"{exc.code.value}: {exc.message}: {last}"}
    failures = [e for e in evaluation.feedback.episodes if e.failure is not None]
    detail = "; ".join(f"Episode {e.index}: {e.failure.value}: {e.reason}" for e in failures)
    return {"name": name, "ok": not failures, "detail": detail or f"score {evaluation.feedback.score:.3f}"}


def _report_in_image(engine: DockerEngine, image: str, entry: str, scope: str) -> dict:
    """Run the conformance checks inside the environment image (no network, read-only) and return the report."""
    labels = LabelSet(session=secrets.token_hex(6), owner=owner_id(), scope=scope).for_role("env-check")
    container = engine.start(ContainerSpec(image=image, command=("python3", "-m", "epg_sdk.checks", "--entry", entry),
                                           labels=labels, user="10001:10001", memory_bytes=2 * 1024**3, pids_limit=256))
    try:
        status = engine.exit_of(container, CHECK_TIMEOUT_S)
        output = engine.logs(container, stdout=True, stderr=False).decode("utf-8", "replace").strip().splitlines()
        if status.exit_code is None:
            fail(f"the checks did not finish inside {image} within {CHECK_TIMEOUT_S:.0f} s")
        try:
            return json.loads(output[-1])
        except (ValueError, IndexError):
            logs = engine.logs(container, stdout=True, stderr=True).decode("utf-8", "replace")
            fail(f"the checks did not run inside {image}: {logs[-400:]}")
    finally:
        engine.remove(container)
