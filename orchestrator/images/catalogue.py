"""Environment packages and the resolution of benchmark names.

Packages are found in three places, in this order: source trees (each root
given, walked down to MAX_DEPTH levels: `ecosystem/suite/leaf` layouts), the
repository's bundled `environments/` (shipped inside the orchestrator's wheel
as `orchestrator/bundled_environments` by `setup.py`), and installed
distributions that register Benchmarks in the entry-point group
`epg.benchmarks`. A Benchmark id found twice is kept where it was found first.

Two kinds of package are read: ours (a `[tool.epg]` table, Benchmarks registered as entry points) and
EvoPolicyGym 0.3 packages (a pyproject.toml that depends on `evopolicygym` and has no `[tool.epg]`), whose
table is synthesised here (evopolicygym_package) and whose Benchmarks are discovered inside their built image
and read back from its benchmarks label (label_benchmarks).
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import unquote, urlparse

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, model_validator

from orchestrator.images.uvlock import LockedRequirements, UvLockError, locked_requirements, requirement_name

REPO_ROOT = Path(__file__).resolve().parents[2]
ENTRY_POINT_GROUP = "epg.benchmarks"
# A checkout of EvoPolicyGym nests environments/FAMILY/GROUP/PACKAGE: four levels below its root.
MAX_DEPTH = 4
KERNEL_DISTRIBUTION = "evopolicygym"  # EvoPolicyGym's kernel: what its packages depend on, replaced by our compat/
EVOPOLICYGYM_IMAGE_PREFIX = "env-epg-"
_EVOPOLICYGYM_NAME_PREFIX = re.compile(r"^evopolicygym-(benchmark-)?")
_HATCH_PACKAGE = re.compile(r"^src/([A-Za-z_][A-Za-z0-9_]*)$")
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
    # The Python of the image: "3.11" (bookworm's, the default) or "3.13" (trixie's); it selects the base, the SDK
    # layer (env-sdk or env-sdk-py313) and the default policy runtime (policy-runtime or policy-runtime-py313).
    python: Literal["3.11", "3.13"] = "3.11"
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


class EvoPolicyGymParts(BaseModel):
    """What an EvoPolicyGym package's image needs beyond its table: where its module lives and what it requires."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    module_dir: str  # relative to the package root, from [tool.hatch.build.targets.wheel] packages ("src/cartpole")
    # Its dependencies but evopolicygym: exact pins from its uv.lock (locked), else its pyproject.toml's ranges.
    requirements: tuple[str, ...] = ()
    locked: bool = False
    local: tuple[str, ...] = ()  # locked dependencies from a directory of the package (vendored): their paths, built into wheels
    dependency_names: tuple[str, ...] = ()  # its direct dependencies' names, extras kept ("gymnasium[mujoco]")
    programs: tuple[str, ...] = ()  # the Program directories below module_dir/programs/ ("baseline", ...)
    environment: dict[str, str] = Field(default_factory=dict)  # variables set in its image (MUJOCO_GL=egl for Mesa's EGL)
    sdist_only: tuple[str, ...] = ()  # locked pins with no wheel, only an sdist (crafter; robosuite's evdev, which compiles)


