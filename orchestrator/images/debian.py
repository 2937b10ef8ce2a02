"""Debian packages of environment images: resolved and downloaded with the host's apt (from the lists of the suite of the
image's base: the host's own for bookworm, a directory of its own for trixie), installed by dpkg in the image."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from orchestrator.backends.engine import DockerEngine
from orchestrator.kernel.infrastructure import InfraErrorCode, InfrastructureError

_NO_EXTRAS = ("--no-recommends", "--no-suggests", "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances")
_DEPENDENCY = re.compile(r"^ ([ |])(Depends|PreDepends): (.+)$")
_UPDATE_HINT = "the host's apt lists may be stale or missing: run apt-get update"


@dataclass(frozen=True, slots=True, kw_only=True)
class DebianPackage:
    """One Debian binary package pinned to the host's candidate version."""

    name: str
    version: str
    architecture: str  # the host's, or "all"

    @property
    def pin(self) -> str:
        return f"{self.name}={self.version}"

    @property
    def filename(self) -> str:
        """The file name `apt-get download` gives it (an epoch's colon written %3a)."""
        return f"{self.name}_{self.version.replace(':', '%3a')}_{self.architecture}.deb"


@dataclass(frozen=True, slots=True, kw_only=True)
class Alternative:
    """One alternative of a dependency: a real package, or a virtual one and the packages that provide it."""

    name: str
    providers: tuple[str, ...] | None = None  # None: a real package

    def candidates(self) -> tuple[str, ...]:
        return (self.name,) if self.providers is None else self.providers


Dependency = tuple[Alternative, ...]  # satisfied by any one of its alternatives


class AptCache(Protocol):
    """The two questions resolution asks the host's apt (HostApt; a fake in tests), and the state they answer from."""

    def fingerprint(self) -> str:
        """What identifies the package lists the answers come from ("" when unknown: then nothing is cached)."""
        ...

    def depends(self, names: list[str]) -> str:
        """`apt-cache depends` output for names: Depends and Pre-Depends only, one level."""
        ...

    def show(self, names: list[str]) -> str:
        """`apt-cache show --no-all-versions` output: the candidate's record of each known name."""
        ...


def _bare(name: str) -> str:
    """name without an architecture qualifier (libc6:amd64, python3:any)."""
    return name.split(":", 1)[0]


def parse_depends(text: str) -> dict[str, list[Dependency]]:
    """Each package of `apt-cache depends` output and its dependencies, in order.

    A virtual target is shown as `<name>` followed by its providers, indented; an alternative
    marked `|` is followed by the next one of the same dependency.
    """
    parsed: dict[str, list[Dependency]] = {}
    current: list[Dependency] | None = None
    group: list[Alternative] = []
    virtual: tuple[str, list[str]] | None = None

    def close_virtual() -> None:
        nonlocal virtual
        if virtual is not None:
            group.append(Alternative(name=virtual[0], providers=tuple(virtual[1])))
            virtual = None

    pending_end = False  # the last target ended its dependency (no `|`)

    def close_group() -> None:
        nonlocal group, pending_end
        close_virtual()
        if group and current is not None:
            current.append(tuple(group))
        group = []
        pending_end = False

    for line in text.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            close_group()
            current = None if line.startswith("<") else parsed.setdefault(_bare(line.strip()), [])
            continue
        matched = _DEPENDENCY.match(line)
        if matched:
            if pending_end:
                close_group()
            close_virtual()
            target = matched.group(3).strip()
            if target.startswith("<") and target.endswith(">"):
                virtual = (_bare(target[1:-1]), [])
            else:
                group.append(Alternative(name=_bare(target)))
            pending_end = matched.group(1) != "|"
        elif line.startswith("    ") and virtual is not None:
            virtual[1].append(_bare(line.strip()))
        # other relations (Recommends, Conflicts...) are not asked for; a stray one is ignored
    close_group()
    return parsed


def parse_show(text: str) -> dict[str, DebianPackage]:
    """The packages of `apt-cache show` records by name (the first record of a name wins)."""
    found: dict[str, DebianPackage] = {}
    for stanza in re.split(r"\n\s*\n", text):
        fields = dict(
            (key.strip(), value.strip())
            for key, _, value in (line.partition(":") for line in stanza.splitlines() if line and not line[0].isspace())
        )
        if {"Package", "Version", "Architecture"} <= fields.keys():
            found.setdefault(fields["Package"], DebianPackage(name=fields["Package"], version=fields["Version"], architecture=fields["Architecture"]))
    return found


def parse_status(text: str) -> frozenset[str]:
    """The names of the packages a dpkg status file (/var/lib/dpkg/status) says are installed."""
    installed = set()
    for stanza in re.split(r"\n\s*\n", text):
        fields = {key.strip(): value.strip() for key, _, value in (line.partition(":") for line in stanza.splitlines() if line and not line[0].isspace())}
        if "Package" in fields and fields.get("Status", "").endswith(" installed"):
            installed.add(fields["Package"])
    return frozenset(installed)


