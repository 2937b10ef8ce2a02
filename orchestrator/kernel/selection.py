"""How the Host picks the one Submission of a Run: among validated candidates, or, without a finish, the candidates themselves."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.kernel.session import SubmissionState, SubmissionView

DIRECTIONS = ("maximize", "minimize")


@dataclass(frozen=True, slots=True, kw_only=True)
class CandidateResult:
    """A candidate's Validation Assessment: its score on the private Validation Episodes.

    order is its 0-based position in the agent's candidate list.
    """

    submission_id: str
    order: int
    score: float
    policy_failures: int


def select_candidate(results: Sequence[CandidateResult], direction: str, *, failures_break_ties: bool = True) -> CandidateResult:
    """Return the selected candidate: best Validation score, then fewer policy failures, then the agent's order.

    direction is "maximize" or "minimize". A non-finite score (NaN, +inf,
    -inf: the Host refuses them, but records of an older version may hold
    them) ranks after every finite one, whatever the direction; such
    candidates are ordered among themselves by failures, then order. Without failures_break_ties a tie on
    the score goes straight to the order (the published rule, whose candidates
    are listed latest first). Raises ValueError for another direction or no results.
    """
    sign = _sign(direction)
    if not results:
        raise ValueError("there is no candidate result to select from")
    if not failures_break_ties:
        return min(results, key=lambda r: (*_score_key(r.score, sign), r.order))
    return min(results, key=lambda r: (*_score_key(r.score, sign), r.policy_failures, r.order))


def every_completed(submissions: Sequence[SubmissionView]) -> tuple[str, ...]:
    """Return every completed Submission, latest first: the candidates of the published rule.

    Listed latest first, so that select_candidate with failures_break_ties=False
    breaks a tie on Validation in favour of the latest Submission.
    """
    completed = [s for s in submissions if s.state == SubmissionState.COMPLETED and s.score is not None]
    return tuple(s.id for s in sorted(completed, key=lambda s: -s.number))


def fallback_candidates(submissions: Sequence[SubmissionView], max_candidates: int, direction: str) -> tuple[str, ...]:
    """Return the candidates of an agent that stopped without finishing, best first.

    The rule: among completed Submissions, the max_candidates best by train
    Feedback score (highest first for "maximize", lowest first for
    "minimize"; a non-finite score ranks after every finite one); ties broken by fewer
    policy failures, then by the later Submission first (a later Program
    embodies more of the agent's learning). Running and voided Submissions
    never count. The empty tuple when no Submission completed. Raises
    ValueError for another direction or max_candidates below 1.
    """
    sign = _sign(direction)
    if isinstance(max_candidates, bool) or not isinstance(max_candidates, int) or max_candidates < 1:
        raise ValueError(f"max_candidates must be a positive integer, not {max_candidates!r}")
    scored = [(s, s.score) for s in submissions if s.state == SubmissionState.COMPLETED and s.score is not None]
    ranked = sorted(scored, key=lambda pair: (*_score_key(pair[1], sign), pair[0].policy_failures or 0, -pair[0].number))
    return tuple(s.id for s, _ in ranked[:max_candidates])


def _sign(direction: str) -> int:
    """-1 for maximize, 1 for minimize: so that a smaller key is always better."""
    if direction == "maximize":
        return -1
    if direction == "minimize":
        return 1
    raise ValueError(f"direction must be one of {', '.join(DIRECTIONS)}, not {direction!r}")


def _score_key(score: float, sign: int) -> tuple[bool, float]:
    # NaN compares false with everything, so it would scramble a sort, and an infinity would beat every real
    # score in one direction: every non-finite score gets one rank of its own, last.
    if not math.isfinite(score):
        return (True, 0.0)
    return (False, sign * score)
