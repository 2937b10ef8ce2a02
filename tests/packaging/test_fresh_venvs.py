"""The SDK with each environment package installs into a fresh venv and works there (the orchestrator's own fresh
venv: test_orchestrator_wheel.py).

Each of the eight packages under environments/ gets its own venv, built the way a user installs it:
`pip install ./sdk[runner] ./environments/NAME` with pip's resolver, from a directory holding the
wheels `pip download` fetched for the package's requirements.lock (the pins, and whatever they need
that the lock misses, which the closure check below then names). The runner extra makes the venv
hold what the package's image holds. pip builds a wheel of a source directory, then installs it: the
SDK's wheel is built once, the same way (tests/support/venvs.py build_wheel), and each venv gets that
file where the command names ./sdk; each package's own wheel is built in its venv's install.
The pins of `[tool.epg] no_deps` are then installed with `--no-deps`: a pyproject.toml cannot say
"this dependency without its own dependencies", so those are left out of its dependencies, and
`pip check` may complain about their dependencies alone. Then the venv must hold exactly the lock
(the lock is closed over every requirement of every locked distribution), register the package's
Benchmarks, and pass the package's own tests: these venvs are where those tests run with the SDK alone.
"""

from __future__ import annotations

import json
import re
import time
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from support.venvs import BUILD_AND_TEST, REPO, Venv, build_wheel, copy_sources, fill_wheels, make_venv

PACKAGES = sorted(path.parent.name for path in (REPO / "environments").glob("*/pyproject.toml"))
# The package's whole tests/ runs: without the orchestrator's pytest plugin its image tests (tests/image) skip, each
# saying what it needs; the main test run runs them with the plugin and the engine.
PYTEST_ARGS: tuple[str, ...] = ()
# What a skipped test of a package must say it needs (the image tests' reason without the plugin).
NEEDS = re.compile(r"epg-orchestrator\[pytest\]")
SDK_EXTRAS = ("runner",)  # what every environment image holds of the SDK: the runner's dependencies too

PROBE = """
import importlib.util, json
from importlib.metadata import entry_points
import epg_sdk
made = {}
for point in entry_points(group="epg.benchmarks"):
    factory = point.load()
    made[point.name] = {"value": point.value, "id": factory().spec.id, "file": importlib.import_module(point.module).__file__}
print(json.dumps({"sdk": epg_sdk.__file__, "orchestrator": importlib.util.find_spec("orchestrator") is not None, "made": made}))
"""


def locked(lock: Path) -> dict[str, tuple[str, set[str]]]:
    """Canonical name -> (version, extras) of every pin of a requirements.lock."""
    pins = {}
    for line in lock.read_text().splitlines():
        text = line.split("#", 1)[0].strip()
        if text:
            requirement = Requirement(text)
            pins[canonicalize_name(requirement.name)] = (next(iter(requirement.specifier)).version, set(requirement.extras))
    return pins


def needed(roots: list[Requirement], installed: dict[str, dict], stop: set[str]) -> set[str]:
    """Canonical names of roots and of everything their installed metadata requires, extras and markers followed;
    the requirements of a distribution in stop are not followed."""
    seen: set[tuple[str, str]] = set()
    names: set[str] = set()
    queue = [(root, "") for root in roots]
    while queue:
        requirement, context = queue.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": context}):
            continue
        name = canonicalize_name(requirement.name)
        names.add(name)
        if name in stop or name not in installed:
            continue
        for extra in ("", *requirement.extras):
            if (name, extra) in seen:
                continue
            seen.add((name, extra))
            queue.extend((Requirement(line), extra) for line in installed[name]["requires"])
    return names


@pytest.fixture(scope="module")
def sdk_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The SDK's wheel, built once from a copy of sdk/ as `pip install ./sdk` builds it (setuptools from local wheels)."""
    sources = copy_sources(tmp_path_factory.mktemp("sdk-sources"), "sdk")
    return build_wheel(sources / "sdk", fill_wheels("sdk-build", [BUILD_AND_TEST[0]]), tmp_path_factory.mktemp("sdk-wheel"))


