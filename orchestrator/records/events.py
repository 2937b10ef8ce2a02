"""The event logs as typed values: every event of a Run's events.jsonl and of a suite's suite-events.jsonl, the closed
sets of event types, phases and terminal reasons, the phase a log has reached, and the rule that only a torn last line
of a log is tolerated.

An event is one JSON object per line, its kind in "type". Each kind is a pydantic model (`extra="forbid"`), the kinds
of one log a discriminated union on "type" (`RunEvent`, `SuiteEvent`). Fields other than "type" and a Submission's "id"
default to None: an older or partial record still reads, a field of the wrong type or an unknown kind does not.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from orchestrator.records.schema import EVENT, SUITE_EVENT, RecordError


class EventType(StrEnum):
    """The "type" of each event of a Run's event log (the kernel's `SessionEvent` values among them)."""

    CREATED = "created"
    STARTED = "started"
    PRESTART = "prestart"
    AGENT_STARTED = "agent_started"
    SUBMISSION_ADMITTED = "submission_admitted"
    SUBMISSION_COMPLETED = "submission_completed"
    SUBMISSION_VOIDED = "submission_voided"
    FINISHED = "finished"  # the agent called Finish
    AGENT_EXITED = "agent_exited"  # the agent's container stopped
    AGENT_PHASE_ENDED = "agent_phase_ended"
    VALIDATION_DONE = "validation_done"
    ASSESSMENT_DONE = "assessment_done"


class Phase(StrEnum):
    """Where a Run stands, in the order it passes through them."""

    AGENT = "agent"
    VALIDATION = "validation"
    ASSESSMENT = "assessment"
    DONE = "done"

    @property
    def order(self) -> int:
        return list(Phase).index(self)


class TerminalReason(StrEnum):
    """Why the agent phase ended. No value is an event type: `finish_called` is what the `finished` event records, and
    `exited_without_finish` is the end that follows an `agent_exited` event when the agent never called Finish."""

    FINISH_CALLED = "finish_called"
    EXITED_WITHOUT_FINISH = "exited_without_finish"
    AGENT_TIME_LIMIT = "agent_time_limit"
    RELAY_LIMIT = "relay_limit"
    NO_SUBMISSIONS = "no_submissions"


# The values records written before TerminalReason had its own values used for it (they were event types).
FORMER_TERMINAL_REASONS = {"finished": TerminalReason.FINISH_CALLED, "agent_exited": TerminalReason.EXITED_WITHOUT_FINISH}


def terminal_reason(value: Any) -> TerminalReason | None:
    """value read as a terminal reason: a TerminalReason, a former value (an event type) as the one it meant, None for
    anything else."""
    if isinstance(value, TerminalReason):
        return value
    if not isinstance(value, str):
        return None
    if value in FORMER_TERMINAL_REASONS:
        return FORMER_TERMINAL_REASONS[value]
    try:
        return TerminalReason(value)
    except ValueError:
        return None


# A terminal reason as a record holds it: one of TerminalReason, or the text a record of before TerminalReason (or one
# someone else wrote) holds, kept as written and shown as text; `terminal_reason` says what it means.
RecordedReason = Annotated[Union[TerminalReason, str], Field(union_mode="left_to_right")]


class KeyedRecord(BaseModel):
    """A record's model that also reads as its JSON form, a mapping (`record["schema"]`, `record.get("id")`), for code
    written against that form (the kernel's `SessionState.replay` takes mappings). Typed code uses attributes."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    def to_json(self) -> dict[str, Any]:
        """The record as written: the fields it was given, by their JSON names."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)

    def __getitem__(self, name: str) -> Any:
        """The value of name in the JSON form. Raises KeyError when the JSON form has no such name."""
        return self.to_json()[name]

    def get(self, name: str, default: Any = None) -> Any:
        """The value of name in the JSON form, or default when it has no such name."""
        return self.to_json().get(name, default)


class _Event(KeyedRecord):
    """One line of an event log: its schema id, its time (Unix seconds, set when it is appended) and its kind's fields."""

    schema_id: Literal["epg.event/1"] = Field(default=EVENT, alias="schema")
    time: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The event as its log line holds it: the fields it was given (and its schema), by their JSON names."""
        return {"schema": self.schema_id, "type": self.model_dump(mode="json")["type"],
                **self.model_dump(mode="json", by_alias=True, exclude_unset=True)}


class Created(_Event):
    type: Literal[EventType.CREATED] = EventType.CREATED
    initial_program_digest: str | None = None


class Started(_Event):
    type: Literal[EventType.STARTED] = EventType.STARTED
    resume: bool | None = None
    owner: str | None = None
    # the id of the sandbox the Run opened (its containers' label); logs written before it was named so call it session
    sandbox: str | None = Field(default=None, validation_alias=AliasChoices("sandbox", "session"))


class Prestart(_Event):
    type: Literal[EventType.PRESTART] = EventType.PRESTART
    phase: Phase | None = None
    target: int | None = None
    ready: int | None = None


class AgentStarted(_Event):
    type: Literal[EventType.AGENT_STARTED] = EventType.AGENT_STARTED
    attempt: int | None = None


class SubmissionAdmitted(_Event):
    type: Literal[EventType.SUBMISSION_ADMITTED] = EventType.SUBMISSION_ADMITTED
    id: str
    selector: str | None = None
    indices: list[int] | None = None
    program_digest: str | None = None


class SubmissionCompleted(_Event):
    type: Literal[EventType.SUBMISSION_COMPLETED] = EventType.SUBMISSION_COMPLETED
    id: str
    score: float | None = None
    policy_failures: int | None = None


class SubmissionVoided(_Event):
    type: Literal[EventType.SUBMISSION_VOIDED] = EventType.SUBMISSION_VOIDED
    id: str
    reason: str | None = None


class Finished(_Event):
    type: Literal[EventType.FINISHED] = EventType.FINISHED
    candidates: list[str] | None = None


class AgentExited(_Event):
    type: Literal[EventType.AGENT_EXITED] = EventType.AGENT_EXITED
    exit_code: int | None = None
    timed_out: bool | None = None
    seconds: float | None = None


class AgentPhaseEnded(_Event):
    type: Literal[EventType.AGENT_PHASE_ENDED] = EventType.AGENT_PHASE_ENDED
    terminal_reason: RecordedReason | None = None

    @property
    def reason(self) -> TerminalReason | None:
        """What terminal_reason means (see `terminal_reason`)."""
        return terminal_reason(self.terminal_reason)


class ValidationDone(_Event):
    type: Literal[EventType.VALIDATION_DONE] = EventType.VALIDATION_DONE
    selected: str | None = None


class AssessmentDone(_Event):
    type: Literal[EventType.ASSESSMENT_DONE] = EventType.ASSESSMENT_DONE
    score: float | None = None


RunEvent = Annotated[
    Union[Created, Started, Prestart, AgentStarted, SubmissionAdmitted, SubmissionCompleted, SubmissionVoided, Finished,
          AgentExited, AgentPhaseEnded, ValidationDone, AssessmentDone],
    Field(discriminator="type"),
]
RUN_EVENT: TypeAdapter[RunEvent] = TypeAdapter(RunEvent)


def phase_of(events: list[RunEvent]) -> Phase:
    """The phase the events of a Run's log have reached: the agent phase until agent_phase_ended, Validation until
    validation_done, then Assessment (done at once when nothing was selected) until assessment_done."""
    reached = Phase.AGENT
    for event in events:
        if isinstance(event, AgentPhaseEnded):
            found = Phase.VALIDATION
        elif isinstance(event, ValidationDone):
            found = Phase.DONE if event.selected is None else Phase.ASSESSMENT
        elif isinstance(event, AssessmentDone):
            found = Phase.DONE
        else:
            continue
        reached = max(reached, found, key=lambda phase: phase.order)
    return reached


def terminal_reason_of(events: list[RunEvent]) -> TerminalReason | str | None:
    """The terminal reason the last agent_phase_ended of a Run's log records, or None."""
    ended = [event for event in events if isinstance(event, AgentPhaseEnded)]
    return ended[-1].terminal_reason if ended else None


# suites --------------------------------------------------------------------------------------------------------------
class SuiteEventType(StrEnum):
    """The "type" of each event of a suite's log."""

    SUITE_STARTED = "suite_started"
    SUITE_ENDED = "suite_ended"
    SUITE_STOPPED = "suite_stopped"
    RUN_REFUSED = "run_refused"
    RUN_STARTED = "run_started"
    RUN_ENDED = "run_ended"


class _SuiteEvent(_Event):
    schema_id: Literal["epg.suite_event/1"] = Field(default=SUITE_EVENT, alias="schema")  # type: ignore[assignment]  # another log's id


class SuiteStarted(_SuiteEvent):
    type: Literal[SuiteEventType.SUITE_STARTED] = SuiteEventType.SUITE_STARTED
    runs: int | None = None
    waiting: int | None = None
    runs_at_once: int | None = None


class SuiteEnded(_SuiteEvent):
    type: Literal[SuiteEventType.SUITE_ENDED] = SuiteEventType.SUITE_ENDED


class SuiteStopped(_SuiteEvent):
    type: Literal[SuiteEventType.SUITE_STOPPED] = SuiteEventType.SUITE_STOPPED


class RunRefused(_SuiteEvent):
    type: Literal[SuiteEventType.RUN_REFUSED] = SuiteEventType.RUN_REFUSED
    run: str
    error: str | None = None


class RunStarted(_SuiteEvent):
    type: Literal[SuiteEventType.RUN_STARTED] = SuiteEventType.RUN_STARTED
    run: str
    resume: bool | None = None
    pid: int | None = None
    argv: list[str] | None = None


class RunEnded(_SuiteEvent):
    type: Literal[SuiteEventType.RUN_ENDED] = SuiteEventType.RUN_ENDED
    run: str
    exit_code: int | None = None
    phase: str | None = None  # a suite's own word for a Run it could not read ("unreadable") among the phases
    score: float | None = None
    seconds: float | None = None
    error: str | None = None


SuiteEvent = Annotated[Union[SuiteStarted, SuiteEnded, SuiteStopped, RunRefused, RunStarted, RunEnded], Field(discriminator="type")]
SUITE_EVENT_ADAPTER: TypeAdapter[SuiteEvent] = TypeAdapter(SuiteEvent)


# reading a log -------------------------------------------------------------------------------------------------------
class EventLogError(RecordError):
    """A line of an event log other than a torn last one is not an event: line is its number (from 1)."""

    def __init__(self, path: Path, line: int, reason: str) -> None:
        super().__init__(path, f"line {line}: {reason}")
        self.line = line


def validation_problem(error: ValidationError) -> str:
    """The first problem of a pydantic validation error as one line: "field.path: reason" (the input never shown)."""
    first = error.errors(include_url=False, include_input=False)[0]
    if first["type"] == "union_tag_invalid":
        return f"type: {str(first.get('ctx', {}).get('tag'))[:80]!r} is not one of its kinds"
    if first["type"] == "union_tag_not_found":
        return "type: missing"
    where = ".".join(str(part) for part in first["loc"])
    return f"{where}: {first['msg']}" if where else str(first["msg"])


def parse_log(path: Path, data: bytes, adapter: TypeAdapter[Any]) -> list[Any]:
    """The events in data (an event log read from path), each validated by adapter. Raises EventLogError.

    A last line without its newline that is not an event is a torn append (a crash mid-write) and is skipped; any other
    line that is not JSON, not an object or not an event of the log's kinds is refused with its number. Empty lines are
    skipped.
    """
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    torn = lines[-1]  # "" when the log ends with its newline
    found = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        last_unterminated = number == len(lines) and torn != ""
        try:
            document = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as exc:
            if last_unterminated:
                break
            raise EventLogError(path, number, f"not JSON ({exc})") from None
        if not isinstance(document, dict):
            if last_unterminated:
                break
            raise EventLogError(path, number, f"not a JSON object but a {type(document).__name__}")
        try:
            found.append(adapter.validate_python(document))
        except ValidationError as exc:
            if last_unterminated:
                break
            raise EventLogError(path, number, f"not an event ({validation_problem(exc)})") from None
    return found
