"""Reaping of orphans: what orchestrator processes left behind when they died, on the Docker engine and on a cluster.

Everything the orchestrator creates carries its owner label (`backends.labels`); an owner that no longer runs
(a pid of this host that is gone, or a cluster owner whose heartbeat Lease went stale) is reaped by label. The work
directories of this host's dead processes go with them (`backends.workdirs`).
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

from orchestrator.backends.engine import DockerEngine, ReapReport
from orchestrator.backends.labels import OWNER, selector
from orchestrator.backends.workdirs import pid_is_dead, reap_work_dirs

if TYPE_CHECKING:
    from orchestrator.backends.kubernetes.cluster import Cluster, ClusterReapReport


def owner_is_dead(owner: str) -> bool:
    """Return True when owner (hostname:pid) names a process of this host that no longer exists."""
    host, _, pid = owner.rpartition(":")
    return host == socket.gethostname() and pid.isdigit() and pid_is_dead(int(pid))


def add_dead_work_dirs(report: ReapReport | ClusterReapReport) -> None:
    """Remove the work directories of this host's dead processes (`backends.workdirs`); count them in report."""
    directories = reap_work_dirs()
    report.directories += len(directories.removed)
    report.errors += directories.errors


def reap_orphans(engine: DockerEngine) -> ReapReport:
    """Reap what orchestrator processes of this host left behind when they died; return what was reaped."""
    total = ReapReport()
    for owner in engine.owners(selector(), OWNER):
        if owner and owner_is_dead(owner):
            report = engine.reap(selector(owner=owner))
            total.containers += report.containers
            total.networks += report.networks
            total.volumes += report.volumes
            total.errors += report.errors
    add_dead_work_dirs(total)
    return total


def reap_cluster_orphans(cluster: Cluster) -> ClusterReapReport:
    """Reap the cluster objects of orchestrator processes whose heartbeat Leases went stale (on any host: the owner
    label is unique per process, and a pid says nothing about another machine that shares this hostname); return
    what was reaped.

    Raises InfrastructureError when the API server does not answer.
    """
    from orchestrator.backends.kubernetes.cluster import ClusterReapReport
    from orchestrator.backends.kubernetes.manifests import label_selector
    from orchestrator.backends.kubernetes.owners import cluster_stale_owners

    total = ClusterReapReport()
    for owner in sorted(cluster_stale_owners(cluster)):
        report = cluster.reap(label_selector(owner=owner))
        total.pods += report.pods
        total.network_policies += report.network_policies
        total.leases += report.leases
        total.errors += report.errors
    add_dead_work_dirs(total)
    return total
