"""EvoPolicyGym's own `evaluate`, run for one package of a checkout of their repository: the reference our
reproduction mode (`evaluate --reproduce`) is compared with.

Their code is untrusted to us and needs Python >= 3.12, so it runs in a container: an image FROM our trixie base
(Python 3.13) holding their kernel (`src/evopolicygym`, pure Python) and the package's sources on PYTHONPATH, and
the package's locked dependencies (its `uv.lock`, runtime closure, markers evaluated for Linux x86-64 CPython 3.13)
installed from wheels the host's pip downloads (`--no-index --ignore-requires-python`: their `<3.13` bound). A
pinned version without a CPython 3.13 manylinux wheel is replaced by the nearest version that has one, and the
substitution is recorded in the image's labels and in every result. The image is tagged by a hash of its inputs and
built once per package; each reference run is a fresh labelled container with no network, removed after.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
from docker.errors import BuildError, ImageNotFound
from packaging.markers import Marker
from packaging.version import Version

from orchestrator.backends.labels import CHECKOUT, IMAGE, INPUTS, MANAGED, PREFIX, LabelSet, owner_id
from orchestrator.images.ownership import path_id

REPO = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("evopolicygym_reference_driver.py")
IMAGE_NAME = "epg/test-evopolicygym-reference"
SUBSTITUTIONS = PREFIX + "reference-substitutions"  # image label: JSON list of {name, locked, used}
WHEEL_CACHE = Path(tempfile.gettempdir()) / "epg-evopolicygym-reference-wheels"

# The interpreter inside the image: trixie's CPython 3.13 on Linux x86-64 (glibc 2.41).
TARGET = {
    "implementation_name": "cpython", "implementation_version": "3.13.5", "os_name": "posix",
    "platform_machine": "x86_64", "platform_python_implementation": "CPython", "platform_release": "",
    "platform_system": "Linux", "platform_version": "", "python_full_version": "3.13.5", "python_version": "3.13",
    "sys_platform": "linux",
}
_PLATFORMS = ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64",
              *(f"manylinux_2_{minor}_x86_64" for minor in range(5, 42)), "any"]
_TARGET_OPTIONS = ["--only-binary=:all:", "--python-version", "3.13", "--implementation", "cp",
                   *(option for abi in ("cp313", "abi3", "none") for option in ("--abi", abi)),
                   *(option for platform in _PLATFORMS for option in ("--platform", platform))]


def trixie_base(client: docker.DockerClient) -> str:
    """The tag of the newest local `epg/base:trixie-*` image (our Python 3.13 base).

    Once orchestrator/images/base.py is merged, this is `base.bootstrap_tag(python="3.13")`.
    Raises LookupError when no such image exists (build one with `epg-orchestrate images build`).
    """
    tagged = [(image.attrs["Created"], tag) for image in client.images.list(name="epg/base")
              for tag in image.tags if tag.startswith("epg/base:trixie-")]
    if not tagged:
        raise LookupError("no epg/base:trixie-* image: build the Python 3.13 images first")
    return max(tagged)[1]


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name.lower())


@dataclass(frozen=True, slots=True, kw_only=True)
class ReferencePackage:
    """One EvoPolicyGym environment package of a checkout: its directory, distribution and import package."""

    directory: Path
    distribution: str
    module: str

    @classmethod
    def read(cls, directory: Path) -> ReferencePackage:
        """Read directory's pyproject.toml (their layout: the wheel's one package under src/). Raises ValueError."""
        project = tomllib.loads((directory / "pyproject.toml").read_text())
        packages = project.get("tool", {}).get("hatch", {}).get("build", {}).get("targets", {}).get("wheel", {}).get("packages", [])
        if len(packages) != 1 or not str(packages[0]).startswith("src/"):
            raise ValueError(f"{directory}: expected one wheel package under src/, found {packages}")
        return cls(directory=directory, distribution=project["project"]["name"], module=Path(packages[0]).name)

    @property
    def baseline(self) -> Path:
        """Their baseline Program's directory (what `baseline_program()` snapshots)."""
        return self.directory / "src" / self.module / "programs" / "baseline"


