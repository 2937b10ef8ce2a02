"""The environment runner's answers as the Host reads them: a non-finite score, return or failure_return is the
environment's fault (an infrastructure error), never a number the Host records, ranks or charges to the policy."""

from __future__ import annotations

import math

import pytest

from epg.v1 import runner_pb2
from epg_sdk.codes import RunnerOutcome
from epg_sdk.protocol import values
from orchestrator.backends.runner_calls import benchmark_info, evaluation_feedback, runner_outcome
from orchestrator.kernel.infrastructure import InfraErrorCode, InfrastructureError
from orchestrator.kernel.ports import EpisodeJob, PlannedEpisode

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
