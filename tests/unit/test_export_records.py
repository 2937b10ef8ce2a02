"""`runs export` from records alone: the records, their order and schema, receipts, diffs, suites; no hidden data."""

from __future__ import annotations

import io
import json
import random
import shutil
import time
import unicodedata
from pathlib import Path

import jsonschema
import pytest
from support.fake_runs import POOL_SEEDS, FakeRun, FakeSubmission, make_run

from orchestrator.kernel.program import capture_program
from orchestrator.reports.export import ProgramForm, export_records, export_schema, find_runs, write_jsonl

EXCHANGE = {"seq": 1, "time": 101.5, "method": "POST", "path": "/v1/responses", "status": 200, "refused": None, "tokens": 12,
            "request": '{"input": "read TASK.md"}', "response": "data: {}\n\n"}
TWO = [FakeSubmission(action=1, indices=[0, 1], rewards=[4.0, 6.0]),
       FakeSubmission(action=2, indices=[1, 2], rewards=[2.0, None], voided_first=True)]


@pytest.fixture
def validator() -> jsonschema.Draft202012Validator:
    schema = export_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_records_follow_the_run_in_time_and_validate_against_the_schema(tmp_path, validator):
    root = make_run(tmp_path / "run", FakeRun(submissions=TWO, relay=[EXCHANGE]))
    records = list(export_records(root, name="run"))
    assert [r["kind"] for r in records] == ["task", "submission", "model_exchange", "submission", "outcome"]
    assert [r["step"] for r in records] == [0, 1, 2, 3, 4] and {r["run"] for r in records} == {"run"}
    for record in records:
        validator.validate(record)
    task, first, exchange, second, outcome = records
    assert task["public_spec"]["id"] == "Fake-v0" and "## Public spec" in task["instructions"]
    assert task["initial_program"]["form"] == "files" and task["initial_program"]["files"][0]["path"] == "policy.py"
    assert (exchange["attempt"], exchange["request"], exchange["tokens"], exchange["error"]) == (1, EXCHANGE["request"], 12, None)
    assert second["feedback"] == json.loads((root / "workspace" / "feedback" / "s0002" / "feedback.json").read_text())
    assert outcome["assessment"]["score"] == 8.0 and outcome["validation"]["selected"] == "s0001"
    assert "feedback" not in outcome["validation"]["results"][0]  # Validation Episodes stay out of the export


def test_receipts_replay_the_budget_from_the_event_log_with_a_voided_submission_refunded(tmp_path):
    root = make_run(tmp_path / "run", FakeRun(submissions=TWO))
    receipts = [r["receipt"] for r in export_records(root, name="run") if r["kind"] == "submission"]
    assert [(r["episodes_used"], r["episodes_left"], r["submissions_left"]) for r in receipts] == [(2, 18, 7), (4, 16, 6)]
    assert [(r["score"], r["policy_failures"]) for r in receipts] == [(5.0, 0), (1.0, 1)]


def test_programs_as_diffs_chain_from_the_starting_program(tmp_path, validator):
    root = make_run(tmp_path / "run", FakeRun(submissions=TWO))
    records = list(export_records(root, name="run", program_form=ProgramForm.DIFF))
    first, second = (r["program"] for r in records if r["kind"] == "submission")
    assert first["base_digest"] == records[0]["initial_program"]["digest"] and second["base_digest"] == first["digest"]
    assert "-        return 1\n+        return 2\n" in second["diff"] and second["diff"].startswith("--- a/policy.py\n+++ b/policy.py\n")
    for record in records:
        validator.validate(record)


def test_the_schema_refuses_a_record_carrying_anything_else(tmp_path, validator):
    record = next(r for r in export_records(make_run(tmp_path / "run", FakeRun(submissions=TWO)), name="run") if r["kind"] == "submission")
    with pytest.raises(jsonschema.ValidationError):
        validator.validate({**record, "pool": [{"payload": "{}"}]})
    record["feedback"]["episodes"][0]["seed"] = 1
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(record)


def test_hidden_material_of_the_run_directory_never_appears(tmp_path):
    root = make_run(tmp_path / "run", FakeRun(submissions=TWO, relay=[EXCHANGE]))
    text = "\n".join(json.dumps(r) for form in ProgramForm for r in export_records(root, name="run", program_form=form))
    pool = json.loads((root / "private" / "pool.json").read_text())
    hidden = [str(s) for s in POOL_SEEDS] + [e["payload"] for e in pool] + [str(e["policy_seed"]) for e in pool]
    assert [value for value in hidden + ["/secret/place/seed.key", "/secret/spec-dir", "private/"] if value in text] == []


