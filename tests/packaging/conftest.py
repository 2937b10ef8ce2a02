"""Fixtures for the packaging tests: a fresh virtual environment with a non-editable orchestrator.

Venvs are made by tests/support/venvs.py: `python -m venv` (never with the system's site-packages),
filled with pip from local wheels only (`--no-index --find-links`).
"""

from __future__ import annotations

import shutil

import pytest
from support.venvs import Venv, copy_sources, fill_wheels, make_venv, orchestrator_requirements


@pytest.fixture(scope="session")
def orchestrator_venv(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """A fresh venv with the SDK and the orchestrator installed non-editable from a copy that is then deleted."""
    wheels = fill_wheels("orchestrator", orchestrator_requirements())
    sources = copy_sources(tmp_path_factory.mktemp("orchestrator-sources"), "sdk", "orchestrator", "environments",
                           "pyproject.toml", "setup.py", "README.md")
    venv = make_venv(tmp_path_factory.mktemp("orchestrator-venv") / "venv", wheels)
    venv.pip_install(sources / "sdk", sources, step="install sdk + orchestrator")
    shutil.rmtree(sources)  # what the installed copy needs, it must carry itself
    return venv
