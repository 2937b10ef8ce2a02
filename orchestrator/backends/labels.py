"""The labels on everything the orchestrator creates, and the selectors that find it again."""

from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass

PREFIX = "org.evopolicygym."
MANAGED = PREFIX + "managed"
ROLE = PREFIX + "role"
SANDBOX = PREFIX + "sandbox"  # the opened sandbox (Docker or Kubernetes) a resource belongs to
SCOPE = PREFIX + "scope"
OWNER = PREFIX + "owner"
IMAGE = PREFIX + "image"
INPUTS = PREFIX + "inputs"
# On images `images build` makes: the checkout that built it, and for an environment image the package it was built
# from (each a hash of the resolved path), so `images prune` removes only this checkout's images on a shared engine.
CHECKOUT = PREFIX + "checkout"
PACKAGE = PREFIX + "package"
# On images: the Benchmark ids an environment image holds (comma-separated, set by the image builder), a directory
# inside an image that holds a baseline Program, and the agent CLI an agent image carries and its version.
BENCHMARKS = PREFIX + "benchmarks"
BASELINE = PREFIX + "baseline"
CLI = PREFIX + "cli"


def owner_id() -> str:
    """This process as hostname:pid, so that leftovers of a dead process can be told apart."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True, slots=True, kw_only=True)
class LabelSet:
    """Labels of one opened sandbox: every container, network and volume it makes gets them.

    scope is a free tag a caller (a test run, a CI job) uses to find exactly
    its own resources; empty means none.
    """

    sandbox: str  # the id of the opened sandbox (its containers' and Kubernetes objects' names embed it)
    owner: str
    scope: str = ""

    def for_role(self, role: str) -> dict[str, str]:
        labels = {MANAGED: "true", ROLE: role, SANDBOX: self.sandbox, OWNER: self.owner}
        if self.scope:
            labels[SCOPE] = self.scope
        return labels


def sandbox_labels(scope: str = "") -> LabelSet:
    """Return the labels of a new sandbox of this process (a fresh sandbox id, this process as owner)."""
    return LabelSet(sandbox=secrets.token_hex(6), owner=owner_id(), scope=scope)


def selector(**labels: str) -> list[str]:
    """Return a docker `label` filter list matching managed resources with the given label values.

    Keys are the short names: sandbox, scope, owner, role.
    """
    names = {"sandbox": SANDBOX, "scope": SCOPE, "owner": OWNER, "role": ROLE}
    return [f"{MANAGED}=true"] + [f"{names[key]}={value}" for key, value in sorted(labels.items())]
