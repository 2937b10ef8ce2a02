"""The base images every other image starts from, one per Python (3.11: bookworm, 3.13: trixie): local, pulled, or
bootstrapped from Debian (images/base/)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import docker
from docker.errors import APIError, DockerException, ImageNotFound

from orchestrator.backends.labels import CHECKOUT, IMAGE, INPUTS, MANAGED
from orchestrator.images.catalogue import REPO_ROOT
from orchestrator.images.ownership import path_id
from orchestrator.kernel.infrastructure import InfraErrorCode, InfrastructureError

DEFAULT_MIRROR = "http://deb.debian.org/debian"
# bootstrap.sh (debootstrap into a tarball), packages-SUITE.txt (a suite's Debian packages) and changes.dockerfile
# (the `docker import --change` instructions that make the base behave like python:3.X-slim for our Dockerfiles).
# The three files of a suite are inputs of its base's tag.
BASE_DIR = REPO_ROOT / "images" / "base"
BOOTSTRAP_SCRIPT = BASE_DIR / "bootstrap.sh"
CHANGES_FILE = BASE_DIR / "changes.dockerfile"
DEFAULT_PYTHON = "3.11"


@dataclass(frozen=True, slots=True, kw_only=True)
class BaseKind:
    """The base of one Python: the Debian suite bootstrapped where no registry answers, and the image pulled where one does."""

    python: str  # major.minor, as [tool.epg] python names it
    suite: str
    pulled: str

    @property
    def packages_file(self) -> Path:
        return BASE_DIR / f"packages-{self.suite}.txt"


# bookworm ships Python 3.11, trixie 3.13 (no Debian suite ships 3.12).
BASES = {
    "3.11": BaseKind(python="3.11", suite="bookworm", pulled="python:3.11-slim"),
    "3.13": BaseKind(python="3.13", suite="trixie", pulled="python:3.13-slim"),
}
PYTHONS = tuple(BASES)
DEFAULT_BASE = BASES[DEFAULT_PYTHON].pulled
SUITE = BASES[DEFAULT_PYTHON].suite

Progress = Callable[[str], None]


def _lines(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.lstrip().startswith("#")]


def kind_of(python: str) -> BaseKind:
    """The base of python ("3.11" or "3.13"). Raises ValueError naming the known ones."""
    try:
        return BASES[python]
    except KeyError:
        raise ValueError(f"no base image for Python {python}; known: {', '.join(PYTHONS)}") from None


def packages(python: str = DEFAULT_PYTHON) -> list[str]:
    """The Debian packages of python's bootstrapped base (images/base/packages-SUITE.txt)."""
    return _lines(kind_of(python).packages_file)


def changes() -> list[str]:
    """The Dockerfile instructions applied on import (images/base/changes.dockerfile)."""
    return _lines(CHANGES_FILE)


def choice_for(choice: str, python: str) -> str:
    """The base choice of python's images in a --base value.

    choice is "auto", "debootstrap", an image reference, or comma-separated `PYTHON=CHOICE` items (e.g.
    `3.11=my/py311,3.13=debootstrap`) with an optional leading plain item for 3.11. A plain image reference is
    the 3.11 base only: the 3.13 images then have none ("") unless an item names one, rather than a base nobody
    asked for. Raises ValueError for an item naming an unknown Python.
    """
    chosen = {python_: "auto" for python_ in PYTHONS}
    for number, item in enumerate(part.strip() for part in choice.split(",")):
        key, equals, value = item.partition("=")
        if equals and key in PYTHONS:
            chosen[key] = value
        elif equals and re.fullmatch(r"\d+\.\d+", key):
            raise ValueError(f"--base {choice}: no base image for Python {key}; known: {', '.join(PYTHONS)}")
        elif number == 0 and item in ("auto", "debootstrap"):
            chosen = dict.fromkeys(PYTHONS, item)
        elif number == 0:
            chosen = dict.fromkeys(PYTHONS, "")
            chosen[DEFAULT_PYTHON] = item
        else:
            raise ValueError(f"--base {choice}: {item!r} is not PYTHON=CHOICE")
    return chosen[kind_of(python).python]


