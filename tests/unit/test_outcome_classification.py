"""How the runner's view of an Episode and the container's exit become a status and failure code."""

from __future__ import annotations

import pytest

from epg_sdk.codes import EpisodeStatus, FailureCode, RunnerOutcome
from epg_sdk.outcomes import SIGKILL_STATUS, ContainerExit, classify_episode

DIRECT = {
    RunnerOutcome.POLICY_EXCEPTION: FailureCode.EXCEPTION,
    RunnerOutcome.POLICY_TIMEOUT: FailureCode.TIMEOUT,
    RunnerOutcome.INVALID_ACTION: FailureCode.INVALID_ACTION,
    RunnerOutcome.PROTOCOL_VIOLATION: FailureCode.PROTOCOL_VIOLATION,
}
POLICY_OUTCOMES = [o for o in RunnerOutcome if o is not RunnerOutcome.ENVIRONMENT_ERROR]
CONTAINERS = [None, ContainerExit(exit_code=None), ContainerExit(exit_code=0), ContainerExit(exit_code=1), ContainerExit(exit_code=137)]


@pytest.mark.parametrize("container", CONTAINERS + [ContainerExit(exit_code=137, oom_killed=True)], ids=repr)
def test_completed_is_completed_whatever_the_container_says(container):
    result = classify_episode(RunnerOutcome.COMPLETED, "", container)
    assert result.status is EpisodeStatus.COMPLETED
    assert result.failure is None
    assert result.reason == ""


@pytest.mark.parametrize("outcome", list(DIRECT), ids=str)
@pytest.mark.parametrize("container", CONTAINERS, ids=repr)
def test_direct_outcomes_map_to_their_failure_code_with_the_runner_message(outcome, container):
    result = classify_episode(outcome, "ValueError: boom", container)
    assert result.status is EpisodeStatus.POLICY_FAILURE
    assert result.failure is DIRECT[outcome]
    assert result.reason == "ValueError: boom"


def test_disconnected_with_oom_killed_container_is_out_of_memory():
    result = classify_episode(RunnerOutcome.POLICY_DISCONNECTED, "socket closed", ContainerExit(exit_code=137, oom_killed=True))
    assert result.status is EpisodeStatus.POLICY_FAILURE
    assert result.failure is FailureCode.OUT_OF_MEMORY
    assert "memory" in result.reason


@pytest.mark.parametrize("outcome", [o for o in POLICY_OUTCOMES if o is not RunnerOutcome.COMPLETED], ids=str)
def test_oom_flag_wins_over_every_failure_outcome(outcome):
    result = classify_episode(outcome, "whatever", ContainerExit(exit_code=None, oom_killed=True))
    assert result.failure is FailureCode.OUT_OF_MEMORY
    assert result.status is EpisodeStatus.POLICY_FAILURE


@pytest.mark.parametrize("container", [None, ContainerExit(exit_code=1)], ids=repr)
def test_memory_error_exception_is_out_of_memory(container):
    result = classify_episode(RunnerOutcome.POLICY_EXCEPTION, "MemoryError: cannot allocate", container)
    assert result.failure is FailureCode.OUT_OF_MEMORY
    assert "MemoryError: cannot allocate" in result.reason


def test_memory_error_text_in_another_outcome_keeps_that_outcome():
    result = classify_episode(RunnerOutcome.POLICY_TIMEOUT, "MemoryError", None)
    assert result.failure is FailureCode.TIMEOUT


def test_exception_that_only_mentions_memory_error_later_is_an_exception():
    result = classify_episode(RunnerOutcome.POLICY_EXCEPTION, "ValueError: not a MemoryError", None)
    assert result.failure is FailureCode.EXCEPTION


def test_disconnected_with_sigkill_exit_is_crashed_by_sigkill():
    result = classify_episode(RunnerOutcome.POLICY_DISCONNECTED, "closed", ContainerExit(exit_code=SIGKILL_STATUS))
    assert SIGKILL_STATUS == 137
    assert result.status is EpisodeStatus.POLICY_FAILURE
    assert result.failure is FailureCode.CRASHED
    assert "SIGKILL" in result.reason


def test_disconnected_with_another_signal_names_the_signal():
    result = classify_episode(RunnerOutcome.POLICY_DISCONNECTED, "closed", ContainerExit(exit_code=128 + 11))
    assert result.failure is FailureCode.CRASHED
    assert "signal 11" in result.reason
    assert "SIGKILL" not in result.reason


@pytest.mark.parametrize("code", [0, 1, 2, 128])
def test_disconnected_with_a_plain_exit_code_names_the_status(code):
    result = classify_episode(RunnerOutcome.POLICY_DISCONNECTED, "closed", ContainerExit(exit_code=code))
    assert result.failure is FailureCode.CRASHED
    assert f"status {code}" in result.reason
    assert "signal" not in result.reason


@pytest.mark.parametrize("container", [None, ContainerExit(exit_code=None)], ids=repr)
def test_disconnected_without_an_exit_code_says_the_policy_stopped_answering(container):
    result = classify_episode(RunnerOutcome.POLICY_DISCONNECTED, "socket closed", container)
    assert result.failure is FailureCode.CRASHED
    assert "stopped answering" in result.reason
    assert "socket closed" in result.reason


def test_disconnected_without_a_message_has_a_reason_without_empty_parentheses():
    result = classify_episode(RunnerOutcome.POLICY_DISCONNECTED, "", None)
    assert result.reason == "the policy stopped answering"


@pytest.mark.parametrize("container", CONTAINERS + [ContainerExit(exit_code=137, oom_killed=True)], ids=repr)
def test_environment_error_is_never_a_policy_outcome(container):
    with pytest.raises(ValueError):
        classify_episode(RunnerOutcome.ENVIRONMENT_ERROR, "env exploded", container)


def test_every_policy_outcome_classifies_without_error():
    for outcome in POLICY_OUTCOMES:
        for container in CONTAINERS:
            result = classify_episode(outcome, "m", container)
            assert (result.status is EpisodeStatus.COMPLETED) == (outcome is RunnerOutcome.COMPLETED)
            assert (result.failure is None) == (outcome is RunnerOutcome.COMPLETED)
