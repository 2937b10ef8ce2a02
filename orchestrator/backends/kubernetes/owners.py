"""Who owns the objects on a cluster, and whether the owner still lives: per-process owner labels and Lease heartbeats.

The Docker backend tells a dead owner by its pid on this host. That does not
hold on a cluster: several hosts may share one namespace, and two of them may
have the same hostname (containers, CI runners, copies of one VM), so a pid
check there reaps another machine's live Pods. Here the owner label names the
host, the pid and a random token drawn once per process (after a fork too), and
each sandbox keeps a Lease (coordination.k8s.io/v1) labelled with its owner
whose renewTime a thread renews every RENEW_S while the sandbox is open. A
reaper reaps an owner only when it has a Lease and all of its Leases are
stale beyond STALE_AFTER_S; an owner with no Lease at all (an older version's
objects) is never reaped automatically (`gc --all` or `--scope` reap it).
Staleness compares the renewer's clock with the reaper's: clocks must agree to
well within STALE_AFTER_S (any NTP-synchronised hosts do).
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable

from orchestrator.backends.kubernetes.cluster import Cluster
from orchestrator.backends.kubernetes.manifests import heartbeat_lease, label_selector, label_value
from orchestrator.backends.labels import OWNER
from orchestrator.kernel.infrastructure import InfrastructureError

log = logging.getLogger(__name__)

RENEW_S = 10.0
LEASE_S = 30  # leaseDurationSeconds: what the Lease says of itself
STALE_AFTER_S = 120.0  # a reaper reaps an owner whose newest renewTime is older than this
STOP_WAIT_S = 35.0  # a renewal in flight ends within the client's request timeout

_token = secrets.token_hex(6)


def _new_token() -> None:
    global _token
    _token = secrets.token_hex(6)


os.register_at_fork(after_in_child=_new_token)


def process_owner() -> str:
    """This process's owner label value: hostname_pid_token, label-safe and at most 63 characters."""
    suffix = f"_{os.getpid()}_{_token}"
    return label_value(socket.gethostname())[: 63 - len(suffix)].rstrip("_.-") + suffix


def micro_time(moment: datetime) -> str:
    """moment as a Kubernetes MicroTime string (UTC, microseconds)."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def stale_owners(leases: Iterable[tuple[str, datetime | None]], owners: Iterable[str], now: datetime,
                 stale_after_s: float = STALE_AFTER_S) -> set[str]:
    """The owners among owners to reap: those with a Lease (leases: (owner, renewTime) pairs) whose newest renewTime
    is older than stale_after_s at now. Owners without any Lease are left alone."""
    newest: dict[str, datetime | None] = {}
    for owner, renewed in leases:
        known = newest.get(owner)
        if owner not in newest or (renewed is not None and (known is None or renewed > known)):
            newest[owner] = renewed
    bound = now - timedelta(seconds=stale_after_s)
    return {owner for owner in owners if owner and owner in newest and ((renewed := newest[owner]) is None or renewed < bound)}


def cluster_stale_owners(cluster: Cluster, now: datetime | None = None) -> set[str]:
    """The owners of labelled objects on cluster whose heartbeat is stale (stale_owners). Raises InfrastructureError."""
    leases = [(((lease.metadata.labels if lease.metadata else None) or {}).get(OWNER, ""), lease.spec.renew_time if lease.spec else None)
              for lease in cluster.leases(label_selector())]
    return stale_owners(leases, cluster.label_values(label_selector(), OWNER), now or datetime.now(timezone.utc))


class Heartbeat:
    """The Lease of one sandbox, renewed every RENEW_S by a daemon thread until stop().

    start() creates it (raises InfrastructureError when the API server refuses);
    a renewal that finds it gone creates it again; a failed renewal is logged
    and tried again at the next tick.
    """

    def __init__(self, cluster: Cluster, *, name: str, labels: dict[str, str], owner: str) -> None:
        self._cluster = cluster
        self._name = name
        self._labels = labels
        self._owner = owner
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"epg-heartbeat-{name}", daemon=True)

    def _manifest(self) -> dict[str, Any]:
        return heartbeat_lease(name=self._name, labels=self._labels, namespace=self._cluster.namespace, holder=self._owner,
                               duration_s=LEASE_S, renew_time=micro_time(datetime.now(timezone.utc)))

    def start(self) -> None:
        self._cluster.create(self._manifest())
        self._thread.start()

    def _loop(self) -> None:
        while not self._stopped.wait(RENEW_S):
            try:
                if not self._cluster.renew_lease(self._name, micro_time(datetime.now(timezone.utc))) and not self._stopped.is_set():
                    self._cluster.create(self._manifest())
            except InfrastructureError as exc:
                log.warning("could not renew the heartbeat Lease %s: %s", self._name, exc)

    def stop(self) -> None:
        """Stop renewing (the Lease itself is deleted with the sandbox's objects)."""
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join(timeout=STOP_WAIT_S)
