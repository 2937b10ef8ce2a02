"""Feedback, the public outcome of an Episode, and the immutable results of an evaluation and of a Run.

A Policy's own failure is a value (a PolicyFailureCode on its Episode), never an exception.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, TypeAlias, TypeVar, cast

from .artifacts import FEEDBACK_MAX_ARTIFACT_BYTES, FEEDBACK_MAX_ARTIFACTS, Artifact
from .policy import PolicyValue, check_u64, copy_policy_value
from .program import Program

PolicyFailureCode: TypeAlias = Literal["exception", "timeout", "invalid_action", "protocol_error"]
EpisodeStatus: TypeAlias = Literal["completed", "policy_failed"]
RunTerminalReason: TypeAlias = Literal[
    "finished",
    "agent_exited",
    "budget_exhausted",
    "agent_failed",
    "evaluation_failed",
    "validation_failed",
    "assessment_failed",
]
POLICY_FAILURE_CODES: frozenset[str] = frozenset({"exception", "timeout", "invalid_action", "protocol_error"})
EPISODE_STATUSES: frozenset[str] = frozenset({"completed", "policy_failed"})
RUN_TERMINAL_REASONS: frozenset[str] = frozenset(
    {"finished", "agent_exited", "budget_exhausted", "agent_failed", "evaluation_failed", "validation_failed", "assessment_failed"}
)
SCORE_DIRECTIONS: frozenset[str] = frozenset({"maximize", "minimize"})


def finite_number(value: object, what: str) -> float:
    """Return value as a float when it is an int or float (not a bool) and finite; raise ValueError naming what otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{what} must be a finite number")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{what} must be a finite number")
    return number


def _text(value: object, what: str) -> str:
    if type(value) is not str or not value:
        raise ValueError(f"{what} must be non-empty text")
    return value


def _sha256(value: object, what: str) -> str:
    text = _text(value, what)
    hexdigits = text[len("sha256:") :]
    if not text.startswith("sha256:") or len(hexdigits) != 64 or any(c not in "0123456789abcdef" for c in hexdigits):
        raise ValueError(f"{what} must be a lowercase SHA-256 digest (sha256:<64 hex digits>)")
    return text


def _count(value: object, what: str, *, positive: bool = False) -> int:
    if type(value) is not int or value < (1 if positive else 0):
        raise ValueError(f"{what} must be a {'positive' if positive else 'non-negative'} integer")
    return value


_Item = TypeVar("_Item")


def _all_of(values: Iterable[object], kind: type[_Item], what: str) -> tuple[_Item, ...]:
    items = tuple(values)
    if any(type(item) is not kind for item in items):
        raise TypeError(f"{what} must contain {kind.__name__} values")
    return cast("tuple[_Item, ...]", items)


@dataclass(frozen=True, slots=True)
class Feedback:
    """What a Benchmark publishes about a set of Episodes: a finite score, bounded public content and artifacts.

    score becomes a float; content a detached PolicyValue copy; artifacts a tuple. Raises TypeError for a score that is
    not a number or an artifact that is not an Artifact, ValueError for a non-finite score, more than
    FEEDBACK_MAX_ARTIFACTS artifacts, more than FEEDBACK_MAX_ARTIFACT_BYTES in all, or two artifacts with one name.
    """

    score: float
    content: PolicyValue = None
    artifacts: tuple[Artifact, ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.score, bool) or not isinstance(self.score, (int, float)):
            raise TypeError("feedback score must be a finite number")
        score = finite_number(self.score, "feedback score")
        artifacts = _all_of(self.artifacts, Artifact, "feedback artifacts")
        if len(artifacts) > FEEDBACK_MAX_ARTIFACTS:
            raise ValueError(f"feedback holds more than {FEEDBACK_MAX_ARTIFACTS} artifacts")
        if sum(artifact.size for artifact in artifacts) > FEEDBACK_MAX_ARTIFACT_BYTES:
            raise ValueError(f"feedback artifacts hold more than {FEEDBACK_MAX_ARTIFACT_BYTES} bytes in all")
        names = [artifact.name for artifact in artifacts]
        if len(set(names)) != len(names):
            raise ValueError("feedback artifact names must be unique")
        object.__setattr__(self, "score", score)
        object.__setattr__(self, "content", copy_policy_value(self.content))
        object.__setattr__(self, "artifacts", artifacts)


