"""`epg-orchestrate env new` as an environment author types it: the package it writes holds gymnasium's real spaces
and passes its own generated tests, with no engine (env test of the package against the engine is in
tests/docker/test_env_test.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import invoke_cli


@pytest.fixture(scope="module")
def new_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("authors") / "test-pendulum"
    made = invoke_cli("env", "new", str(directory), "--gymnasium", "Pendulum-v1", "--benchmark-id", "EpgTestPendulum-v1",
                      "--name", "test-pendulum", "--failure-return", "-4000")
    assert made.exit_code == 0, made.stderr
    return directory


def test_new_package_passes_its_own_generated_tests(new_package):
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(new_package / "tests")],
                            capture_output=True, text=True, cwd=new_package, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "6 passed" in result.stdout


def test_new_package_readme_holds_the_real_spaces(new_package):
    readme = (new_package / "README.md").read_text()
    assert "`Box([-1. -1. -8.], [1. 1. 8.], (3,), float32)`" in readme
    assert "`Box(-2.0, 2.0, (1,), float32)`" in readme
    assert "**Horizon:** 200 steps" in readme
