"""`epg-orchestrate gc` and `benchmarks`."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from orchestrator.backends.engine import DockerEngine
from orchestrator.backends.labels import selector
from orchestrator.cli.common import fail, fail_infrastructure, out
from orchestrator.cli.options import Environments, environment_roots
from orchestrator.compose import reap_orphans
from orchestrator.images.catalogue import CatalogueError, discover
from orchestrator.kernel.codes import InfrastructureError


def gc(
    all_: Annotated[bool, typer.Option("--all", help="Also reap resources of orchestrator processes that are still running.")] = False,
    scope: Annotated[str, typer.Option("--scope", help="Only resources with this scope label.")] = "",
) -> None:
    """Reap leftover containers, networks and volumes by label (by default those of dead processes)."""
    try:
        engine = DockerEngine.connect()
        if all_ or scope:
            report = engine.reap(selector(scope=scope) if scope else selector())
        else:
            report = reap_orphans(engine)
    except InfrastructureError as exc:
        fail_infrastructure(exc)
    out.print(f"reaped {report.containers} containers, {report.networks} networks, {report.volumes} volumes")
    if report.errors:
        fail("could not remove: " + "; ".join(report.errors))


def benchmarks(environments: Environments = None) -> None:
    """List the benchmarks of the environment packages."""
    try:
        packages = discover(environment_roots(environments))
    except CatalogueError as exc:
        fail(str(exc))
    table = Table()
    for column in ("benchmark", "aliases", "image", "package"):
        table.add_column(column)
    for package in packages:
        for benchmark_id in package.table.benchmarks:
            table.add_row(benchmark_id, ", ".join(package.table.aliases), package.image, str(package.root))
    out.print(table)
