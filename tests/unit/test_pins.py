"""One source for each pin: orchestrator/images/sdk-layer.lock holds the exact versions, everything else derives from it."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata

import pytest
from packaging.requirements import Requirement

from orchestrator.images.catalogue import REPO_ROOT
from orchestrator.images.pins import (
    POLICY_NAMES,
    RUNNER_NAMES,
    SDK_LAYER_LOCK,
    LockError,
    agent_mcp_pins,
    normalise,
    parse_lock,
    pins_of,
    sdk_layer_pins,
    sdk_layer_versions,
    sdk_version,
)
from orchestrator.images.recipes import agent_base_recipe, policy_runtime_recipe, sdk_layer_recipe

# Files that used to repeat the pins by hand; none of them may write a version of what the lock pins.
DERIVED = (
    "pyproject.toml",
    "sdk/pyproject.toml",
    "Makefile",
    *sorted(path.relative_to(REPO_ROOT).as_posix() for path in (REPO_ROOT / "orchestrator").rglob("*.py")),
    *sorted(path.relative_to(REPO_ROOT).as_posix() for path in (REPO_ROOT / "orchestrator" / "scaffold" / "templates").rglob("*")
            if path.is_file()),
    # An agent's own lock (images/agent-python-cli/*.lock) pins that agent's venv, not the SDK layer: not derived.
    *sorted(path.relative_to(REPO_ROOT).as_posix() for path in (REPO_ROOT / "images").rglob("*") if path.is_file() and path.suffix != ".lock"),
)


def _exact_pins_in(text: str) -> list[str]:
    names = "|".join(re.escape(name).replace(r"\-", "[-_.]") for name in sdk_layer_versions())
    # Not within a longer name: mypy-protobuf or types-grpcio is another distribution than protobuf or grpcio.
    return re.findall(rf"(?i)(?<![\w.-])(?:{names})(?:\[[^\]]*\])?\s*===?\s*[0-9][0-9A-Za-z.+!-]*", text)


@pytest.mark.parametrize("path", DERIVED)
def test_no_file_but_the_lock_writes_an_exact_version_of_what_the_lock_pins(path):
    assert _exact_pins_in((REPO_ROOT / path).read_text(errors="replace")) == []


def test_the_check_above_finds_a_pin_written_by_hand():
    assert _exact_pins_in('REQUIREMENTS = ("grpcio==1.85.3", "Typing_Extensions == 4.16.0")\n') == ["grpcio==1.85.3", "Typing_Extensions == 4.16.0"]
    assert _exact_pins_in('"gymnasium[mujoco]==1.3.0",') == ["gymnasium[mujoco]==1.3.0"]
    assert _exact_pins_in('"numpy>=2.0", "protobuf>=7.35.1,<8"') == []
    assert _exact_pins_in('"mypy-protobuf==5.1.0", "types-grpcio==1.85.0.20261028", "protobuf==7.36.2"') == ["protobuf==7.36.2"]


def test_the_sdk_accepts_every_version_the_lock_pins():
    project = tomllib.loads((REPO_ROOT / "sdk" / "pyproject.toml").read_text())["project"]
    requirements = [Requirement(r) for r in project["dependencies"]]
    requirements += [Requirement(r) for extra in ("gym", "runner") for r in project["optional-dependencies"][extra]]
    versions = sdk_layer_versions()
    assert {normalise(r.name) for r in requirements} >= {"numpy", "protobuf", "grpcio", "gymnasium"}
    for requirement in requirements:
        assert requirement.specifier.contains(versions[normalise(requirement.name)]), str(requirement)


def test_the_orchestrator_depends_on_the_sdk_at_its_version_and_not_on_the_sdks_pins():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    requirements = [Requirement(r) for r in project["dependencies"]]
    (sdk,) = [r for r in requirements if r.name == "epg-sdk"]
    assert str(sdk.specifier) == f"=={sdk_version(REPO_ROOT / 'sdk')}" and "runner" in sdk.extras
    assert not {normalise(r.name) for r in requirements} & {"grpcio", "protobuf", "gymnasium", "typing-extensions"}


def test_make_setup_installs_the_venv_with_the_lock_as_constraints():
    makefile = (REPO_ROOT / "Makefile").read_text()
    recipe = makefile.split("$(STAMP):", 1)[1].split("\n\n", 1)[0]
    lock = SDK_LAYER_LOCK.relative_to(REPO_ROOT).as_posix()
    assert lock in recipe.splitlines()[0]  # a change of a pin remakes the venv
    installs = [line for line in recipe.splitlines() if "pip install" in line and "-e " in line]
    # compat/ (our evopolicygym) has no dependencies, so nothing for the lock to constrain.
    constrained = [line for line in installs if not line.endswith("-e ./compat")]
    assert len(installs) == 3 and len(constrained) == 2 and all(f"-c {lock}" in line for line in constrained)


def test_the_images_take_their_pins_from_the_lock():
    versions = sdk_layer_versions()
    assert policy_runtime_recipe().requirements == tuple(f"{name}=={versions[name]}" for name in sorted(POLICY_NAMES))
    assert agent_base_recipe().requirements == tuple(f"{name}=={versions[name]}" for name in sorted(RUNNER_NAMES)) + agent_mcp_pins()
    assert sdk_layer_recipe().requirements == sdk_layer_pins() == tuple(f"{n}=={v}" for n, v in sorted(versions.items()))


def test_the_lock_pins_everything_its_packages_need():
    """The closure of the lock's distributions (no extras), read from this venv, which make setup installs from the lock."""
    versions = sdk_layer_versions()
    for name, version in versions.items():
        assert metadata.version(name) == version, f"this venv has {name} {metadata.version(name)}, the lock {version}"
        for requirement in map(Requirement, metadata.requires(name) or []):
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                assert normalise(requirement.name) in versions, f"{name} needs {requirement.name}, which the lock does not pin"
                assert requirement.specifier.contains(versions[normalise(requirement.name)]), f"{name} needs {requirement}"


