"""Run and suite directories someone else wrote: links, a traversing digest, FIFOs and a 1 GB file give clear errors and
nothing outside the directory is read (a secret planted beside it never appears) or written (a file a log links to)."""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.cli import invoke_cli
from support.fake_runs import FakeRun, FakeSubmission, make_run, write_program
from test_replay_comparison import KEY, RecordedSandbox
from test_suite_report import SUITE, fill

from orchestrator.images.catalogue import discover
from orchestrator.kernel.program import ProgramError
from orchestrator.records import safe_read, schema
from orchestrator.reports import run_records
from orchestrator.reports.export import ProgramForm, export_records, write_jsonl
from orchestrator.reports.replay import ReplayError, replay
from orchestrator.reports.report import report_json, write_html_report
from orchestrator.reports.rerun import replay_run
from orchestrator.reports.run_records import load_run
from orchestrator.suite import scheduler as suite_scheduler
from orchestrator.suite.directory import SuiteDirectory
from orchestrator.suite.report import build_report
from orchestrator.suite.spec import SuiteSpec, plan_suite

SECRET = "HOST-SECRET-4f1c"
TWO = [FakeSubmission(action=1, indices=[0, 1], rewards=[4.0, 6.0]), FakeSubmission(action=2, indices=[1, 2], rewards=[2.0, 3.0])]


