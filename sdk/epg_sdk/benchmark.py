"""The Benchmark contract and its values."""

from __future__ import annotations

import abc
import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from epg_sdk.planning import plan_seeds

Direction = Literal["maximize", "minimize"]


class InvalidAction(Exception):
    """Raised by Benchmark.validate_action (or by Environment.step) for an action outside the action space."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchmarkSpec:
    """The public description of a Benchmark, shown to agents and policies.

    Spaces are plain descriptions (dicts of str, numbers and NumPy arrays),
    for example ``{"type": "discrete", "n": 2, "start": 0}``.
    """

    id: str
    description: str
    observation_space: dict[str, Any]
    action_space: dict[str, Any]
    horizon: int
    failure_return: float
    primary_metric: str = "mean_return"
    direction: Direction = "maximize"
    parameters: dict[str, Any] = field(default_factory=dict)
    readme: str = ""
    # The Program ABI the Benchmark's policies speak: "" (ours) or "policy/v2" (EvoPolicyGym 0.3 Programs).
    program_abi: str = ""
    # Public values a policy/v2 Program reads as PolicyContext.metadata.
    metadata: dict[str, Any] = field(default_factory=dict)
    # Per-Benchmark time limits in seconds (per act() and per Episode); 0.0 keeps the Host's.
    step_seconds: float = 0.0
    episode_seconds: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class StepResult:
    observation: Any
    reward: float
    terminated: bool
    truncated: bool = False


class Environment(Protocol):
    """One fresh Environment per Episode, built by Benchmark.make_environment."""

    def reset(self) -> Any:
        """Return the first observation."""

    def step(self, action: Any) -> StepResult:
        """Apply a validated action. May raise InvalidAction: the Episode ends as the policy's invalid action."""

    def summary(self) -> dict[str, Any]:
        """Return bounded public values about the finished Episode (may be empty)."""

    # Optional: def artifacts(self) -> dict[str, bytes], named files of the finished Episode (for example a
    # rendered replay), called after summary(). They reach Benchmark.feedback in EpisodeRecord.artifacts, and
    # only what feedback() returns among Feedback.artifacts is published. The runner drops them all (and says
    # so in the summary) when they take more than EPISODE_ARTIFACTS_LIMIT_BYTES or a name is neither a plain
    # file name nor a relative POSIX path of them ("episode-000/replay.gif").
    #
    # Optional: def evidence(self) -> bytes, the Benchmark's own encoding of the whole Episode (every action,
    # observation, reward, per-step metrics), called after summary(). It reaches Benchmark.feedback in
    # EpisodeRecord.evidence and is never published; the runner drops it (and says so in the summary) when it
    # takes more than EVIDENCE_LIMIT_BYTES.

    def close(self) -> None:
        """Release the simulator."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EpisodeRecord:
    """What Benchmark.feedback receives for each Episode, in plan order.

    status is "completed" or "policy_failure"; failure names the failure code
    (for example "timeout") or is None.
    """

    index: int
    status: str
    failure: str | None
    steps: int
    total_reward: float
    terminated: bool
    truncated: bool
    summary: dict[str, Any] = field(default_factory=dict)
    artifacts: dict[str, bytes] = field(default_factory=dict)
    evidence: bytes = b""


ArtifactRetention = Literal["permanent", "bulk"]


@dataclass(frozen=True, slots=True)
class Artifact:
    """A published file with its media type ("" lets the Host guess from the name) and retention class:
    "permanent" is kept as long as the Run, "bulk" (large, reproducible: replays, frames) may be evicted
    oldest first when the Run's bulk bound is reached."""

    data: bytes
    media_type: str = ""
    retention: ArtifactRetention = "permanent"


@dataclass(frozen=True, slots=True, kw_only=True)
class Feedback:
    """A score, bounded public values and small named artifacts.

    An artifact's name is a file name or a relative POSIX path ("episode-000/replay.gif"); its value is the
    bytes, or an Artifact carrying a media type and a retention class.
    """

    score: float
    values: dict[str, Any] = field(default_factory=dict)
    artifacts: Mapping[str, bytes | Artifact] = field(default_factory=dict)


def as_artifact(value: bytes | Artifact) -> Artifact:
    """Return a Feedback artifact's value as an Artifact (plain bytes: a permanent one of no stated media type).

    Raises TypeError for anything else.
    """
    if isinstance(value, Artifact):
        if not isinstance(value.data, bytes):
            raise TypeError(f"Artifact data must be bytes, not {type(value.data).__name__}")
        return value
    if isinstance(value, bytes):
        return Artifact(value)
    raise TypeError(f"a Feedback artifact must be bytes or an Artifact, not {type(value).__name__}")