def test_the_agent_mcp_lock_and_agent_bases_layer_pins_hold_everything_mcp_needs():
    """The closure of mcp from this venv, with the extras its requirements name (pyjwt[crypto]): pinned once, at this
    venv's versions, with nothing of the SDK layer's pinned again at another version."""
    layer = {normalise(pin.partition("==")[0]): pin.partition("==")[2] for pin in pins_of(*RUNNER_NAMES)}
    own = {normalise(pin.partition("==")[0]): pin.partition("==")[2] for pin in agent_mcp_pins()}
    assert "mcp" in own and not own.keys() & layer.keys()
    versions = {**layer, **own}
    for name, version in own.items():
        assert metadata.version(name) == version, f"this venv has {name} {metadata.version(name)}, agent-mcp.lock {version}"
        wanted = [Requirement(text) for text in metadata.requires(name) or []]
        needed = [r for r in wanted if r.marker is None or r.marker.evaluate({"extra": "", "python_version": "3.11"})]
        for requirement in needed:
            needed += [extra_requirement for extra in requirement.extras for extra_requirement in map(Requirement, metadata.requires(requirement.name) or [])
                       if extra_requirement.marker is not None and extra_requirement.marker.evaluate({"extra": extra, "python_version": "3.11"})]
        for requirement in needed:
            assert normalise(requirement.name) in versions, f"{name} needs {requirement.name}, which no lock of agent-base pins"
            assert requirement.specifier.contains(versions[normalise(requirement.name)]), f"{name} needs {requirement}"


def test_pins_of_names_a_distribution_the_lock_does_not_pin():
    assert pins_of("NumPy", "protobuf") == tuple(f"{n}=={sdk_layer_versions()[n]}" for n in ("numpy", "protobuf"))
    with pytest.raises(KeyError, match="pins no torch"):
        pins_of("numpy", "torch")


def test_a_lock_line_that_is_not_a_plain_pin_names_the_file_and_the_line():
    assert parse_lock("# c\n\nA_b == 1.0  # why\nc[x,y]==2\n", "f.lock") == ("A_b==1.0", "c[x,y]==2")
    with pytest.raises(LockError, match=r"^f\.lock:2: '-f http://x' is not a plain pinned requirement"):
        parse_lock("a==1\n-f http://x\n", "f.lock")
