"""Every environment package's requirements.lock agrees with its pyproject.toml and with the SDK's runtime pins.

The lock is what the package's image installs (`[tool.epg] no_deps` pins without their
dependencies); pyproject.toml is what pip's resolver installs. Read from the files alone, so this
is fast: that the lock is also closed (every requirement of every locked distribution locked)
needs the distributions' metadata and is checked where they are installed, by
tests/packaging/test_fresh_venvs.py.
"""

from __future__ import annotations

import textwrap
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
SDK_PYPROJECT = REPO / "sdk" / "pyproject.toml"
# Where the image builder keeps the exact versions of the SDK's runtime distributions, when it keeps them apart from
# sdk/pyproject.toml (which then states ranges).
SDK_LAYER_LOCK = REPO / "orchestrator" / "images" / "sdk-layer.lock"
PACKAGES = sorted(path.parent for pattern in ("environments/*/pyproject.toml", "tests/environments/*/pyproject.toml")
                  for path in REPO.glob(pattern))
SDK = "epg-sdk"
# The extra of the SDK that every environment image installs: the runner's own dependencies.
RUNNER_EXTRA = "runner"


@dataclass(frozen=True)
class Sdk:
    """The SDK's version, its dependencies and those of each extra, from sdk/pyproject.toml."""

    version: str
    dependencies: tuple[Requirement, ...]
    extras: dict[str, tuple[Requirement, ...]]
    exact: dict[str, Version]  # the image builder's exact version of each runtime distribution, where it keeps them apart

    def runtime(self, extras: set[str]) -> list[Requirement]:
        """What an image of a package asking for extras holds of the SDK's requirements: its own, the runner's and those extras'."""
        wanted = sorted(extras | {RUNNER_EXTRA})
        return [*self.dependencies, *(req for extra in wanted for req in self.extras.get(extra, ()))]


def read_sdk(pyproject: Path, layer_lock: Path) -> Sdk:
    """The SDK of pyproject, with the exact versions of layer_lock when that file exists."""
    project = tomllib.loads(pyproject.read_text())["project"]
    exact, problems = read_lock(layer_lock) if layer_lock.is_file() else ({}, [])
    assert problems == []
    return Sdk(
        version=project["version"],
        dependencies=tuple(Requirement(line) for line in project.get("dependencies", [])),
        extras={extra: tuple(Requirement(line) for line in lines) for extra, lines in project.get("optional-dependencies", {}).items()},
        exact=exact,
    )


def read_lock(lock: Path) -> tuple[dict[str, Version], list[str]]:
    """(canonical name -> pinned version, problems) of a requirements.lock: one NAME==VERSION per line, comments skipped."""
    pins: dict[str, Version] = {}
    problems: list[str] = []
    for number, line in enumerate(lock.read_text().splitlines(), 1):
        text = line.split("#", 1)[0].strip() if not line.lstrip().startswith("#") else ""
        if not text:
            continue
        try:
            requirement = Requirement(text)
        except InvalidRequirement as exc:
            problems.append(f"{lock.name}:{number}: {text!r} is not a requirement ({exc})")
            continue
        specifiers = list(requirement.specifier)
        if len(specifiers) != 1 or specifiers[0].operator != "==" or "*" in specifiers[0].version:
            problems.append(f"{lock.name}:{number}: {text!r} does not pin one version with ==")
            continue
        name = canonicalize_name(requirement.name)
        if name in pins:
            problems.append(f"{lock.name}:{number}: {requirement.name} is pinned twice")
        pins[name] = Version(specifiers[0].version)
    return pins, problems


def _pinned(requirement: Requirement) -> Version | None:
    """The version requirement pins with a single ==, or None for a range or no specifier."""
    specifiers = list(requirement.specifier)
    if len(specifiers) == 1 and specifiers[0].operator == "==" and "*" not in specifiers[0].version:
        return Version(specifiers[0].version)
    return None


def _agrees(requirement: Requirement, pins: dict[str, Version], whose: str) -> list[str]:
    """Problems of the lock against one requirement: not locked, locked at another pin, or outside its range."""
    name = canonicalize_name(requirement.name)
    if name not in pins:
        return [f"{whose} asks for {requirement}, which requirements.lock does not pin"]
    locked = pins[name]
    pinned = _pinned(requirement)
    if pinned is not None and pinned != locked:
        return [f"{whose} pins {requirement}, requirements.lock pins {requirement.name}=={locked}"]
    if locked not in requirement.specifier:
        return [f"{whose} asks for {requirement}, requirements.lock pins {requirement.name}=={locked}, outside it"]
    return []


