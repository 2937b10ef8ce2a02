"""Environment packages and the resolution of benchmark names.

Packages are found in three places, in this order: source trees (each root
given, walked down to MAX_DEPTH levels: `ecosystem/suite/leaf` layouts), the
repository's bundled `environments/` (shipped inside the orchestrator's wheel
as `orchestrator/bundled_environments` by `setup.py`), and installed
distributions that register Benchmarks in the entry-point group
`epg.benchmarks`. A Benchmark id found twice is kept where it was found first.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from typing import Annotated
from urllib.parse import unquote, urlparse

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, model_validator

REPO_ROOT = Path(__file__).resolve().parents[2]
ENTRY_POINT_GROUP = "epg.benchmarks"
MAX_DEPTH = 4
_SKIPPED_DIRS = frozenset({".venv", "venv", "node_modules", "__pycache__", "build", "dist"})
_VERSION = re.compile(r"-v\d+$")


def bundled_environments() -> Path:
    """The bundled environments/: package data of an installed wheel, else the checkout's own folder."""
    shipped = Path(__file__).resolve().parents[1] / "bundled_environments"
    return shipped if shipped.is_dir() else REPO_ROOT / "environments"


DEFAULT_ENVIRONMENTS = bundled_environments()


class EpgTable(BaseModel):
    """The [tool.epg] table of an environment package's pyproject.toml, plus its registered Benchmarks.

    benchmarks come from `[project.entry-points."epg.benchmarks"]` (id -> "module:factory"),
    the same entry points an installed distribution exposes.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    image: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    module: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    baseline: str = "baseline"
    # A list names the package's only Benchmark; a table maps each alias to one of several ({"doorkey": "MiniGrid-DoorKey-16x16-v0"}).
    aliases: tuple[str, ...] | dict[str, str] = ()
    # Pins of requirements.lock installed without their dependencies, after the others: for a
    # distribution whose metadata names one that another pin replaces (highway-env's `pygame`).
    no_deps: tuple[str, ...] = ()
    # Debian packages the image needs (libosmesa6 for offscreen OpenGL): the host's apt resolves
    # their Depends on top of the base image and downloads them; dpkg installs them in the image.
    debian: tuple[Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9+.-]+$")], ...] = ()
    benchmarks: dict[str, str]

    @model_validator(mode="after")
    def _aliases_name_benchmarks(self) -> EpgTable:
        if isinstance(self.aliases, dict):
            unknown = sorted(set(self.aliases.values()) - set(self.benchmarks))
            if unknown:
                raise ValueError(f"aliases name no registered Benchmark: {', '.join(unknown)}")
        elif self.aliases and len(self.benchmarks) > 1:
            raise ValueError("a list of aliases needs a package of one Benchmark; map each alias to its Benchmark in a table")
        return self

    def aliases_of(self, benchmark_id: str) -> tuple[str, ...]:
        """The aliases that name benchmark_id."""
        if isinstance(self.aliases, dict):
            return tuple(alias for alias, target in self.aliases.items() if target == benchmark_id)
        return tuple(self.aliases) if benchmark_id in self.benchmarks else ()


class EnvironmentPackage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    root: Path
    table: EpgTable
    distribution: str = ""  # the distribution's name and version, as its pyproject.toml or metadata says
    version: str = ""

    @property
    def image(self) -> str:
        return self.table.image

    @property
    def baseline_dir(self) -> Path:
        return self.root / self.table.baseline

    @property
    def random_dir(self) -> Path:
        """The package's uniform-random Program (the `random` agent submits it), by convention `random/`."""
        return self.root / "random"

    @property
    def lock_file(self) -> Path:
        return self.root / "requirements.lock"


class CatalogueError(Exception):
    """An environment package is malformed, or a benchmark name is unknown or ambiguous."""


