"""What RunHost.submit tells the agent when a fault on the Host's side ends a Submission: exactly what it cost.

A sandbox double runs the Episodes (no container is involved: this is the Host's bookkeeping); the run directory is
real, and its event log is made to fail at a chosen event, as a full disk would.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from epg_sdk.codes import EpisodeStatus
from orchestrator.kernel.outcomes import EpisodeOutcome
from orchestrator.kernel.ports import BenchmarkInfo, EvaluationFeedback, PlannedEpisode
from orchestrator.kernel.rejections import RejectionCode, RequestRejected
from orchestrator.kernel.session import Budget, SessionEvent, SessionState, SubmissionState
from orchestrator.records.events import RunEvent
from orchestrator.records.run_dir import RunDirectory
from orchestrator.run.host import RunHost

BENCHMARK = BenchmarkInfo(
    id="fake/steady-v0", description="A fake Benchmark.", observation_space={"type": "discrete", "n": 2},
    action_space={"type": "discrete", "n": 2}, horizon=5, primary_metric="mean_return", direction="maximize",
    parameters={}, failure_return=0.0, readme="",
)
POLICY = "class Policy:\n    def act(self, observation):\n        return 0\n\n\ndef make_policy(context):\n    return Policy()\n"


class _Sandbox:
    """Every Episode completes with reward 1 after 3 steps; with crash, the batch raises an OSError instead."""

    def __init__(self, crash: bool = False) -> None:
        self.crash = crash

    def run_episodes(self, jobs, on_episode=None) -> list[EpisodeOutcome]:
        if self.crash:
            raise OSError(28, "No space left on device")
        return [EpisodeOutcome(index=job.episode.index, split=job.episode.split, status=EpisodeStatus.COMPLETED, failure=None,
                               reason="", steps=3, reward=1.0, terminated=True, truncated=False,
                               policy_seconds=0.001, environment_seconds=0.001) for job in jobs]

    def feedback(self, outcomes: list[EpisodeOutcome]) -> EvaluationFeedback:
        return EvaluationFeedback(score=1.0, values={}, artifacts={}, episodes=tuple(outcomes))


class _FailingLog(RunDirectory):
    """A run directory whose event log refuses one kind of event, once, as a full disk would."""

    def __init__(self, root: Path, failing: str) -> None:
        super().__init__(root)
        self.failing: str | None = failing

    def append(self, event: RunEvent) -> RunEvent:
        if event.type == self.failing:
            self.failing = None
            raise OSError(28, "No space left on device")
        return super().append(event)


def _host(tmp_path: Path, failing: str, sandbox: _Sandbox | None = None) -> tuple[RunHost, _FailingLog, Budget]:
    records = _FailingLog(tmp_path / "run", failing)
    records.create("benchmark: fake/steady-v0\n")
    (records.workspace / "program" / "policy.py").write_text(POLICY)
    budget = Budget(episodes=10, max_submissions=3, pool_size=8, max_episodes_per_submission=None, max_candidates=2)
    pool = [PlannedEpisode(split="train", index=i, payload=b"%d" % i, policy_seed=i) for i in range(8)]
    host = RunHost(records=records, sandbox=sandbox or _Sandbox(), benchmark=BENCHMARK, state=SessionState(budget), episode_pool=pool, instructions="")
    return host, records, budget


def test_a_submission_charged_before_its_completion_failed_to_log_is_never_reported_as_costing_nothing(tmp_path: Path):
    host, records, budget = _host(tmp_path, SessionEvent.SUBMISSION_COMPLETED.value)

    with pytest.raises(RequestRejected) as refused:
        host.submit("0:3")

    status = host.status()
    assert (status.episodes_used, status.submissions_used) == (3, 1)
    assert [(s.id, s.state) for s in status.submissions] == [("s0001", SubmissionState.COMPLETED)]
    assert refused.value.code is RejectionCode.INTERNAL
    assert "nothing was spent" not in refused.value.message
    assert "s0001 was evaluated and its 3 Episode(s) were spent" in refused.value.message
    assert host.feedback_path("s0001") in refused.value.message
    assert (records.workspace / host.feedback_path("s0001")).is_file()
    # The records say the same: a resume completes it from its record, charging what the agent was told.
    resumed = RunHost(records=RunDirectory(records.root), sandbox=_Sandbox(), benchmark=BENCHMARK,
                      state=SessionState.replay(budget, records.events()), episode_pool=[], instructions="")
    assert resumed.recover_in_flight() == "s0001 completed from its record"
    assert (resumed.status().episodes_used, resumed.status().submissions[0].state) == (3, SubmissionState.COMPLETED)


def test_a_submission_whose_evaluation_failed_is_refunded_and_reported_as_costing_nothing(tmp_path: Path):
    host, records, budget = _host(tmp_path, failing="", sandbox=_Sandbox(crash=True))

    with pytest.raises(RequestRejected) as refused:
        host.submit("0:3")

    assert refused.value.code is RejectionCode.INTERNAL and "nothing was spent" in refused.value.message
    status = host.status()
    assert (status.episodes_used, status.submissions_used, status.submissions[0].state) == (0, 0, SubmissionState.VOIDED)
    assert SessionState.replay(budget, records.events()).status() == status


@pytest.mark.parametrize("failing", ["program", SessionEvent.SUBMISSION_ADMITTED.value])
def test_an_admission_the_host_could_not_record_costs_nothing_and_leaves_the_session_free(tmp_path: Path, failing: str):
    host, records, budget = _host(tmp_path, failing)
    if failing == "program":
        stored = records.store_program

        def full_disk(program):
            records.store_program = stored  # once, as the event log's failure
            raise OSError(28, "No space left on device")

        records.store_program = full_disk

    with pytest.raises(RequestRejected) as refused:
        host.submit("0:3")

    assert refused.value.code is RejectionCode.INTERNAL and "nothing was spent" in refused.value.message
    status = host.status()
    assert (status.episodes_used, status.submissions_used, status.in_flight, status.submissions) == (0, 0, None, ())
    receipt = host.submit("0:2")  # not refused as busy: the next Submission takes the number the failed one had
    assert receipt.submission_id == "s0001"
    replayed = SessionState.replay(budget, [event.to_json() for event in records.events()]).status()
    assert (replayed.episodes_used, replayed.submissions_used) == (host.status().episodes_used, host.status().submissions_used) == (2, 1)