class Benchmark(abc.ABC):
    """Domain semantics of one benchmark. Subclass and implement the abstract methods."""

    @property
    @abc.abstractmethod
    def spec(self) -> BenchmarkSpec:
        """The public spec."""

    @abc.abstractmethod
    def make_environment(self, payload: bytes) -> Environment:
        """Return a fresh Environment for the Episode planned as payload."""

    @abc.abstractmethod
    def validate_action(self, action: Any) -> Any:
        """Return the action in the form the Environment takes. Raises InvalidAction."""

    def plan(self, split: str, seed: int, count: int) -> list[bytes]:
        """Return count hidden Episode payloads of split; disjoint across splits.

        The default plans environment seeds with plan_seeds and encodes each as
        JSON ``{"seed": N}``.
        """
        return [json.dumps({"seed": s}).encode() for s in plan_seeds(split, seed, count)]

    def episode_return(self, record: EpisodeRecord) -> float:
        """The return an Episode counts for in the score (failure_return on failure)."""
        if record.status != "completed":
            return self.spec.failure_return
        return record.total_reward

    def feedback(self, records: list[EpisodeRecord]) -> Feedback:
        """Return the Feedback of an evaluation: by default the mean return, a
        per-Episode table and an episodes.csv artifact."""
        returns = [self.episode_return(r) for r in records]
        score = sum(returns) / len(returns) if returns else self.spec.failure_return
        spread = math.sqrt(sum((x - score) ** 2 for x in returns) / len(returns)) if returns else 0.0
        episodes = [
            {
                "index": r.index,
                "status": r.status,
                "failure": r.failure,
                "steps": r.steps,
                "return": r.total_reward,
                "scored_return": ret,
                "terminated": r.terminated,
                "truncated": r.truncated,
                "summary": r.summary,
            }
            for r, ret in zip(records, returns, strict=True)
        ]
        values = {
            self.spec.primary_metric: score,
            "std_return": spread,
            "min_return": min(returns, default=0.0),
            "max_return": max(returns, default=0.0),
            "policy_failures": sum(1 for r in records if r.status != "completed"),
            "episodes": episodes,
        }
        return Feedback(score=score, values=values, artifacts={"episodes.csv": episodes_csv(episodes)})


# Helpers for a Benchmark whose feedback() extends the default one. Each takes the per-Episode rows of the
# default Feedback (its values["episodes"], in plan order) and returns new values, never changing the rows.

EPISODE_COLUMNS = ("index", "status", "failure", "steps", "return", "scored_return", "terminated", "truncated")


def episodes_csv(
    episodes: list[dict[str, Any]], columns: Sequence[str] = EPISODE_COLUMNS, summary_columns: Sequence[str] = ()
) -> bytes:
    """Return an episodes.csv: one line per row with its columns, then the summary_columns read from its
    summary ("" where the summary lacks one)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=[*columns, *summary_columns], extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in episodes:
        summary = row.get("summary") or {}
        writer.writerow({**row, **{name: summary.get(name, "") for name in summary_columns}})
    return out.getvalue().encode()


def with_failure_summaries(episodes: list[dict[str, Any]], failure_summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Return the rows with each failed Episode's summary (status other than "completed") updated by failure_summary,
    for example ``{"end": "policy_failure"}``; every summary is a copy."""
    return [
        {**row, "summary": {**(row.get("summary") or {}), **(failure_summary if row["status"] != "completed" else {})}}
        for row in episodes
    ]


def count_ends(episodes: list[dict[str, Any]], end_causes: Sequence[str]) -> dict[str, int]:
    """Return how many Episodes ended in each cause: the summary's `end` ("unknown" when missing), counted
    under each of end_causes (zero included, in that order), then under any other cause found."""
    ends = dict.fromkeys(end_causes, 0)
    for row in episodes:
        end = str(row["summary"].get("end", "unknown"))
        ends[end] = ends.get(end, 0) + 1
    return ends


def shorten_summaries(episodes: list[dict[str, Any]], *, detailed: int, keys: Sequence[str]) -> list[dict[str, Any]]:
    """Return the rows with the summaries after the first `detailed` cut down to keys (those present), so that
    Feedback stays bounded however many Episodes it covers."""
    return [
        row if position < detailed else {**row, "summary": {key: row["summary"][key] for key in keys if key in row["summary"]}}
        for position, row in enumerate(episodes)
    ]


def mean_steps(episodes: list[dict[str, Any]]) -> float:
    """Return the mean of the rows' steps (0.0 for none)."""
    return sum(row["steps"] for row in episodes) / len(episodes) if episodes else 0.0


def success_rate(episodes: list[dict[str, Any]]) -> float:
    """Return the share of rows whose summary says `success: True` (0.0 for none)."""
    return sum(1 for row in episodes if row["summary"].get("success") is True) / len(episodes) if episodes else 0.0
