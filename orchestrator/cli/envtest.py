"""`epg-orchestrate env test IMAGE | NAME | DIR` and `env new DIR --gymnasium ID`: presentation of orchestrator.envcheck and orchestrator.scaffold."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.table import Table
from rich.text import Text

from orchestrator.cli.common import ExitCode, err, fail, fail_infrastructure, json_mode, out, print_json
from orchestrator.cli.options import Base, Environments, Json, Scope, environment_roots
from orchestrator.cli.terminal import plain
from orchestrator.kernel.infrastructure import InfrastructureError

if TYPE_CHECKING:
    from orchestrator.envcheck import EnvReport

app = typer.Typer(help="Check and create environment packages and images.", no_args_is_help=True)


@app.command("test")
def env_test(
    target: Annotated[str, typer.Argument(help="An image (repo:tag or id), a Benchmark id or alias (its image is built if needed), or a package directory.")],
    episodes: Annotated[int, typer.Option("--episodes", "-n", min=1, help="Episodes of the baseline run.")] = 3,
    baseline: Annotated[Optional[Path], typer.Option("--baseline", help="Baseline Program directory (default: the package's, or the image's).",
                                                         exists=True, file_okay=False)] = None,
    as_json: Json = False,
    base: Base = "auto",
    environments: Environments = None,
    scope: Scope = "",
) -> None:
    """Conformance of every Benchmark inside the image, then a baseline Program through the sandbox on that image.

    Exit status: 0 every check passed, 1 a check failed or the target is bad, 2 usage,
    3 infrastructure (the engine, an image build, or a check that did not finish in time).
    """
    from orchestrator.backends.engine import DockerEngine  # the engine's client: loaded by the command, not by --help
    from orchestrator.envcheck import EnvCheckError, check_environment

    json_mode(as_json)
    progress = (lambda message: None) if as_json else (lambda message: err.print(plain(message, "dim")))
    try:
        engine = DockerEngine.connect()
        report = check_environment(engine, target, episodes=episodes, scope=scope, base=base,
                                   environments=environment_roots(environments), baseline_dir=baseline, progress=progress)
    except EnvCheckError as exc:
        fail(str(exc))  # it may quote the image's own output: fail() prints it plainly
    except InfrastructureError as exc:
        fail_infrastructure(exc)
    if as_json:
        print_json(report.to_json())
    else:
        _print_table(report)
    if not report.finished:
        raise typer.Exit(int(ExitCode.INFRASTRUCTURE))
    if not report.ok:
        raise typer.Exit(int(ExitCode.BAD_INPUT))


def _print_table(report: EnvReport) -> None:
    """Print one row per check. Names and details come from the image (and a baseline's reasons from its policy):
    printed as plain text with their control characters visible, never as markup."""
    title = plain(f"{', '.join(report.benchmarks)} in {report.image} ({report.image_id[:19]})")
    table = Table(title=title, title_justify="left")
    for column in ("benchmark", "check", "result", "detail"):
        table.add_column(column)
    for check in report.checks:
        result = Text("ok", style="green") if check.ok else Text("FAILED", style="red")
        table.add_row(plain(check.benchmark), plain(check.name), result, plain(check.detail))
    out.print(table)


@app.command("new")
def env_new(
    directory: Annotated[Path, typer.Argument(help="The new package's directory (must not exist or be empty).")],
    gymnasium: Annotated[str, typer.Option("--gymnasium", help="The gymnasium id to wrap, e.g. Pendulum-v1.")],
    benchmark_id: Annotated[str, typer.Option("--benchmark-id", help="The Benchmark id (default: the gymnasium id).")] = "",
    name: Annotated[str, typer.Option("--name", help="Package name NAME: distribution epg-env-NAME, image env-NAME (default: from the directory).")] = "",
    failure_return: Annotated[float, typer.Option("--failure-return", help="What a failed Episode scores: below the worst return of a completed one.")] = 0.0,
    as_json: Json = False,
) -> None:
    """Generate an environment package wrapping a gymnasium environment: pyproject, module, README with its real spaces, a weak baseline, tests."""
    from orchestrator.scaffold import ScaffoldError, new_gymnasium_package

    json_mode(as_json)
    try:
        created = new_gymnasium_package(directory, gymnasium, benchmark_id=benchmark_id or gymnasium,
                                         name=name or directory.name, failure_return=failure_return)
    except ScaffoldError as exc:
        fail(str(exc))
    if as_json:
        print_json({"root": str(created.root), "benchmark_id": created.benchmark_id, "image": created.image})
        return
    out.print(plain(f"created {created.root} ({created.benchmark_id}, image {created.image}); "
                    f"check it with `epg-orchestrate env test {created.root}`"))