def locked_pins(lock_text: str, distribution: str) -> list[tuple[str, str]]:
    """(name, version) of every registry package in distribution's runtime closure in a uv.lock, sorted by name.

    Follows `dependencies` and the `optional-dependencies` a dependency's `extra` names, never the root's own
    optional (dev) ones; markers are evaluated for TARGET. Packages locked from a path (their kernel, the package
    itself) are left out: they go in as sources. Raises KeyError for a name the lock does not hold.
    """
    packages = {_normal(package["name"]): package for package in tomllib.loads(lock_text)["package"]}
    pins: dict[str, str] = {}
    pending, seen = [(_normal(distribution), ())], set()
    while pending:
        name, extras = pending.pop()
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        package = packages[name]
        if "registry" in package.get("source", {}):
            pins[name] = package["version"]
        edges = list(package.get("dependencies", []))
        for extra in extras:
            edges += package.get("optional-dependencies", {}).get(extra, [])
        for edge in edges:
            marker = edge.get("marker")
            if marker and not any(Marker(marker).evaluate({**TARGET, "extra": extra}) for extra in (*extras, "")):
                continue
            pending.append((_normal(edge["name"]), tuple(sorted(edge.get("extra", ())))))
    return sorted(pins.items())


def _pip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pip", *args, "--disable-pip-version-check"], capture_output=True,
                          text=True, timeout=900, check=False)


def _nearest_with_wheel(name: str, locked: str) -> str:
    """The version of name closest to locked that has a CPython 3.13 Linux wheel: the first newer, else the last older."""
    listed = _pip("index", "versions", name, *_TARGET_OPTIONS)
    match = re.search(r"Available versions: (.+)", listed.stdout)
    if not match:
        raise RuntimeError(f"no CPython 3.13 wheel of {name} at any version: {listed.stdout}{listed.stderr}")
    versions = sorted(Version(text.strip()) for text in match.group(1).split(","))
    newer = [version for version in versions if version > Version(locked)]
    return str(newer[0] if newer else versions[-1])


def download_wheels(pins: list[tuple[str, str]], directory: Path) -> tuple[list[Path], list[dict[str, str]]]:
    """Download (into WHEEL_CACHE, then copy into directory) one CPython 3.13 Linux x86-64 wheel per pin.

    Returns the wheels and the substitutions ({name, locked, used}) for pins with no such wheel. Raises RuntimeError
    when pip cannot download a wheel even at the nearest version.
    """
    wheels, substitutions = [], []
    for name, version in pins:
        target = WHEEL_CACHE / f"{name}=={version}"
        found = sorted(target.glob("*.whl")) if target.is_dir() else []
        if not found:
            used = version
            downloaded = _pip("download", "--no-deps", *_TARGET_OPTIONS, "-d", str(target), f"{name}=={version}")
            if downloaded.returncode != 0:
                used = _nearest_with_wheel(name, version)
                downloaded = _pip("download", "--no-deps", *_TARGET_OPTIONS, "-d", str(target), f"{name}=={used}")
                if downloaded.returncode != 0:
                    raise RuntimeError(f"pip download {name}=={used}: {downloaded.stdout}{downloaded.stderr}")
            found = sorted(target.glob("*.whl"))
        used_version = found[0].name.split("-")[1]
        if Version(used_version) != Version(version):
            substitutions.append({"name": name, "locked": version, "used": used_version})
        for wheel in found:
            shutil.copy2(wheel, directory / wheel.name)
            wheels.append(directory / wheel.name)
    return wheels, substitutions


def _tree_digest(hasher: Any, root: Path) -> None:
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        hasher.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")


DOCKERFILE = """\
FROM {base}
COPY wheels/ /opt/reference/wheels/
RUN python3 -m pip install --no-cache-dir --no-index --no-deps --ignore-requires-python --ignore-installed \\
    /opt/reference/wheels/*.whl \\
 && rm -rf /opt/reference/wheels
COPY site/ /opt/reference/site/
COPY driver.py /opt/reference/driver.py
ENV PYTHONPATH=/opt/reference/site PYTHONDONTWRITEBYTECODE=1 PYTHONHASHSEED=0
WORKDIR /tmp
ENTRYPOINT ["python3", "/opt/reference/driver.py"]
"""


