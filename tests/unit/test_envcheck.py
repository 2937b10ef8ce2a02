"""The environment check's report and the in-image Benchmark listing, without an engine."""

from __future__ import annotations

import json

from epg_sdk import checks
from orchestrator.envcheck import EnvCheck, EnvReport, _is_directory_target


def test_report_is_ok_only_when_every_check_passed_and_there_was_one():
    passed = EnvCheck(benchmark="B-v0", name="plan is deterministic", ok=True)
    broken = EnvCheck(benchmark="B-v0", name="splits are disjoint", ok=False, detail="train and test share Episodes")
    assert EnvReport(image="i:t", image_id="sha256:1", benchmarks=("B-v0",), checks=(passed,)).ok
    assert not EnvReport(image="i:t", image_id="sha256:1", benchmarks=("B-v0",), checks=(passed, broken)).ok
    assert not EnvReport(image="i:t", image_id="sha256:1", benchmarks=()).ok


def test_report_json_lists_every_check():
    report = EnvReport(image="i:t", image_id="sha256:1", benchmarks=("B-v0",),
                       checks=(EnvCheck(benchmark="B-v0", name="splits are disjoint", ok=False, detail="why"),))
    assert json.loads(json.dumps(report.to_json())) == {
        "image": "i:t", "image_id": "sha256:1", "benchmarks": ["B-v0"], "ok": False, "finished": True,
        "checks": [{"benchmark": "B-v0", "name": "splits are disjoint", "ok": False, "detail": "why", "finished": True}],
    }
    assert report.failures() == ["B-v0: splits are disjoint: why"]


def test_a_check_that_did_not_finish_makes_the_report_unfinished_not_merely_failed():
    late = EnvCheck(benchmark="B-v0", name="checks ran", ok=False, detail="not finished within 300 s", finished=False)
    report = EnvReport(image="i:t", image_id="sha256:1", benchmarks=("B-v0",), checks=(late,))
    assert not report.ok and not report.finished and report.to_json()["finished"] is False


def test_a_package_directory_is_a_directory_target_and_a_name_is_not(tmp_path, monkeypatch):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "pyproject.toml").write_text("")
    (tmp_path / "cartpole").mkdir()
    monkeypatch.chdir(tmp_path)
    assert _is_directory_target("pkg") and _is_directory_target(str(tmp_path / "cartpole"))
    assert not _is_directory_target("cartpole") and not _is_directory_target("env-cartpole:abc")


def test_sdk_lists_the_entry_point_benchmarks_installed_here(capsys, monkeypatch):
    monkeypatch.setattr(checks, "installed_benchmarks", lambda: {"X-v0": "x:make"})
    assert checks.main(["--list"]) == 0
    assert json.loads(capsys.readouterr().out) == {"benchmarks": {"X-v0": "x:make"}}


class _ListingEngine:
    """Answers `python3 -m epg_sdk.checks --list` with the given entry points; records the containers' labels."""

    def __init__(self, installed: dict[str, str]) -> None:
        self.installed = installed
        self.started: list = []

    def start(self, spec):
        self.started.append(spec)
        return spec

    def exit_of(self, container, wait_s):
        from epg_sdk.outcomes import ContainerExit

        return ContainerExit(exit_code=0)

    def logs(self, container, *, stdout, stderr):
        return json.dumps({"benchmarks": self.installed}).encode()

    def remove(self, container):
        return True


class _Catalogue:
    def __init__(self, packages):
        self._packages = packages

    def packages(self):
        return self._packages


def test_image_holds_its_labelled_and_its_installed_benchmarks(tmp_path):
    from orchestrator.envcheck import _from_image
    from orchestrator.images.catalogue import EnvironmentPackage, EpgTable

    cartpole = EnvironmentPackage(root=tmp_path, table=EpgTable(image="env-cartpole", module="epg_env_cartpole",
                                                                benchmarks={"CartPole-v1": "epg_env_cartpole:make_benchmark"}))
    engine = _ListingEngine({"Mine-v0": "epg_env_mine:make_benchmark"})
    target = _from_image(engine, _Catalogue([cartpole]), "author:1", "sha256:1",
                         {"org.evopolicygym.benchmarks": "CartPole-v1,Unknown-v0"}, scope="s1")
    assert {b: h.entry for b, h in target.benchmarks.items()} == {
        "CartPole-v1": "epg_env_cartpole:make_benchmark", "Unknown-v0": "", "Mine-v0": "epg_env_mine:make_benchmark"}
    assert target.benchmarks["CartPole-v1"].package == cartpole and target.benchmarks["Mine-v0"].package is None
    (listing,) = engine.started
    assert listing.command == ("python3", "-m", "epg_sdk.checks", "--list")
    assert listing.labels["org.evopolicygym.scope"] == "s1" and listing.network_none
