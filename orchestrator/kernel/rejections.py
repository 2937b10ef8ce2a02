"""The closed set of typed errors a Host API caller can branch on, and the exception that carries one."""

from __future__ import annotations

from enum import StrEnum


class RejectionCode(StrEnum):
    """Why the Host refused a request of the agent.

    UNAUTHENTICATED, REQUEST_TOO_LARGE, MALFORMED_REQUEST, UNKNOWN_METHOD,
    INVALID_PROGRAM and INTERNAL are raised by the layers around the session
    rules; they are defined here so the set is closed.
    """

    UNAUTHENTICATED = "unauthenticated"
    INVALID_SELECTOR = "invalid_selector"
    INDEX_OUT_OF_RANGE = "index_out_of_range"
    TOO_MANY_EPISODES = "too_many_episodes"  # more than max_episodes_per_submission selected
    BUDGET_EXHAUSTED = "budget_exhausted"  # fewer Episodes left than selected
    SUBMISSIONS_EXHAUSTED = "submissions_exhausted"
    INVALID_PROGRAM = "invalid_program"
    UNKNOWN_SUBMISSION = "unknown_submission"
    DUPLICATE_CANDIDATE = "duplicate_candidate"
    TOO_MANY_CANDIDATES = "too_many_candidates"
    NO_CANDIDATES = "no_candidates"
    FINISH_NOT_ALLOWED = "finish_not_allowed"
    ALREADY_FINISHED = "already_finished"
    BUSY = "busy"
    INTERNAL = "internal"
    REQUEST_TOO_LARGE = "request_too_large"  # the request message is over the Host API's size limit
    MALFORMED_REQUEST = "malformed_request"  # the request bytes do not parse as the method's request message
    UNKNOWN_METHOD = "unknown_method"  # the called path is no method of the Host API
    SESSION_CLOSED = "session_closed"  # the agent phase is ending: no Submit or Finish is accepted any more


class RequestRejected(Exception):
    """A request of the agent was refused; nothing changed.

    `message` says why in words safe to show the agent.
    """

    def __init__(self, code: RejectionCode, message: str) -> None:
        super().__init__(f"{code.value}: {message}")
        self.code = code
        self.message = message
