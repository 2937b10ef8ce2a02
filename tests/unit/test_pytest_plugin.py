"""The pytest plugin for environment authors, without an engine: its options, its assertion, a missing engine, and the
environment packages' image tests, which skip saying what they need without the plugin and never skip with it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from epg_sdk.checks import Check, CheckReport
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