def lock_problems(package: Path, sdk: Sdk) -> list[str]:
    """Every disagreement between package's pyproject.toml, its requirements.lock and the SDK's pins; [] when they agree.

    - the package depends on epg-sdk at the SDK's own version, with extras the SDK has;
    - every other dependency is locked: a pinned one at the same version, any other inside its range;
    - the SDK's runtime requirements (its own, its `runner` extra's, and those of the extras the
      package asks for) are locked the same way;
    - each `[tool.epg] no_deps` name is locked, left out of the dependencies (the resolver would
      install its dependencies) and justified by a comment of pyproject.toml that names it.
    """
    text = (package / "pyproject.toml").read_text()
    pyproject = tomllib.loads(text)
    lock = package / "requirements.lock"
    if not lock.is_file():
        return ["requirements.lock is missing"]
    pins, problems = read_lock(lock)
    dependencies = [Requirement(line) for line in pyproject["project"].get("dependencies", [])]
    dependencies = [req for req in dependencies if req.marker is None or req.marker.evaluate({"extra": ""})]
    sdk_requirements = [req for req in dependencies if canonicalize_name(req.name) == SDK]
    if len(sdk_requirements) != 1:
        problems.append(f"pyproject.toml names {SDK} {len(sdk_requirements)} times, not once")
        extras: set[str] = set()
    else:
        [asked] = sdk_requirements
        extras = set(asked.extras)
        if _pinned(asked) != Version(sdk.version):
            problems.append(f"pyproject.toml asks for {asked}, not {SDK}=={sdk.version} (sdk/pyproject.toml)")
        for extra in sorted(extras - set(sdk.extras)):
            problems.append(f"pyproject.toml asks for the extra {SDK}[{extra}], which sdk/pyproject.toml does not have")
    for requirement in dependencies:
        if canonicalize_name(requirement.name) != SDK:
            problems += _agrees(requirement, pins, "pyproject.toml")
    for requirement in sdk.runtime(extras):
        problems += _agrees(requirement, pins, "sdk/pyproject.toml" + (f" (through {SDK}[{','.join(sorted(extras))}])" if extras else ""))
    for requirement in sdk.runtime(set()):  # what the runner imports: at the image builder's versions, when it keeps them apart
        name = canonicalize_name(requirement.name)
        if name in sdk.exact and name in pins and pins[name] != sdk.exact[name]:
            problems.append(f"{SDK_LAYER_LOCK.name} pins {requirement.name}=={sdk.exact[name]}, requirements.lock pins {requirement.name}=={pins[name]}")
    no_deps = pyproject.get("tool", {}).get("epg", {}).get("no_deps", [])
    comments = [line.split("#", 1)[1].lower() for line in text.splitlines() if "#" in line]
    for name in no_deps:
        if canonicalize_name(name) not in pins:
            problems.append(f"[tool.epg] no_deps names {name}, which requirements.lock does not pin")
        if any(canonicalize_name(req.name) == canonicalize_name(name) for req in dependencies):
            problems.append(f"{name} is in [tool.epg] no_deps and in the dependencies, where the resolver installs its dependencies")
        if not any(name.lower() in comment for comment in comments):
            problems.append(f"[tool.epg] no_deps names {name} without a comment of pyproject.toml saying why")
    return problems


def test_every_environment_package_and_test_package_is_checked():
    names = {path.relative_to(REPO).as_posix() for path in PACKAGES}
    assert {"environments/cartpole", "environments/mujoco", "environments/highway", "environments/fetch",
            "tests/environments/probe", "tests/environments/broken"} <= names
    assert len([name for name in names if name.startswith("environments/")]) == 8


@pytest.mark.parametrize("package", PACKAGES, ids=[path.relative_to(REPO).as_posix() for path in PACKAGES])
def test_the_lock_pins_what_pyproject_and_the_sdk_ask_for(package: Path):
    assert lock_problems(package, read_sdk(SDK_PYPROJECT, SDK_LAYER_LOCK)) == []


SYNTHETIC_SDK = Sdk(
    version="0.1.0",
    dependencies=(Requirement("numpy>=2.0"), Requirement("protobuf==7.36.2")),
    extras={"gym": (Requirement("gymnasium==1.4.0"),), "runner": (Requirement("grpcio==1.85.3"),)},
    exact={},
)


def write_package(directory: Path, dependencies: list[str], lock: str, epg: str = "") -> Path:
    directory.mkdir()
    listed = "".join(f'    "{line}",\n' for line in dependencies)
    (directory / "pyproject.toml").write_text(f'[project]\nname = "epg-env-x"\ndependencies = [\n{listed}]\n\n[tool.epg]\n{epg}')
    (directory / "requirements.lock").write_text(textwrap.dedent(lock))
    return directory


