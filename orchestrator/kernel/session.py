"""A Run's Budget and the session rules: which Submissions are admitted, what they cost, and when the agent may finish."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from orchestrator.kernel.rejections import RejectionCode, RequestRejected
from orchestrator.kernel.selectors import format_selector, parse_selector

__all__ = [
    "Budget",
    "FinishPolicy",
    "RequestRejected",
    "RejectionCode",
    "SessionEvent",
    "SessionState",
    "StatusView",
    "SubmissionState",
    "SubmissionView",
]


class FinishPolicy(StrEnum):
    ALLOW_EARLY = "allow_early"
    REQUIRE_EXHAUSTION = "require_exhaustion"  # finish only once the Budget can pay for no further Submission


class SubmissionState(StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    VOIDED = "voided"  # refunded: an infrastructure error or an orchestrator crash interrupted it


class SessionEvent(StrEnum):
    """The "type" of each event-log entry SessionState.replay understands."""

    SUBMISSION_ADMITTED = "submission_admitted"
    SUBMISSION_COMPLETED = "submission_completed"
    SUBMISSION_VOIDED = "submission_voided"
    FINISHED = "finished"


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """What a Run lets the agent spend.

    episodes: total Episode units; every selected index costs one, a repeated
    index too. max_episodes_per_submission: None means only the Episodes left
    bound a Submission. finish_policy accepts a FinishPolicy or its value.
    Raises ValueError for a count below 1 or an unknown finish policy.
    """

    episodes: int
    max_submissions: int
    pool_size: int
    max_episodes_per_submission: int | None = None
    finish_policy: FinishPolicy = FinishPolicy.ALLOW_EARLY
    max_candidates: int = 4

    def __post_init__(self) -> None:
        for name in ("episodes", "max_submissions", "pool_size", "max_candidates"):
            _require_positive(name, getattr(self, name))
        if self.max_episodes_per_submission is not None:
            _require_positive("max_episodes_per_submission", self.max_episodes_per_submission)
        try:
            policy = FinishPolicy(self.finish_policy)
        except ValueError:
            allowed = ", ".join(p.value for p in FinishPolicy)
            raise ValueError(f"finish_policy must be one of {allowed}, not {self.finish_policy!r}") from None
        object.__setattr__(self, "finish_policy", policy)  # frozen: normalise a plain string to the member


def _require_positive(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, not {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class SubmissionView:
    """One Submission as the agent sees it.

    number is its 1-based place among all admitted Submissions, voided ones
    included. score and policy_failures are None until it completes.
    """

    id: str
    number: int
    program_digest: str
    selector: str
    indices: tuple[int, ...]
    state: SubmissionState
    score: float | None
    policy_failures: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusView:
    """A consistent snapshot of a Run's session: Budget spent and left, Submissions, candidates.

    Voided Submissions are listed but spend nothing and do not count as used.
    """

    episodes_total: int
    episodes_used: int
    episodes_left: int
    submissions_used: int
    submissions_left: int
    pool_size: int
    max_episodes_per_submission: int | None
    max_candidates: int
    finish_policy: FinishPolicy
    finished: bool
    candidates: tuple[str, ...]
    submissions: tuple[SubmissionView, ...]
    in_flight: str | None


@dataclass(slots=True, kw_only=True)
class _Submission:
    id: str
    number: int
    program_digest: str
    selector: str
    indices: tuple[int, ...]
    state: SubmissionState = SubmissionState.RUNNING
    score: float | None = None
    policy_failures: int | None = None

    def view(self) -> SubmissionView:
        return SubmissionView(
            id=self.id,
            number=self.number,
            program_digest=self.program_digest,
            selector=self.selector,
            indices=self.indices,
            state=self.state,
            score=self.score,
            policy_failures=self.policy_failures,
        )


@dataclass(slots=True)
class _Fields:
    submissions: dict[str, _Submission] = field(default_factory=dict)  # in admission order
    episodes_used: int = 0
    submissions_used: int = 0
    in_flight: str | None = None
    finished: bool = False
    candidates: tuple[str, ...] = ()
    closed: bool = False  # the agent phase is ending: nothing more is admitted; never logged, so a resume reopens


class SessionState:
    """The one owner of a Run's budget state: Episodes and Submissions spent, the one in flight, the finish.

    A single threading.Lock protects every field; every method takes it, so all
    methods are safe to call from many threads, and each check-then-change
    happens under the lock (two concurrent submits cannot both pass BUSY).
    A refused request raises RequestRejected and changes nothing.

    At most one Submission is in flight. Admitting one charges its Episodes at
    once (a started evaluation spends them); voiding it refunds the Episodes and
    the Submission. Ids are "s0001", "s0002", ... in admission order and never
    reused, a voided id included. The caller logs each change it makes; replay
    rebuilds the state from that log.

    close() ends the agent's side: from then on Submissions and the finish are
    refused with SESSION_CLOSED, and wait_until_settled() lets the Host wait
    for the one in flight to complete or be voided.
    """

    def __init__(self, budget: Budget) -> None:
        self._budget = budget
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)  # notified whenever no Submission is left in flight
        self._fields = _Fields()

    @property
    def budget(self) -> Budget:
        return self._budget

    @classmethod
    def replay(cls, budget: Budget, events: Iterable[Mapping[str, Any]]) -> SessionState:
        """Return the state an event log describes, applying each event with the same rules as the live methods.

        Entries are mappings with a "type" (see SessionEvent) and fields:
        submission_admitted: id, selector, program_digest, indices;
        submission_completed: id, score, policy_failures; submission_voided: id;
        finished: candidates. Other types are ignored: other layers log other
        events. A Submission admitted but neither completed nor voided stays in
        flight, for the caller to void. Raises ValueError when an event
        contradicts the rules or the state so far (a corrupt or foreign log).
        """
        state = cls(budget)
        for position, event in enumerate(events, start=1):
            try:
                state._apply(event)
            except (RequestRejected, ValueError, KeyError, TypeError) as error:
                if isinstance(error, RequestRejected):
                    detail = f"{error.code.value}: {error.message}"
                elif isinstance(error, KeyError):
                    detail = f"field {error} is missing"
                else:
                    detail = str(error)
                raise ValueError(f"event {position} ({event.get('type')!r}) cannot be replayed: {detail}") from error
        return state

    def _apply(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if kind == SessionEvent.SUBMISSION_ADMITTED:
            with self._lock:
                expected = _submission_id(len(self._fields.submissions) + 1)
                if event["id"] != expected:
                    raise ValueError(f"admitted id {event['id']!r} where the next id is {expected!r}")
                view = self._admit_locked(event["selector"], event["program_digest"])
                if view.indices != tuple(event["indices"]):
                    raise ValueError(f"logged indices differ from those selector {event['selector']!r} selects")
        elif kind == SessionEvent.SUBMISSION_COMPLETED:
            self.complete(event["id"], event["score"], event["policy_failures"])
        elif kind == SessionEvent.SUBMISSION_VOIDED:
            self.void(event["id"])
        elif kind == SessionEvent.FINISHED:
            self.finish(list(event["candidates"]))

    def in_flight(self) -> str | None:
        """Return the id of the Submission being evaluated, or None."""
        with self._lock:
            return self._fields.in_flight

    def close(self) -> None:
        """Refuse every later admit, check and finish with SESSION_CLOSED (a finished Run still says ALREADY_FINISHED).

        The Submission in flight, if any, stays in flight until it is completed
        or voided. Closing twice is harmless.
        """
        with self._lock:
            self._fields.closed = True

    @property
    def closed(self) -> bool:
        with self._lock:
            return self._fields.closed

    def wait_until_settled(self, timeout_s: float) -> bool:
        """Block until no Submission is in flight or timeout_s passes; return whether none is in flight."""
        with self._settled:
            return self._settled.wait_for(lambda: self._fields.in_flight is None, timeout=max(0.0, timeout_s))

    def status(self) -> StatusView:
        """Return a consistent snapshot of the whole session."""
        with self._lock:
            f, b = self._fields, self._budget
            return StatusView(
                episodes_total=b.episodes,
                episodes_used=f.episodes_used,
                episodes_left=b.episodes - f.episodes_used,
                submissions_used=f.submissions_used,
                submissions_left=b.max_submissions - f.submissions_used,
                pool_size=b.pool_size,
                max_episodes_per_submission=b.max_episodes_per_submission,
                max_candidates=b.max_candidates,
                finish_policy=b.finish_policy,
                finished=f.finished,
                candidates=f.candidates,
                submissions=tuple(s.view() for s in f.submissions.values()),
                in_flight=f.in_flight,
            )

    def admit(self, selector: str, program_digest: str) -> SubmissionView:
        """Admit a Submission of the Program with program_digest on the Episodes selector names; return it running.

        Charges its Episodes and one Submission and puts it in flight. Raises
        RequestRejected, checking in this order: ALREADY_FINISHED, SESSION_CLOSED,
        BUSY (another Submission is in flight), INVALID_SELECTOR or INDEX_OUT_OF_RANGE,
        TOO_MANY_EPISODES, SUBMISSIONS_EXHAUSTED, BUDGET_EXHAUSTED.
        """
        with self._lock:
            return self._admit_locked(selector, program_digest)

    def check(self, selector: str) -> None:
        """Raise what admit would raise for selector now, changing nothing.

        Lets the Host refuse a Submission before it reads the Program: a
        finished Run answers ALREADY_FINISHED whatever the workspace holds.
        """
        with self._lock:
            self._checked_indices(selector)

    def _checked_indices(self, selector: str) -> tuple[int, ...]:
        f, b = self._fields, self._budget
        if f.finished:
            raise RequestRejected(RejectionCode.ALREADY_FINISHED, "the Run is finished: no more Submissions")
        if f.closed:
            raise RequestRejected(RejectionCode.SESSION_CLOSED, "the agent phase is ending: no more Submissions")
        if f.in_flight is not None:
            raise RequestRejected(
                RejectionCode.BUSY, f"Submission {f.in_flight} is still being evaluated: submit again once it is done"
            )
        indices = parse_selector(selector, b.pool_size)
        if b.max_episodes_per_submission is not None and len(indices) > b.max_episodes_per_submission:
            raise RequestRejected(
                RejectionCode.TOO_MANY_EPISODES,
                f"{len(indices)} Episodes selected; a Submission may use at most {b.max_episodes_per_submission}",
            )
        if f.submissions_used >= b.max_submissions:
            raise RequestRejected(
                RejectionCode.SUBMISSIONS_EXHAUSTED, f"all {b.max_submissions} Submissions of the Budget are used"
            )
        left = b.episodes - f.episodes_used
        if len(indices) > left:
            raise RequestRejected(
                RejectionCode.BUDGET_EXHAUSTED, f"{len(indices)} Episodes selected but only {left} left in the Budget"
            )
        return indices

    def _admit_locked(self, selector: str, program_digest: str) -> SubmissionView:
        f = self._fields
        indices = self._checked_indices(selector)
        number = len(f.submissions) + 1  # voided Submissions keep their number, so ids are never reused
        submission = _Submission(
            id=_submission_id(number),
            number=number,
            program_digest=program_digest,
            selector=format_selector(indices),
            indices=indices,
        )
        f.submissions[submission.id] = submission
        f.episodes_used += len(indices)
        f.submissions_used += 1
        f.in_flight = submission.id
        return submission.view()

    def complete(self, submission_id: str, score: float, policy_failures: int) -> SubmissionView:
        """Record the train Feedback of the in-flight Submission; return it completed.

        Raises ValueError when submission_id is not in flight, score is not a
        number, or policy_failures is not an integer from 0 to its Episodes.
        """
        with self._lock:
            submission = self._in_flight_locked(submission_id)
            if isinstance(score, bool) or not isinstance(score, (int, float)):
                raise ValueError(f"score must be a number, not {score!r}")
            if isinstance(policy_failures, bool) or not isinstance(policy_failures, int):
                raise ValueError(f"policy_failures must be an integer, not {policy_failures!r}")
            if not 0 <= policy_failures <= len(submission.indices):
                raise ValueError(f"policy_failures {policy_failures} is outside 0 to {len(submission.indices)}")
            submission.state = SubmissionState.COMPLETED
            submission.score = float(score)
            submission.policy_failures = policy_failures
            self._fields.in_flight = None
            self._settled.notify_all()
            return submission.view()

    def void(self, submission_id: str) -> SubmissionView:
        """Void the in-flight Submission, refunding its Episodes and the Submission; return it voided.

        For infrastructure errors and for a Submission an orchestrator crash
        interrupted: neither is the agent's doing. Raises ValueError when
        submission_id is not in flight.
        """
        with self._lock:
            submission = self._in_flight_locked(submission_id)
            submission.state = SubmissionState.VOIDED
            self._fields.episodes_used -= len(submission.indices)
            self._fields.submissions_used -= 1
            self._fields.in_flight = None
            self._settled.notify_all()
            return submission.view()

    def withdraw(self, submission_id: str) -> None:
        """Undo the admission of the in-flight Submission as if it never happened: refund it and free its number.

        For an admission the Host could not record (its Program or its admission event not written): the event log
        holds nothing of it, so a state replayed from the log must agree with this one. Raises ValueError when
        submission_id is not in flight.
        """
        with self._lock:
            submission = self._in_flight_locked(submission_id)
            del self._fields.submissions[submission_id]  # the last admitted: the next admission takes its number
            self._fields.episodes_used -= len(submission.indices)
            self._fields.submissions_used -= 1
            self._fields.in_flight = None
            self._settled.notify_all()

    def _in_flight_locked(self, submission_id: str) -> _Submission:
        if self._fields.in_flight is None or submission_id != self._fields.in_flight:
            raise ValueError(f"{submission_id!r} is not the Submission in flight ({self._fields.in_flight!r})")
        return self._fields.submissions[submission_id]

    def finish(self, candidate_ids: Sequence[str]) -> tuple[str, ...]:
        """End the agent's session with candidate_ids for Validation; return them in the agent's order.

        Raises RequestRejected, checking in this order: ALREADY_FINISHED,
        SESSION_CLOSED, BUSY, NO_CANDIDATES, UNKNOWN_SUBMISSION (any id that is not a completed
        Submission: unknown, running or voided), DUPLICATE_CANDIDATE,
        TOO_MANY_CANDIDATES, FINISH_NOT_ALLOWED (require_exhaustion and the
        Budget can still pay for a Submission).
        """
        with self._lock:
            f, b = self._fields, self._budget
            if f.finished:
                raise RequestRejected(RejectionCode.ALREADY_FINISHED, "the Run is already finished")
            if f.closed:
                raise RequestRejected(RejectionCode.SESSION_CLOSED, "the agent phase is ending: it can no longer be finished")
            if f.in_flight is not None:
                raise RequestRejected(
                    RejectionCode.BUSY, f"Submission {f.in_flight} is still being evaluated: finish once it is done"
                )
            candidates = tuple(candidate_ids)
            if not candidates:
                raise RequestRejected(RejectionCode.NO_CANDIDATES, "name at least one completed Submission as a candidate")
            for candidate in candidates:
                known = f.submissions.get(candidate) if isinstance(candidate, str) else None
                if known is None or known.state is not SubmissionState.COMPLETED:
                    why = "does not exist" if known is None else f"is {known.state.value}, not completed"
                    raise RequestRejected(RejectionCode.UNKNOWN_SUBMISSION, f"candidate {candidate!r} {why}")
            seen: set[str] = set()
            for candidate in candidates:
                if candidate in seen:
                    raise RequestRejected(RejectionCode.DUPLICATE_CANDIDATE, f"candidate {candidate!r} is named twice")
                seen.add(candidate)
            if len(candidates) > b.max_candidates:
                raise RequestRejected(
                    RejectionCode.TOO_MANY_CANDIDATES,
                    f"{len(candidates)} candidates named; at most {b.max_candidates} are validated",
                )
            if b.finish_policy is FinishPolicy.REQUIRE_EXHAUSTION and not self._exhausted_locked():
                raise RequestRejected(
                    RejectionCode.FINISH_NOT_ALLOWED,
                    f"this Run requires the Budget to be spent before finishing: {b.episodes - f.episodes_used}"
                    f" Episodes and {b.max_submissions - f.submissions_used} Submissions are left",
                )
            f.candidates = candidates
            f.finished = True
            return candidates

    def _exhausted_locked(self) -> bool:
        # No further Submission can be paid for: one needs a Submission and at least one Episode.
        f, b = self._fields, self._budget
        return b.episodes - f.episodes_used < 1 or b.max_submissions - f.submissions_used < 1


def _submission_id(number: int) -> str:
    return f"s{number:04d}"
