"""The Run driver ends a phase with its event before the manifest's phase: an orchestrator killed between the two
leaves a run directory that reads at the phase the event log records, and that a resume catches up (`catch_up`)
without starting another agent or evaluating the phase again; a phase whose results are gone is run again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_host_api import POLICY, FakeSandbox

from orchestrator.kernel.program import capture_program
from orchestrator.kernel.session import SessionState
from orchestrator.records import events as ev
from orchestrator.records.events import Phase, TerminalReason
from orchestrator.records.run_dir import RunDirectory
from orchestrator.run.driver import RunDriver, RunOptions, budget_of, catch_up
from orchestrator.run.seed_key import SeedKey
from orchestrator.run.spec import RunSpec


class Killed(Exception):
    """Stands for the orchestrator dying where it is raised."""


class PoolStub:
    def expect(self, episodes: int) -> None:
        pass

    def resize(self, target: int) -> None:
        pass

    def ready_count(self) -> int:
        return 0


class PhasedSandbox(FakeSandbox):
    """The Host API tests' FakeSandbox with the container pool control the driver's phases call."""

    container_pool = PoolStub()


def agent_phase_over(tmp_path: Path) -> tuple[RunDriver, SessionState]:
    """A driver whose run directory holds one completed Submission the agent named a candidate, the agent phase ended."""
    spec = RunSpec.model_validate({"benchmark": "CartPole-v1", "agent": {"kind": "hill-climb"},
                                   "validation": {"episodes": 2}, "assessment": {"episodes": 2}})
    driver = RunDriver(RunOptions(spec=spec, spec_text="", spec_dir=tmp_path, run_dir=tmp_path / "run"), lambda kind, fields: None)
    driver._seed_key = SeedKey(key=b"k" * 32, path=tmp_path / "seed.key")
    records: RunDirectory = driver._records
    records.create("benchmark: CartPole-v1\n")
    (tmp_path / "program").mkdir()
    (tmp_path / "program" / "policy.py").write_text(POLICY)
    program = capture_program(tmp_path / "program")
    program.write_to(records.root / "initial_program")
    records.store_program(program)
    records.update_manifest(benchmark="CartPole-v1", phase=Phase.AGENT, initial_program_digest=program.digest)
    records.append(ev.SubmissionAdmitted(id="s0001", selector="0:2", indices=[0, 1], program_digest=program.digest))
    records.append(ev.SubmissionCompleted(id="s0001", score=0.5, policy_failures=0))
    records.append(ev.Finished(candidates=["s0001"]))
    records.append(ev.AgentPhaseEnded(terminal_reason=TerminalReason.FINISH_CALLED))
    records.update_manifest(phase=Phase.VALIDATION, terminal_reason=TerminalReason.FINISH_CALLED)
    state = SessionState.replay(budget_of(spec), [event.to_json() for event in records.events()])
    return driver, state


def test_a_crash_between_the_validation_event_and_the_manifest_resumes_at_the_assessment(tmp_path, monkeypatch):
    driver, state = agent_phase_over(tmp_path)
    records = driver._records
    sandbox = PhasedSandbox()
    update = records.update_manifest

    def dies_writing_the_phase(**fields: Any):
        if "phase" in fields:
            raise Killed()
        return update(**fields)

    monkeypatch.setattr(records, "update_manifest", dies_writing_the_phase)
    with pytest.raises(Killed):
        driver._validation_phase(sandbox, state, "maximize")
    monkeypatch.setattr(records, "update_manifest", update)

    assert records.read_stored_manifest().phase is Phase.VALIDATION  # the cache is behind
    assert isinstance(records.events()[-1], ev.ValidationDone)  # the log is not
    manifest = records.read_manifest()
    assert manifest.phase is Phase.ASSESSMENT and manifest.final is not None and manifest.final.submission_id == "s0001"
    validated = len(sandbox.calls)
    assert catch_up(records) == "Validation was done"  # what a resume does first
    assert records.read_stored_manifest().phase is Phase.ASSESSMENT and driver._phase() is Phase.ASSESSMENT
    driver._assessment_phase(sandbox)  # then the phase run.json names
    assert validated == 2 and len(sandbox.calls) == validated + 4  # Validation is not run again: 2 held-out Episodes each
    # for the selected Program and the starting one
    done = records.read_manifest()
    assert (done.phase, done.reason, done.assessment is not None) == (Phase.DONE, TerminalReason.FINISH_CALLED, True)
    assert records.read_stored_manifest().phase is Phase.DONE
    ends = [type(e) for e in records.events() if isinstance(e, (ev.AgentPhaseEnded, ev.ValidationDone, ev.AssessmentDone))]
    assert ends == [ev.AgentPhaseEnded, ev.ValidationDone, ev.AssessmentDone]  # each phase ended once


def test_a_crash_between_the_agent_phase_event_and_the_manifest_leaves_the_validation_to_do_and_no_agent_to_start(tmp_path):
    driver, _ = agent_phase_over(tmp_path)
    records = driver._records
    # Killed after agent_phase_ended was logged, before run.json said so.
    records.manifest_path.write_text(records.manifest_path.read_text().replace('"validation"', '"agent"').replace(
        '"finish_called"', "null"))
    assert records.read_stored_manifest().phase is Phase.AGENT
    assert records.read_manifest().phase is Phase.VALIDATION and records.read_manifest().reason is TerminalReason.FINISH_CALLED
    assert catch_up(records) == "the agent phase had ended"
    stored = records.read_stored_manifest()
    assert (stored.phase, stored.reason) == (Phase.VALIDATION, TerminalReason.FINISH_CALLED)
    assert catch_up(records) == ""  # nothing more: Validation has not ended


def test_an_agent_started_again_after_the_agent_phase_ended_is_not_caught_up(tmp_path):
    driver, _ = agent_phase_over(tmp_path)
    records = driver._records
    records.update_manifest(phase=Phase.AGENT)
    records.append(ev.AgentStarted(attempt=2))  # a later attempt is under way: its end is not logged
    assert catch_up(records) == "" and driver._phase() is Phase.AGENT


def test_a_phase_whose_results_are_gone_is_run_again(tmp_path):
    driver, state = agent_phase_over(tmp_path)
    records = driver._records
    sandbox = PhasedSandbox()
    driver._validation_phase(sandbox, state, "maximize")
    driver._assessment_phase(sandbox)
    assert driver._phase() is Phase.DONE
    (records.root / "assessment.json").unlink()
    records.update_manifest(phase=Phase.ASSESSMENT)  # as tests/docker/test_secret_episodes.py asks for the Assessment again
    assert catch_up(records) == "" and driver._phase() is Phase.ASSESSMENT
    driver._assessment_phase(sandbox)
    assert (records.root / "assessment.json").is_file() and driver._phase() is Phase.DONE


def test_nothing_to_validate_is_logged_before_the_manifest_says_done(tmp_path, monkeypatch):
    driver, _ = agent_phase_over(tmp_path)
    records = driver._records
    nothing = SessionState.replay(budget_of(driver._spec), [])
    monkeypatch.setattr(driver, "_candidates", lambda state, direction: ((), "agent"))
    update = records.update_manifest

    def dies_writing_the_phase(**fields: Any):
        if "phase" in fields:
            raise Killed()
        return update(**fields)

    monkeypatch.setattr(records, "update_manifest", dies_writing_the_phase)
    with pytest.raises(Killed):
        driver._validation_phase(PhasedSandbox(), nothing, "maximize")
    monkeypatch.setattr(records, "update_manifest", update)
    manifest = records.read_manifest()
    assert (manifest.phase, manifest.final) == (Phase.DONE, None)
    assert catch_up(records) == "Validation was done" and driver._phase() is Phase.DONE