def reference_image(client: docker.DockerClient, checkout: Path, package: ReferencePackage, *,
                    base: str | None = None, progress: Callable[[str], None] = print) -> str:
    """Return the tag of package's reference image, building it once (tagged by a hash of every input).

    The inputs: the base image's id, the Dockerfile, the driver, the kernel's and the package's sources, and the
    pins of its uv.lock. Raises LookupError (no trixie base), RuntimeError (a wheel pip cannot download, a failed
    build, with its log's tail).
    """
    base = base or trixie_base(client)
    pins = locked_pins((package.directory / "uv.lock").read_text(), package.distribution)
    hasher = hashlib.sha256()
    for part in (client.images.get(base).id, DOCKERFILE, DRIVER.read_text(), json.dumps(pins)):
        hasher.update(part.encode() + b"\0")
    _tree_digest(hasher, checkout / "src" / "evopolicygym")
    _tree_digest(hasher, package.directory / "src" / package.module)
    digest = hasher.hexdigest()
    tag = f"{IMAGE_NAME}:{_normal(package.module)}-{digest[:16]}"
    try:
        client.images.get(tag)
        return tag
    except ImageNotFound:
        pass
    progress(f"building {tag} ({len(pins)} locked wheels)")
    with tempfile.TemporaryDirectory(prefix="epg-reference-") as scratch:
        context = Path(scratch)
        (context / "wheels").mkdir()
        _, substitutions = download_wheels(pins, context / "wheels")
        shutil.copytree(checkout / "src" / "evopolicygym", context / "site" / "evopolicygym",
                        ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copytree(package.directory / "src" / package.module, context / "site" / package.module,
                        ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy2(DRIVER, context / "driver.py")
        (context / "Dockerfile").write_text(DOCKERFILE.format(base=base))
        labels = {MANAGED: "true", IMAGE: "evopolicygym-reference", INPUTS: digest, CHECKOUT: path_id(REPO),
                  SUBSTITUTIONS: json.dumps(substitutions)}
        try:
            client.images.build(path=str(context), tag=tag, labels=labels, rm=True, forcerm=True, network_mode="none")
        except BuildError as exc:
            log = "".join(str(chunk.get("stream", chunk.get("error", ""))) for chunk in exc.build_log)
            raise RuntimeError(f"building {tag}: {exc.msg}\n{log[-4000:]}") from exc
    return tag


@dataclass(frozen=True, slots=True, kw_only=True)
class ReferenceResult:
    """What their kernel's evaluate gave: the driver's JSON document, the substitutions and the wall time."""

    document: dict[str, Any]
    substitutions: list[dict[str, str]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def returns(self) -> list[float | None]:
        """Per-Episode returns in plan order (None for a policy failure). Raises AssertionError when nothing was evaluated."""
        assert self.document.get("status") == "evaluated", self.document
        return list(self.document["returns"])


def run_reference(client: docker.DockerClient, tag: str, module: str, *, split: str, seed: int, count: int,
                  scope: str = "", timeout: float = 30.0, wait_seconds: float = 1800) -> ReferenceResult:
    """Run their evaluate in a fresh container of tag: no network, an unprivileged user without capabilities, a
    read-only root with a /tmp of its own, labelled with scope, removed after.

    Returns the ReferenceResult. Raises RuntimeError when the container fails or prints no JSON document.
    """
    labels = LabelSet(sandbox=secrets.token_hex(6), owner=owner_id(), scope=scope).for_role("evopolicygym-reference")
    started = time.monotonic()
    container = client.containers.run(tag, [module, split, str(seed), str(count), str(timeout)], detach=True,
                                      network_mode="none", labels=labels, mem_limit="2g", pids_limit=256,
                                      user="65534:65534", cap_drop=["ALL"], security_opt=["no-new-privileges"],
                                      read_only=True, tmpfs={"/tmp": "size=256m"}, environment={"HOME": "/tmp"})
    try:
        status = container.wait(timeout=wait_seconds)
        stdout = container.logs(stdout=True, stderr=False).decode()
        stderr = container.logs(stdout=False, stderr=True).decode()
    finally:
        container.remove(force=True)
    seconds = time.monotonic() - started
    lines = stdout.strip().splitlines()
    if status.get("StatusCode") != 0 or not lines:
        raise RuntimeError(f"reference run of {module} exited {status}: {stdout[-2000:]}{stderr[-4000:]}")
    substitutions = json.loads(client.images.get(tag).labels.get(SUBSTITUTIONS, "[]"))
    return ReferenceResult(document=json.loads(lines[-1]), substitutions=substitutions, seconds=seconds)


def evaluate_reference(client: docker.DockerClient, checkout: Path, package_dir: Path, *, split: str, seed: int,
                       count: int, scope: str = "", progress: Callable[[str], None] = print) -> ReferenceResult:
    """Build (once) package_dir's reference image and run their evaluate in it. Raises as reference_image and run_reference."""
    package = ReferencePackage.read(package_dir)
    tag = reference_image(client, checkout, package, progress=progress)
    return run_reference(client, tag, package.module, split=split, seed=seed, count=count, scope=scope)


if __name__ == "__main__":  # python -m tests.support.evopolicygym_reference CHECKOUT PACKAGE_DIR [SPLIT SEED COUNT]
    checkout_, package_ = Path(sys.argv[1]), Path(sys.argv[2])
    split_, seed_, count_ = (sys.argv[3:6] + ["test", "7", "8"][len(sys.argv[3:6]):])
    result = evaluate_reference(docker.from_env(), checkout_, package_, split=split_, seed=int(seed_), count=int(count_),
                                progress=lambda line: print(line, file=sys.stderr))
    print(json.dumps({**result.document, "substitutions": result.substitutions, "wall_seconds": result.seconds}))
