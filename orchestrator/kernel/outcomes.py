"""Episode outcomes as published in Feedback (their classification is `epg_sdk.outcomes.classify_episode`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from epg_sdk.codes import EpisodeStatus, FailureCode


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