def finishes(call: Callable[[], Any], seconds: float = 10.0) -> Any:
    """call() in a thread; its result, or a failure when it is still going after seconds (blocked on a FIFO, say)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # handed to the test
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still reading after {seconds} s"
    if "error" in box:
        raise box["error"]
    return box["value"]


def exported(root: Path, form: ProgramForm = ProgramForm.FILES) -> str:
    lines: list[str] = []

    class Sink:
        def write(self, text: str) -> None:
            lines.append(text)

    write_jsonl(export_records(root, name="run", program_form=form), Sink())
    return "".join(lines)


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    root = make_run(tmp_path / "run", FakeRun(submissions=TWO))
    (root / "task.md").write_text((root / "workspace" / "TASK.md").read_text())
    return root


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "secret.txt"
    path.write_text(f"## Public spec\n\n```json\n{{\"id\": \"{SECRET}\"}}\n```\n{SECRET}\n")
    return path


def record_of(root: Path, submission: str) -> dict[str, Any]:
    return json.loads((root / "submissions" / submission / "record.json").read_text())


# links -------------------------------------------------------------------------------
def test_a_task_md_that_is_a_link_is_not_exported_but_named(run_dir, secret):
    (run_dir / "task.md").unlink()
    (run_dir / "task.md").symlink_to(secret)
    text = exported(run_dir)
    assert SECRET not in text
    task = json.loads(text.splitlines()[0])
    assert task["instructions"] == "" and task["public_spec"] == {}
    assert f"{run_dir}/task.md: a symbolic link (not followed)" in load_run(run_dir).problems


def test_a_program_store_that_is_a_link_is_not_read(run_dir, tmp_path):
    outside = tmp_path / "elsewhere"
    shutil.copytree(run_dir / "programs", outside)
    for policy in outside.glob("*/policy.py"):
        policy.write_text(policy.read_text() + f"# {SECRET}\n")
    shutil.rmtree(run_dir / "programs")
    (run_dir / "programs").symlink_to(outside)
    text = exported(run_dir) + exported(run_dir, ProgramForm.DIFF) + json.dumps(report_json(run_dir))
    assert SECRET not in text
    run = load_run(run_dir)
    with pytest.raises(ProgramError, match="programs: a symbolic link"):
        run.program(run.submissions[0].program_digest)


def test_a_submission_directory_or_record_that_is_a_link_is_a_marked_row(run_dir, tmp_path):
    shutil.move(run_dir / "submissions" / "s0002", tmp_path / "s0002")
    (run_dir / "submissions" / "s0002").symlink_to(tmp_path / "s0002")
    (run_dir / "submissions" / "s0001" / "record.json").unlink()
    (run_dir / "submissions" / "s0001" / "record.json").symlink_to(tmp_path / "s0002" / "record.json")
    rows = {s.id: s.error for s in load_run(run_dir).submissions}
    assert rows == {"s0001": "a symbolic link (not followed)", "s0002": "a symbolic link (not followed)"}


def test_a_traversing_program_digest_is_never_a_path_for_export_report_or_replay(run_dir, tmp_path):
    write_program(tmp_path / "outside", 1)
    (tmp_path / "outside" / "policy.py").write_text(f"def make_policy(context):\n    return '{SECRET}'\n")
    record = record_of(run_dir, "s0001")
    record["program_digest"] = "sha256:../../outside"
    (run_dir / "submissions" / "s0001" / "record.json").write_text(json.dumps(record))
    validation = json.loads((run_dir / "validation.json").read_text())
    validation["results"][0]["program_digest"] = "sha256:../../outside"
    (run_dir / "validation.json").write_text(json.dumps(validation))
    text = exported(run_dir) + exported(run_dir, ProgramForm.DIFF) + json.dumps(report_json(run_dir))
    assert SECRET not in text
    run = load_run(run_dir)
    assert "is not a Program digest" in (run.submission("s0001").error or "")
    with pytest.raises(ReplayError, match="its record cannot be read"):
        replay(run, "s0001", RecordedSandbox(run_dir), KEY)
    with pytest.raises(ReplayError, match="'sha256:../../outside' cannot be read"):
        replay(run, "validation", RecordedSandbox(run_dir), KEY)


def test_the_default_report_page_is_not_written_through_a_link(run_dir, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (run_dir / "report.html").symlink_to(victim)
    with pytest.raises(schema.RecordError, match="report.html: a symbolic link"):
        write_html_report(run_dir, run_dir / "report.html")
    os.link(victim, tmp_path / "second-name")
    (run_dir / "report.html").unlink()
    os.link(victim, run_dir / "report.html")
    with pytest.raises(schema.RecordError, match="hard link"):
        write_html_report(run_dir, run_dir / "report.html")
    assert victim.read_text() == "keep me\n"


# FIFOs and size ------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["run.json", "events.jsonl", "task.md", "submissions/s0001/record.json", "validation.json"])
def test_a_fifo_in_a_run_directory_is_refused_without_blocking(run_dir, name):
    (run_dir / name).unlink()
    os.mkfifo(run_dir / name)
    if name == "run.json":
        with pytest.raises(schema.RecordError, match="run.json: not a regular file but a FIFO"):
            finishes(lambda: load_run(run_dir))
        return
    run = finishes(lambda: load_run(run_dir))
    found = list(run.problems) + [f"{s.id}: {s.error}" for s in run.submissions if s.error]
    assert any("not a regular file but a FIFO" in line for line in found), found
    finishes(lambda: exported(run_dir))


def test_a_fifo_for_a_relay_record_ends_the_export_with_its_name(run_dir):
    (run_dir / "relay").mkdir()
    os.mkfifo(run_dir / "relay" / "exchanges.1.jsonl")
    with pytest.raises(schema.RecordError, match="exchanges.1.jsonl: not a regular file but a FIFO"):
        finishes(lambda: exported(run_dir))


@pytest.mark.parametrize("name", ["events.jsonl", "submissions/s0002/record.json", "task.md"])
def test_a_1_gb_sparse_file_is_refused_by_its_size_unread(run_dir, name):
    with open(run_dir / name, "r+b") as handle:
        handle.truncate(1 << 30)
    run = finishes(lambda: load_run(run_dir), seconds=5.0)
    found = list(run.problems) + [f"{s.id}: {s.error}" for s in run.submissions if s.error]
    assert any(f"larger than {safe_read.MAX_TEXT_BYTES if name == 'task.md' else safe_read.MAX_RECORD_BYTES} bytes" in line
               for line in found), found


def test_a_relay_record_line_past_its_bound_is_skipped_and_the_rest_read(run_dir, monkeypatch):
    monkeypatch.setattr(safe_read, "MAX_RELAY_LINE_BYTES", 1000)
    (run_dir / "relay").mkdir()
    entry = {"seq": 2, "time": 101.0, "method": "POST", "path": "/v1/responses", "status": 200, "request": "{}", "response": "ok"}
    (run_dir / "relay" / "exchanges.1.jsonl").write_text(json.dumps({**entry, "seq": 1, "request": "x" * 5000}) + "\n" + json.dumps(entry) + "\n")
    exchanges = [json.loads(line) for line in exported(run_dir).splitlines() if '"model_exchange"' in line]
    assert [e["seq"] for e in exchanges] == [2]


# the commands ----------------------------------------------------------------------------
def test_runs_show_prints_record_text_as_text(run_dir):
    manifest = json.loads((run_dir / "run.json").read_text())
    manifest["terminal_reason"] = "[/]\x1b[2J\x9b31m\u202e"
    (run_dir / "run.json").write_text(json.dumps(manifest))
    record = record_of(run_dir, "s0002")
    (run_dir / "submissions" / "s0002" / "record.json").write_text(json.dumps({**record, "selector": "[/][bold]x"}))
    result = invoke_cli("runs", "show", str(run_dir))
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "terminal reason: [/]\\x1b[2J\\x9b31m\\u202e" in result.stdout + result.stderr
    assert "[/][bold]x" in result.stdout + result.stderr and "\x1b" not in result.stdout + result.stderr and "\x9b" not in result.stdout + result.stderr


def test_runs_export_of_a_run_whose_relay_folder_is_a_link_fails_naming_it(run_dir, tmp_path):
    (tmp_path / "relay").mkdir()
    (tmp_path / "relay" / "exchanges.1.jsonl").write_text(json.dumps({"seq": 1, "time": 1.0, "request": SECRET}) + "\n")
    (run_dir / "relay").symlink_to(tmp_path / "relay")
    result = invoke_cli("runs", "export", str(run_dir))
    assert result.exit_code == 1 and SECRET not in result.stdout + result.stderr
    assert "relay: a symbolic link (not followed)" in result.stdout + result.stderr


# suites ------------------------------------------------------------------------------------
@pytest.fixture
def suite_dir(tmp_path: Path) -> Path:
    plan = plan_suite(SuiteSpec.model_validate(SUITE), tmp_path, discover())
    SuiteDirectory(tmp_path / "suite").create("name: mini\n", "mini", tmp_path, plan)
    return tmp_path / "suite"


@pytest.mark.parametrize(("field", "value"), [("run_dir", "../../elsewhere"), ("spec", "/etc/passwd"), ("name", "../x")])
def test_a_suite_json_whose_paths_leave_the_suite_is_refused(suite_dir, field, value):
    manifest = json.loads((suite_dir / "suite.json").read_text())
    manifest["runs"][1][field] = value
    (suite_dir / "suite.json").write_text(json.dumps(manifest))
    with pytest.raises(schema.RecordError, match=r"suite.json: runs\.1"):
        build_report(suite_dir)
    result = invoke_cli("suite", "report", str(suite_dir))
    assert result.exit_code == 1 and "runs.1" in result.stdout + result.stderr


def test_a_suite_run_directory_that_is_a_link_is_reported_not_read(suite_dir, tmp_path):
    fill(suite_dir, {"cartpole-v1--hc--r0": 40.0})
    outside = tmp_path / "outside-run"
    shutil.move(suite_dir / "runs" / "cartpole-v1--hc--r0", outside)
    manifest = json.loads((outside / "run.json").read_text())
    (outside / "run.json").write_text(json.dumps({**manifest, "terminal_reason": SECRET}))
    (suite_dir / "runs" / "cartpole-v1--hc--r0").symlink_to(outside)
    report = build_report(suite_dir)
    assert SECRET not in json.dumps(report.to_json())
    row = next(r for r in report.runs if r.name == "cartpole-v1--hc--r0")
    assert row.problems == ("runs/cartpole-v1--hc--r0: a symbolic link (not followed)",) and row.score is None


class NoRun:
    """Stands for subprocess.Popen in the suite scheduler: records the command, starts nothing, ends at once."""

    started: list[list[str]] = []

    def __init__(self, argv: list[str], **kwargs: Any) -> None:
        NoRun.started.append(argv)
        self.pid, self.returncode = 4242, 1

    def poll(self) -> int:
        return 1


@pytest.mark.parametrize("log", [".log", ".json"])
def test_suite_logs_that_are_links_are_not_written_through_and_the_run_is_not_started(suite_dir, tmp_path, monkeypatch, log):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    monkeypatch.setattr(suite_scheduler.subprocess, "Popen", NoRun)
    monkeypatch.setattr(suite_scheduler, "POLL_S", 0.0)
    NoRun.started = []
    names = [run["name"] for run in SuiteDirectory(suite_dir).read_manifest()["runs"]]
    (suite_dir / "logs" / f"{names[0]}{log}").symlink_to(victim)
    seen: list[tuple[str, dict]] = []
    outcomes = suite_scheduler.SuiteScheduler(SuiteDirectory(suite_dir), suite_scheduler.SchedulerOptions(),
                                        lambda kind, fields: seen.append((kind, fields))).execute()
    assert victim.read_text() == "keep me\n"
    refused = next(o for o in outcomes if o.name == names[0])
    assert refused.phase == "unreadable" and f"logs/{names[0]}{log}: a symbolic link (not followed)" in (refused.error or "")
    assert len(NoRun.started) == len(names) - 1 and not any(names[0] in " ".join(argv) for argv in NoRun.started)


def test_safe_writing_refuses_a_fifo_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(schema.RecordError, match="FIFO"):
        finishes(lambda: safe_read.open_for_writing(tmp_path, "pipe", append=False))


def test_a_path_from_a_record_that_leaves_its_directory_is_refused(tmp_path):
    for relative in ("../x", "/etc/passwd", "a/../../b", "a//b"):
        with pytest.raises(schema.RecordError, match="not a plain relative path"):
            safe_read.read_bytes(tmp_path, relative, 10)


def test_a_replay_refuses_a_spec_or_a_seed_key_file_that_is_a_fifo_before_it_needs_an_engine(run_dir, tmp_path):
    os.mkfifo(run_dir / "spec.yaml")
    with pytest.raises(schema.RecordError, match="spec.yaml: not a regular file but a FIFO"):
        finishes(lambda: replay_run(run_dir, ["s0001"]))
    (run_dir / "spec.yaml").unlink()
    (run_dir / "spec.yaml").write_text("benchmark: CartPole-v1\nagent:\n  kind: hill-climb\n")
    os.mkfifo(tmp_path / "key-pipe")
    manifest = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**manifest, "seed_key_file": str(tmp_path / "key-pipe")}))
    with pytest.raises(ReplayError, match="key-pipe: the seed key file run.json names is not a regular file"):
        finishes(lambda: replay_run(run_dir, ["s0001"]))


def test_the_submission_records_and_relay_records_of_a_run_are_bounded_together(run_dir, monkeypatch):
    size = len((run_dir / "submissions" / "s0001" / "record.json").read_bytes())
    monkeypatch.setattr(run_records, "MAX_SUBMISSION_RECORDS_BYTES", size)
    rows = {s.id: s.error for s in load_run(run_dir).submissions}
    assert rows["s0001"] is None and "not read: the Submission records before it hold" in (rows["s0002"] or "")
    (run_dir / "relay").mkdir()
    line = json.dumps({"seq": 1, "time": 101.0, "request": "{}", "response": "ok"}) + "\n"
    for attempt in (1, 2):
        (run_dir / "relay" / f"exchanges.{attempt}.jsonl").write_text(line * 3)
    monkeypatch.setattr(safe_read, "MAX_RELAY_BYTES", len(line) * 4)
    exchanges = [json.loads(text) for text in exported(run_dir).splitlines() if '"model_exchange"' in text]
    assert [e["attempt"] for e in exchanges] == [1, 1, 1, 2]