@dataclass(frozen=True, slots=True)
class EpisodeSummary:
    """One Episode's public outcome: completed with a finite reward, or policy_failed with a failure code and no reward."""

    status: EpisodeStatus
    reward: float | None
    steps: int
    failure: PolicyFailureCode | None = None

    def __post_init__(self) -> None:
        _count(self.steps, "episode steps")
        if self.status == "completed":
            if self.failure is not None:
                raise ValueError("a completed Episode has no failure")
            object.__setattr__(self, "reward", finite_number(self.reward, "a completed Episode's reward"))
        elif self.status == "policy_failed":
            if self.reward is not None:
                raise ValueError("a failed Episode publishes no reward")
            if self.failure not in POLICY_FAILURE_CODES:
                raise ValueError(f"a failed Episode needs a failure code, one of {sorted(POLICY_FAILURE_CODES)}")
        else:
            raise ValueError(f"episode status must be one of {sorted(EPISODE_STATUSES)}")


@dataclass(frozen=True, slots=True)
class EvaluationResult:
    """The result of evaluating one Program: Benchmark id, environment-parameters and Program digests, Feedback, Episodes."""

    benchmark_id: str
    environment_digest: str
    program_digest: str
    feedback: Feedback
    episodes: tuple[EpisodeSummary, ...]

    def __post_init__(self) -> None:
        _text(self.benchmark_id, "benchmark_id")
        _sha256(self.environment_digest, "environment_digest")
        _sha256(self.program_digest, "program_digest")
        if type(self.feedback) is not Feedback:
            raise TypeError("feedback must be Feedback")
        object.__setattr__(self, "episodes", _all_of(self.episodes, EpisodeSummary, "episodes"))


@dataclass(frozen=True, slots=True)
class SubmissionResult:
    """One Submission of a Run: its Program, the strictly increasing pool indices it used, budget counts and Feedback."""

    submission_id: str
    program: Program
    episode_indices: tuple[int, ...]
    episodes_used: int
    episodes_remaining: int
    feedback: Feedback
    episodes: tuple[EpisodeSummary, ...] = ()

    def __post_init__(self) -> None:
        _text(self.submission_id, "submission_id")
        if type(self.program) is not Program:
            raise TypeError("program must be Program")
        indices = tuple(self.episode_indices)
        for index in indices:
            check_u64(index, "each episode index")
        if any(later <= earlier for earlier, later in zip(indices, indices[1:], strict=False)):
            raise ValueError("episode_indices must be strictly increasing")
        _count(self.episodes_used, "episodes_used", positive=True)
        _count(self.episodes_remaining, "episodes_remaining")
        if len(indices) != self.episodes_used:
            raise ValueError("episode_indices must number episodes_used")
        if type(self.feedback) is not Feedback:
            raise TypeError("feedback must be Feedback")
        episodes = _all_of(self.episodes, EpisodeSummary, "episodes")
        if len(episodes) != self.episodes_used:
            raise ValueError("episodes must number episodes_used")
        object.__setattr__(self, "episode_indices", indices)
        object.__setattr__(self, "episodes", episodes)

    @property
    def program_digest(self) -> str:
        """The submitted Program's digest."""
        return self.program.digest


def _check_aggregate(score: object, episodes: object, policy_failures: object) -> float:
    total = _count(episodes, "episodes", positive=True)
    if type(policy_failures) is not int or not 0 <= policy_failures <= total:
        raise ValueError("policy_failures must be between zero and episodes")
    return finite_number(score, "score")


@dataclass(frozen=True, slots=True)
class AssessmentResult:
    """The selected Program's aggregate result on the held-out split."""

    submission_id: str
    program_digest: str
    split: str
    episodes: int
    primary_metric: str
    score_direction: Literal["maximize", "minimize"]
    score: float
    policy_failures: int
    feedback_content: PolicyValue = None

    def __post_init__(self) -> None:
        _text(self.submission_id, "submission_id")
        _sha256(self.program_digest, "program_digest")
        _text(self.split, "split")
        _text(self.primary_metric, "primary_metric")
        if self.score_direction not in SCORE_DIRECTIONS:
            raise ValueError("score_direction must be 'maximize' or 'minimize'")
        object.__setattr__(self, "score", _check_aggregate(self.score, self.episodes, self.policy_failures))
        object.__setattr__(self, "feedback_content", copy_policy_value(self.feedback_content))


@dataclass(frozen=True, slots=True)
class ValidationCandidateResult:
    """One candidate's aggregate result on the private validation Episodes."""

    submission_id: str
    program_digest: str
    score: float
    episodes: int
    policy_failures: int
    feedback_content: PolicyValue = None

    def __post_init__(self) -> None:
        _text(self.submission_id, "submission_id")
        _sha256(self.program_digest, "program_digest")
        object.__setattr__(self, "score", _check_aggregate(self.score, self.episodes, self.policy_failures))
        object.__setattr__(self, "feedback_content", copy_policy_value(self.feedback_content))


