"""Fixtures for the packaging tests: a local wheel directory and fresh virtual environments.

Each venv is made with `python -m venv` (never with the system's site-packages)
and filled with pip from local wheels only (`--no-index --find-links`). The
wheels are downloaded once into the user's cache by the host's pip (which
reuses its own HTTP cache); later runs need no network.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from venvs import WHEEL_REQUIREMENTS, Venv, copy_sources, make_venv, wheel_dir


@pytest.fixture(scope="session")
def wheels() -> Path:
    """A directory of wheels for everything the packaging tests install (downloaded once, then reused)."""
    directory = wheel_dir()
    stamp = directory / (".complete-" + hashlib.sha256("\n".join(WHEEL_REQUIREMENTS).encode()).hexdigest()[:16])
    if not stamp.is_file():
        directory.mkdir(parents=True, exist_ok=True)
        result = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--only-binary", ":all:",
             "--dest", str(directory), *WHEEL_REQUIREMENTS],
            capture_output=True, text=True, timeout=600, check=False,
        )
        assert result.returncode == 0, f"could not fill the wheel directory {directory}:\n{result.stderr}"
        stamp.write_text("\n".join(WHEEL_REQUIREMENTS) + "\n")
    return directory


@pytest.fixture(scope="session")
def environment_venv(tmp_path_factory: pytest.TempPathFactory, wheels: Path) -> Venv:
    """A fresh venv holding the SDK, the CartPole package (both installed from copies, not editable) and pytest."""
    sources = copy_sources(tmp_path_factory.mktemp("env-sources"), "sdk", "environments/cartpole")
    venv = make_venv(tmp_path_factory.mktemp("env-venv") / "venv", wheels)
    venv.pip_install(sources / "sdk", sources / "environments" / "cartpole", "pytest", step="install sdk + cartpole + pytest")
    return venv


@pytest.fixture(scope="session")
def orchestrator_venv(tmp_path_factory: pytest.TempPathFactory, wheels: Path) -> Venv:
    """A fresh venv with the SDK and the orchestrator installed non-editable from a copy that is then deleted."""
    sources = copy_sources(tmp_path_factory.mktemp("orchestrator-sources"), "sdk", "orchestrator", "environments",
                           "pyproject.toml", "setup.py", "README.md")
    venv = make_venv(tmp_path_factory.mktemp("orchestrator-venv") / "venv", wheels)
    venv.pip_install(sources / "sdk", sources, step="install sdk + orchestrator")
    shutil.rmtree(sources)  # what the installed copy needs, it must carry itself
    return venv
