"""Episode outcomes as published in Feedback (their classification is `epg_sdk.outcomes.classify_episode`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from epg_sdk.codes import EpisodeStatus, FailureCode


class ArtifactRetention(str, Enum):
    """How long an artifact is kept: with its Submission for as long as the Run (permanent), or until the Run's bulk
    artifacts exceed their bound, oldest first (bulk: large and reproducible, replays and frames)."""

    PERMANENT = "permanent"
    BULK = "bulk"


@dataclass(frozen=True, slots=True, kw_only=True)
class ArtifactDetails:
    """What the runner says of an artifact besides its bytes: its media type ("" lets the Host guess) and retention."""

    media_type: str = ""
    retention: ArtifactRetention = ArtifactRetention.PERMANENT


@dataclass(frozen=True, slots=True, kw_only=True)
class EpisodeOutcome:
    """One evaluated Episode as published in Feedback (no hidden spec, no seed)."""

    index: int
    split: str
    status: EpisodeStatus
    failure: FailureCode | None
    reason: str
    steps: int
    reward: float
    terminated: bool
    truncated: bool
    policy_seconds: float
    environment_seconds: float
    loop_seconds: float = 0.0
    output_tail: str = ""
    traceback: str = ""
    summary: dict[str, Any] = field(default_factory=dict)
    # The Benchmark's files of this Episode (a rendered replay, ...): passed back to its Feedback, never
    # published or recorded as such (only what the Feedback returns among its artifacts is).
    artifacts: dict[str, bytes] = field(default_factory=dict, repr=False)
    # Their media types and retention, by name, as the runner sent them (a name without an entry: guessed, permanent).
    artifact_details: dict[str, ArtifactDetails] = field(default_factory=dict, repr=False)
    # The Episode's whole trajectory in the Benchmark's own encoding: Host-private, kept in memory from RunEpisode
    # to BuildFeedback only, never published or recorded.
    evidence: bytes = field(default=b"", repr=False)
    # The runner sent evidence that the Host could not keep (over its in-memory bound for a batch).
    evidence_dropped: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "split": self.split,
            "status": self.status.value,
            "failure": self.failure.value if self.failure else None,
            "reason": self.reason,
            "steps": self.steps,
            "reward": self.reward,
            "terminated": self.terminated,
            "truncated": self.truncated,
            "policy_seconds": round(self.policy_seconds, 6),
            "environment_seconds": round(self.environment_seconds, 6),
            "loop_seconds": round(self.loop_seconds, 6),
            "output_tail": self.output_tail,
            "traceback": self.traceback,
            "summary": self.summary,
        }
