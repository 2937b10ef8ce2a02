"""The session rules of a Run: admitting Submissions against the Budget, completing, voiding, finishing, replaying."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from orchestrator.kernel.rejections import RejectionCode, RequestRejected
from orchestrator.kernel.session import (
    Budget,
    FinishPolicy,
    SessionEvent,
    SessionState,
    SubmissionState,
)

DIGEST = "sha256:" + "ab" * 32


def budget(**overrides: Any) -> Budget:
    values: dict[str, Any] = {"episodes": 40, "max_submissions": 5, "pool_size": 32}
    values.update(overrides)
    return Budget(**values)


class Logged:
    """A SessionState driven the way the Host drives it: every change it makes is also written to an event log."""

    def __init__(self, b: Budget) -> None:
        self.state = SessionState(b)
        self.events: list[dict[str, Any]] = []

    def admit(self, selector: str, digest: str = DIGEST):
        view = self.state.admit(selector, digest)
        self.events.append(
            {"type": "submission_admitted", "id": view.id, "selector": view.selector, "program_digest": digest,
             "indices": list(view.indices)}
        )
        return view

    def complete(self, submission_id: str, score: float, failures: int = 0):
        view = self.state.complete(submission_id, score, failures)
        self.events.append({"type": "submission_completed", "id": submission_id, "score": score, "policy_failures": failures})
        return view

    def void(self, submission_id: str):
        view = self.state.void(submission_id)
        self.events.append({"type": "submission_voided", "id": submission_id})
        return view

    def finish(self, candidates: list[str]):
        chosen = self.state.finish(candidates)
        self.events.append({"type": "finished", "candidates": list(chosen)})
        return chosen

    def run(self, selector: str, score: float, failures: int = 0) -> str:
        view = self.admit(selector)
        self.complete(view.id, score, failures)
        return view.id


def rejected(state: SessionState, code: RejectionCode, call, *args):
    """Assert call(*args) is refused with code and leaves the whole status unchanged; return the message."""
    before = state.status()
    with pytest.raises(RequestRejected) as caught:
        call(*args)
    assert caught.value.code is code, caught.value.message
    assert state.status() == before
    assert caught.value.message
    return caught.value.message


# Budget


def test_a_budget_defaults_to_early_finish_four_candidates_and_no_per_submission_cap():
    b = Budget(episodes=10, max_submissions=2, pool_size=8)
    assert b.finish_policy is FinishPolicy.ALLOW_EARLY
    assert b.max_candidates == 4
    assert b.max_episodes_per_submission is None


@pytest.mark.parametrize(
    "overrides",
    [
        {"episodes": 0},
        {"episodes": -3},
        {"max_submissions": 0},
        {"pool_size": 0},
        {"max_episodes_per_submission": 0},
        {"max_candidates": 0},
        {"episodes": True},
        {"episodes": 2.5},
        {"finish_policy": "whenever"},
    ],
)
def test_a_budget_refuses_counts_below_one_and_unknown_policies(overrides):
    with pytest.raises(ValueError):
        budget(**overrides)


def test_a_budget_accepts_the_finish_policy_by_its_value():
    assert budget(finish_policy="require_exhaustion").finish_policy is FinishPolicy.REQUIRE_EXHAUSTION


# admitting


def test_a_fresh_session_has_spent_nothing():
    status = SessionState(budget(max_episodes_per_submission=8)).status()
    assert (status.episodes_total, status.episodes_used, status.episodes_left) == (40, 0, 40)
    assert (status.submissions_used, status.submissions_left) == (0, 5)
    assert status.pool_size == 32
    assert status.max_episodes_per_submission == 8
    assert status.max_candidates == 4
    assert status.finish_policy is FinishPolicy.ALLOW_EARLY
    assert not status.finished
    assert status.candidates == ()
    assert status.submissions == ()
    assert status.in_flight is None


def test_admitting_charges_every_selected_episode_at_once_and_puts_the_submission_in_flight():
    state = SessionState(budget())
    view = state.admit(" 0:8 , 12,20:24", DIGEST)
    assert view.id == "s0001"
    assert view.number == 1
    assert view.program_digest == DIGEST
    assert view.selector == "0:8,12,20:24"
    assert view.indices == (*range(8), 12, 20, 21, 22, 23)
    assert view.state is SubmissionState.RUNNING and view.state == "running"
    assert view.score is None and view.policy_failures is None
    status = state.status()
    assert (status.episodes_used, status.episodes_left) == (13, 27)
    assert (status.submissions_used, status.submissions_left) == (1, 4)
    assert status.in_flight == "s0001" == state.in_flight()
    assert status.submissions == (view,)


def test_reusing_indices_in_a_later_submission_costs_again():
    s = Logged(budget())
    s.run("0:4", 1.0)
    s.run("0:4", 2.0)
    assert s.state.status().episodes_used == 8


def test_ids_follow_admission_order():
    s = Logged(budget())
    assert [s.run(f"{i}", float(i)) for i in range(3)] == ["s0001", "s0002", "s0003"]
    assert [v.number for v in s.state.status().submissions] == [1, 2, 3]


def test_completing_records_the_train_score_and_frees_the_session():
    state = SessionState(budget())
    view = state.admit("0:4", DIGEST)
    done = state.complete(view.id, 0.75, 1)
    assert done.state is SubmissionState.COMPLETED
    assert (done.score, done.policy_failures) == (0.75, 1)
    status = state.status()
    assert status.in_flight is None and state.in_flight() is None
    assert status.submissions == (done,)
    assert status.episodes_used == 4


def test_an_admitted_submission_may_use_exactly_what_is_left():
    state = SessionState(budget(episodes=6, max_episodes_per_submission=6))
    view = state.admit("0:6", DIGEST)
    state.complete(view.id, 1.0, 0)
    assert state.status().episodes_left == 0


def test_already_finished_refuses_a_submission():
    s = Logged(budget())
    first = s.run("0", 1.0)
    s.finish([first])
    rejected(s.state, RejectionCode.ALREADY_FINISHED, s.state.admit, "1", DIGEST)


def test_busy_refuses_a_second_submission_while_one_is_in_flight():
    state = SessionState(budget())
    state.admit("0", DIGEST)
    message = rejected(state, RejectionCode.BUSY, state.admit, "1", DIGEST)
    assert "s0001" in message


def test_a_closed_session_refuses_submissions_and_the_finish_as_session_closed_and_changes_nothing():
    s = Logged(budget())
    done = s.run("0:2", 1.0)
    s.state.close()
    assert s.state.closed
    assert "ending" in rejected(s.state, RejectionCode.SESSION_CLOSED, s.state.admit, "2:4", DIGEST)
    rejected(s.state, RejectionCode.SESSION_CLOSED, s.state.check, "2:4")
    rejected(s.state, RejectionCode.SESSION_CLOSED, s.state.finish, [done])
    s.state.close()  # twice is harmless
    assert s.state.status().episodes_used == 2


def test_closing_leaves_the_submission_in_flight_to_complete_or_void_and_a_finished_run_says_finished():
    state = SessionState(budget())
    running = state.admit("0:4", DIGEST)
    state.close()
    rejected(state, RejectionCode.SESSION_CLOSED, state.admit, "4:8", DIGEST)  # not busy: closed comes first
    assert state.complete(running.id, 2.0, 0).state is SubmissionState.COMPLETED
    finished = Logged(budget())
    finished.finish([finished.run("0", 1.0)])
    finished.state.close()
    rejected(finished.state, RejectionCode.ALREADY_FINISHED, finished.state.admit, "1", DIGEST)


def test_a_replayed_session_is_open_again_whatever_the_live_one_was():
    s = Logged(budget())
    s.run("0", 1.0)
    s.state.close()
    replayed = SessionState.replay(budget(), s.events)
    assert not replayed.closed
    assert replayed.admit("1", DIGEST).id == "s0002"


@pytest.mark.parametrize("settle", ["complete", "void"])
def test_waiting_until_settled_returns_as_soon_as_the_submission_in_flight_completes_or_is_voided(settle):
    state = SessionState(budget())
    assert state.wait_until_settled(0.0)  # nothing in flight
    running = state.admit("0:4", DIGEST)
    assert not state.wait_until_settled(0.0)
    waited: list[bool] = []
    waiter = threading.Thread(target=lambda: waited.append(state.wait_until_settled(60.0)))
    waiter.start()
    if settle == "complete":
        state.complete(running.id, 1.0, 0)
    else:
        state.void(running.id)
    waiter.join(10.0)
    assert not waiter.is_alive() and waited == [True]


def test_a_malformed_selector_is_refused():
    state = SessionState(budget())
    rejected(state, RejectionCode.INVALID_SELECTOR, state.admit, "3,2", DIGEST)
    rejected(state, RejectionCode.INVALID_SELECTOR, state.admit, "", DIGEST)


def test_an_index_outside_the_pool_is_refused():
    state = SessionState(budget())
    rejected(state, RejectionCode.INDEX_OUT_OF_RANGE, state.admit, "30:33", DIGEST)


def test_more_episodes_than_a_submission_may_use_is_refused():
    state = SessionState(budget(max_episodes_per_submission=4))
    message = rejected(state, RejectionCode.TOO_MANY_EPISODES, state.admit, "0:5", DIGEST)
    assert "4" in message
    assert state.admit("0:4", DIGEST).indices == (0, 1, 2, 3)


def test_a_submission_beyond_max_submissions_is_refused():
    s = Logged(budget(max_submissions=2))
    s.run("0", 1.0)
    s.run("1", 1.0)
    rejected(s.state, RejectionCode.SUBMISSIONS_EXHAUSTED, s.state.admit, "2", DIGEST)


def test_selecting_more_episodes_than_are_left_is_refused():
    s = Logged(budget(episodes=10))
    s.run("0:8", 1.0)
    message = rejected(s.state, RejectionCode.BUDGET_EXHAUSTED, s.state.admit, "0:3", DIGEST)
    assert "2" in message and "3" in message
    assert s.state.admit("0:2", DIGEST).id == "s0002"


def test_admission_checks_come_in_the_documented_order():
    # finished before busy cannot both hold (finish needs nothing in flight), so start from busy.
    state = SessionState(budget(max_episodes_per_submission=2))
    state.admit("0", DIGEST)
    rejected(state, RejectionCode.BUSY, state.admit, "nonsense", DIGEST)
    state.complete("s0001", 1.0, 0)
    # a bad selector before the per-Submission cap
    rejected(state, RejectionCode.INDEX_OUT_OF_RANGE, state.admit, "0:40", DIGEST)

    exhausted = Logged(budget(episodes=3, max_submissions=1, max_episodes_per_submission=2))
    exhausted.run("0:2", 1.0)
    # both Submissions and Episodes are exhausted here; the cap is checked before either
    rejected(exhausted.state, RejectionCode.TOO_MANY_EPISODES, exhausted.state.admit, "0:3", DIGEST)
    rejected(exhausted.state, RejectionCode.SUBMISSIONS_EXHAUSTED, exhausted.state.admit, "0:2", DIGEST)

    finished = Logged(budget())
    finished.finish([finished.run("0", 1.0)])
    rejected(finished.state, RejectionCode.ALREADY_FINISHED, finished.state.admit, "nonsense", DIGEST)


def test_a_refused_submission_does_not_use_up_an_id():
    state = SessionState(budget())
    with pytest.raises(RequestRejected):
        state.admit("a", DIGEST)
    assert state.admit("0", DIGEST).id == "s0001"


# voiding


def test_voiding_refunds_the_episodes_and_the_submission():
    s = Logged(budget(episodes=10, max_submissions=2))
    s.run("0:3", 1.0)
    view = s.admit("0:5")
    voided = s.void(view.id)
    assert voided.state is SubmissionState.VOIDED
    assert voided.score is None and voided.policy_failures is None
    status = s.state.status()
    assert (status.episodes_used, status.episodes_left) == (3, 7)
    assert (status.submissions_used, status.submissions_left) == (1, 1)
    assert status.in_flight is None
    assert [v.state for v in status.submissions] == ["completed", "voided"]


def test_a_withdrawn_admission_leaves_no_trace_and_only_the_submission_in_flight_can_be_withdrawn():
    state = SessionState(budget(episodes=10, max_submissions=2))
    first = state.admit("0:3", "a" * 64)
    state.complete(first.id, 1.0, 0)
    with pytest.raises(ValueError):
        state.withdraw(first.id)  # completed: not in flight
    second = state.admit("0:5", "b" * 64)
    state.withdraw(second.id)
    status = state.status()
    assert (status.episodes_used, status.submissions_used, status.in_flight) == (3, 1, None)
    assert [v.id for v in status.submissions] == [first.id]
    assert state.admit("0:2", "c" * 64).id == second.id  # its number is free again: the event log never held it


def test_ids_are_never_reused_after_a_void():
    s = Logged(budget())
    s.void(s.admit("0").id)
    second = s.admit("1")
    assert (second.id, second.number) == ("s0002", 2)
    s.void(second.id)
    assert s.run("2", 1.0) == "s0003"
    assert [v.id for v in s.state.status().submissions] == ["s0001", "s0002", "s0003"]


def test_a_refunded_budget_can_be_spent_again():
    s = Logged(budget(episodes=4, max_submissions=1))
    s.void(s.admit("0:4").id)
    assert s.admit("0:4").id == "s0002"


@pytest.mark.parametrize("operation", ["complete", "void"])
def test_only_the_submission_in_flight_can_be_completed_or_voided(operation):
    s = Logged(budget())
    first = s.run("0", 1.0)

    def act(submission_id):
        if operation == "complete":
            return s.state.complete(submission_id, 1.0, 0)
        return s.state.void(submission_id)

    before = s.state.status()
    for wrong in (first, "s0002", "nope"):
        with pytest.raises(ValueError):
            act(wrong)
    running = s.admit("1")
    for wrong in (first, "s0003"):
        with pytest.raises(ValueError):
            act(wrong)
    assert act(running.id).id == running.id
    with pytest.raises(ValueError):
        act(running.id)  # no longer in flight
    assert before.submissions[0] == s.state.status().submissions[0]


@pytest.mark.parametrize(("score", "failures"), [(1.0, -1), (1.0, 3), (1.0, 1.5), (1.0, True), ("1.0", 0), (None, 0)])
def test_completing_refuses_impossible_feedback_and_keeps_the_submission_in_flight(score, failures):
    state = SessionState(budget())
    view = state.admit("0:2", DIGEST)
    before = state.status()
    with pytest.raises(ValueError):
        state.complete(view.id, score, failures)
    assert state.status() == before


def test_a_submission_may_fail_on_every_episode():
    state = SessionState(budget())
    view = state.admit("0:2", DIGEST)
    assert state.complete(view.id, float("-inf"), 2).policy_failures == 2


# finishing


def test_finishing_records_the_candidates_in_the_agents_order():
    s = Logged(budget())
    ids = [s.run(f"{i}", float(i)) for i in range(3)]
    assert s.state.finish([ids[2], ids[0]]) == (ids[2], ids[0])
    status = s.state.status()
    assert status.finished
    assert status.candidates == (ids[2], ids[0])


def test_finishing_twice_is_refused():
    s = Logged(budget())
    first = s.run("0", 1.0)
    s.finish([first])
    rejected(s.state, RejectionCode.ALREADY_FINISHED, s.state.finish, [first])


def test_finishing_while_a_submission_is_in_flight_is_refused():
    s = Logged(budget())
    first = s.run("0", 1.0)
    s.admit("1")
    rejected(s.state, RejectionCode.BUSY, s.state.finish, [first])


def test_finishing_with_no_candidates_is_refused():
    s = Logged(budget())
    s.run("0", 1.0)
    rejected(s.state, RejectionCode.NO_CANDIDATES, s.state.finish, [])


def test_a_candidate_must_be_a_completed_submission():
    s = Logged(budget())
    good = s.run("0", 1.0)
    voided = s.admit("1").id
    s.void(voided)
    for bad in ("s0099", voided, "", 7, None):
        message = rejected(s.state, RejectionCode.UNKNOWN_SUBMISSION, s.state.finish, [good, bad])
        assert repr(bad) in message


def test_a_candidate_named_twice_is_refused():
    s = Logged(budget())
    good = s.run("0", 1.0)
    rejected(s.state, RejectionCode.DUPLICATE_CANDIDATE, s.state.finish, [good, good])


def test_more_candidates_than_validated_is_refused():
    s = Logged(budget(max_candidates=2))
    ids = [s.run(f"{i}", 1.0) for i in range(3)]
    rejected(s.state, RejectionCode.TOO_MANY_CANDIDATES, s.state.finish, ids)
    assert s.state.finish(ids[:2]) == tuple(ids[:2])


def test_finish_checks_come_in_the_documented_order():
    s = Logged(budget(max_candidates=2, finish_policy="require_exhaustion"))
    a, b = s.run("0", 1.0), s.run("1", 1.0)
    rejected(s.state, RejectionCode.UNKNOWN_SUBMISSION, s.state.finish, [a, a, "zzz"])
    rejected(s.state, RejectionCode.DUPLICATE_CANDIDATE, s.state.finish, [a, a, b])
    s.run("2", 1.0)
    rejected(s.state, RejectionCode.TOO_MANY_CANDIDATES, s.state.finish, [a, b, "s0003"])
    rejected(s.state, RejectionCode.FINISH_NOT_ALLOWED, s.state.finish, [a, b])
    s.admit("3")
    rejected(s.state, RejectionCode.BUSY, s.state.finish, [])


def test_early_finish_is_allowed_under_allow_early():
    s = Logged(budget(finish_policy=FinishPolicy.ALLOW_EARLY))
    first = s.run("0", 1.0)
    assert s.state.finish([first]) == (first,)
    assert s.state.status().episodes_left == 39


def test_require_exhaustion_refuses_finishing_while_the_budget_can_pay_for_a_submission():
    s = Logged(budget(episodes=10, max_submissions=3, finish_policy="require_exhaustion"))
    first = s.run("0:9", 1.0)
    message = rejected(s.state, RejectionCode.FINISH_NOT_ALLOWED, s.state.finish, [first])
    assert "1 Episodes" in message


def test_require_exhaustion_allows_finishing_once_no_episode_is_left():
    s = Logged(budget(episodes=10, max_submissions=3, finish_policy="require_exhaustion"))
    first = s.run("0:10", 1.0)
    assert s.state.finish([first]) == (first,)


def test_require_exhaustion_allows_finishing_once_no_submission_is_left():
    s = Logged(budget(episodes=40, max_submissions=2, finish_policy="require_exhaustion"))
    ids = [s.run("0", 1.0), s.run("1", 2.0)]
    assert s.state.finish(ids) == tuple(ids)


def test_a_void_makes_an_exhausted_budget_unexhausted_again():
    s = Logged(budget(episodes=10, max_submissions=2, finish_policy="require_exhaustion"))
    first = s.run("0:5", 1.0)
    s.void(s.admit("0:5").id)
    rejected(s.state, RejectionCode.FINISH_NOT_ALLOWED, s.state.finish, [first])


# threads


def test_two_concurrent_submits_admit_exactly_one_and_refuse_the_other_as_busy():
    for _ in range(50):
        state = SessionState(budget())
        barrier = threading.Barrier(2)
        outcomes: list[object] = []

        def submit(selector: str, state=state, barrier=barrier, outcomes=outcomes) -> None:
            barrier.wait()
            try:
                outcomes.append(state.admit(selector, DIGEST))
            except RequestRejected as error:
                outcomes.append(error.code)

        threads = [threading.Thread(target=submit, args=(selector,)) for selector in ("0:4", "4:8")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(type(o).__name__ for o in outcomes) == ["RejectionCode", "SubmissionView"]
        assert RejectionCode.BUSY in outcomes
        status = state.status()
        assert status.episodes_used == 4
        assert status.submissions_used == 1
        assert len(status.submissions) == 1
        assert status.in_flight == status.submissions[0].id == "s0001"


def test_a_submit_from_another_thread_is_refused_while_one_is_in_flight():
    state = SessionState(budget())
    running = state.admit("0:4", DIGEST)
    refused: list[RejectionCode] = []

    def second() -> None:
        try:
            state.admit("4:8", DIGEST)
        except RequestRejected as error:
            refused.append(error.code)

    thread = threading.Thread(target=second)
    thread.start()
    thread.join()
    assert refused == [RejectionCode.BUSY]
    assert state.in_flight() == running.id
    assert state.status().episodes_used == 4


def test_many_threads_submitting_and_completing_keep_the_books_balanced():
    state = SessionState(budget(episodes=1000, max_submissions=200, pool_size=8))
    barrier = threading.Barrier(8)

    def worker(number: int) -> None:
        barrier.wait()
        for _ in range(200):
            try:
                view = state.admit(f"{number}", DIGEST)
            except RequestRejected:
                continue
            if view.number % 3:
                state.complete(view.id, 1.0, 0)
            else:
                state.void(view.id)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    status = state.status()
    completed = [v for v in status.submissions if v.state == "completed"]
    assert status.in_flight is None
    assert status.episodes_used == len(completed) == status.submissions_used
    assert [v.number for v in status.submissions] == list(range(1, len(status.submissions) + 1))


# replay


def test_replay_reproduces_the_status_from_the_event_log():
    s = Logged(budget(episodes=30, max_submissions=6))
    a = s.run("0:8", 0.5, 2)
    s.void(s.admit("8:12").id)
    b = s.run("0:4,12", 0.9)
    s.run("20:22", float("-inf"), 2)
    s.finish([b, a])
    replayed = SessionState.replay(s.state.budget, s.events)
    assert replayed.status() == s.state.status()
    assert replayed.status().finished


def test_replay_leaves_an_interrupted_submission_in_flight_for_the_caller_to_void():
    s = Logged(budget())
    s.run("0:4", 1.0)
    s.admit("4:10")
    replayed = SessionState.replay(s.state.budget, s.events)
    assert replayed.in_flight() == "s0002"
    assert replayed.status() == s.state.status()
    assert replayed.status().episodes_used == 10
    voided = replayed.void("s0002")
    assert voided.state is SubmissionState.VOIDED
    assert replayed.status().episodes_used == 4
    assert replayed.admit("0", DIGEST).id == "s0003"


def test_replay_ignores_events_of_other_layers():
    s = Logged(budget())
    s.run("0", 1.0)
    noisy = [{"type": "run_started", "seed": 3}, *s.events[:1], {"type": "episode_finished", "index": 0}, *s.events[1:],
             {"note": "no type at all"}]
    assert SessionState.replay(s.state.budget, noisy).status() == s.state.status()


def test_replay_accepts_the_event_type_members():
    s = Logged(budget())
    s.run("0", 1.0)
    typed = [{**event, "type": SessionEvent(event["type"])} for event in s.events]
    assert SessionState.replay(s.state.budget, typed).status() == s.state.status()


def test_replay_of_an_empty_log_is_a_fresh_session():
    assert SessionState.replay(budget(), []).status() == SessionState(budget()).status()


@pytest.mark.parametrize(
    "events",
    [
        [{"type": "submission_admitted", "id": "s0002", "selector": "0", "program_digest": DIGEST, "indices": [0]}],
        [{"type": "submission_admitted", "id": "s0001", "selector": "0:2", "program_digest": DIGEST, "indices": [0]}],
        [{"type": "submission_admitted", "id": "s0001", "selector": "99", "program_digest": DIGEST, "indices": [99]}],
        [{"type": "submission_admitted", "id": "s0001", "selector": "0", "program_digest": DIGEST}],
        [{"type": "submission_completed", "id": "s0001", "score": 1.0, "policy_failures": 0}],
        [{"type": "submission_voided", "id": "s0001"}],
        [{"type": "finished", "candidates": ["s0001"]}],
        [
            {"type": "submission_admitted", "id": "s0001", "selector": "0", "program_digest": DIGEST, "indices": [0]},
            {"type": "submission_admitted", "id": "s0002", "selector": "1", "program_digest": DIGEST, "indices": [1]},
        ],
    ],
    ids=["id-skips", "indices-differ", "out-of-pool", "field-missing", "complete-unknown", "void-unknown",
         "finish-unknown", "two-in-flight"],
)
def test_replay_refuses_a_log_that_contradicts_the_rules(events):
    with pytest.raises(ValueError, match="event"):
        SessionState.replay(budget(), events)


def test_replay_refuses_a_log_spending_more_than_the_budget():
    s = Logged(budget(episodes=40))
    s.run("0:30", 1.0)
    with pytest.raises(ValueError, match="budget_exhausted"):
        SessionState.replay(budget(episodes=20), s.events)