def choose(dependency: Dependency, present: set[str]) -> str | None:
    """None when a package already there satisfies dependency; else its first candidate.

    A virtual package without providers (apt's way of showing one it does not know) offers none.
    Raises InfrastructureError(IMAGE_BUILD_FAILED) when no alternative has a candidate.
    """
    candidates = [name for alternative in dependency for name in alternative.candidates()]
    if any(name in present for name in candidates):
        return None
    if not candidates:
        names = " | ".join(alternative.name for alternative in dependency)
        raise InfrastructureError(InfraErrorCode.IMAGE_BUILD_FAILED, f"no Debian package provides {names}; {_UPDATE_HINT}")
    return candidates[0]


def closure(names: tuple[str, ...], installed: frozenset[str], apt: AptCache) -> list[str]:
    """The packages to install for names on top of installed: names and their Depends and Pre-Depends, recursively.

    Of a dependency's alternatives (or a virtual package's providers) one already installed or
    chosen wins, else the first. Raises InfrastructureError(IMAGE_BUILD_FAILED) for a name apt does not know.
    """
    chosen: list[str] = []
    present = set(installed)
    frontier = [name for name in dict.fromkeys(names) if name not in present]
    while frontier:
        parsed = parse_depends(apt.depends(frontier))
        unknown = [name for name in frontier if name not in parsed]
        if unknown:
            raise InfrastructureError(
                InfraErrorCode.IMAGE_BUILD_FAILED, f"apt-cache knows no Debian package {', '.join(unknown)}; {_UPDATE_HINT}"
            )
        chosen.extend(frontier)
        present.update(frontier)
        following: list[str] = []
        for name in frontier:
            for dependency in parsed[name]:
                pick = choose(dependency, present)
                if pick is not None:
                    following.append(pick)
                    present.add(pick)
        frontier = following
    return chosen


def resolve(names: tuple[str, ...], installed: frozenset[str], apt: AptCache) -> tuple[DebianPackage, ...]:
    """The closure of names minus installed, each pinned to its candidate version, sorted by name.

    Raises InfrastructureError(IMAGE_BUILD_FAILED) for a package without a candidate version.
    """
    wanted = closure(names, installed, apt)
    if not wanted:
        return ()
    records = parse_show(apt.show(wanted))
    missing = [name for name in wanted if name not in records]
    if missing:
        raise InfrastructureError(
            InfraErrorCode.IMAGE_BUILD_FAILED, f"apt-cache has no installable version of {', '.join(missing)}; {_UPDATE_HINT}"
        )
    return tuple(sorted((records[name] for name in wanted), key=lambda package: package.name))


APT_LISTS = Path("/var/lib/apt/lists")


class HostApt:
    """The host's apt-cache (Debian bookworm, like the images of Python 3.11)."""

    def __init__(self, lists: Path = APT_LISTS) -> None:
        self._lists = lists

    @property
    def options(self) -> tuple[str, ...]:
        """apt's `-o` options that select the package lists it answers from (none: the host's own)."""
        return ()

    def fingerprint(self) -> str:
        """The names, sizes and modification times of the host's package lists (apt-get update changes them)."""
        try:
            entries = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in self._lists.iterdir() if "_Packages" in p.name)
        except OSError:
            return ""
        return ";".join(f"{name}:{size}:{mtime}" for name, size, mtime in entries)

    def depends(self, names: list[str]) -> str:
        return self._run(["depends", *_NO_EXTRAS, *names], allow_missing=True)

    def show(self, names: list[str]) -> str:
        return self._run(["show", "--no-all-versions", *names], allow_missing=True)

    def _run(self, arguments: list[str], *, allow_missing: bool) -> str:
        executable = shutil.which("apt-cache")
        if executable is None:
            raise InfrastructureError(InfraErrorCode.IMAGE_BUILD_FAILED, "Debian packages need the host's apt-cache (a Debian host)")
        result = subprocess.run([executable, *self.options, *arguments], capture_output=True, text=True)
        # apt-cache exits 100 when no name is known; the caller names the unknown ones
        if result.returncode != 0 and not (allow_missing and result.returncode == 100):
            raise InfrastructureError(InfraErrorCode.IMAGE_BUILD_FAILED, f"apt-cache {arguments[0]} failed; {_UPDATE_HINT}", result.stderr[-4000:])
        return result.stdout


