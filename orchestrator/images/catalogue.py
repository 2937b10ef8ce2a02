"""Environment packages (each under environments/) and the resolution of benchmark names."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_ENVIRONMENTS = REPO_ROOT / "environments"
_VERSION = re.compile(r"-v\d+$")


class EpgTable(BaseModel):
    """The [tool.epg] table of an environment package's pyproject.toml."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    image: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    module: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    baseline: str = "baseline"
    aliases: tuple[str, ...] = ()
    benchmarks: dict[str, str]


class EnvironmentPackage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    root: Path
    table: EpgTable

    @property
    def image(self) -> str:
        return self.table.image

    @property
    def baseline_dir(self) -> Path:
        return self.root / self.table.baseline

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
        table = EpgTable.model_validate(data.get("tool", {}).get("epg", {}))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CatalogueError(f"{pyproject}: {exc}") from exc
    except ValidationError as exc:
        problems = "; ".join(f"tool.epg.{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise CatalogueError(f"{pyproject}: {problems}") from exc
    return EnvironmentPackage(root=root, table=table)


def discover(roots: list[Path] | None = None) -> list[EnvironmentPackage]:
    """Return the packages found directly below each root (default: the repository's environments/)."""
    packages = []
    for root in roots or [DEFAULT_ENVIRONMENTS]:
        for candidate in sorted(root.iterdir()) if root.is_dir() else []:
            if (candidate / "pyproject.toml").is_file():
                packages.append(load_package(candidate))
    return packages


def resolve_benchmark(name: str, packages: list[EnvironmentPackage]) -> tuple[EnvironmentPackage, str, str]:
    """Return (package, benchmark id, factory entry) for a benchmark id or alias, case-insensitively.

    Raises CatalogueError naming the known benchmarks when name matches none.
    """
    wanted = name.lower()
    matches = []
    for package in packages:
        for benchmark_id, entry in package.table.benchmarks.items():
            names = {benchmark_id.lower(), _VERSION.sub("", benchmark_id.lower())}
            if len(package.table.benchmarks) == 1:
                names |= {alias.lower() for alias in package.table.aliases}
            if wanted in names:
                matches.append((package, benchmark_id, entry))
    if len(matches) == 1:
        return matches[0]
    known = sorted(b for p in packages for b in p.table.benchmarks)
    if not matches:
        raise CatalogueError(f"unknown benchmark {name!r}; known: {', '.join(known) or 'none'}")
    raise CatalogueError(f"benchmark name {name!r} is ambiguous: {', '.join(m[1] for m in matches)}")
