"""Progress events: what a Run (its driver and Host) and a suite scheduler tell whoever shows their progress, as a closed
set of kinds, each with the fields it carries.

A progress event is a kind and a mapping of fields, handed to a `Notify` callable; it is shown, never recorded (the
event logs are `records.events`). `checked` is how a listener reads one: a kind outside the set, or one without its
fields, is refused with ValueError rather than silently ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any, TypeVar


class RunProgress(StrEnum):
    """What a Run tells as it goes (`run.driver.RunDriver`, `run.host.RunHost`)."""

    NOTE = "note"  # message: a line to show
    PHASE = "phase"  # phase (and attempt for the agent phase)
    SUBMISSION_STARTED = "submission_started"  # id, episodes
    SUBMISSION_COMPLETED = "submission_completed"  # id, score, status (kernel.session.StatusView), direction
    SUBMISSION_VOIDED = "submission_voided"  # id, reason
    FINISHED = "finished"  # candidates: the agent called Finish with them
    VALIDATED = "validated"  # id, score
    ASSESSED = "assessed"  # score


class SuiteProgress(StrEnum):
    """What a suite scheduler tells as it goes (`suite.scheduler.SuiteScheduler`)."""

    PLAN = "plan"  # total, done, waiting
    STARTED = "started"  # name, resume
    ENDED = "ended"  # outcome (suite.scheduler.RunOutcome)
    STOPPING = "stopping"  # signal, runs
    PROGRESS = "progress"  # runs (suite.scheduler.RunProgress of each going Run)


FIELDS: dict[RunProgress | SuiteProgress, frozenset[str]] = {
    RunProgress.NOTE: frozenset({"message"}),
    RunProgress.PHASE: frozenset({"phase"}),
    RunProgress.SUBMISSION_STARTED: frozenset({"id", "episodes"}),
    RunProgress.SUBMISSION_COMPLETED: frozenset({"id", "score", "status", "direction"}),
    RunProgress.SUBMISSION_VOIDED: frozenset({"id", "reason"}),
    RunProgress.FINISHED: frozenset({"candidates"}),
    RunProgress.VALIDATED: frozenset({"id", "score"}),
    RunProgress.ASSESSED: frozenset({"score"}),
    SuiteProgress.PLAN: frozenset({"total", "done", "waiting"}),
    SuiteProgress.STARTED: frozenset({"name", "resume"}),
    SuiteProgress.ENDED: frozenset({"outcome"}),
    SuiteProgress.STOPPING: frozenset({"signal", "runs"}),
    SuiteProgress.PROGRESS: frozenset({"runs"}),
}

Notify = Callable[[RunProgress, Mapping[str, Any]], None]
SuiteNotify = Callable[[SuiteProgress, Mapping[str, Any]], None]


K = TypeVar("K", RunProgress, SuiteProgress)


def checked(kinds: type[K], kind: str, fields: Mapping[str, Any]) -> K:
    """kind as a member of kinds (RunProgress or SuiteProgress). Raises ValueError when it is none of them, or fields
    lack one the kind carries."""
    member = kinds(kind)
    missing = FIELDS[member] - set(fields)
    if missing:
        raise ValueError(f"progress {member.value!r} without {', '.join(sorted(missing))}")
    return member
