"""Which checkout built an image: the labels `images build` adds, and the rule that keeps `images prune` to them.

Several checkouts (branches, worktrees, users) may share one Docker engine. Each image the builder makes carries
the hash of the resolved repository root that built it (CHECKOUT) and, for an environment image, the hash of the
resolved package directory it was built from (PACKAGE). Neither is an input of the content tag, so equal inputs
still give equal tags everywhere (a registry round trip, another machine). A checkout that finds an image already
built under its tag uses it as it is, so the label names the checkout that built it first; the Ledger records the
tags each checkout of this user last found current, so that a prune keeps an image another checkout still uses.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

from orchestrator.backends.labels import CHECKOUT, PACKAGE


def path_id(path: Path) -> str:
    """16 hex digits of the SHA-256 of path, resolved: the value of a CHECKOUT or PACKAGE label."""
    return hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]


def reason_to_keep(
    labels: Mapping[str, str] | None, tags: Iterable[str] = (), *, checkout: str, packages: Collection[str],
    elsewhere: Mapping[str, str] | None = None,
) -> str | None:
    """Why `images prune` must keep an outdated managed image with these labels and tags, or None when it may go.

    checkout is this checkout's label value; packages the PACKAGE values of the environment packages of the
    catalogue being pruned (an environment image built from a package outside it is kept: it may be another
    `--environments` root's, whose current tag this catalogue cannot tell); elsewhere maps the tags other checkouts
    last found current to their paths (Ledger.used_elsewhere).
    """
    labels = labels or {}
    used = [f"{tag} is current for the checkout at {(elsewhere or {})[tag]}" for tag in tags if tag in (elsewhere or {})]
    if used:
        return used[0]
    owner = labels.get(CHECKOUT) or None  # empty: an image built FROM one of ours cannot drop the label, only blank it
    if owner is None:
        return "no checkout label (built before checkouts were labelled, or not by images build): remove it by hand"
    if owner != checkout:
        return f"built by another checkout ({CHECKOUT}={owner})"
    package = labels.get(PACKAGE) or None
    if package is not None and package not in packages:
        return f"built from an environment package outside this catalogue ({PACKAGE}={package}); name its root with --environments"
    return None


class Ledger:
    """The tags each checkout last found current (image name -> tag), one JSON file per checkout in directory.

    Written by `images build` and `images list` (any command that computes the tags); read by `images prune`, which
    keeps an image whose tag a checkout that still exists uses. Only the checkouts of this cache directory (this
    user) are known; a checkout that was moved or deleted no longer counts.
    """

    def __init__(self, directory: Path, checkout: Path) -> None:
        self._directory = directory
        self._checkout = checkout.resolve()
        self._path = directory / f"{path_id(checkout)}.json"

    @property
    def path(self) -> Path:
        """This checkout's file."""
        return self._path

    def record(self, tags: Mapping[str, str]) -> None:
        """Add tags (image name -> tag) to this checkout's file, replacing the tag an image name had."""
        if not tags:
            return
        images = self._images(self._path) | dict(tags)
        self._directory.mkdir(parents=True, exist_ok=True)
        scratch = self._path.with_suffix(f".{os.getpid()}.tmp")
        scratch.write_text(json.dumps({"checkout": str(self._checkout), "images": images}, indent=1, sort_keys=True))
        os.replace(scratch, self._path)

    def used_elsewhere(self) -> dict[str, str]:
        """Tag -> path of another checkout that still exists and last found that tag current."""
        used: dict[str, str] = {}
        for path in sorted(self._directory.glob("*.json")) if self._directory.is_dir() else ():
            checkout = self._read(path).get("checkout")
            if path == self._path or not isinstance(checkout, str) or not Path(checkout).is_dir():
                continue
            used.update({tag: checkout for tag in self._images(path).values()})
        return used

    def _images(self, path: Path) -> dict[str, str]:
        images = self._read(path).get("images")
        return {str(k): str(v) for k, v in images.items()} if isinstance(images, dict) else {}

    @staticmethod
    def _read(path: Path) -> dict[str, Any]:
        try:
            loaded = json.loads(path.read_text())
        except (OSError, ValueError):
            return {}
        return loaded if isinstance(loaded, dict) else {}
