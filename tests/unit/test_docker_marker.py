"""The markers: every test that needs the engine carries `docker`, so `-m "not docker"` runs without one; `slow`, `agents`,
`kubernetes` and `browser` mark what the table in tests/support/markers.py names, and nothing else.

The whole suite is collected once, in this process, and each test's markers read from the collected items.
"""

from __future__ import annotations

import sys

import pytest
from support.cli import REPO
from support.markers import MARKED, marked_by_table


class Collected:
    """A plugin that keeps, for every collected test, its node id and the names of its markers."""

    def __init__(self) -> None:
        self.markers: dict[str, set[str]] = {}

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            self.markers[item.nodeid] = {mark.name for mark in item.iter_markers()}


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """Node id -> marker names of every test the suite collects from the repository (its testpaths)."""
    plugin = Collected()
    # The modules the collection imports stay imported: this session imports the same files under the same names,
    # and an extension module (the simulators') cannot be loaded twice in one process.
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(REPO)
        patch.setattr(sys, "path", list(sys.path))
        code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                            "--basetemp", str(tmp_path_factory.mktemp("collect"))], plugins=[plugin])
    assert code == 0
    assert len(plugin.markers) > 1000
    return plugin.markers


def under(nodeid: str, *prefixes: str) -> bool:
    return nodeid.startswith(prefixes)


def test_every_engine_test_is_marked_docker_and_nothing_else_is(collected):
    marked = {nodeid for nodeid, markers in collected.items() if "docker" in markers}
    # tests/docker, and environment image tests through the plugin's engine fixture.
    assert any(item.startswith("tests/docker/test_hostile_policies.py::") for item in marked)
    assert any("/tests/image/" in item for item in marked)
    assert all(item.startswith("tests/docker/") or "/tests/image/" in item for item in marked), marked
    unmarked = set(collected) - marked
    assert [item for item in unmarked if item.startswith("tests/docker/") or "/tests/image/" in item] == []
    assert any(item.startswith("tests/unit/test_architecture.py::") for item in unmarked)


@pytest.mark.parametrize("marker", sorted(MARKED))
def test_each_marker_marks_the_tests_its_table_names_and_no_other(collected, marker):
    named = {nodeid for nodeid in collected if marked_by_table(nodeid, marker)}
    assert {nodeid for nodeid, markers in collected.items() if marker in markers} == named
    # every entry of the table names a collected test: a moved or renamed test does not lose its marker silently
    assert [entry for entry in MARKED[marker]
            if not any(nodeid == entry or under(nodeid, entry + "/", entry + "::", entry + "[") for nodeid in named)] == []


def test_the_quick_engine_tests_leave_out_runs_agents_clusters_and_browsers(collected):
    quick = {nodeid for nodeid, markers in collected.items() if "docker" in markers and not markers & {"slow", "agents", "kubernetes", "browser"}}
    assert any(item.startswith("tests/docker/test_hostile_policies.py::") for item in quick)
    assert any(item.startswith("tests/docker/test_policy_isolation.py::") for item in quick)
    assert not any(under(item, "tests/docker/test_hostile_agents.py", "tests/docker/test_runs.py", "tests/docker/test_k8s_backend.py")
                   for item in quick)
