"""Readers of records through the CLI (`runs list`, `runs show`, `run --resume`) survive partial and corrupt files.

Each command runs in this process through typer's runner: an exception escaping a reader fails the test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from support.cli import invoke_cli


def make_runs(root: Path) -> None:
    good = root / "good"
    (good / "submissions" / "s0001").mkdir(parents=True)
    (good / "run.json").write_text(json.dumps({"schema": "epg.run/1", "benchmark": "CartPole-v1", "agent": "scripted", "phase": "done",
                                               "terminal_reason": "finished", "assessment": {"score": 12.5},
                                               "final": {"submission_id": "s0001", "program_digest": "sha256:ab"},
                                               "validation": {"scores": {"s0001": 11.0}}}))
    (good / "submissions" / "s0001" / "record.json").write_text(json.dumps({
        "schema": "epg.submission/1", "id": "s0001", "selector": "0:4", "program_digest": "sha256:" + "ab" * 32,
        "feedback": {"score": 9.5, "episodes": [{"failure": None}, {"failure": "timeout"}]}}))
    (good / "submissions" / "s0002").mkdir()
    (good / "submissions" / "s0002" / "record.json").write_text(json.dumps({"schema": "epg.submission/1", "id": "s0002", "selector": "4:8"}))
    (good / "submissions" / "s0003").mkdir()
    (good / "submissions" / "s0003" / "record.json").write_text('{"id": "s0003", "feedb')
    (good / "submissions" / "s0004").mkdir()
    (good / "submissions" / "s0004" / "record.json").write_text(json.dumps({"id": "s0004", "feedback": {"score": "high", "episodes": []}}))
    (root / "corrupt").mkdir()
    (root / "corrupt" / "run.json").write_text('{"benchmark": "CartPole-v1", "pha')
    (root / "list").mkdir()
    (root / "list" / "run.json").write_text("[1, 2]")
    (root / "started").mkdir()
    (root / "started" / "events.jsonl").write_text("")
    (root / "foreign").mkdir()
    (root / "foreign" / "run.json").write_text(json.dumps({"schema": "epg.evaluation/1"}))
    (root / "not-a-run").mkdir()


def test_runs_list_marks_unreadable_run_directories_and_lists_the_rest(tmp_path):
    make_runs(tmp_path)
    result = invoke_cli("runs", "list", str(tmp_path), "--json")
    assert result.exit_code == 0, result.stderr
    rows = {row["run"]: row for row in result.json()["runs"]}
    assert set(rows) == {"good", "corrupt", "list", "started", "foreign"}
    assert rows["good"]["error"] is None and rows["good"]["assessment_score"] == 12.5 and rows["good"]["phase"] == "done"
    assert rows["corrupt"]["error"].startswith("not JSON (1:")
    assert rows["list"]["error"] == "not a JSON object but a list"
    assert rows["started"]["error"] == "no run.json yet (a Run that never started)"
    assert rows["foreign"]["error"] == "schema 'epg.evaluation/1', expected 'epg.run/1'"
    text = invoke_cli("runs", "list", str(tmp_path))
    assert text.exit_code == 0
    assert "unreadable: not JSON" in text.stdout and "12.500" in text.stdout


def test_runs_show_marks_partial_and_corrupt_records(tmp_path):
    make_runs(tmp_path)
    result = invoke_cli("runs", "show", str(tmp_path / "good"), "--json")
    assert result.exit_code == 0, result.stderr
    document = result.json()
    assert document["manifest"]["terminal_reason"] == "finished"
    rows = {row["id"]: row for row in document["submissions"]}
    assert rows["s0001"] == {"id": "s0001", "selector": "0:4", "score": 9.5, "policy_failures": 1,
                             "program_digest": "sha256:" + "ab" * 32, "error": None}
    assert rows["s0002"] == {"id": "s0002", "error": "partial record: no 'feedback'"}
    assert rows["s0003"]["error"].startswith("not JSON (1:")
    assert rows["s0004"]["error"].startswith("malformed record: ")
    text = invoke_cli("runs", "show", str(tmp_path / "good"))
    assert text.exit_code == 0
    assert "unreadable: partial record" in text.stdout and "assessment score: 12.5000" in text.stdout


@pytest.mark.parametrize(
    ("directory", "message"),
    [("corrupt", "run.json: not JSON (1:"), ("list", "run.json: not a JSON object but a list"),
     ("not-a-run", "is not a run directory (it holds no run.json)")],
)
def test_runs_show_of_an_unreadable_run_is_one_line_and_exit_1(tmp_path, directory, message):
    make_runs(tmp_path)
    result = invoke_cli("runs", "show", str(tmp_path / directory))
    assert result.exit_code == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and message in line


def test_resume_of_a_run_with_a_corrupt_run_json_exits_1(tmp_path):
    make_runs(tmp_path)
    run_dir = tmp_path / "corrupt"
    (run_dir / "events.jsonl").write_text("")
    (run_dir / "spec.yaml").write_text(yaml.safe_dump({"benchmark": "CartPole-v1", "agent": {"kind": "hill-climb"}}))
    result = invoke_cli("run", "--resume", str(run_dir))
    assert result.exit_code == 1
    (line,) = result.stderr.strip().splitlines()
    assert "run.json: not JSON (1:" in line
