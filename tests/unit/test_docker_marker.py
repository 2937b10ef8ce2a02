"""The `docker` marker: every test that needs the engine carries it, so `-m "not docker"` runs without one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def collected(marker_expression: str) -> list[str]:
    result = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", marker_expression],
                            cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return [line for line in result.stdout.splitlines() if "::" in line]


def test_every_engine_test_is_marked_docker_and_nothing_else_is():
    marked = collected("docker")
    unmarked = collected("not docker")
    assert not set(marked) & set(unmarked)
    # tests/docker, and environment image tests through the plugin's engine fixture.
    assert any(item.startswith("tests/docker/test_hostile_policies.py::") for item in marked)
    assert any("/tests/image/" in item for item in marked)
    assert all(item.startswith("tests/docker/") or "/tests/image/" in item for item in marked), marked
    assert [item for item in unmarked if item.startswith("tests/docker/") or "/tests/image/" in item] == []
    assert any(item.startswith("tests/unit/test_architecture.py::") for item in unmarked)
