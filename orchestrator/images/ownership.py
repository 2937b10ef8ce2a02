"""Which checkout built an image: the labels `images build` adds, and the rule that keeps `images prune` to them.

Several checkouts (branches, worktrees, users) may share one Docker engine. Each image the builder makes carries
the hash of the resolved repository root that built it (CHECKOUT) and, for an environment image, the hash of the
resolved package directory it was built from (PACKAGE). Neither is an input of the content tag, so equal inputs
still give equal tags everywhere (a registry round trip, another machine).
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping
from pathlib import Path

from orchestrator.backends.labels import CHECKOUT, PACKAGE


def path_id(path: Path) -> str:
    """16 hex digits of the SHA-256 of path, resolved: the value of a CHECKOUT or PACKAGE label."""
    return hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]


def reason_to_keep(labels: Mapping[str, str] | None, *, checkout: str, packages: Collection[str]) -> str | None:
    """Why `images prune` must keep an outdated managed image with these labels, or None when it is this checkout's.

    checkout is this checkout's label value; packages the PACKAGE values of the environment packages of the
    catalogue being pruned (an environment image built from a package outside it is kept: it may be another
    `--environments` root's, whose current tag this catalogue cannot tell).
    """
    labels = labels or {}
    owner = labels.get(CHECKOUT)
    if owner is None:
        return "no checkout label (built before checkouts were labelled, or not by images build): remove it by hand"
    if owner != checkout:
        return f"built by another checkout ({CHECKOUT}={owner})"
    package = labels.get(PACKAGE)
    if package is not None and package not in packages:
        return f"built from an environment package outside this catalogue ({PACKAGE}={package}); name its root with --environments"
    return None
