"""The exact requirements of an EvoPolicyGym package, read from its `uv.lock` (uv's lock file, TOML).

Pure: the lock's text in, pins out. The pins are what an image installs for the package on Linux x86-64 CPython 3.13:
the package's locked dependency closure, markers evaluated for that target, extras followed, the named skipped ones
(the kernel, which our compat package replaces) left out with what only they need.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass

from packaging.markers import InvalidMarker, Marker

# The interpreter the images of EvoPolicyGym packages run: trixie's CPython 3.13 on Linux x86-64.
TARGET_ENVIRONMENT = {
    "implementation_name": "cpython",
    "implementation_version": "3.13.5",
    "os_name": "posix",
    "platform_machine": "x86_64",
    "platform_python_implementation": "CPython",
    "platform_release": "",
    "platform_system": "Linux",
    "platform_version": "",
    "python_full_version": "3.13.5",
    "python_version": "3.13",
    "sys_platform": "linux",
}


class UvLockError(ValueError):
    """The lock does not parse, or does not lock the package asked for."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LockedRequirements:
    pins: tuple[str, ...]  # `name==version`, sorted by name (no extras: what an extra adds is in the closure, pinned)
    # Distributions locked from a directory or path beside the lock (a vendored one): no index holds that version, so
    # they are left out of pins; each as its path, relative to the lock's directory.
    local: tuple[str, ...]
    sdist_only: tuple[str, ...] = ()  # pins the lock knows no wheel of (only an sdist): they need a compiler to install


def requirement_name(requirement: str) -> str:
    """The normalised (PEP 503) distribution name at the start of a requirement string: `Foo_Bar[x]>=1` -> `foo-bar`."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    return re.sub(r"[-_.]+", "-", match.group(1).lower()) if match else ""


def _applies(marker: str | None, extras: Iterable[str] = ()) -> bool:
    if not marker:
        return True
    try:
        parsed = Marker(marker)
    except InvalidMarker as exc:
        raise UvLockError(f"marker {marker!r}: {exc}") from exc
    environments = [{**TARGET_ENVIRONMENT, "extra": extra} for extra in (*extras, "")]
    return any(parsed.evaluate(environment) for environment in environments)


def locked_requirements(text: str, distribution: str, *, skip: Iterable[str] = ()) -> LockedRequirements:
    """The pins of distribution's locked closure in the uv.lock text (its own dev extras excluded), for TARGET_ENVIRONMENT.

    skip names distributions left out with every dependency reached only through them. Raises UvLockError for a lock
    that is not TOML, has no package named distribution, or names a dependency it does not lock.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UvLockError(f"not TOML: {exc}") from exc
    packages: dict[str, dict[str, object]] = {}
    for package in data.get("package", []):
        if isinstance(package, dict) and "name" in package:
            packages.setdefault(requirement_name(str(package["name"])), package)  # uv locks one version per target here
    root = requirement_name(distribution)
    if root not in packages:
        raise UvLockError(f"locks no package {distribution!r}")
    skipped = {requirement_name(name) for name in skip}
    reached: set[str] = set()
    pending: list[tuple[str, frozenset[str]]] = [(root, frozenset())]
    seen: set[tuple[str, frozenset[str]]] = set()
    while pending:
        name, extras = pending.pop()
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        package = packages.get(name)
        if package is None:
            raise UvLockError(f"names the dependency {name!r}, which it does not lock")
        edges = list(_edges(package.get("dependencies")))
        optional = package.get("optional-dependencies")
        for extra in extras:
            if isinstance(optional, dict):
                edges.extend(_edges(optional.get(extra)))
        for dependency in edges:
            target = requirement_name(str(dependency.get("name", "")))
            if target in skipped or not _applies(_marker(dependency), extras):
                continue
            asked = dependency.get("extra")
            wanted: frozenset[str] = frozenset(str(e) for e in asked) if isinstance(asked, list) else frozenset()
            reached.add(target)
            pending.append((target, wanted))
    pins, local, sdist_only = [], [], []
    for name in sorted(reached - {root}):
        package = packages[name]
        source = package.get("source")
        if isinstance(source, dict) and not ({"registry", "url"} & set(source)):
            where = source.get("directory") or source.get("path")
            if not where:
                raise UvLockError(f"locks {name!r} from {source!r}: neither an index nor a directory beside the lock")
            local.append(str(where))
            continue
        pins.append(f"{name}=={package['version']}")
        if "sdist" in package and not package.get("wheels"):
            sdist_only.append(pins[-1])
    return LockedRequirements(pins=tuple(pins), local=tuple(local), sdist_only=tuple(sdist_only))


def _edges(value: object) -> Iterable[dict[str, object]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _marker(dependency: dict[str, object]) -> str | None:
    marker = dependency.get("marker")
    return str(marker) if marker else None
