"""Closed sets of codes the runner, the local harness and the Host share: Episode statuses, policy failures, runner outcomes.

Each set is mirrored one to one in proto/epg/v1 (`epg_sdk.protocol.codes`);
tests check the mappings are complete. Standard library only: the Host's
kernel imports this module.
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
