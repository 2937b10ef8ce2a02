"""Records read and written through their models: a run and a suite directory written before the models existed still
read, only a torn last line of an event log is tolerated, the event log decides the phase, and progress kinds are a
closed set."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.cli import invoke_cli

from orchestrator.cli.run import _Reporter as RunReporter
from orchestrator.cli.suite import _Reporter as SuiteReporter
from orchestrator.kernel.session import SessionEvent
from orchestrator.records import events as ev
from orchestrator.records import schema
from orchestrator.records.events import EventLogError, EventType, Phase, TerminalReason
from orchestrator.records.models import FeedbackDocument, RunManifest, SubmissionRecord, parse
from orchestrator.records.progress import RunProgress, SuiteProgress
from orchestrator.records.run_dir import RunDirectory
from orchestrator.reports.run_records import load_run
from orchestrator.suite.directory import SuiteDirectory, is_done, run_phase
from orchestrator.suite.report import build_report

# Written by `epg-orchestrate run` and `suite run` at commit a181597, before the models: a scripted CartPole Run
# (two Submissions, Validation, Assessment) and a one-Run suite.
DATA = Path(__file__).resolve().parents[1] / "data" / "records-a181597"


@pytest.fixture
def old_run(tmp_path: Path) -> Path:
    return Path(shutil.copytree(DATA / "run", tmp_path / "run"))


@pytest.fixture
def old_suite(tmp_path: Path) -> Path:
    return Path(shutil.copytree(DATA / "suite", tmp_path / "suite"))


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# older records ----------------------------------------------------------------------------------------------------
def test_a_run_directory_written_before_the_models_reads_through_them(old_run):
    records = RunDirectory(old_run)
    events = records.events()
    assert [type(e) for e in events] == [
        ev.Created, ev.Started, ev.Prestart, ev.AgentStarted, ev.SubmissionAdmitted, ev.SubmissionCompleted,
        ev.SubmissionAdmitted, ev.SubmissionCompleted, ev.Finished, ev.AgentExited, ev.AgentPhaseEnded, ev.Prestart,
        ev.ValidationDone, ev.Prestart, ev.AssessmentDone]
    written = lines(old_run / "events.jsonl")
    written[1]["sandbox"] = written[1].pop("session")  # the sandbox's id, which logs of then called session
    assert [e.to_json() for e in events] == written  # nothing lost or added
    assert isinstance(events[1], ev.Started) and events[1].sandbox == "8e656b42cc09"
    admitted = events[4]
    assert isinstance(admitted, ev.SubmissionAdmitted)
    assert (admitted.id, admitted.selector, admitted.indices) == ("s0001", "0:2", [0, 1])
    assert events[10].reason is TerminalReason.FINISH_CALLED  # written as "finished", before the reasons had their own values

    manifest = records.read_manifest()
    assert manifest.to_json() == json.loads((old_run / "run.json").read_text())
    assert (manifest.benchmark, manifest.agent, manifest.phase, manifest.seed) == ("CartPole-v1", "scripted", Phase.DONE, 0)
    assert manifest.terminal_reason == "finished" and manifest.reason is TerminalReason.FINISH_CALLED
    assert manifest.final is not None and manifest.final.submission_id == "s0001" and manifest.final.is_initial_program is True
    assert manifest.assessment is not None and (manifest.assessment.score, manifest.assessment.episodes) == (43.5, 2)
    assert manifest.budget is not None and (manifest.budget.episodes, manifest.budget.max_submissions) == (4, 2)
    assert manifest.images is not None and manifest.images["environment"].tag.startswith("epg/env-cartpole:")
    assert manifest.metric is not None and manifest.metric.direction == "maximize"
    assert manifest.validation is not None and manifest.validation.scores == {"s0001": 36.5, "s0002": 26.5}

    for submission in ("s0001", "s0002"):
        path = old_run / "submissions" / submission / "record.json"
        record = parse(SubmissionRecord, path, schema.read_record(path, schema.SUBMISSION))
        assert record.id == submission and record.to_json() == json.loads(path.read_text())
        published = old_run / "workspace" / "feedback" / submission / "feedback.json"
        assert parse(FeedbackDocument, published, json.loads(published.read_text())) == record.feedback
    run = load_run(old_run)
    assert run.problems == () and [s.error for s in run.submissions] == [None, None]


def test_a_suite_directory_written_before_the_models_reads_through_them(old_suite):
    directory = SuiteDirectory(old_suite)
    manifest = directory.read_manifest()
    (planned,) = manifest.runs
    assert (planned.name, planned.benchmark, planned.agent, planned.repeat) == ("cartpole-v1--rnd--r0", "CartPole-v1", "rnd", 0)
    assert manifest.to_json() == json.loads((old_suite / "suite.json").read_text())
    events = directory.events()
    assert [type(e) for e in events] == [ev.SuiteStarted, ev.RunStarted, ev.RunEnded, ev.SuiteEnded]
    assert [e.to_json() for e in events] == lines(old_suite / "suite-events.jsonl")
    assert run_phase(directory.run_dir(planned)) == "done"
    (row,) = build_report(old_suite).runs
    assert (row.phase, row.terminal_reason, row.score, row.problems) == ("done", "finished", 31.0, ())


# the event log ------------------------------------------------------------------------------------------------------
def test_the_started_event_writes_the_sandbox_id_as_sandbox_and_reads_it_under_its_former_name_session():
    started = ev.Started(owner="box:1", sandbox="0123456789ab", time=1.0)
    assert started.to_json() == {"schema": "epg.event/1", "type": "started", "owner": "box:1", "sandbox": "0123456789ab",
                                 "time": 1.0}
    assert ev.RUN_EVENT.validate_python(started.to_json()) == started
    former = {"schema": "epg.event/1", "type": "started", "owner": "box:1", "session": "0123456789ab", "time": 1.0}
    assert ev.RUN_EVENT.validate_python(former) == started


def test_a_torn_last_line_of_the_event_log_is_skipped(old_run):
    whole = (old_run / "events.jsonl").read_text()
    (old_run / "events.jsonl").write_text(whole + '{"schema": "epg.event/1", "type": "submission_adm')
    assert len(RunDirectory(old_run).events()) == len(whole.splitlines())


@pytest.mark.parametrize(("bad", "reason"), [
    ("{not json", "not JSON"),
    ('["a list"]', "not a JSON object but a list"),
    ('{"type": "submission_admited", "id": "s0009"}', "not an event (type: 'submission_admited' is not one of its kinds)"),
    ('{"type": "submission_completed", "id": "s0009", "score": "high"}', "not an event (submission_completed.score: Input should be a valid number"),
])
def test_a_corrupt_line_that_is_not_the_last_is_reported_with_its_number(old_run, bad, reason):
    whole = (old_run / "events.jsonl").read_text().splitlines()
    (old_run / "events.jsonl").write_text("\n".join([*whole[:3], bad, *whole[3:]]) + "\n")
    with pytest.raises(EventLogError) as caught:
        RunDirectory(old_run).events()
    assert caught.value.line == 4 and str(caught.value).startswith(f"{old_run / 'events.jsonl'}: line 4: {reason}")
    assert any("events.jsonl: line 4: " in problem for problem in load_run(old_run).problems)


def test_a_corrupt_last_line_that_ends_with_its_newline_is_not_a_torn_one(old_run):
    with open(old_run / "events.jsonl", "a") as log:
        log.write('{"type": "created", "time": "yesterday"}\n')
    with pytest.raises(EventLogError, match="line 16: not an event"):
        RunDirectory(old_run).events()


def test_a_corrupt_line_of_a_suite_log_is_reported_and_a_torn_last_one_skipped(old_suite):
    whole = (old_suite / "suite-events.jsonl").read_text()
    (old_suite / "suite-events.jsonl").write_text(whole + '{"type": "run_end')
    assert len(SuiteDirectory(old_suite).events()) == 4
    (old_suite / "suite-events.jsonl").write_text('{"type": "run_started"}\n' + whole)
    with pytest.raises(EventLogError, match="suite-events.jsonl: line 1: not an event"):
        SuiteDirectory(old_suite).events()


def test_an_event_of_no_known_kind_is_not_appended(tmp_path):
    records = RunDirectory(tmp_path)
    with pytest.raises(ValueError, match="submission_admited"):
        records.append_event("submission_admited", id="s0001")
    with pytest.raises(ValueError, match="indices"):
        records.append_event(EventType.SUBMISSION_ADMITTED, id="s0001", indices="0:2")
    assert not records.events_path.exists()


# the phase ----------------------------------------------------------------------------------------------------------
def test_the_event_log_decides_the_phase_when_a_crash_left_the_manifest_behind(tmp_path):
    records = RunDirectory(tmp_path / "run")
    records.root.mkdir()
    records.update_manifest(benchmark="CartPole-v1", phase=Phase.AGENT)
    records.append(ev.Created())
    # The agent phase's end is logged, then the orchestrator dies before run.json says so.
    records.append(ev.AgentPhaseEnded(terminal_reason=TerminalReason.FINISH_CALLED))
    assert json.loads(records.manifest_path.read_text())["phase"] == "agent"
    manifest = records.read_manifest()
    assert (manifest.phase, manifest.reason) == (Phase.VALIDATION, TerminalReason.FINISH_CALLED)
    assert run_phase(records.root) == "validation"  # what `suite run` shows
    shown = invoke_cli("runs", "show", str(records.root), "--json")
    assert shown.exit_code == 0 and shown.json()["manifest"]["phase"] == "validation"
    assert shown.json()["manifest"]["terminal_reason"] == "finish_called"
    records.append(ev.ValidationDone(selected="s0001"))
    assert records.read_manifest().phase is Phase.ASSESSMENT
    records.append(ev.AssessmentDone(score=1.0))
    assert records.read_manifest().phase is Phase.DONE
    assert not is_done(records.root)  # run.json is behind: `suite run` resumes the Run, which catches run.json up
    records.update_manifest(wall_seconds=1.0)  # a write sets only what it is given
    assert json.loads(records.manifest_path.read_text())["phase"] == "agent"


def test_nothing_selected_ends_the_run_at_validation_and_a_manifest_ahead_of_its_log_keeps_its_phase(tmp_path):
    records = RunDirectory(tmp_path)
    records.update_manifest(phase=Phase.VALIDATION, terminal_reason=TerminalReason.EXITED_WITHOUT_FINISH)
    records.append(ev.AgentPhaseEnded(terminal_reason=TerminalReason.EXITED_WITHOUT_FINISH))
    records.append(ev.ValidationDone(selected=None))
    assert records.read_manifest().phase is Phase.DONE
    other = RunDirectory(tmp_path / "old")
    other.root.mkdir()
    other.update_manifest(phase=Phase.DONE)  # a log of before the phase events (or a partial one) says less
    other.append(ev.Created())
    assert other.read_manifest().phase is Phase.DONE


@pytest.mark.parametrize(("manifest", "reason"), [
    ({"phase": "somewhere"}, "malformed record: phase: Input should be 'agent', 'validation', 'assessment' or 'done'"),
    ({"assessment": {"score": "high"}}, "malformed record: assessment.score: Input should be a valid number"),
    ({"phase": "done", "colour": "red"}, "malformed record: colour: Extra inputs are not permitted"),
])
def test_a_manifest_field_that_is_not_as_the_model_says_is_refused_in_one_line(tmp_path, manifest, reason):
    (tmp_path / "run.json").write_text(json.dumps({"schema": "epg.run/1", **manifest}))
    with pytest.raises(schema.RecordError) as caught:
        RunDirectory(tmp_path).read_manifest()
    assert str(caught.value) == f"{tmp_path / 'run.json'}: {reason}"
    listed = invoke_cli("runs", "list", str(tmp_path.parent), "--json")
    assert listed.exit_code == 0
    assert next(row for row in listed.json()["runs"] if row["run"] == tmp_path.name)["error"] == reason


# the closed sets ----------------------------------------------------------------------------------------------------
def test_no_terminal_reason_is_an_event_type_and_the_former_ones_still_mean_what_they_meant():
    assert {r.value for r in TerminalReason} & {t.value for t in EventType} == set()
    assert ev.terminal_reason("finished") is TerminalReason.FINISH_CALLED
    assert ev.terminal_reason("agent_exited") is TerminalReason.EXITED_WITHOUT_FINISH
    assert ev.terminal_reason("agent_time_limit") is TerminalReason.AGENT_TIME_LIMIT
    assert ev.terminal_reason("[/]\x1b[2J") is None
    assert RunManifest.model_validate({"terminal_reason": "[/]\x1b[2J"}).terminal_reason == "[/]\x1b[2J"  # kept, as text


def test_every_event_type_the_kernel_replays_is_an_event_type():
    assert {e.value for e in SessionEvent} <= {t.value for t in EventType}


def test_an_unknown_progress_kind_is_refused_not_dropped():
    for quiet in (True, False):
        with pytest.raises(ValueError, match="'phse' is not a valid RunProgress"):
            RunReporter(quiet=quiet).notify("phse", {"phase": "agent"})
    with pytest.raises(ValueError, match="progress 'submission_voided' without reason"):
        RunReporter(quiet=True).notify(RunProgress.SUBMISSION_VOIDED, {"id": "s0001"})
    with SuiteReporter(live=False) as reporter:
        with pytest.raises(ValueError, match="'progres' is not a valid SuiteProgress"):
            reporter.notify("progres", {"runs": []})
        reporter.notify(SuiteProgress.PROGRESS, {"runs": []})


def test_every_run_progress_kind_is_shown(capsys):
    class Status:
        episodes_left, episodes_total, submissions_left, submissions_used = 3, 4, 1, 1

    reporter = RunReporter(quiet=False)
    fields = {
        RunProgress.NOTE: {"message": "a note"}, RunProgress.PHASE: {"phase": "validation"},
        RunProgress.SUBMISSION_STARTED: {"id": "s0001", "episodes": 2},
        RunProgress.SUBMISSION_COMPLETED: {"id": "s0001", "score": 2.5, "status": Status(), "direction": "maximize"},
        RunProgress.SUBMISSION_VOIDED: {"id": "s0002", "reason": "why"}, RunProgress.FINISHED: {"candidates": ["s0001"]},
        RunProgress.VALIDATED: {"id": "s0001", "score": 1.5}, RunProgress.ASSESSED: {"score": 0.5},
    }
    assert set(fields) == set(RunProgress)
    for kind, given in fields.items():
        reporter.notify(kind, given)
    shown = capsys.readouterr().err
    for text in ("a note", "phase: validation", "s0001  score      2.500", "s0002 voided: why", "candidates s0001",
                 "validation: s0001 scored 1.500", "assessment: 0.500"):
        assert text in shown


def test_the_relay_totals_a_run_records_fit_the_manifest():
    from orchestrator.relay.server import RelayCounters

    counts = RelayCounters(requests=3, tokens=120, limit_reached="tokens: 100 allowed").to_json()
    manifest = RunManifest().updated(relay=counts)
    assert manifest.relay is not None and manifest.relay.limit_reached == "tokens: 100 allowed"
    assert manifest.to_json()["relay"] == counts
