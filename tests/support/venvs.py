"""Fresh virtual environments for the tests that install the project: made with `python -m venv`, filled from local wheels only.

A venv never sees the system's site-packages, the caller's PYTHON*/PIP_* variables or the
machine's pip configuration. Wheels come from a directory that the host's pip fills once
(`pip download`, which reuses pip's own HTTP cache) and marks complete; later runs need no
network. Each directory is filled under a file lock, so test processes running side by side
(pytest-xdist) never install from a half-filled one.
"""

from __future__ import annotations

import ensurepip
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# What pip needs besides the requirements themselves: the build backend of every pyproject.toml here
# (`setuptools>=68`, installed into pip's isolated build environment) and the test runner.
BUILD_AND_TEST = ("setuptools>=68", "pytest>=8")

# Prints {canonical name: {"version": ..., "requires": [...]}} for every distribution of the interpreter running it.
_LIST_DISTRIBUTIONS = """
import json, re
from importlib.metadata import distributions
print(json.dumps({re.sub(r"[-_.]+", "-", d.metadata["Name"]).lower(): {"version": d.version, "requires": d.requires or []}
                  for d in distributions()}))
"""


@dataclass
class Venv:
    """A fresh virtual environment; `timings` records how long each step took (seconds)."""

    root: Path
    wheels: Path
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    def run(self, *args: str | Path, cwd: Path | None = None, timeout: float = 300,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """Run a command with this venv's bin/ first on PATH and nothing of the caller's Python or pip setup
        (plus env); return the finished process. Raises subprocess.TimeoutExpired after timeout seconds."""
        environment = _clean_environment()
        environment.update(PATH=f"{self.root / 'bin'}{os.pathsep}{environment.get('PATH', '')}", **(env or {}))
        return subprocess.run([str(a) for a in args], cwd=cwd, env=environment, capture_output=True, text=True, timeout=timeout, check=False)

    def pip(self, *args: str | Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        """Run the host's pip on this venv (`pip --python`: the venv is made without a pip of its own); return the finished process."""
        return self.run(sys.executable, "-m", "pip", "--python", self.python, *args, timeout=timeout)

    def pip_install(self, *targets: str | Path, step: str, no_deps: bool = False) -> None:
        """pip install targets from the wheel directory alone (with pip's resolver unless no_deps); fails the test when pip does.

        Nothing is byte-compiled at install (--no-compile): a module is compiled when something first imports it, which
        saves most of an install's CPU time for the large distributions of which a test imports a part."""
        started = time.monotonic()
        options = ("--no-deps",) if no_deps else ()
        result = self.pip("install", "--quiet", "--no-compile", "--no-index", "--find-links", self.wheels, *options, *targets)
        self.timings[step] = round(time.monotonic() - started, 1)
        assert result.returncode == 0, f"pip install {' '.join(map(str, targets))} failed:\n{result.stdout}\n{result.stderr}"

    def distributions(self) -> dict[str, dict]:
        """Canonical name -> {"version", "requires"} of every distribution installed in the venv."""
        # Run in the venv's directory: from a checkout's root, `python -c` would also find the checkout's own *.egg-info.
        result = self.run(self.python, "-c", _LIST_DISTRIBUTIONS, cwd=self.root)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)


def _clean_environment() -> dict[str, str]:
    """This process's environment without the caller's Python, venv or pip settings, and pip told to ignore the machine's
    configuration and not to look for a newer pip."""
    environment = {key: value for key, value in os.environ.items() if not key.startswith(("PYTHON", "VIRTUAL_ENV", "PIP_"))}
    return environment | {"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_CONFIG_FILE": os.devnull}


def build_wheel(source: Path, wheels: Path, destination: Path) -> Path:
    """Build the wheel of the project at source into destination with the host's pip as `pip install` builds one: in an
    isolated build environment, its build requirements from the wheel directory wheels alone. Return the wheel's path;
    fails the test when pip does."""
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-index", "--find-links", str(wheels),
         "--wheel-dir", str(destination), str(source)],
        env=_clean_environment(), capture_output=True, text=True, timeout=600, check=False,
    )
    assert result.returncode == 0, f"pip could not build the wheel of {source}:\n{result.stdout}\n{result.stderr}"
    (wheel,) = destination.glob("*.whl")
    return wheel