def test_a_directory_of_runs_is_found_run_by_run(tmp_path):
    for name in ("suite/cartpole/hill-climb-1", "suite/cartpole/random-1", "suite/acrobot/random-1"):
        make_run(tmp_path / name, FakeRun(submissions=TWO[:1], candidates=[0]))
    (tmp_path / "suite" / "notes").mkdir()
    found = [p.relative_to(tmp_path / "suite").as_posix() for p in find_runs(tmp_path / "suite")]
    assert found == ["acrobot/random-1", "cartpole/hill-climb-1", "cartpole/random-1"]
    assert find_runs(tmp_path / "suite" / "acrobot" / "random-1") == [tmp_path / "suite" / "acrobot" / "random-1"]


def large_programs_run(root: Path, lines: int = 50_000) -> Path:
    """A Run of two Submissions whose Programs hold a data file of `lines` lines, the second with every third line
    changed: values that repeat often, but not often enough for difflib's junk heuristic (its quadratic case)."""
    make_run(root, FakeRun(submissions=TWO))
    rng = random.Random(0)
    data = [f"{rng.randrange(lines // 99)}\n" for _ in range(lines)]
    for number in (1, 2):
        record_path = root / "submissions" / f"s{number:04d}" / "record.json"
        record = json.loads(record_path.read_text())
        staging = root / "programs" / "staging"
        shutil.copytree(root / "programs" / record["program_digest"].removeprefix("sha256:"), staging)
        if number == 2:
            data = [f"{rng.randrange(lines // 99)}\n" if i % 3 == 0 else line for i, line in enumerate(data)]
        (staging / "data.csv").write_text("".join(data))
        digest = capture_program(staging).digest
        if not (root / "programs" / digest.removeprefix("sha256:")).exists():
            staging.rename(root / "programs" / digest.removeprefix("sha256:"))
        else:
            shutil.rmtree(staging)
        record_path.write_text(json.dumps({**record, "program_digest": digest, "feedback": {**record["feedback"], "program_digest": digest}}))
    return root


def test_a_diff_of_two_50000_line_programs_is_summarised_in_bounded_time(tmp_path, validator):
    root = large_programs_run(tmp_path / "run")
    started = time.monotonic()
    records = list(export_records(root, name="run", program_form=ProgramForm.DIFF))
    seconds = time.monotonic() - started
    assert seconds < 10, f"{seconds:.1f} s"  # a complexity bound, loose for a loaded machine; bench/diff_bound.py measures it
    first, second = (r["program"] for r in records if r["kind"] == "submission")
    assert [s["path"] for s in first["summarised"]] == ["data.csv"] and "+++ b/policy.py" in first["diff"]
    (summary,) = second["summarised"]
    assert (summary["lines_before"], summary["lines_after"]) == (50_000, 50_000)
    assert 0 < summary["lines_added"] == summary["lines_removed"] <= 50_000 // 3 + 1
    assert "data.csv" not in second["diff"] and "-        return 1\n+        return 2\n" in second["diff"]
    for record in records:
        validator.validate(record)


def test_small_programs_are_still_diffed_whole_with_nothing_summarised(tmp_path):
    root = large_programs_run(tmp_path / "run", lines=300)
    second = [r["program"] for r in export_records(root, name="run", program_form=ProgramForm.DIFF) if r["kind"] == "submission"][1]
    assert second["summarised"] == [] and "--- a/data.csv\n+++ b/data.csv\n" in second["diff"]


def test_control_and_formatting_characters_are_escaped_in_the_export_and_read_back_unchanged(tmp_path):
    hostile = "a\x1b[2J b\x9b31m c\x85 d\u202egnp.exe e\u2028f\x7f"
    root = make_run(tmp_path / "run", FakeRun(submissions=TWO, relay=[{**EXCHANGE, "response": hostile}]))
    handle = io.StringIO()
    write_jsonl(export_records(root, name="run"), handle)
    text = handle.getvalue()
    assert [c for c in text if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") and c != "\n"] == []
    assert "\\u009b31m" in text and "\\u202e" in text and "\\u001b[2J" in text
    (exchange,) = [json.loads(line) for line in text.splitlines() if '"model_exchange"' in line]
    assert exchange["response"] == hostile
