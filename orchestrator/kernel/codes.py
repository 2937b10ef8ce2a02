"""Closed sets of codes: Episode statuses, policy failures, runner outcomes, infrastructure errors.

Each set is mirrored one to one in proto/epg/v1 where it crosses a process
boundary; tests check the mappings are complete.
"""

from __future__ import annotations

from enum import StrEnum


class EpisodeStatus(StrEnum):
    COMPLETED = "completed"
    POLICY_FAILURE = "policy_failure"


class FailureCode(StrEnum):
    """Why an Episode is a scored policy failure."""

    EXCEPTION = "exception"
    TIMEOUT = "timeout"
    INVALID_ACTION = "invalid_action"
    PROTOCOL_VIOLATION = "protocol_violation"
    OUT_OF_MEMORY = "out_of_memory"
    CRASHED = "crashed"


class RunnerOutcome(StrEnum):
    """What the environment runner saw of an Episode, before the Host asks the engine."""

    COMPLETED = "completed"
    POLICY_EXCEPTION = "policy_exception"
    POLICY_TIMEOUT = "policy_timeout"
    INVALID_ACTION = "invalid_action"
    PROTOCOL_VIOLATION = "protocol_violation"
    POLICY_DISCONNECTED = "policy_disconnected"
    ENVIRONMENT_ERROR = "environment_error"


class InfraErrorCode(StrEnum):
    """Faults of the trusted side. Never charged to the policy."""

    ENGINE_UNAVAILABLE = "engine_unavailable"
    IMAGE_MISSING = "image_missing"
    IMAGE_BUILD_FAILED = "image_build_failed"
    RUNNER_FAILED = "runner_failed"
    ENVIRONMENT_ERROR = "environment_error"
    CONTAINER_FAILED = "container_failed"
    WORKSPACE_UNAVAILABLE = "workspace_unavailable"  # the agent's bounded workspace cannot be made or mounted


class InfrastructureError(Exception):
    """The sandbox itself is broken (engine, runner, Benchmark code).

    `evidence` holds Host-private diagnostics (log tails, exit codes,
    tracebacks) for the run directory; `message` is safe to show anyone.
    """

    def __init__(self, code: InfraErrorCode, message: str, evidence: str = "") -> None:
        super().__init__(f"{code.value}: {message}")
        self.code = code
        self.message = message
        self.evidence = evidence