def test_a_lock_that_agrees_has_no_problem(tmp_path: Path):
    package = write_package(tmp_path / "good", ["epg-sdk[gym]==0.1.0", "gymnasium==1.4.0", "scipy"],
                            "# a comment\nnumpy==2.4.6\nprotobuf==7.36.2\ngrpcio==1.85.3\ngymnasium==1.4.0\nscipy==1.17.1\n")
    assert lock_problems(package, SYNTHETIC_SDK) == []


def test_the_gymnasium_conflict_of_the_sdks_extra_and_a_direct_pin_is_named(tmp_path: Path):
    # The MuJoCo package as it was: gymnasium 1.4.0 through epg-sdk[gym], 1.3.0 directly and in the lock.
    package = write_package(tmp_path / "mujoco", ["epg-sdk[gym]==0.1.0", "gymnasium[mujoco]==1.3.0"],
                            "numpy==2.4.6\nprotobuf==7.36.2\ngrpcio==1.85.3\ngymnasium==1.3.0\n")
    assert lock_problems(package, SYNTHETIC_SDK) == [
        "sdk/pyproject.toml (through epg-sdk[gym]) pins gymnasium==1.4.0, requirements.lock pins gymnasium==1.3.0"]


def test_a_lock_that_misses_or_contradicts_a_pin_is_named(tmp_path: Path):
    package = write_package(tmp_path / "bad", ["epg-sdk==0.2.0", "highway-env==1.11", "pandas>=3", "scipy"],
                            "numpy==1.26.0\nhighway-env==1.10\npandas==2.2.0\nnumpy==1.26.0\nscipy>=1\n")
    assert lock_problems(package, SYNTHETIC_SDK) == [
        "requirements.lock:4: numpy is pinned twice",
        "requirements.lock:5: 'scipy>=1' does not pin one version with ==",
        "pyproject.toml asks for epg-sdk==0.2.0, not epg-sdk==0.1.0 (sdk/pyproject.toml)",
        "pyproject.toml pins highway-env==1.11, requirements.lock pins highway-env==1.10",
        "pyproject.toml asks for pandas>=3, requirements.lock pins pandas==2.2.0, outside it",
        "pyproject.toml asks for scipy, which requirements.lock does not pin",
        "sdk/pyproject.toml asks for numpy>=2.0, requirements.lock pins numpy==1.26.0, outside it",
        "sdk/pyproject.toml asks for protobuf==7.36.2, which requirements.lock does not pin",
        "sdk/pyproject.toml asks for grpcio==1.85.3, which requirements.lock does not pin",
    ]


def test_a_no_deps_pin_must_be_locked_kept_out_of_the_dependencies_and_justified(tmp_path: Path):
    package = write_package(tmp_path / "nodeps", ["epg-sdk==0.1.0", "highway-env==1.11"],
                            "numpy==2.4.6\nprotobuf==7.36.2\ngrpcio==1.85.3\nhighway-env==1.11\n",
                            epg='no_deps = ["highway-env", "gymnasium-robotics"]\n')
    assert lock_problems(package, SYNTHETIC_SDK) == [
        "highway-env is in [tool.epg] no_deps and in the dependencies, where the resolver installs its dependencies",
        "[tool.epg] no_deps names highway-env without a comment of pyproject.toml saying why",
        "[tool.epg] no_deps names gymnasium-robotics, which requirements.lock does not pin",
        "[tool.epg] no_deps names gymnasium-robotics without a comment of pyproject.toml saying why",
    ]


def test_the_runners_distributions_must_be_locked_at_the_image_builders_versions(tmp_path: Path):
    layer = tmp_path / "sdk-layer.lock"
    layer.write_text("grpcio==1.85.3\ngymnasium==1.4.0\nnumpy==2.4.6\nprotobuf==7.36.2\n")
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nversion = "0.1.0"\ndependencies = ["numpy>=2.0", "protobuf>=7.35.1,<8"]\n'
                         '[project.optional-dependencies]\ngym = ["gymnasium>=1.3.0,<1.5"]\nrunner = ["grpcio>=1.85.1"]\n')
    sdk = read_sdk(pyproject, layer)
    package = write_package(tmp_path / "ranged", ["epg-sdk[gym]==0.1.0", "gymnasium==1.3.0"],
                            "numpy==2.4.5\nprotobuf==7.36.2\ngrpcio==1.85.3\ngymnasium==1.3.0\n")
    # gymnasium 1.3.0 is inside the gym extra's range: the package's image installs it over the layer's 1.4.0.
    assert lock_problems(package, sdk) == ["sdk-layer.lock pins numpy==2.4.6, requirements.lock pins numpy==2.4.5"]