def wheel_cache() -> Path:
    """Where the wheel directories live: below the user's cache directory, kept between runs."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "epg-orchestrator" / "test-wheels"


def fill_wheels(name: str, requirements: list[str], no_deps: list[str] = ()) -> Path:
    """A directory of wheels (CPython of this interpreter, binary only) for requirements and their dependencies, and for
    no_deps without theirs; named by name and a hash of both lists, filled once and then reused. Fails the test when pip
    cannot download them."""
    digest = hashlib.sha256(json.dumps([sorted(requirements), sorted(no_deps)]).encode()).hexdigest()[:16]
    directory = wheel_cache() / f"{name}-{digest}"
    stamp = directory / ".complete"
    directory.parent.mkdir(parents=True, exist_ok=True)
    with open(directory.parent / f".{directory.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not stamp.is_file():
            for wanted, options in ((requirements, ()), (no_deps, ("--no-deps",))):
                if not wanted:
                    continue
                result = subprocess.run(
                    [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--only-binary", ":all:",
                     *options, "--dest", str(directory), *wanted],
                    capture_output=True, text=True, timeout=900, check=False,
                )
                assert result.returncode == 0, f"could not fill the wheel directory {directory}:\n{result.stderr}"
            stamp.write_text("\n".join([*requirements, *no_deps]) + "\n")
    return directory


def make_venv(root: Path, wheels: Path, *, with_pip: bool = False) -> Venv:
    """Create a fresh venv at root (no system site-packages). Without with_pip it has no pip of its own (the host's pip
    installs into it, see Venv.pip). With with_pip it holds what `python -m venv` gives it, the pip and setuptools wheels
    bundled with the interpreter's ensurepip, installed by the host's pip without byte-compiling them (ensurepip compiles
    every module of both: four fifths of its CPU time)."""
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, capture_output=True, timeout=300)
    venv = Venv(root=root, wheels=wheels)
    if with_pip:
        bundled = Path(ensurepip.__file__).parent / "_bundled"
        installed = venv.pip("install", "--quiet", "--no-compile", "--no-index", "--find-links", bundled, "pip", "setuptools")
        assert installed.returncode == 0, f"could not install ensurepip's wheels from {bundled}:\n{installed.stderr}"
    venv.timings["venv"] = round(time.monotonic() - started, 1)
    config = (root / "pyvenv.cfg").read_text()
    assert "include-system-site-packages = false" in config
    return venv


def copy_sources(destination: Path, *names: str) -> Path:
    """Copy parts of the repository (no caches, no build outputs) to destination; return it."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "dist", ".*")
    for name in names:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, destination / name, ignore=ignore)
        else:
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)
    return destination


def project_requirements(pyproject: Path, *extras: str) -> list[str]:
    """The [project] dependencies of pyproject and those of the named extras, as written there."""
    project = tomllib.loads(pyproject.read_text())["project"]
    return [*project.get("dependencies", []), *(line for extra in extras for line in project.get("optional-dependencies", {})[extra])]


def orchestrator_requirements() -> list[str]:
    """Everything the orchestrator and the SDK ask for (every extra but the orchestrator's dev tools), read from their
    pyproject.toml files, without the SDK itself, which is installed from sdk/."""
    root = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    sdk = tomllib.loads((REPO / "sdk" / "pyproject.toml").read_text())["project"]
    wanted = project_requirements(REPO / "pyproject.toml", *(extra for extra in root.get("optional-dependencies", {}) if extra != "dev"))
    wanted += project_requirements(REPO / "sdk" / "pyproject.toml", *sdk.get("optional-dependencies", {}))
    return sorted({line for line in wanted if not line.replace("_", "-").lower().startswith("epg-sdk")} | set(BUILD_AND_TEST))
