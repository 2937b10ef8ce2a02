"""The one function that classifies how a policy's Episode ended, and what the engine reports of a policy's container.

Standard library only: the Host's kernel imports this module.
"""

from __future__ import annotations

from dataclasses import dataclass

from epg_sdk.codes import EpisodeStatus, FailureCode, RunnerOutcome

SIGKILL_STATUS = 128 + 9

_DIRECT: dict[RunnerOutcome, FailureCode] = {
    RunnerOutcome.POLICY_EXCEPTION: FailureCode.EXCEPTION,
    RunnerOutcome.POLICY_TIMEOUT: FailureCode.TIMEOUT,
    RunnerOutcome.INVALID_ACTION: FailureCode.INVALID_ACTION,
    RunnerOutcome.PROTOCOL_VIOLATION: FailureCode.PROTOCOL_VIOLATION,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerExit:
    """How the policy's container (or process) ended, as the engine reports it.

    exit_code is None when it was still running when inspected.
    """

    exit_code: int | None
    oom_killed: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Classification:
    status: EpisodeStatus
    failure: FailureCode | None
    reason: str


def classify_episode(outcome: RunnerOutcome, message: str, container: ContainerExit | None) -> Classification:
    """Return the status, failure code and readable reason of a policy's Episode.

    outcome and message come from the runner; container from the engine after
    the policy container stopped. Raises ValueError for ENVIRONMENT_ERROR,
    which is an infrastructure fault and never a policy failure.
    """
    if outcome is RunnerOutcome.ENVIRONMENT_ERROR:
        raise ValueError("an environment error is not a policy outcome")
    if outcome is RunnerOutcome.COMPLETED:
        return Classification(status=EpisodeStatus.COMPLETED, failure=None, reason="")
    if container is not None and container.oom_killed:
        return _failure(FailureCode.OUT_OF_MEMORY, "the policy container was killed for exceeding its memory limit")
    if outcome is RunnerOutcome.POLICY_EXCEPTION and message.startswith("MemoryError"):
        return _failure(FailureCode.OUT_OF_MEMORY, f"the policy ran out of memory ({message})")
    if outcome in _DIRECT:
        return _failure(_DIRECT[outcome], message)
    return _failure(FailureCode.CRASHED, _death_reason(message, container))


def _death_reason(message: str, container: ContainerExit | None) -> str:
    if container is None or container.exit_code is None:
        return f"the policy stopped answering ({message})" if message else "the policy stopped answering"
    if container.exit_code == SIGKILL_STATUS:
        return "the policy process was killed (SIGKILL)"
    if container.exit_code > 128:
        return f"the policy process died from signal {container.exit_code - 128}"
    return f"the policy process exited with status {container.exit_code} before the Episode ended"


def _failure(code: FailureCode, reason: str) -> Classification:
    return Classification(status=EpisodeStatus.POLICY_FAILURE, failure=code, reason=reason)
