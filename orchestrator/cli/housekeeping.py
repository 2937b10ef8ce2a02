"""`epg-orchestrate gc` and `benchmarks`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from orchestrator.cli.common import ExitCode, fail, fail_infrastructure, json_mode, out, print_json, require_extra, with_built_benchmarks
from orchestrator.cli.options import Backend, Base, Environments, Json, KubeContext, KubeNamespace
from orchestrator.kernel.infrastructure import InfrastructureError

if TYPE_CHECKING:

    from orchestrator.backends.kubernetes.manifests import ClusterTarget


def gc(
    all_: Annotated[bool, typer.Option("--all", help="Also reap resources of orchestrator processes that are still running.")] = False,
    scope: Annotated[str, typer.Option("--scope", help="Only resources with this scope label.")] = "",
    backend: Backend = "docker",
    context: KubeContext = "",
    namespace: KubeNamespace = "default",
    as_json: Json = False,
) -> None:
    """Reap leftover containers, networks and volumes by label (by default those of dead processes).

    Without --scope, also removes the work directories (sockets, copies of Programs) that dead orchestrator processes
    of this host left in the temporary directory; a running process's are kept, even with --all.
    With --backend kubernetes: the Pods and NetworkPolicies of the namespace, by label selector.
    Exit status: 0 reaped (or nothing to reap), 3 the engine did not answer or refused a removal.
    """
    # The engine's client and the compose layer are loaded by the command, not by --help.
    from orchestrator.backends.engine import DockerEngine
    from orchestrator.backends.kubernetes.manifests import ClusterTarget
    from orchestrator.backends.labels import selector
    from orchestrator.orphans import add_dead_work_dirs, reap_orphans

    json_mode(as_json)
    if backend == "kubernetes":
        return _gc_cluster(ClusterTarget(context=context, namespace=namespace), all_, scope, as_json)
    try:
        engine = DockerEngine.connect()
        if scope:
            report = engine.reap(selector(scope=scope))
        elif all_:
            report = engine.reap(selector())
            add_dead_work_dirs(report)
        else:
            report = reap_orphans(engine)
    except InfrastructureError as exc:
        fail_infrastructure(exc)
    if as_json:
        print_json({"containers": report.containers, "networks": report.networks, "volumes": report.volumes,
                    "directories": report.directories, "errors": report.errors})
    else:
        out.print(f"reaped {report.containers} containers, {report.networks} networks, {report.volumes} volumes, "
                  f"{report.directories} work directories")
    if report.errors:
        if as_json:  # the JSON above holds the errors already
            raise typer.Exit(int(ExitCode.INFRASTRUCTURE))
        fail("could not remove: " + "; ".join(report.errors), ExitCode.INFRASTRUCTURE)


def _gc_cluster(target: ClusterTarget, all_: bool, scope: str, as_json: bool) -> None:
    require_extra("kubernetes", "--backend kubernetes")
    from orchestrator.backends.kubernetes.cluster import Cluster  # the client's import costs a second: only when asked for
    from orchestrator.backends.kubernetes.manifests import label_selector
    from orchestrator.orphans import reap_cluster_orphans

    try:
        cluster = Cluster.connect(target)
        if all_ or scope:
            report = cluster.reap(label_selector(scope=scope) if scope else label_selector())
        else:
            report = reap_cluster_orphans(cluster)
    except InfrastructureError as exc:
        fail_infrastructure(exc)
    if as_json:
        print_json({"pods": report.pods, "network_policies": report.network_policies, "directories": report.directories,
                    "errors": report.errors})
    else:
        out.print(f"reaped {report.pods} pods, {report.network_policies} network policies, {report.directories} work directories")
    if report.errors:
        if as_json:
            raise typer.Exit(int(ExitCode.INFRASTRUCTURE))
        fail("could not remove: " + "; ".join(report.errors), ExitCode.INFRASTRUCTURE)


def benchmarks(environments: Environments = None, base: Base = "auto", as_json: Json = False) -> None:
    """List the benchmarks of the environment packages; an EvoPolicyGym package's once its image is built (its
    Benchmarks are discovered inside it), `(not built)` before."""
    from orchestrator.images.catalogue import CatalogueError  # with pydantic: loaded by the command, not by --help

    json_mode(as_json)
    try:
        packages = with_built_benchmarks(base, environments)  # their Benchmarks are named by their images' labels
    except CatalogueError as exc:
        fail(str(exc))
    rows: list[dict[str, Any]] = [{"id": benchmark_id, "entry": entry, "aliases": list(package.table.aliases_of(benchmark_id)), "image": package.image,
             "package": str(package.root), "distribution": package.distribution, "version": package.version,
             "python": package.python}
            for package in packages for benchmark_id, entry in package.table.benchmarks.items()]
    not_built = [{"image": package.image, "package": str(package.root), "distribution": package.distribution,
                  "version": package.version, "python": package.python}
                 for package in packages if package.evopolicygym is not None and not package.table.benchmarks]
    if as_json:
        print_json({"benchmarks": rows, "not_built": not_built})
        return
    table = Table()
    for column in ("benchmark", "aliases", "image", "package"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["id"], ", ".join(row["aliases"]), row["image"], row["package"])
    for package_row in not_built:
        table.add_row("[yellow](not built)[/]", "", package_row["image"], package_row["package"])
    out.print(table)
