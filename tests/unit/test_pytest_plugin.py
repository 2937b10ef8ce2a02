"""The pytest plugin for environment authors, without an engine: its options, its assertion, a missing engine, the
environment packages' image tests, which skip saying what they need without the plugin and never skip with it, and
the conformance checks, which are envcheck's (the plugin runs their commands in containers of its own)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from epg_sdk.checks import Check, CheckReport
from orchestrator import pytest_plugin
from orchestrator.envcheck import conformance_checks
from orchestrator.images.catalogue import EnvironmentPackage, EpgTable
from orchestrator.pytest_plugin import ImageReport, assert_checks_pass

REPO = Path(__file__).resolve().parents[2]
IMAGE_TESTS = sorted((REPO / "environments").glob("*/tests/image"))
NEEDS_PLUGIN = ("image test: needs the epg pytest plugin and a Docker engine "
                "(pip install 'epg-orchestrator[pytest]', then run pytest where Docker answers)")


def _pytest(directory: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=directory,
                          env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=120, check=False)


def test_every_pytest_finds_the_plugin_through_its_entry_point(tmp_path: Path):
    result = _pytest(tmp_path, "--help")
    assert result.returncode == 0, result.stderr
    for option in ("--epg-image", "--epg-package", "--epg-episodes", "--epg-base"):
        assert option in result.stdout


def test_the_assertion_names_every_failed_check():
    report = ImageReport(image="example/env:1", reports=(
        CheckReport(benchmark_id="Toy-v0", checks=(
            Check(name="spec is complete and encodable", ok=True),
            Check(name="splits are disjoint", ok=False, detail="2 seeds shared"),
            Check(name="plan is deterministic", ok=False, detail="differs on a second call"),
        )),
    ))
    assert not report.ok
    with pytest.raises(pytest.fail.Exception) as failure:
        assert_checks_pass(report)
    message = str(failure.value)
    assert "2 conformance check(s) failed" in message
    assert "Toy-v0: splits are disjoint: 2 seeds shared" in message
    assert "Toy-v0: plan is deterministic: differs on a second call" in message


def test_a_report_without_benchmarks_does_not_pass():
    report = ImageReport(image="example/env:1", reports=())
    assert not report.ok
    with pytest.raises(pytest.fail.Exception, match="no Benchmark was checked"):
        assert_checks_pass(report)


def test_a_missing_engine_fails_the_fixture_with_one_clear_message_and_never_skips(tmp_path: Path):
    (tmp_path / "test_image.py").write_text("def test_conformance(epg_check_report):\n    pass\n")
    result = _pytest(tmp_path, "-q", "-rA", env={"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"})
    assert result.returncode == 1, result.stdout + result.stderr
    summary = result.stdout.strip().splitlines()[-1]
    assert "1 error" in summary and "skipped" not in summary, summary
    assert "testing an environment image needs a Docker engine: no Docker daemon answers" in result.stdout


def test_without_the_plugin_every_packages_image_tests_skip_naming_what_they_need(tmp_path: Path):
    # As in a venv holding only epg-sdk and the package: the `epg` plugin is not there to provide the fixtures.
    result = _pytest(REPO, "-p", "no:epg", "-rs", "--basetemp", str(tmp_path), *map(str, IMAGE_TESTS))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    summary = result.stdout.strip().splitlines()[-1]
    assert "passed" not in summary and "error" not in summary and "skipped" in summary, summary
    assert "fixture 'epg_" not in result.stdout
    skipped = [line for line in result.stdout.splitlines() if line.startswith("SKIPPED")]
    assert all(line.endswith(f": {NEEDS_PLUGIN}") for line in skipped), skipped
    files = {line.split("] ", 1)[1].split(":", 1)[0] for line in skipped}
    assert files == {str(path.relative_to(REPO)) for directory in IMAGE_TESTS for path in directory.glob("test_*.py")}
    assert len(IMAGE_TESTS) == 8


def test_with_the_plugin_the_image_tests_never_skip_and_a_missing_engine_fails_each(tmp_path: Path):
    # In the orchestrator's own run the plugin is always loaded: an image test runs, or fails; it is never skipped.
    result = _pytest(REPO, "-q", "-rA", "--basetemp", str(tmp_path), *map(str, IMAGE_TESTS),
                     env={"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"})
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-2000:]
    summary = result.stdout.strip().splitlines()[-1]
    assert "skipped" not in summary and "passed" not in summary and " error" in summary, summary
    assert "testing an environment image needs a Docker engine" in result.stdout


# The checks are envcheck's: the plugin only runs their commands in its own containers ----------------------------
TOY_REPORT = json.dumps({"benchmark": "Toy-v0", "checks": [
    {"name": "spec is complete and encodable", "ok": True, "detail": ""},
    {"name": "splits are disjoint", "ok": False, "detail": "2 seeds shared"},
]})


class _Commands:
    """Stands in for the plugin's container runner: answers each command with canned output, and records it."""

    def __init__(self, answers: dict[str, tuple[int | None, str, str]]) -> None:
        self.answers = answers
        self.seen: list[tuple[str, tuple[str, ...], str]] = []

    def __call__(self, state, image: str, command: tuple[str, ...], role: str) -> tuple[int | None, str, str]:
        self.seen.append((image, command, role))
        return self.answers[command[3]]