class EnvironmentPackage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    root: Path
    table: EpgTable
    distribution: str = ""  # the distribution's name and version, as its pyproject.toml or metadata says
    version: str = ""
    evopolicygym: EvoPolicyGymParts | None = None  # set for an EvoPolicyGym package

    @property
    def image(self) -> str:
        return self.table.image

    @property
    def module_dir(self) -> Path:
        """The directory of the package's import module: root/MODULE for ours, root/src/MODULE for EvoPolicyGym's."""
        return self.root / (self.evopolicygym.module_dir if self.evopolicygym else self.table.module)

    @property
    def python(self) -> str:
        return self.table.python

    @property
    def baseline_dir(self) -> Path:
        return self.root / self.table.baseline

    def baseline_for(self, benchmark_id: str) -> Path:
        """The baseline Program of one of the package's Benchmarks: baseline_dir, unless an EvoPolicyGym package ships
        a Program `programs/NAME_baseline/` whose NAME, its underscores read as dashes, is part of the Benchmark's id
        (Crafter's `local_symbolic_baseline` for `crafter/CrafterReward-v1/local-symbolic-v1/...`); the longest such
        NAME wins."""
        if self.evopolicygym is None:
            return self.baseline_dir
        named = [(name, name.removesuffix("_baseline").replace("_", "-")) for name in self.evopolicygym.programs
                 if name.endswith("_baseline") and name != "_baseline"]
        matching = sorted((len(key), name) for name, key in named if key.lower() in benchmark_id.lower())
        return self.module_dir / "programs" / matching[-1][1] if matching else self.baseline_dir

    @property
    def random_dir(self) -> Path:
        """The package's uniform-random Program (the `random` agent submits it): by convention `random/` in ours, and
        `src/MODULE/programs/random/` beside the baseline in an EvoPolicyGym package."""
        if self.evopolicygym is not None:
            return self.module_dir / "programs" / "random"
        return self.root / "random"

    @property
    def lock_file(self) -> Path:
        return self.root / "requirements.lock"


class CatalogueError(Exception):
    """An environment package is malformed, or a benchmark name is unknown or ambiguous."""


