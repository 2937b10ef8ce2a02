"""Mappings between the closed code sets of `epg_sdk.codes` and their protobuf mirrors."""

from __future__ import annotations

from epg.v1 import runner_pb2
from epg_sdk.codes import FailureCode, RunnerOutcome

OUTCOMES: dict[runner_pb2.RunnerOutcome.ValueType, RunnerOutcome] = {
    runner_pb2.RUNNER_OUTCOME_COMPLETED: RunnerOutcome.COMPLETED,
    runner_pb2.RUNNER_OUTCOME_POLICY_EXCEPTION: RunnerOutcome.POLICY_EXCEPTION,
    runner_pb2.RUNNER_OUTCOME_POLICY_TIMEOUT: RunnerOutcome.POLICY_TIMEOUT,
    runner_pb2.RUNNER_OUTCOME_INVALID_ACTION: RunnerOutcome.INVALID_ACTION,
    runner_pb2.RUNNER_OUTCOME_PROTOCOL_VIOLATION: RunnerOutcome.PROTOCOL_VIOLATION,
    runner_pb2.RUNNER_OUTCOME_POLICY_DISCONNECTED: RunnerOutcome.POLICY_DISCONNECTED,
    runner_pb2.RUNNER_OUTCOME_ENVIRONMENT_ERROR: RunnerOutcome.ENVIRONMENT_ERROR,
}

FAILURES: dict[FailureCode, runner_pb2.FailureCode.ValueType] = {
    FailureCode.EXCEPTION: runner_pb2.FAILURE_CODE_EXCEPTION,
    FailureCode.TIMEOUT: runner_pb2.FAILURE_CODE_TIMEOUT,
    FailureCode.INVALID_ACTION: runner_pb2.FAILURE_CODE_INVALID_ACTION,
    FailureCode.PROTOCOL_VIOLATION: runner_pb2.FAILURE_CODE_PROTOCOL_VIOLATION,
    FailureCode.OUT_OF_MEMORY: runner_pb2.FAILURE_CODE_OUT_OF_MEMORY,
    FailureCode.CRASHED: runner_pb2.FAILURE_CODE_CRASHED,
}


def failure_to_proto(failure: FailureCode | None) -> runner_pb2.FailureCode.ValueType:
    """Return the protobuf mirror of failure; FAILURE_CODE_UNSPECIFIED for None (the Episode did not fail)."""
    return runner_pb2.FAILURE_CODE_UNSPECIFIED if failure is None else FAILURES[failure]
