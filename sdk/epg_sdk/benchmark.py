"""The Benchmark contract and its values."""

from __future__ import annotations

import abc
import csv
import hashlib
import io
import json
import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from epg_sdk.planning import plan_seeds

Direction = Literal["maximize", "minimize"]


class InvalidAction(Exception):
    """Raised by Benchmark.validate_action for an action outside the action space."""


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
        """Apply a validated action."""

    def summary(self) -> dict[str, Any]:
        """Return bounded public values about the finished Episode (may be empty)."""

    # Optional: def artifacts(self) -> dict[str, bytes], named files of the finished Episode (for example a
    # rendered replay), called after summary(). They reach Benchmark.feedback in EpisodeRecord.artifacts, and
    # only what feedback() returns among Feedback.artifacts is published. The runner drops them all (and says
    # so in the summary) when they take more than EPISODE_ARTIFACTS_LIMIT_BYTES or a name is not a plain file name.

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


@dataclass(frozen=True, slots=True, kw_only=True)
class Feedback:
    """A score, bounded public values and small named artifacts."""

    score: float
    values: dict[str, Any] = field(default_factory=dict)
    artifacts: dict[str, bytes] = field(default_factory=dict)


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


_PARAMETERS_DOMAIN = b"epg/benchmark-parameters/v1\0"


def parameters_digest(parameters: Any) -> str:
    """The identity of a Benchmark's public parameters: "sha256:" and the hex SHA-256 of their canonical encoding.

    The encoding tags each value with its type and prefixes every variable part with its length, so values of
    different types or shapes never encode alike: None, bool, int, float (IEEE 754 big-endian), str (UTF-8), bytes,
    list, tuple (apart from list), dict (keys are strings, sorted by their UTF-8 bytes) and arrays (anything with
    dtype, shape and tobytes: its dtype string, shape and C-order bytes; a NumPy scalar is an array of shape ()).
    The runner sends it in its description and the Host computes it the same way when a runner sends none.
    Raises TypeError for a value of another type or a dict key that is not a string.
    """
    digest = hashlib.sha256(_PARAMETERS_DOMAIN)
    _encode_parameter(digest, parameters)
    return "sha256:" + digest.hexdigest()


def _encode_parameter(digest: Any, value: Any) -> None:
    if value is None:
        digest.update(b"n")
    elif isinstance(value, bool):
        digest.update(b"t" if value else b"f")
    elif isinstance(value, int):
        _tagged(digest, b"i", str(value).encode("ascii"))
    elif isinstance(value, float):
        digest.update(b"d" + struct.pack(">d", value))
    elif isinstance(value, str):
        _tagged(digest, b"s", value.encode("utf-8"))
    elif isinstance(value, (bytes, bytearray)):
        _tagged(digest, b"b", bytes(value))
    elif isinstance(value, (list, tuple)):
        digest.update((b"l" if isinstance(value, list) else b"u") + len(value).to_bytes(8, "big"))
        for item in value:
            _encode_parameter(digest, item)
    elif isinstance(value, Mapping):
        if not all(isinstance(key, str) for key in value):
            raise TypeError("parameter mappings must have string keys")
        digest.update(b"m" + len(value).to_bytes(8, "big"))
        for key in sorted(value, key=lambda k: k.encode("utf-8")):
            _tagged(digest, b"k", key.encode("utf-8"))
            _encode_parameter(digest, value[key])
    elif hasattr(value, "dtype") and hasattr(value, "shape") and hasattr(value, "tobytes"):
        _tagged(digest, b"a", str(value.dtype).encode("ascii"))
        digest.update(len(value.shape).to_bytes(8, "big") + b"".join(int(size).to_bytes(8, "big") for size in value.shape))
        _tagged(digest, b"", value.tobytes(order="C"))
    else:
        raise TypeError(f"a Benchmark parameter cannot be {type(value).__name__}")


def _tagged(digest: Any, tag: bytes, data: bytes) -> None:
    digest.update(tag + len(data).to_bytes(8, "big") + data)
