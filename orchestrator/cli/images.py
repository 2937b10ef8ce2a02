"""`epg-orchestrate images build | list`."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.table import Table

from orchestrator.backends.engine import DockerEngine
from orchestrator.cli.common import err, fail, fail_infrastructure, out
from orchestrator.cli.options import Base, Environments, environment_roots
from orchestrator.images.builder import ImageBuilder
from orchestrator.images.catalogue import CatalogueError
from orchestrator.kernel.codes import InfrastructureError

app = typer.Typer(help="Build and list the offline images.", no_args_is_help=True)


def _builder(base: str, environments) -> ImageBuilder:
    engine = DockerEngine.connect()
    return ImageBuilder(engine.client, base=base, environments=environment_roots(environments), progress=lambda m: err.print(m, highlight=False))


@app.command("build")
def build(
    names: Annotated[Optional[list[str]], typer.Argument(help="Images to build (default: all).", show_default=False)] = None,
    base: Base = "auto",
    environments: Environments = None,
) -> None:
    """Build images whose inputs changed; an image with the same inputs is never rebuilt."""
    try:
        results = _builder(base, environments).ensure(names or None)
    except InfrastructureError as exc:
        fail_infrastructure(exc)
    except (KeyError, CatalogueError) as exc:
        fail(str(exc).strip("'\""))
    built = [r for r in results if r.built]
    for result in results:
        out.print(f"{result.name:<28} {result.tag:<52} {'built' if result.built else 'up to date'}", highlight=False)
    out.print(f"{len(built)} built, {len(results) - len(built)} up to date")


@app.command("list")
def list_images(base: Base = "auto", environments: Environments = None) -> None:
    """List every image of the catalogue with its content-hash tag and whether it is built."""
    try:
        statuses = _builder(base, environments).status()
    except InfrastructureError as exc:
        fail_infrastructure(exc)
    table = Table()
    for column in ("image", "tag", "state", "pinned"):
        table.add_column(column)
    for status in statuses:
        table.add_row(status.name, status.tag, "built" if status.present else "[yellow]missing[/]", status.pinned or "-")
    out.print(table)


@app.command("prune")
def prune(base: Base = "auto", environments: Environments = None) -> None:
    """Remove images built from inputs that are no longer current."""
    try:
        removed = _builder(base, environments).prune()
    except InfrastructureError as exc:
        fail_infrastructure(exc)
    for tag in removed:
        out.print(f"removed {tag}", highlight=False)
    out.print(f"{len(removed)} outdated images removed")
