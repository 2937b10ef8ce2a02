"""The base image every other image starts from: local, pulled, or bootstrapped from Debian (images/base/)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Callable

import docker
from docker.errors import APIError, DockerException, ImageNotFound

from orchestrator.backends.labels import CHECKOUT, IMAGE, INPUTS, MANAGED
from orchestrator.images.catalogue import REPO_ROOT
from orchestrator.images.ownership import path_id
from orchestrator.kernel.infrastructure import InfraErrorCode, InfrastructureError

DEFAULT_BASE = "python:3.11-slim"
SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# bootstrap.sh (debootstrap into a tarball), packages.txt (its Debian packages) and
# changes.dockerfile (the `docker import --change` instructions that make the base behave
# like python:3.11-slim for our Dockerfiles). All three are inputs of the base's tag.
BASE_DIR = REPO_ROOT / "images" / "base"
BOOTSTRAP_SCRIPT = BASE_DIR / "bootstrap.sh"
PACKAGES_FILE = BASE_DIR / "packages.txt"
CHANGES_FILE = BASE_DIR / "changes.dockerfile"

Progress = Callable[[str], None]


def _lines(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.lstrip().startswith("#")]


def packages() -> list[str]:
    """The Debian packages of the bootstrapped base (images/base/packages.txt)."""
    return _lines(PACKAGES_FILE)


def changes() -> list[str]:
    """The Dockerfile instructions applied on import (images/base/changes.dockerfile)."""
    return _lines(CHANGES_FILE)


def bootstrap_tag(mirror: str = DEFAULT_MIRROR) -> str:
    """epg/base:bookworm-HASH, HASH over the suite, the mirror and the bytes of every file in images/base/."""
    hasher = hashlib.sha256()
    for part in (SUITE, mirror):
        hasher.update(part.encode() + b"\0")
    for path in (BOOTSTRAP_SCRIPT, PACKAGES_FILE, CHANGES_FILE):
        hasher.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return f"epg/base:{SUITE}-{hasher.hexdigest()[:12]}"


def planned_bootstrap_tag(client: docker.DockerClient, choice: str, mirror: str = DEFAULT_MIRROR) -> str | None:
    """The bootstrapped base's tag when choice leads (or would lead) to one; None for another base.

    Asks only the local engine: "auto" with a local python:3.11-slim is that image.
    """
    if choice == "debootstrap":
        return bootstrap_tag(mirror)
    if choice != "auto":
        return None
    try:
        client.images.get(DEFAULT_BASE)
    except ImageNotFound:
        return bootstrap_tag(mirror)
    return None


def ensure_base(client: docker.DockerClient, choice: str, progress: Progress, mirror: str = DEFAULT_MIRROR) -> str:
    """Return the id of the base image, making it when needed.

    choice is "auto" (a local python:3.11-slim, else a pull of it, else a
    Debian bootstrap), "debootstrap", or any image reference (local or
    pullable). Raises InfrastructureError(IMAGE_BUILD_FAILED).
    """
    if choice not in ("auto", "debootstrap"):
        return _local_or_pulled(client, choice, progress) or _fail(f"base image {choice} is neither local nor pullable")
    tag = bootstrap_tag(mirror)
    if choice == "auto":
        found = _local(client, DEFAULT_BASE) or _local(client, tag) or _local_or_pulled(client, DEFAULT_BASE, progress)
        if found:
            return found
    found = _local(client, tag)
    if found:
        return found
    progress(f"bootstrapping {tag} from Debian {SUITE} (no registry answers; about a minute)")
    return _bootstrap(client, tag, mirror, progress)


def local_base(client: docker.DockerClient, choice: str, mirror: str = DEFAULT_MIRROR) -> str | None:
    """The id of the base image ensure_base would return, when the engine holds it already; else None (nothing is made)."""
    if choice not in ("auto", "debootstrap"):
        return _local(client, choice)
    tag = bootstrap_tag(mirror)
    return (_local(client, DEFAULT_BASE) if choice == "auto" else None) or _local(client, tag)


def _local(client: docker.DockerClient, reference: str) -> str | None:
    try:
        return client.images.get(reference).id
    except ImageNotFound:
        return None


def _local_or_pulled(client: docker.DockerClient, reference: str, progress: Progress) -> str | None:
    found = _local(client, reference)
    if found:
        return found
    progress(f"pulling {reference}")
    try:
        return client.images.pull(reference).id
    except (APIError, DockerException) as exc:
        progress(f"cannot pull {reference}: {str(exc).splitlines()[0][:160]}")
        return None


def _fail(message: str, evidence: str = "") -> str:
    raise InfrastructureError(InfraErrorCode.IMAGE_BUILD_FAILED, message, evidence)


def _ensure_debootstrap(progress: Progress) -> str:
    found = shutil.which("debootstrap")
    if found:
        return found
    if os.geteuid() != 0:
        _fail("debootstrap is not installed; install Debian's debootstrap package or pass --base IMAGE")
    progress("installing Debian's debootstrap")
    subprocess.run(["apt-get", "update", "-qq"], check=True, capture_output=True)
    subprocess.run(["apt-get", "install", "-y", "-qq", "debootstrap"], check=True, capture_output=True)
    return shutil.which("debootstrap") or _fail("debootstrap is still missing after installing it")


def _bootstrap(client: docker.DockerClient, tag: str, mirror: str, progress: Progress) -> str:
    if os.geteuid() != 0:
        _fail("bootstrapping a base image needs root (debootstrap); run as root or pass --base IMAGE")
    _ensure_debootstrap(progress)
    with tempfile.TemporaryDirectory(prefix="epg-base-") as tmp:
        archive = Path(tmp) / "rootfs.tar"
        result = subprocess.run(["sh", str(BOOTSTRAP_SCRIPT), str(archive), mirror], capture_output=True, text=True, env={**os.environ, "TMPDIR": tmp})
        if result.returncode != 0 or not archive.is_file():
            _fail(f"{BOOTSTRAP_SCRIPT.relative_to(REPO_ROOT)} failed", result.stdout[-4000:] + result.stderr[-4000:])
        progress("importing the bootstrapped file system")
        repository, _, version = tag.partition(":")
        import_changes = [*changes(), f"LABEL {MANAGED}=true {IMAGE}=base {INPUTS}={version} {CHECKOUT}={path_id(REPO_ROOT)}"]
        try:
            client.api.import_image(src=str(archive), repository=repository, tag=version, changes=import_changes)
            image_id = client.images.get(tag).id
        except (APIError, ImageNotFound) as exc:
            return _fail("docker import of the bootstrapped base failed", str(exc))
        return image_id or _fail(f"docker import of the bootstrapped base gave {tag} no image id")