def load_package(root: Path) -> EnvironmentPackage:
    """Read the package at root. Raises CatalogueError with the file and field at fault."""
    pyproject = root / "pyproject.toml"
    try:
        data = tomllib.loads(pyproject.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CatalogueError(f"{pyproject}: {exc}") from exc
    fields = dict(data.get("tool", {}).get("epg", {}))
    if "benchmarks" in fields:
        raise CatalogueError(f'{pyproject}: tool.epg.benchmarks: Benchmarks are registered in [project.entry-points."{ENTRY_POINT_GROUP}"]')
    benchmarks = data.get("project", {}).get("entry-points", {}).get(ENTRY_POINT_GROUP, {})
    if not benchmarks:
        raise CatalogueError(f"{pyproject}: project.entry-points.{ENTRY_POINT_GROUP}: no Benchmark is registered")
    try:
        table = EpgTable.model_validate({**fields, "benchmarks": benchmarks})
    except ValidationError as exc:
        problems = "; ".join(f"{_field_path(e['loc'])}: {e['msg'].removeprefix('Value error, ')}" for e in exc.errors())
        raise CatalogueError(f"{pyproject}: {problems}") from exc
    project = data.get("project", {})
    return EnvironmentPackage(root=root, table=table, distribution=str(project.get("name", "")), version=str(project.get("version", "")))


def _field_path(loc: tuple[object, ...]) -> str:
    if loc and loc[0] == "benchmarks":
        return ".".join(["project.entry-points", ENTRY_POINT_GROUP, *map(str, loc[1:])])
    return ".".join(["tool.epg", *map(str, loc)])


def is_package_dir(directory: Path) -> bool:
    """True when directory holds a pyproject.toml with a [tool.epg] table (an environment package)."""
    pyproject = directory / "pyproject.toml"
    if not pyproject.is_file():
        return False
    try:
        return "epg" in tomllib.loads(pyproject.read_text()).get("tool", {})
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CatalogueError(f"{pyproject}: {exc}") from exc


def find_package_dirs(root: Path, max_depth: int = MAX_DEPTH) -> list[Path]:
    """Return the environment package directories at or below root, at most max_depth levels down, sorted.

    A package's own subdirectories are not searched; hidden directories, virtual
    environments, node_modules and build outputs are skipped, and so are symlinked directories.
    """
    if not root.is_dir():
        return []
    if is_package_dir(root):
        return [root]
    found: list[Path] = []
    pending = [(root, 0)]
    while pending:
        directory, depth = pending.pop()
        for child in sorted(directory.iterdir()):
            if child.name.startswith(".") or child.name in _SKIPPED_DIRS or child.is_symlink() or not child.is_dir():
                continue
            if is_package_dir(child):
                found.append(child)
            elif depth + 1 < max_depth:
                pending.append((child, depth + 1))
    return sorted(found)


def installed_packages() -> list[EnvironmentPackage]:
    """Return one package per installed distribution registering entry points in `epg.benchmarks`.

    A distribution installed from a local directory (editable or not) that still
    holds its pyproject.toml is read from there, [tool.epg] included. Otherwise its
    [tool.epg] metadata is derived: module from the entry points, image
    `env-NAME` from the distribution name `epg-env-NAME`, root the directory
    holding the module (no baseline, no lock file).
    """
    by_distribution: dict[str, tuple[metadata.Distribution | None, dict[str, str]]] = {}
    for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
        distribution = entry_point.dist
        key = distribution.metadata["Name"] if distribution is not None else entry_point.module
        by_distribution.setdefault(key, (distribution, {}))[1][entry_point.name] = entry_point.value
    packages = []
    for name, (distribution, benchmarks) in sorted(by_distribution.items()):
        source = _source_dir(distribution)
        if source is not None and is_package_dir(source):
            packages.append(load_package(source))
        else:
            packages.append(_derived_package(name, distribution, benchmarks))
    return packages


def _source_dir(distribution: metadata.Distribution | None) -> Path | None:
    """The local directory a distribution was installed from (PEP 610 direct_url.json), or None."""
    text = distribution.read_text("direct_url.json") if distribution is not None else None
    if not text:
        return None
    try:
        url = urlparse(json.loads(text).get("url", ""))
    except (json.JSONDecodeError, AttributeError):
        return None
    return Path(unquote(url.path)) if url.scheme == "file" else None


def _derived_package(name: str, distribution: metadata.Distribution | None, benchmarks: dict[str, str]) -> EnvironmentPackage:
    modules = sorted({entry.split(":")[0].split(".")[0] for entry in benchmarks.values()})
    image = "env-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).removeprefix("epg-env-").strip("-")
    located = distribution.locate_file(modules[0]) if distribution is not None else None
    root = Path(str(located)).parent if located is not None else Path.cwd()
    try:
        table = EpgTable(image=image, module=modules[0], benchmarks=benchmarks)
    except ValidationError as exc:
        raise CatalogueError(f"installed distribution {name}: {exc.errors()[0]['msg']}") from exc
    version = distribution.version if distribution is not None else ""
    return EnvironmentPackage(root=root, table=table, distribution=name, version=version)


def discover(roots: list[Path] | None = None, *, installed: bool = True) -> list[EnvironmentPackage]:
    """Return the environment packages of roots (default: the bundled environments/), then of installed distributions.

    Each root is searched at any depth up to MAX_DEPTH. A package already found
    (same directory) or whose Benchmark ids were all found before is left out, so
    an installed copy of a source package is listed once. Raises CatalogueError
    for a malformed package.
    """
    found = [load_package(d) for root in (roots if roots is not None else [DEFAULT_ENVIRONMENTS]) for d in find_package_dirs(root)]
    if installed:
        found.extend(installed_packages())
    return _without_duplicates(found)


def _without_duplicates(packages: Iterable[EnvironmentPackage]) -> list[EnvironmentPackage]:
    kept: list[EnvironmentPackage] = []
    roots: set[Path] = set()
    ids: set[str] = set()
    for package in packages:
        root = package.root.resolve()
        if root in roots or set(package.table.benchmarks) <= ids:
            continue
        roots.add(root)
        ids |= set(package.table.benchmarks)
        kept.append(package)
    return kept


def resolve_benchmark(name: str, packages: list[EnvironmentPackage]) -> tuple[EnvironmentPackage, str, str]:
    """Return (package, benchmark id, factory entry) for a benchmark id or alias, case-insensitively.

    Raises CatalogueError naming the known benchmarks when name matches none.
    """
    wanted = name.lower()
    matches = []
    for package in packages:
        for benchmark_id, entry in package.table.benchmarks.items():
            names = {benchmark_id.lower(), _VERSION.sub("", benchmark_id.lower())}
            names |= {alias.lower() for alias in package.table.aliases_of(benchmark_id)}
            if wanted in names:
                matches.append((package, benchmark_id, entry))
    if len(matches) == 1:
        return matches[0]
    known = sorted(b for p in packages for b in p.table.benchmarks)
    if not matches:
        raise CatalogueError(f"unknown benchmark {name!r}; known: {', '.join(known) or 'none'}")
    raise CatalogueError(f"benchmark name {name!r} is ambiguous: {', '.join(m[1] for m in matches)}")
