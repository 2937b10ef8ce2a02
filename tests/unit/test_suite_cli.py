"""`suite run` and `suite report` at the command line, up to where a Run would start: usage, bad input, the printed report."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from support.cli import invoke_cli
from test_suite_report import ALL, SUITE, fill

from orchestrator.images.catalogue import discover
from orchestrator.suite.directory import SuiteDirectory
from orchestrator.suite.spec import SuiteSpec, plan_suite


def test_suite_run_needs_a_suite_file_or_resume_but_not_both(tmp_path):
    assert invoke_cli("suite", "run").exit_code == 2
    suite = tmp_path / "suite.yaml"
    suite.write_text("name: x\n")
    assert invoke_cli("suite", "run", str(suite), "--resume", str(tmp_path)).exit_code == 2
    assert invoke_cli("suite", "run", "--resume", str(tmp_path), "-o", str(tmp_path / "o")).exit_code == 2


def test_an_invalid_suite_is_refused_with_field_paths_as_json_too(tmp_path):
    suite = tmp_path / "suite.yaml"
    suite.write_text(yaml.safe_dump({"name": "bad name", "benchmarks": ["cartpole"], "agents": [], "runs_at_once": 0}))
    result = invoke_cli("suite", "run", str(suite), "--json", "-o", str(tmp_path / "out"))
    assert result.exit_code == 1
    error = json.loads(result.stdout.splitlines()[-1])["error"]
    assert error["kind"] == "bad_input" and error["message"] == f"{suite}: invalid suite"
    assert sorted(p.split(":")[0] for p in error["problems"]) == ["agents", "name", "runs_at_once"]
    assert not (tmp_path / "out").exists()


def test_a_suite_whose_run_cannot_start_names_the_run_and_starts_nothing(tmp_path):
    suite = tmp_path / "suite.yaml"
    suite.write_text(yaml.safe_dump({"name": "s", "benchmarks": ["cartpole"], "seed_key_file": "missing.key",
                                     "agents": [{"name": "r", "agent": {"kind": "random"}}]}))
    result = invoke_cli("suite", "run", str(suite), "--json", "-o", str(tmp_path / "out"))
    assert result.exit_code == 1
    (problem,) = json.loads(result.stdout.splitlines()[-1])["error"]["problems"]
    assert problem.startswith("cartpole-v1--r--r0: seed_key_file: ")
    assert not (tmp_path / "out").exists()


def test_resume_and_report_of_a_directory_that_holds_no_suite_exit_1(tmp_path):
    result = invoke_cli("suite", "run", "--resume", str(tmp_path))
    assert result.exit_code == 1 and "is not a suite directory" in result.stdout + result.stderr
    result = invoke_cli("suite", "report", str(tmp_path), "--json")
    assert result.exit_code == 1 and "suite.json: missing" in json.loads(result.stdout.splitlines()[-1])["error"]["message"]


def test_suite_report_prints_the_standings_and_writes_the_page(tmp_path: Path):
    plan = plan_suite(SuiteSpec.model_validate(SUITE), tmp_path, discover())
    SuiteDirectory(tmp_path / "suite").create("name: mini\n", "mini", tmp_path, plan)
    fill(tmp_path / "suite", ALL)
    result = invoke_cli("suite", "report", str(tmp_path / "suite"), "--html", str(tmp_path / "page.html"))
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "aggregate rank score" in result.stdout and "42.0000 ± 2.83 #1" in result.stdout
    assert (tmp_path / "page.html").read_text().startswith("<!DOCTYPE html>")
    document = json.loads(invoke_cli("suite", "report", str(tmp_path / "suite"), "--json").stdout)
    assert [s["agent"] for s in document["standings"]] == ["hc", "rnd"]


def test_suite_report_prints_names_from_the_records_as_text(tmp_path: Path):
    plan = plan_suite(SuiteSpec.model_validate(SUITE), tmp_path, discover())
    SuiteDirectory(tmp_path / "suite").create("name: mini\n", "mini", tmp_path, plan)
    fill(tmp_path / "suite", ALL)
    manifest = json.loads((tmp_path / "suite" / "suite.json").read_text())
    manifest["name"] = "[/]\x1b]0;owned\x07"
    for run in manifest["runs"]:
        run["agent"] = run["agent"].replace("hc", "[/][red]hc\x9b2J")
    (tmp_path / "suite" / "suite.json").write_text(json.dumps(manifest))
    result = invoke_cli("suite", "report", str(tmp_path / "suite"))
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "Suite [/]\\x1b]0;owned\\x07: aggregate rank score" in result.stdout and "[/][red]hc\\x9b2J" in result.stdout
    assert "\x1b" not in result.stdout and "\x9b" not in result.stdout