@dataclass(frozen=True, slots=True)
class ValidationResult:
    """Every candidate's validation result and the one selected."""

    split: str
    episodes_per_candidate: int
    primary_metric: str
    score_direction: Literal["maximize", "minimize"]
    candidates: tuple[ValidationCandidateResult, ...]
    selected_submission_id: str

    def __post_init__(self) -> None:
        _text(self.split, "split")
        _text(self.primary_metric, "primary_metric")
        _count(self.episodes_per_candidate, "episodes_per_candidate", positive=True)
        if self.score_direction not in SCORE_DIRECTIONS:
            raise ValueError("score_direction must be 'maximize' or 'minimize'")
        candidates = _all_of(self.candidates, ValidationCandidateResult, "candidates")
        if not candidates:
            raise TypeError("candidates must contain ValidationCandidateResult values")
        identifiers = [candidate.submission_id for candidate in candidates]
        if len(set(identifiers)) != len(identifiers):
            raise ValueError("validation candidate ids must be unique")
        if self.selected_submission_id not in identifiers:
            raise ValueError("selected_submission_id must name a candidate")
        object.__setattr__(self, "candidates", candidates)


@dataclass(frozen=True, slots=True)
class RunResult:
    """A Run's public outcome: its Submissions, why it ended, and (after a finish) candidates, Validation, Assessment, final Program."""

    final_program: Program | None
    final_submission_id: str | None
    submissions: tuple[SubmissionResult, ...]
    terminal_reason: RunTerminalReason
    candidate_submission_ids: tuple[str, ...] = ()
    validation: ValidationResult | None = None
    assessment: AssessmentResult | None = None

    def __post_init__(self) -> None:
        if self.terminal_reason not in RUN_TERMINAL_REASONS:
            raise ValueError(f"terminal_reason must be one of {sorted(RUN_TERMINAL_REASONS)}")
        if self.final_program is not None and type(self.final_program) is not Program:
            raise TypeError("final_program must be Program or None")
        if (self.final_program is None) != (self.final_submission_id is None):
            raise ValueError("final_program and final_submission_id come together")
        submissions = _all_of(self.submissions, SubmissionResult, "submissions")
        by_id = {submission.submission_id: submission for submission in submissions}
        if len(by_id) != len(submissions):
            raise ValueError("submission ids must be unique")
        candidates = tuple(self.candidate_submission_ids)
        if any(type(candidate) is not str or candidate not in by_id for candidate in candidates) or len(set(candidates)) != len(candidates):
            raise ValueError("candidate_submission_ids must name distinct submissions")
        finished = self.terminal_reason in ("finished", "assessment_failed")
        if candidates and self.terminal_reason not in ("finished", "validation_failed", "assessment_failed"):
            raise ValueError("only a Run that reached its finish has candidates")
        if self.final_submission_id is not None:
            if not finished:
                raise ValueError("only a Run past selection has a final Program")
            if self.final_submission_id not in candidates or by_id[self.final_submission_id].program != self.final_program:
                raise ValueError("the final Program must be the selected candidate's")
        elif finished:
            raise ValueError("a Run past selection needs a final candidate")
        if self.validation is not None:
            if type(self.validation) is not ValidationResult or not finished:
                raise ValueError("validation must be a ValidationResult of a Run past selection")
            if tuple(candidate.submission_id for candidate in self.validation.candidates) != candidates:
                raise ValueError("validation candidates must be the finished candidates")
            if self.validation.selected_submission_id != self.final_submission_id:
                raise ValueError("the final submission must be the one validation selected")
        if self.assessment is not None:
            if type(self.assessment) is not AssessmentResult or self.terminal_reason != "finished":
                raise ValueError("assessment must be an AssessmentResult of a finished Run")
            assert self.final_program is not None
            if self.assessment.submission_id != self.final_submission_id or self.assessment.program_digest != self.final_program.digest:
                raise ValueError("the assessment must be the final Program's")
        object.__setattr__(self, "submissions", submissions)
        object.__setattr__(self, "candidate_submission_ids", candidates)


__all__ = [
    "AssessmentResult",
    "EpisodeStatus",
    "EpisodeSummary",
    "EvaluationResult",
    "Feedback",
    "PolicyFailureCode",
    "RunResult",
    "RunTerminalReason",
    "SubmissionResult",
    "ValidationCandidateResult",
    "ValidationResult",
]