class SuiteApt(HostApt):
    """apt of the host answering from another Debian suite's package lists (trixie, for the images of Python 3.13),
    kept in a directory of its own: its sources.list, its lists (fetched by `apt-get update` when missing), an empty
    dpkg status, so that neither the host's sources nor what the host has installed change an answer.

    The suite's Release files are checked against the host's Debian archive keyring, as debootstrap checks them.
    """

    def __init__(self, suite: str, root: Path, mirror: str = "http://deb.debian.org/debian") -> None:
        self._suite = suite
        self._root = root
        self._mirror = mirror
        super().__init__(root / "state" / "lists")

    @property
    def options(self) -> tuple[str, ...]:
        root = self._root
        return ("-o", f"Dir::Etc::SourceList={root / 'sources.list'}", "-o", "Dir::Etc::SourceParts=/nonexistent",
                "-o", f"Dir::State={root / 'state'}", "-o", f"Dir::State::status={root / 'status'}",
                "-o", f"Dir::Cache={root / 'cache'}", "-o", "Dir::Etc::Preferences=/nonexistent",
                "-o", "Dir::Etc::PreferencesParts=/nonexistent", "-o", "APT::Get::List-Cleanup=false")

    def fingerprint(self) -> str:
        self.ensure_lists()
        return super().fingerprint()

    def depends(self, names: list[str]) -> str:
        self.ensure_lists()
        return super().depends(names)

    def show(self, names: list[str]) -> str:
        self.ensure_lists()
        return super().show(names)

    def ensure_lists(self) -> None:
        """Write the suite's apt configuration and fetch its package lists once. Raises InfrastructureError."""
        lists = self._root / "state" / "lists"
        if lists.is_dir() and any("_Packages" in p.name for p in lists.iterdir()):
            return
        (lists / "partial").mkdir(parents=True, exist_ok=True)
        (self._root / "cache" / "archives" / "partial").mkdir(parents=True, exist_ok=True)
        (self._root / "sources.list").write_text(f"deb {self._mirror} {self._suite} main\n")
        (self._root / "status").touch()
        executable = shutil.which("apt-get")
        if executable is None:
            raise InfrastructureError(InfraErrorCode.IMAGE_BUILD_FAILED, "Debian packages need the host's apt-get (a Debian host)")
        result = subprocess.run([executable, *self.options, "update", "-q"], capture_output=True, text=True)
        if result.returncode != 0:
            raise InfrastructureError(InfraErrorCode.IMAGE_BUILD_FAILED, f"apt-get update of Debian {self._suite}'s lists failed",
                                      (result.stdout + result.stderr)[-4000:])


def installed_in_image(engine: DockerEngine, image: str, labels: dict[str, str]) -> frozenset[str]:
    """The Debian packages installed in image, read from its /var/lib/dpkg/status.

    The file comes out of a labelled container that is created, never started, and removed
    (`DockerEngine.copy_from_image`). Raises InfrastructureError(IMAGE_BUILD_FAILED), also for an image without the
    file (not a Debian image) or one the engine does not hold.
    """
    try:
        tar = engine.copy_from_image(image, "/var/lib/dpkg/status", labels)
    except InfrastructureError as exc:
        raise InfrastructureError(InfraErrorCode.IMAGE_BUILD_FAILED,
                                  f"cannot read the package list of {image} (/var/lib/dpkg/status: is it a Debian image?)",
                                  f"{exc.code.value}: {exc.message}\n{exc.evidence}") from exc
    try:
        member = tarfile.open(fileobj=io.BytesIO(tar)).extractfile("status")
        text = member.read().decode("utf-8", "replace") if member is not None else ""
    except (tarfile.TarError, KeyError) as exc:
        raise InfrastructureError(InfraErrorCode.IMAGE_BUILD_FAILED, f"cannot read the package list of {image}", str(exc)) from exc
    return parse_status(text)


def download(packages: tuple[DebianPackage, ...], cache: Path, dest: Path, apt_options: tuple[str, ...] = ()) -> list[str]:
    """Copy the .deb of each package into dest, fetching with `apt-get download` (with apt_options: another suite's
    lists, `SuiteApt.options`) into cache only what is missing.

    Returns the pins it downloaded. Raises InfrastructureError(IMAGE_BUILD_FAILED).
    """
    cache.mkdir(parents=True, exist_ok=True)
    missing = [package for package in packages if not (cache / package.filename).is_file()]
    if missing:
        executable = shutil.which("apt-get")
        if executable is None:
            raise InfrastructureError(InfraErrorCode.IMAGE_BUILD_FAILED, "Debian packages need the host's apt-get (a Debian bookworm host)")
        fetched = subprocess.run([executable, *apt_options, "download", "-q", *(package.pin for package in missing)], cwd=cache,
                                 capture_output=True, text=True)
        absent = [package.pin for package in missing if not (cache / package.filename).is_file()]
        if fetched.returncode != 0 or absent:
            raise InfrastructureError(
                InfraErrorCode.IMAGE_BUILD_FAILED,
                f"apt-get download failed for {', '.join(absent) or 'the Debian packages'}; {_UPDATE_HINT}",
                (fetched.stdout + fetched.stderr)[-4000:],
            )
    dest.mkdir(parents=True, exist_ok=True)
    for package in packages:
        shutil.copyfile(cache / package.filename, dest / package.filename)
    return [package.pin for package in missing]