def _state(labels: dict[str, str] | None = None) -> SimpleNamespace:
    engine = SimpleNamespace(image_labels=lambda image: ("sha256:1", labels or {}))
    return SimpleNamespace(engine=engine, benchmarks={})


def test_the_plugin_reports_exactly_the_checks_envcheck_reads_from_the_image(monkeypatch):
    commands = _Commands({"--entry": (1, f"some output\n{TOY_REPORT}\n", "")})
    monkeypatch.setattr(pytest_plugin, "_run_in_image", commands)

    report = pytest_plugin._check_in_image(_state(), "example/env:1", "Toy-v0", "epg_env_toy:make")

    expected = conformance_checks(lambda image, command: commands.answers[command[3]], "example/env:1", "Toy-v0", "epg_env_toy:make")
    assert report == CheckReport(benchmark_id="Toy-v0", checks=tuple(Check(name=c.name, ok=c.ok, detail=c.detail) for c in expected))
    assert [c.name for c in report.checks] == ["spec is complete and encodable", "splits are disjoint"]
    assert commands.seen == [("example/env:1", ("python3", "-m", "epg_sdk.checks", "--entry", "epg_env_toy:make"), "env-check")]


def test_checks_that_printed_no_report_fail_the_fixture_with_their_output(monkeypatch):
    monkeypatch.setattr(pytest_plugin, "_run_in_image", _Commands({"--entry": (1, "", "ModuleNotFoundError: No module named 'epg_env_toy'")}))
    with pytest.raises(pytest.fail.Exception) as failure:
        pytest_plugin._check_in_image(_state(), "example/env:1", "Toy-v0", "epg_env_toy:make")
    assert "the checks of Toy-v0 did not run inside example/env:1: exit 1: ModuleNotFoundError" in str(failure.value)


def test_the_benchmarks_checked_are_those_env_test_finds_in_the_image(monkeypatch, tmp_path: Path):
    package = EnvironmentPackage(root=tmp_path, table=EpgTable(image="env-toy", module="epg_env_toy",
                                                               benchmarks={"Toy-v0": "epg_env_toy:make", "Other-v0": "epg_env_toy:other"}))
    listing = json.dumps({"benchmarks": {"Mine-v0": "epg_env_mine:make"}})
    monkeypatch.setattr(pytest_plugin, "_run_in_image", _Commands({"--list": (0, listing, listing)}))
    labelled = pytest_plugin._benchmarks_of(_state({"org.evopolicygym.benchmarks": "Toy-v0"}), "example/env:1", package)
    assert labelled == {"Toy-v0": "epg_env_toy:make", "Mine-v0": "epg_env_mine:make"}

    monkeypatch.setattr(pytest_plugin, "_run_in_image", _Commands({"--list": (2, "", "usage: no --list")}))
    assert pytest_plugin._benchmarks_of(_state(), "example/env:1", package) == dict(package.table.benchmarks)
    with pytest.raises(pytest.fail.Exception, match="holds Gone-v0, which neither the image's entry points nor"):
        pytest_plugin._benchmarks_of(_state({"org.evopolicygym.benchmarks": "Gone-v0"}), "example/env:1", package)
