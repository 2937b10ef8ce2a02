"""Which Submission the Host selects: among validated candidates, and the candidates of an agent that never finished."""

from __future__ import annotations

import math

import pytest

from orchestrator.kernel.selection import CandidateResult, every_completed, fallback_candidates, select_candidate
from orchestrator.kernel.session import SubmissionState, SubmissionView

NAN = float("nan")


def result(order: int, score: float, failures: int = 0) -> CandidateResult:
    return CandidateResult(submission_id=f"s{order + 1:04d}", order=order, score=score, policy_failures=failures)


def submission(number: int, score: float | None, failures: int | None = 0, state: str = "completed") -> SubmissionView:
    return SubmissionView(
        id=f"s{number:04d}",
        number=number,
        program_digest="sha256:" + "0" * 64,
        selector="0",
        indices=(0,),
        state=SubmissionState(state),
        score=score,
        policy_failures=failures,
    )


# select_candidate


def test_the_best_validation_score_wins_when_maximizing():
    results = [result(0, 1.0), result(1, 3.0), result(2, 2.0)]
    assert select_candidate(results, "maximize").submission_id == "s0002"


def test_the_lowest_validation_score_wins_when_minimizing():
    results = [result(0, 1.0), result(1, 3.0), result(2, -2.0)]
    assert select_candidate(results, "minimize").submission_id == "s0003"


@pytest.mark.parametrize("direction", ["maximize", "minimize"])
def test_a_score_tie_goes_to_fewer_policy_failures(direction):
    results = [result(0, 5.0, failures=3), result(1, 5.0, failures=1), result(2, 5.0, failures=2)]
    assert select_candidate(results, direction).order == 1


@pytest.mark.parametrize("direction", ["maximize", "minimize"])
def test_a_tie_in_score_and_failures_goes_to_the_agents_earlier_candidate(direction):
    results = [result(2, 5.0, 1), result(0, 5.0, 1), result(1, 5.0, 1)]
    assert select_candidate(results, direction).order == 0


def test_a_better_score_wins_over_fewer_failures():
    results = [result(0, 5.0, failures=0), result(1, 6.0, failures=4)]
    assert select_candidate(results, "maximize").order == 1
    assert select_candidate(results, "minimize").order == 0


@pytest.mark.parametrize("direction", ["maximize", "minimize"])
def test_a_non_finite_score_ranks_after_every_finite_one_whatever_the_direction(direction):
    # An infinity would otherwise beat every real score in one direction (and NaN scramble the order).
    results = [result(0, NAN), result(1, -math.inf), result(2, math.inf), result(3, 1.0, failures=9)]
    assert select_candidate(results, direction).order == 3
    assert select_candidate(results, direction, failures_break_ties=False).order == 3


@pytest.mark.parametrize("direction", ["maximize", "minimize"])
def test_among_non_finite_scores_failures_then_order_decide(direction):
    results = [result(0, NAN, failures=2), result(1, math.inf, failures=1), result(2, -math.inf, failures=1)]
    assert select_candidate(results, direction).order == 1
    assert select_candidate(results, direction, failures_break_ties=False).order == 0


def test_a_single_candidate_is_selected():
    only = result(0, NAN, 3)
    assert select_candidate([only], "minimize") is only


def test_selecting_from_no_result_is_an_error():
    with pytest.raises(ValueError):
        select_candidate([], "maximize")


@pytest.mark.parametrize("direction", ["max", "Maximize", "", "ascending"])
def test_an_unknown_direction_is_an_error(direction):
    with pytest.raises(ValueError):
        select_candidate([result(0, 1.0)], direction)
    with pytest.raises(ValueError):
        fallback_candidates([submission(1, 1.0)], 4, direction)


# fallback_candidates


def test_the_fallback_takes_the_best_completed_submissions_best_first():
    submissions = [submission(1, 1.0), submission(2, 4.0), submission(3, 2.0), submission(4, 3.0), submission(5, 0.5)]
    assert fallback_candidates(submissions, 3, "maximize") == ("s0002", "s0004", "s0003")
    assert fallback_candidates(submissions, 2, "minimize") == ("s0005", "s0001")


def test_the_fallback_returns_every_completed_submission_when_there_are_fewer_than_the_limit():
    assert fallback_candidates([submission(1, 1.0), submission(2, 2.0)], 4, "maximize") == ("s0002", "s0001")


def test_running_and_voided_submissions_are_never_fallback_candidates():
    submissions = [
        submission(1, None, None, state="voided"),
        submission(2, 1.0),
        submission(3, None, None, state="running"),
    ]
    assert fallback_candidates(submissions, 4, "maximize") == ("s0002",)


def test_no_completed_submission_gives_no_fallback_candidate():
    assert fallback_candidates([], 4, "maximize") == ()
    assert fallback_candidates([submission(1, None, None, state="voided")], 4, "minimize") == ()


@pytest.mark.parametrize("direction", ["maximize", "minimize"])
def test_fallback_ties_go_to_fewer_failures_then_to_the_later_submission(direction):
    submissions = [submission(1, 2.0, 1), submission(2, 2.0, 0), submission(3, 2.0, 1), submission(4, 2.0, 0)]
    assert fallback_candidates(submissions, 4, direction) == ("s0004", "s0002", "s0003", "s0001")


def test_the_fallback_limit_cuts_inside_a_tie_keeping_the_later_submission():
    submissions = [submission(1, 2.0), submission(2, 2.0), submission(3, 1.0)]
    assert fallback_candidates(submissions, 1, "maximize") == ("s0002",)


def test_non_finite_train_scores_rank_last_in_the_fallback_whatever_the_direction():
    submissions = [submission(1, NAN, 1), submission(2, -math.inf), submission(3, math.inf), submission(4, 1.0, 5)]
    assert fallback_candidates(submissions, 4, "maximize") == ("s0004", "s0003", "s0002", "s0001")
    assert fallback_candidates(submissions, 4, "minimize") == ("s0004", "s0003", "s0002", "s0001")
    assert fallback_candidates(submissions, 1, "minimize") == ("s0004",)


@pytest.mark.parametrize("limit", [0, -1, True, 1.5])
def test_a_fallback_limit_below_one_is_an_error(limit):
    with pytest.raises(ValueError):
        fallback_candidates([submission(1, 1.0)], limit, "maximize")


# the published rule: every completed Submission a candidate, ties to the latest

def test_every_completed_submission_is_a_candidate_latest_first():
    submissions = [submission(1, 3.0), submission(2, None, state="running"), submission(3, 5.0, state="voided"),
                   submission(4, 1.0), submission(5, 2.0, failures=3)]
    assert every_completed(submissions) == ("s0005", "s0004", "s0001")


@pytest.mark.parametrize("direction", ["maximize", "minimize"])
def test_under_the_published_rule_a_tie_goes_to_the_latest_submission_whatever_its_failures(direction):
    latest_first = [result(0, 7.0, failures=2), result(1, 7.0, failures=0), result(2, 7.0, failures=0)]
    assert select_candidate(latest_first, direction, failures_break_ties=False).order == 0
    assert select_candidate(latest_first, direction).order == 1


def test_under_the_published_rule_the_best_validation_score_still_wins():
    latest_first = [result(0, 1.0), result(1, 9.0, failures=5), result(2, 4.0)]
    assert select_candidate(latest_first, "maximize", failures_break_ties=False).order == 1
    assert select_candidate(latest_first, "minimize", failures_break_ties=False).order == 0
