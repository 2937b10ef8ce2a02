"""The environment runner's answers as the Host reads them: a non-finite score, return or failure_return is the
environment's fault (an infrastructure error), never a number the Host records, ranks or charges to the policy.
And a batch spread over lanes: one outcome per job, in job order, or an error, never a shorter list."""

from __future__ import annotations

import math

import pytest

from epg.v1 import runner_pb2
from epg_sdk.codes import EpisodeStatus, RunnerOutcome
from epg_sdk.protocol import values
from orchestrator.backends.lanes import run_over_lanes
from orchestrator.kernel.infrastructure import InfraErrorCode, InfrastructureError
from orchestrator.kernel.outcomes import EpisodeOutcome
from orchestrator.kernel.ports import EpisodeJob, PlannedEpisode
from orchestrator.kernel.program import Program, ProgramFile, program_digest
from orchestrator.protocol.runner_messages import benchmark_info, evaluation_feedback, runner_outcome

NON_FINITE = [math.nan, math.inf, -math.inf]
JOB = EpisodeJob(episode=PlannedEpisode(split="train", index=7, payload=b"{}", policy_seed=1), program=None)


def feedback_response(score: float) -> runner_pb2.FeedbackResponse:
    return runner_pb2.FeedbackResponse(score=score, values=values.encode({"return": 1.0}),
                                       artifacts=[runner_pb2.Artifact(name="episodes.csv", data=b"index\n0\n")])


def record(outcome: int, total_reward: float) -> runner_pb2.EpisodeRecord:
    return runner_pb2.EpisodeRecord(outcome=outcome, total_reward=total_reward, steps=3)


def description(failure_return: float) -> runner_pb2.BenchmarkDescription:
    return runner_pb2.BenchmarkDescription(id="X-v0", primary_metric="return", horizon=10, failure_return=failure_return,
                                           observation_space=values.encode(None), action_space=values.encode(None),
                                           parameters=values.encode({}))


def test_a_finite_feedback_score_is_read_with_its_values_and_artifacts():
    feedback = evaluation_feedback(feedback_response(-2.5), [])
    assert feedback.score == -2.5
    assert feedback.values == {"return": 1.0}
    assert feedback.artifacts == {"episodes.csv": b"index\n0\n"}


@pytest.mark.parametrize("score", NON_FINITE)
def test_a_non_finite_feedback_score_is_an_environment_error_not_a_score(score):
    with pytest.raises(InfrastructureError) as raised:
        evaluation_feedback(feedback_response(score), [])
    assert raised.value.code is InfraErrorCode.ENVIRONMENT_ERROR
    assert "non-finite score" in raised.value.message and repr(score) in raised.value.message
    assert "not the policy's fault" in raised.value.message


@pytest.mark.parametrize("total_reward", NON_FINITE)
@pytest.mark.parametrize("outcome", [runner_pb2.RUNNER_OUTCOME_COMPLETED, runner_pb2.RUNNER_OUTCOME_POLICY_EXCEPTION])
def test_a_non_finite_episode_return_is_an_environment_error_whatever_the_policy_did(outcome, total_reward):
    with pytest.raises(InfrastructureError) as raised:
        runner_outcome(JOB, record(outcome, total_reward))
    assert raised.value.code is InfraErrorCode.ENVIRONMENT_ERROR
    assert "train Episode 7 a non-finite return" in raised.value.message


def test_a_finite_episode_return_gives_the_runners_outcome():
    assert runner_outcome(JOB, record(runner_pb2.RUNNER_OUTCOME_COMPLETED, 1e300)) is RunnerOutcome.COMPLETED
    assert runner_outcome(JOB, record(runner_pb2.RUNNER_OUTCOME_POLICY_TIMEOUT, -3.0)) is RunnerOutcome.POLICY_TIMEOUT


@pytest.mark.parametrize("failure_return", NON_FINITE)
def test_a_non_finite_failure_return_in_the_description_is_an_environment_error(failure_return):
    with pytest.raises(InfrastructureError) as raised:
        benchmark_info(description(failure_return))
    assert raised.value.code is InfraErrorCode.ENVIRONMENT_ERROR and "failure_return" in raised.value.message
    assert benchmark_info(description(-500.0)).failure_return == -500.0


class _Batches:
    """The part of a container pool run_over_lanes drives: it counts the batches begun and ended."""

    def __init__(self) -> None:
        self.begun: list[int] = []
        self.ended = 0

    def begin_batch(self, episodes: int) -> None:
        self.begun.append(episodes)

    def end_batch(self) -> None:
        self.ended += 1


def _jobs(count: int) -> list[EpisodeJob]:
    files = (ProgramFile(path="policy.py", data=b"def make_policy(context):\n    return None\n"),)
    program = Program(digest=program_digest(files), files=files)
    return [EpisodeJob(episode=PlannedEpisode(split="train", index=i, payload=b"", policy_seed=i), program=program) for i in range(count)]


def _completed(lane: int, job: EpisodeJob) -> EpisodeOutcome:
    return EpisodeOutcome(index=job.episode.index, split="train", status=EpisodeStatus.COMPLETED, failure=None, reason="", steps=1,
                          reward=1.0, terminated=True, truncated=False, policy_seconds=0.0, environment_seconds=0.0)


@pytest.mark.parametrize("lanes", [1, 3])
def test_every_job_gets_its_outcome_in_job_order_whatever_the_lanes(lanes):
    pool = _Batches()
    outcomes = run_over_lanes(pool, _jobs(5), lanes, _completed, None, "test-lane")
    assert [o.index for o in outcomes] == [0, 1, 2, 3, 4]
    assert pool.begun == [5] and pool.ended == 1


def test_an_episode_callback_that_fails_is_raised_not_a_shorter_list_of_outcomes():
    seen: list[int] = []

    def on_episode(outcome: EpisodeOutcome) -> None:
        seen.append(outcome.index)
        if outcome.index == 1:
            raise OSError("the progress display went away")

    pool = _Batches()
    with pytest.raises(OSError, match="the progress display went away"):
        run_over_lanes(pool, _jobs(4), 1, _completed, on_episode, "test-lane")
    assert seen == [0, 1] and pool.ended == 1


def test_a_job_that_ends_without_an_outcome_is_an_infrastructure_error_not_a_shorter_list():
    def loses_the_third(lane: int, job: EpisodeJob) -> EpisodeOutcome:
        return None if job.episode.index == 2 else _completed(lane, job)  # type: ignore[return-value]  # a backend's bug

    with pytest.raises(InfrastructureError) as raised:
        run_over_lanes(_Batches(), _jobs(4), 2, loses_the_third, None, "test-lane")
    assert raised.value.code is InfraErrorCode.RUNNER_FAILED
    assert "1 of 4 Episodes ended without an outcome (indices [2])" in raised.value.message
