"""Shared fixtures (Programs written from source text, a private data directory) and the markers of the expensive groups.

The markers (registered in pyproject.toml) are given here, by file or by test, from one table (support/markers.py):
a test file does not mark itself. tests/unit/test_docker_marker.py checks the table against the collected suite.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Iterator

import pytest
from support.markers import MARKED, marked_by_table

REPO = Path(__file__).resolve().parents[1]
DOCKER_TESTS = REPO / "tests" / "docker"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark with `docker` every test in tests/docker and every test that uses the `engine` fixture, directly or through
    another; give the other markers by the table of support/markers.py."""
    for item in items:
        if item.path.is_relative_to(DOCKER_TESTS) or "engine" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.docker)
        if not item.path.is_relative_to(REPO):
            continue
        nodeid = item.path.relative_to(REPO).as_posix() + item.nodeid[len(item.nodeid.split("::", 1)[0]):]
        for marker in MARKED:
            if marked_by_table(nodeid, marker):
                item.add_marker(marker)
    items[:] = sorted(items, key=_cost_order(items))


def _cost_order(items: list[pytest.Item]):
    """A sort key that puts first the files that need no engine (they run while `make test` builds the images), and
    within each part the files with a slow test (a long file started last would end the run alone)."""
    docker_files = {item.path for item in items if item.get_closest_marker("docker")}
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    return lambda item: (item.path in docker_files, item.path not in slow_files)


@pytest.fixture(scope="session", autouse=True)
def private_data_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Point XDG_DATA_HOME (here and in every subprocess) at a temporary directory.

    Runs keep their secret seed key in the user's data directory: tests must never write into the real one.
    """
    with pytest.MonkeyPatch.context() as patch:
        directory = tmp_path_factory.mktemp("data-home")
        patch.setenv("XDG_DATA_HOME", str(directory))
        yield directory


@pytest.fixture
def write_program(tmp_path: Path):
    """Return a function that writes a Program (policy.py plus extra files) and returns its directory."""
    counter = iter(range(1_000_000))

    def write(source: str, **extra_files: str) -> Path:
        directory = tmp_path / f"program-{next(counter)}"
        directory.mkdir()
        (directory / "policy.py").write_text(textwrap.dedent(source))
        for name, text in extra_files.items():
            (directory / name).write_text(textwrap.dedent(text))
        return directory

    return write