def install_package(name: str, sdk_wheel: Path, tmp_path: Path) -> tuple[Venv, Path, dict[str, tuple[str, set[str]]], list[str]]:
    """A fresh venv holding the SDK (its wheel, with its runner extra), the package NAME (from a copy) and pytest, installed
    together with pip's resolver, then the package's no_deps pins without their dependencies; return (venv, the package's
    copy, its lock, no_deps)."""
    sources = copy_sources(tmp_path / "sources", f"environments/{name}")
    package = sources / "environments" / name
    pins = locked(package / "requirements.lock")
    no_deps = [canonicalize_name(n) for n in tomllib.loads((package / "pyproject.toml").read_text())["tool"]["epg"].get("no_deps", [])]
    lines = [f"{n}{'[' + ','.join(sorted(extras)) + ']' if extras else ''}=={version}" for n, (version, extras) in sorted(pins.items())]
    wheels = fill_wheels(f"env-{name}", [line for line in lines if canonicalize_name(Requirement(line).name) not in no_deps] + list(BUILD_AND_TEST),
                         [line for line in lines if canonicalize_name(Requirement(line).name) in no_deps])
    venv = make_venv(tmp_path / "venv", wheels)
    venv.pip_install(f"{sdk_wheel}[{','.join(SDK_EXTRAS)}]", package, "pytest", step="install (resolver)")
    if no_deps:
        venv.pip_install(*(f"{n}=={pins[n][0]}" for n in no_deps), step="install no_deps pins", no_deps=True)
    return venv, package, pins, no_deps


@pytest.mark.parametrize("name", PACKAGES)
def test_the_package_installs_beside_the_sdk_with_the_resolver_holds_its_lock_and_passes_its_own_tests(name: str, sdk_wheel: Path, tmp_path: Path):
    venv, package, pins, no_deps = install_package(name, sdk_wheel, tmp_path)

    # pip check: every requirement met, but those of a no_deps pin (installed without its dependencies on purpose).
    checked = venv.pip("check")
    complaints = [line for line in checked.stdout.splitlines() if line.strip() and line != "No broken requirements found."]
    assert [line for line in complaints if canonicalize_name(line.split()[0]) not in no_deps] == [], checked.stdout
    assert (checked.returncode == 0) == (not complaints), checked.stdout + checked.stderr

    # The venv is the lock: every locked distribution the resolver installed at its pin, nothing unlocked but pytest's own,
    # and every requirement of every locked distribution (but a no_deps pin's) locked.
    installed = venv.distributions()
    project = tomllib.loads((package / "pyproject.toml").read_text())["project"]
    own = {canonicalize_name(project["name"]), "epg-sdk"}
    testing = needed([Requirement("pytest")], installed, stop=set()) - set(pins)
    assert {n: installed[n]["version"] for n in set(installed) - set(pins) - own - testing} == {}, "installed but not locked"
    assert {n: (installed[n]["version"], pins[n][0]) for n in set(pins) & set(installed) if installed[n]["version"] != pins[n][0]} == {}
    roots = [Requirement(f"{n}[{','.join(sorted(pins[n][1]))}]" if pins[n][1] else n) for n in set(pins) & set(installed)]
    roots += [Requirement(f"epg-sdk[{','.join(SDK_EXTRAS)}]"), Requirement(project["name"])]
    assert needed(roots, installed, stop=set(no_deps)) - set(pins) - own == set(), "required but not locked"
    assert set(no_deps) <= set(installed)

    # The Benchmarks are registered as entry points, made by the installed package with the installed SDK; no orchestrator.
    probe = venv.run(venv.python, "-c", PROBE, cwd=tmp_path)
    assert probe.returncode == 0, probe.stderr
    facts = json.loads(probe.stdout)
    assert {bid: made["value"] for bid, made in facts["made"].items()} == project["entry-points"]["epg.benchmarks"]
    assert all(made["id"] == bid and "/site-packages/" in made["file"] for bid, made in facts["made"].items()), facts["made"]
    assert "/site-packages/" in facts["sdk"] and facts["orchestrator"] is False

    # The package's own tests, run in its copy (the image tests need the orchestrator's plugin and Docker).
    started = time.monotonic()
    result = venv.run(venv.python, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "tests", *PYTEST_ARGS, cwd=package, timeout=900)
    venv.timings["package tests"] = round(time.monotonic() - started, 1)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    summary = result.stdout.strip().splitlines()[-1]
    passed = re.search(r"(\d+) passed", summary)
    assert passed and int(passed.group(1)) > 0 and "failed" not in summary and "error" not in summary, summary
    skips = [line for line in result.stdout.splitlines() if line.startswith("SKIPPED")]
    assert skips and all(NEEDS.search(line) for line in skips), result.stdout[-3000:]
    print(f"fresh venv of {name}: {venv.timings}; tests: {summary}; pip check: {complaints or 'clean'}")