def _read_pyproject(pyproject: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(pyproject.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CatalogueError(f"{pyproject}: {exc}") from exc


def is_evopolicygym_project(data: dict[str, object]) -> bool:
    """True for the pyproject.toml data of an EvoPolicyGym package: no [tool.epg], a dependency on evopolicygym, and not
    the kernel itself (whose name is evopolicygym)."""
    project = data.get("project")
    tool = data.get("tool")
    if not isinstance(project, dict) or (isinstance(tool, dict) and "epg" in tool):
        return False
    if requirement_name(str(project.get("name", ""))) == KERNEL_DISTRIBUTION:
        return False
    dependencies = project.get("dependencies") or []
    return isinstance(dependencies, list) and any(requirement_name(str(d)) == KERNEL_DISTRIBUTION for d in dependencies)


def load_package(root: Path) -> EnvironmentPackage:
    """Read the package at root (ours, or EvoPolicyGym's). Raises CatalogueError with the file and field at fault."""
    pyproject = root / "pyproject.toml"
    data = _read_pyproject(pyproject)
    if is_evopolicygym_project(data):
        return evopolicygym_package(root, data)
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
    """True when directory holds an environment package: a pyproject.toml with a [tool.epg] table (ours) or one that
    depends on evopolicygym (EvoPolicyGym's; the kernel's own root is none)."""
    pyproject = directory / "pyproject.toml"
    if not pyproject.is_file():
        return False
    data = _read_pyproject(pyproject)
    tool = data.get("tool")
    return (isinstance(tool, dict) and "epg" in tool) or is_evopolicygym_project(data)


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
        # an EvoPolicyGym package's Benchmarks are known once its image is built: its directory alone identifies it
        if root in roots or (package.table.benchmarks and set(package.table.benchmarks) <= ids):
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
        unbuilt = sorted(p.image for p in packages if p.evopolicygym is not None and not p.table.benchmarks)
        hint = (f"; the Benchmarks of {len(unbuilt)} EvoPolicyGym package(s) are known once their images are built "
                f"(epg-orchestrate images build {' '.join(unbuilt[:5])}{' ...' if len(unbuilt) > 5 else ''})") if unbuilt else ""
        raise CatalogueError(f"unknown benchmark {name!r}; known: {', '.join(known) or 'none'}{hint}")
    raise CatalogueError(f"benchmark name {name!r} is ambiguous: {', '.join(m[1] for m in matches)}")


# Debian packages an EvoPolicyGym family needs, by the dependencies that call for them (every name of a key among the
# package's direct dependencies, extras as written). The MuJoCo families that render frames use EGL (MUJOCO_GL=egl)
# through Mesa's software driver.
MESA_EGL = ("libegl1", "libegl-mesa0", "libgl1-mesa-dri", "libopengl0")
EGL_ENVIRONMENT = {"MUJOCO_GL": "egl", "PYOPENGL_PLATFORM": "egl"}  # MuJoCo (and PyOpenGL under it) render through EGL
DEBIAN_BY_DEPENDENCIES: tuple[tuple[frozenset[str], tuple[str, ...], dict[str, str]], ...] = (
    (frozenset({"mujoco"}), MESA_EGL, EGL_ENVIRONMENT),  # dm_control, Gymnasium-Robotics, MetaWorld, robosuite
    (frozenset({"gymnasium[mujoco]", "imageio-ffmpeg"}), MESA_EGL, EGL_ENVIRONMENT),  # HalfCheetah: videos of its frames
)


def debian_for(dependency_names: Iterable[str]) -> tuple[str, ...]:
    """The Debian packages DEBIAN_BY_DEPENDENCIES gives a package with these direct dependencies, sorted."""
    names = set(dependency_names)
    return tuple(sorted({debian for key, packages, _ in DEBIAN_BY_DEPENDENCIES if key <= names for debian in packages}))


def environment_for(dependency_names: Iterable[str]) -> dict[str, str]:
    """The environment variables DEBIAN_BY_DEPENDENCIES sets in the image of a package with these direct dependencies."""
    names = set(dependency_names)
    return {key: value for needed, _, variables in DEBIAN_BY_DEPENDENCIES if needed <= names for key, value in sorted(variables.items())}


def _dependency_key(requirement: str) -> str:
    """A dependency as DEBIAN_BY_DEPENDENCIES names it: the normalised name and its extras ("gymnasium[mujoco]")."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[([^\]]*)\])?", requirement)
    if match is None:
        return requirement_name(requirement)
    extras = ",".join(sorted(e.strip().lower() for e in (match.group(3) or "").split(",") if e.strip()))
    name = requirement_name(match.group(1))
    return f"{name}[{extras}]" if extras else name


def evopolicygym_package(root: Path, data: dict[str, object]) -> EnvironmentPackage:
    """The EnvironmentPackage of the EvoPolicyGym package at root, whose pyproject.toml holds data.

    Image `env-epg-NAME` (NAME: the distribution name without `evopolicygym-benchmark-`), Python 3.13, the import
    module of `[tool.hatch.build.targets.wheel] packages = ["src/MODULE"]`, the baseline Program
    `src/MODULE/programs/baseline/`, requirements its dependencies but evopolicygym, pinned from its uv.lock when there
    is one, and the Debian packages of DEBIAN_BY_DEPENDENCIES. Its Benchmarks are not known here: they are discovered
    inside its built image (label_benchmarks). Raises CatalogueError naming the file and field at fault.
    """
    pyproject = root / "pyproject.toml"
    project = data["project"]
    assert isinstance(project, dict)  # is_evopolicygym_project checked it
    distribution = str(project.get("name", ""))
    module = _hatch_module(pyproject, data)
    dependencies = tuple(str(d) for d in project.get("dependencies") or [] if requirement_name(str(d)) != KERNEL_DISTRIBUTION)
    lock = root / "uv.lock"
    try:
        locked: LockedRequirements | None = (
            locked_requirements(lock.read_text(), distribution, skip=(KERNEL_DISTRIBUTION,)) if lock.is_file() else None)
    except (OSError, UvLockError) as exc:
        raise CatalogueError(f"{lock}: {exc}") from exc
    for where in locked.local if locked else ():
        if not (root / where).resolve().is_relative_to(root.resolve()) or not (root / where / "pyproject.toml").is_file():
            raise CatalogueError(f"{lock}: a dependency is locked from {where}, which is no distribution inside the package")
    programs_dir = root / "src" / module / "programs"
    programs = tuple(sorted(d.name for d in programs_dir.iterdir() if d.is_dir() and (d / "policy.py").is_file())) if programs_dir.is_dir() else ()
    image = EVOPOLICYGYM_IMAGE_PREFIX + re.sub(r"[^a-z0-9]+", "-", _EVOPOLICYGYM_NAME_PREFIX.sub("", distribution.lower())).strip("-")
    names = tuple(_dependency_key(d) for d in dependencies)
    try:
        table = EpgTable(image=image, module=module, baseline=f"src/{module}/programs/baseline", python="3.13",
                         debian=debian_for(names), benchmarks={})
    except ValidationError as exc:
        raise CatalogueError(f"{pyproject}: project.name: {exc.errors()[0]['msg']} (image {image})") from exc
    parts = EvoPolicyGymParts(module_dir=f"src/{module}", requirements=locked.pins if locked else dependencies,
                              locked=locked is not None, local=locked.local if locked else (), dependency_names=names, programs=programs,
                              environment=environment_for(names), sdist_only=locked.sdist_only if locked else ())
    return EnvironmentPackage(root=root, table=table, distribution=distribution, version=str(project.get("version", "")),
                              evopolicygym=parts)


def _hatch_module(pyproject: Path, data: dict[str, object]) -> str:
    tool = data.get("tool")
    wheel = tool.get("hatch", {}).get("build", {}).get("targets", {}).get("wheel", {}) if isinstance(tool, dict) else {}
    packages = wheel.get("packages") if isinstance(wheel, dict) else None
    modules = [m.group(1) for m in (_HATCH_PACKAGE.match(str(p)) for p in packages or []) if m]
    if len(modules) != 1:
        raise CatalogueError(f'{pyproject}: tool.hatch.build.targets.wheel.packages: an EvoPolicyGym package names its one '
                             f'import module as ["src/MODULE"]; found {packages!r}')
    return modules[0]


class DiscoveredBenchmark(BaseModel):
    """One Benchmark `python -m epg_sdk.evopolicygym discover MODULE` found inside an EvoPolicyGym package's image."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str = Field(min_length=1, pattern=r"^[^,\s]+$")
    entry: str = Field(min_length=1)  # what the runner's load_benchmark takes: "module:Class" or "module:Class?profile=P"
    class_: str = Field("", alias="class")
    profile: str | None = None


def parse_discovered(text: str) -> list[DiscoveredBenchmark]:
    """The Benchmarks of the discovery command's output (its last line, a JSON list). Raises CatalogueError."""
    lines = text.strip().splitlines()
    try:
        found = json.loads(lines[-1]) if lines else None
        if not isinstance(found, list):
            raise ValueError("not a JSON list")
        benchmarks = [DiscoveredBenchmark.model_validate(item) for item in found]
    except (ValueError, ValidationError) as exc:
        raise CatalogueError(f"the Benchmark discovery printed no JSON list of Benchmarks ({str(exc).splitlines()[0]}): {text[-400:]!r}") from exc
    ids = [b.id for b in benchmarks]
    if len(set(ids)) != len(ids):
        raise CatalogueError(f"the Benchmark discovery found an id twice: {', '.join(sorted(ids))}")
    return benchmarks


def discovered_label(benchmarks: list[DiscoveredBenchmark]) -> str:
    """The benchmarks label of an EvoPolicyGym package's image: the discovered Benchmarks as a JSON list."""
    return json.dumps([b.model_dump(by_alias=True) for b in benchmarks], separators=(",", ":"), sort_keys=True)


def label_benchmarks(value: str) -> dict[str, str]:
    """Benchmark id -> factory entry of an image's benchmarks label ("" where the label does not say).

    The label is a comma-separated list of ids (our packages' images) or the JSON list of discovered Benchmarks
    (an EvoPolicyGym package's image). A JSON label that does not parse names nothing.
    """
    if value.lstrip().startswith("["):
        try:
            return {b.id: b.entry for b in parse_discovered(value)}
        except CatalogueError:
            return {}
    return {benchmark_id: "" for benchmark_id in value.split(",") if benchmark_id}


def with_discovered(package: EnvironmentPackage, benchmarks: dict[str, str]) -> EnvironmentPackage:
    """package with its Benchmarks (id -> entry) as its image's label names them."""
    return package.model_copy(update={"table": package.table.model_copy(update={"benchmarks": dict(benchmarks)})})
