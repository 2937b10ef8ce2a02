"""Closed sets of codes of the trusted side: infrastructure errors.

The codes of Episodes (EpisodeStatus, FailureCode, RunnerOutcome) live in
`epg_sdk.codes`: the runner and the local harness share them.
"""

from __future__ import annotations

from enum import StrEnum


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