def bootstrap_tag(mirror: str = DEFAULT_MIRROR, python: str = DEFAULT_PYTHON) -> str:
    """epg/base:SUITE-HASH, HASH over the suite, the mirror and the bytes of the suite's files in images/base/."""
    kind = kind_of(python)
    hasher = hashlib.sha256()
    for part in (kind.suite, mirror):
        hasher.update(part.encode() + b"\0")
    for path in (BOOTSTRAP_SCRIPT, kind.packages_file, CHANGES_FILE):
        hasher.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return f"epg/base:{kind.suite}-{hasher.hexdigest()[:12]}"


def planned_bootstrap_tag(client: docker.DockerClient, choice: str, mirror: str = DEFAULT_MIRROR,
                          python: str = DEFAULT_PYTHON) -> str | None:
    """The bootstrapped base's tag when choice leads (or would lead) to one for python's images; None for another base.

    Asks only the local engine: "auto" with a local python:3.X-slim is that image.
    """
    choice = choice_for(choice, python)
    if choice == "debootstrap":
        return bootstrap_tag(mirror, python)
    if choice != "auto":
        return None
    try:
        client.images.get(kind_of(python).pulled)
    except ImageNotFound:
        return bootstrap_tag(mirror, python)
    return None


def ensure_base(client: docker.DockerClient, choice: str, progress: Progress, mirror: str = DEFAULT_MIRROR,
                python: str = DEFAULT_PYTHON) -> str:
    """Return the id of the base image of python's images, making it when needed.

    choice (see choice_for) is "auto" (a local python:3.X-slim, else a pull of it, else a Debian bootstrap of the
    suite shipping that Python), "debootstrap", or any image reference (local or pullable).
    Raises InfrastructureError(IMAGE_BUILD_FAILED), ValueError for a choice naming an unknown Python.
    """
    kind = kind_of(python)
    given = choice
    choice = choice_for(choice, python)
    if not choice:
        return _fail(f"--base {given} names no base for the Python {python} images: add {python}=IMAGE (or {python}=auto)")
    if choice not in ("auto", "debootstrap"):
        return _local_or_pulled(client, choice, progress) or _fail(f"base image {choice} is neither local nor pullable")
    tag = bootstrap_tag(mirror, python)
    if choice == "auto":
        found = _local(client, kind.pulled) or _local(client, tag) or _local_or_pulled(client, kind.pulled, progress)
        if found:
            return found
    found = _local(client, tag)
    if found:
        return found
    progress(f"bootstrapping {tag} from Debian {kind.suite} (no registry answers; about a minute)")
    return _bootstrap(client, tag, mirror, kind, progress)


def local_base(client: docker.DockerClient, choice: str, mirror: str = DEFAULT_MIRROR, python: str = DEFAULT_PYTHON) -> str | None:
    """The id of the base image ensure_base would return, when the engine holds it already; else None (nothing is made)."""
    choice = choice_for(choice, python)
    if not choice:
        return None
    if choice not in ("auto", "debootstrap"):
        return _local(client, choice)
    tag = bootstrap_tag(mirror, python)
    return (_local(client, kind_of(python).pulled) if choice == "auto" else None) or _local(client, tag)


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


def _bootstrap(client: docker.DockerClient, tag: str, mirror: str, kind: BaseKind, progress: Progress) -> str:
    if os.geteuid() != 0:
        _fail("bootstrapping a base image needs root (debootstrap); run as root or pass --base IMAGE")
    _ensure_debootstrap(progress)
    with tempfile.TemporaryDirectory(prefix="epg-base-") as tmp:
        archive = Path(tmp) / "rootfs.tar"
        result = subprocess.run(["sh", str(BOOTSTRAP_SCRIPT), str(archive), mirror, kind.suite], capture_output=True, text=True,
                                env={**os.environ, "TMPDIR": tmp})
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
