"""The base image every other image starts from: local, pulled, or bootstrapped from Debian."""

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

from orchestrator.backends.labels import IMAGE, INPUTS, MANAGED
from orchestrator.kernel.codes import InfraErrorCode, InfrastructureError

DEFAULT_BASE = "python:3.11-slim"
SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# git: the agent images are built on this base, and an agent expects git.
PACKAGES = ("python3", "python3-pip", "ca-certificates", "git")
# The bootstrapped base behaves like python:3.11-slim for our Dockerfiles:
# `python3` and `python3 -m pip` work as root, UTF-8 locale.
CHANGES = (
    "ENV LANG=C.UTF-8",
    "ENV PIP_BREAK_SYSTEM_PACKAGES=1",
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    'CMD ["python3"]',
)

Progress = Callable[[str], None]


def bootstrap_tag(mirror: str = DEFAULT_MIRROR) -> str:
    recipe = "\n".join([SUITE, mirror, *PACKAGES, *CHANGES])
    return f"epg/base:{SUITE}-{hashlib.sha256(recipe.encode()).hexdigest()[:12]}"


def ensure_base(client: docker.DockerClient, choice: str, progress: Progress, mirror: str = DEFAULT_MIRROR) -> str:
    """Return the id of the base image, making it when needed.

    choice is "auto" (a local python:3.11-slim, else a pull of it, else a
    Debian bootstrap), "debootstrap", or any image reference (local or
    pullable). Raises InfrastructureError(IMAGE_BUILD_FAILED).
    """
    if choice not in ("auto", "debootstrap"):
        return _local_or_pulled(client, choice, progress) or _fail(f"base image {choice} is neither local nor pullable")
    if choice == "auto":
        found = _local_or_pulled(client, DEFAULT_BASE, progress)
        if found:
            return found
    tag = bootstrap_tag(mirror)
    try:
        return client.images.get(tag).id
    except ImageNotFound:
        pass
    progress(f"bootstrapping {tag} from Debian {SUITE} (no registry answers; about a minute)")
    return _bootstrap(client, tag, mirror, progress)


def _local_or_pulled(client: docker.DockerClient, reference: str, progress: Progress) -> str | None:
    try:
        return client.images.get(reference).id
    except ImageNotFound:
        pass
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
    debootstrap = _ensure_debootstrap(progress)
    with tempfile.TemporaryDirectory(prefix="epg-base-") as tmp:
        root = Path(tmp) / "root"
        command = [debootstrap, "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE, str(root), mirror]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            _fail("debootstrap failed", result.stdout[-4000:] + result.stderr[-4000:])
        for leftover in ("var/cache/apt/archives", "var/lib/apt/lists"):
            shutil.rmtree(root / leftover, ignore_errors=True)
        progress("importing the bootstrapped file system")
        archive = Path(tmp) / "rootfs.tar"
        packed = subprocess.run(["tar", "-C", str(root), "-cf", str(archive), "."], capture_output=True, text=True)
        if packed.returncode != 0:
            _fail("packing the bootstrapped file system failed", packed.stderr[-4000:])
        repository, _, version = tag.partition(":")
        changes = [*CHANGES, f"LABEL {MANAGED}=true {IMAGE}=base {INPUTS}={version}"]
        try:
            client.api.import_image(src=str(archive), repository=repository, tag=version, changes=changes)
            return client.images.get(tag).id
        except (APIError, ImageNotFound) as exc:
            return _fail("docker import of the bootstrapped base failed", str(exc))
