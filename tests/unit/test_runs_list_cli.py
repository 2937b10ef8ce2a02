"""`runs list` before the first Run: no `runs/` directory yet lists no run, a DIR named that does not exist is a usage error."""

from __future__ import annotations

import json

from support.cli import invoke_cli


def test_runs_list_before_any_run_says_there_are_none_and_exits_0(tmp_path):
    result = invoke_cli("runs", "list", cwd=tmp_path)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "No runs in runs (it does not exist yet): `epg-orchestrate run SPEC` starts one."
    assert not (tmp_path / "runs").exists()


def test_runs_list_json_before_any_run_is_an_empty_list(tmp_path):
    result = invoke_cli("runs", "list", "--json", cwd=tmp_path)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert json.loads(result.stdout) == {"root": "runs", "runs": []}


def test_runs_list_of_an_empty_directory_says_there_are_none(tmp_path):
    result = invoke_cli("runs", "list", str(tmp_path))
    assert result.exit_code == 0, result.stdout + result.stderr
    assert result.stdout.strip() == f"No runs in {tmp_path}: `epg-orchestrate run SPEC` starts one."
    assert json.loads(invoke_cli("runs", "list", str(tmp_path), "--json").stdout) == {"root": str(tmp_path), "runs": []}


def test_runs_list_of_a_named_directory_that_does_not_exist_is_a_usage_error(tmp_path):
    result = invoke_cli("runs", "list", str(tmp_path / "typo"))
    assert result.exit_code == 2
    assert "Invalid value" in result.stdout + result.stderr and "Traceback" not in result.stdout + result.stderr


def test_runs_list_with_a_file_named_runs_is_a_usage_error(tmp_path):
    (tmp_path / "runs").write_text("not a directory")
    result = invoke_cli("runs", "list", "--json", cwd=tmp_path)
    assert result.exit_code == 2
    assert "runs is not a directory" in result.stdout + result.stderr
