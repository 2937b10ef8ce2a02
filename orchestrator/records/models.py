"""The JSON documents of a run or suite directory as pydantic models: the run manifest (run.json), a Submission's
record (record.json), a Feedback document (feedback.json), validation.json, assessment.json and a suite's plan
(suite.json); `parse` turns a document
read back into its model, a validation error into the reader's one-line RecordError.

Every model forbids fields it does not know and names its schema id (`records.schema`). A document is written from its
model with only the fields it was given (`to_json`), so a partial manifest stays partial. Read back, every field but
what a reader cannot do without is optional: a record written before a field existed, or one a Run left partial, still
reads; a field of the wrong type does not. Numbers are strict (a string or a bool is not a number), text taken from a
record is shown as text, and a value is kept as written (a former terminal reason too: `RunManifest.reason` says what
it means).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, Field, Strict, ValidationError

from orchestrator.records.events import KeyedRecord, Phase, RecordedReason, TerminalReason, terminal_reason, validation_problem
from orchestrator.records.schema import ASSESSMENT, FEEDBACK, RUN, SUBMISSION, SUITE, VALIDATION, RecordError

Number = Annotated[float, Strict()]  # an int or a float (NaN and infinities pass: readers check finite_number)
Integer = Annotated[int, Strict()]  # not a bool, not a string


class Record(KeyedRecord):
    """A JSON document of a run or suite directory."""


M = TypeVar("M", bound=BaseModel)


def parse(model: type[M], path: Path, document: dict[str, Any]) -> M:
    """document (read from path) as model. Raises RecordError naming path and the first field that is not as the model
    says ("field.path: reason"); a required field that is missing gives "partial record: no 'field.path'"."""
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        if first["type"] == "missing":
            where = ".".join(str(part) for part in first["loc"])
            raise RecordError(path, f"partial record: no {where!r}") from None
        raise RecordError(path, f"malformed record: {validation_problem(exc)}") from None


# run.json -----------------------------------------------------------------------------------------------------------
class Metric(Record):
    name: str | None = None
    direction: str | None = None  # "maximize" or "minimize"; anything else a reader takes as unknown


class BudgetRecord(Record):
    episodes: Integer | None = None
    max_submissions: Integer | None = None
    pool_size: Integer | None = None
    max_episodes_per_submission: Integer | None = None
    finish: str | None = None


class WorkspaceBound(Record):
    bytes: Integer
    files: Integer


class ImageRecord(Record):
    tag: str
    id: str


class BenchmarkPackage(Record):
    name: str
    version: str
    image: str


class RelayTotals(Record):
    """What the model relay saw over every agent attempt (`relay.server.RelayCounters`, summed)."""

    requests: Integer | None = None
    refused: Integer | None = None
    errors: Integer | None = None
    tokens: Integer | None = None
    request_bytes: Integer | None = None
    response_bytes: Integer | None = None
    refused_bytes: Integer | None = None
    refused_connections: Integer | None = None
    unrecorded: Integer | None = None
    limit_reached: str | None = None  # why the agent phase ended early, None while no limit was reached


class ValidationSummary(Record):
    candidates: list[str] | None = None
    rule: str | None = None
    selected: str | None = None
    scores: dict[str, Number | None] | None = None


class FinalSelection(Record):
    submission_id: str | None = None
    program_digest: str | None = None
    is_initial_program: bool | None = None


class AssessmentSummary(Record):
    score: Number | None = None
    episodes: Integer | None = None
    policy_failures: Integer | None = None
    initial_program_score: Number | None = None


class SkillRecord(Record):
    """One agent skill of a Run (`run.skills.StoredSkill`): its name, where the agent finds it, and its stored copy's digest."""

    name: str
    digest: str
    files: Integer
    bytes: Integer


class RunManifest(Record):
    """run.json: what a Run is and where it stands. Its phase and terminal reason are a cache of the event log's (the
    events are written first); `records.run_dir.RunDirectory.read_manifest` reconciles them."""

    schema_id: Literal["epg.run/1"] = Field(default=RUN, alias="schema")
    started_at: str | None = None
    ended_at: str | None = None
    spec_dir: str | None = None
    benchmark: str | None = None
    agent: str | None = None
    phase: Phase | None = None
    seed: Integer | None = None
    initial_program_digest: str | None = None
    budget: BudgetRecord | None = None
    seed_key_id: str | None = None
    seed_key_file: str | None = None
    workspace_bound: WorkspaceBound | None = None
    software: dict[str, str] | None = None
    images: dict[str, ImageRecord] | None = None
    benchmark_package: BenchmarkPackage | None = None
    metric: Metric | None = None
    parameters_digest: str | None = None  # the Benchmark's parameters (`BenchmarkInfo.parameters_digest`); a resume checks it
    relay: RelayTotals | None = None
    terminal_reason: RecordedReason | None = None
    validation: ValidationSummary | None = None
    final: FinalSelection | None = None
    assessment: AssessmentSummary | None = None
    wall_seconds: Number | None = None
    episodes_spent: Integer | None = None
    submissions_made: Integer | None = None
    agent_exit_code: Integer | None = None
    skills: list[SkillRecord] | None = None  # the agent's skills, stored at the Run's first start

    @property
    def current_phase(self) -> Phase:
        """The phase, "agent" before the manifest records one."""
        return self.phase or Phase.AGENT

    @property
    def reason(self) -> TerminalReason | None:
        """What terminal_reason means: a TerminalReason (a former value read as the one it meant), None for none or for
        text that is none (shown as text, never acted upon)."""
        return terminal_reason(self.terminal_reason)

    @property
    def assessment_score(self) -> float | None:
        return self.assessment.score if self.assessment is not None else None

    def updated(self, **fields: Any) -> RunManifest:
        """This manifest with fields set (each validated as read back). Raises ValueError (a pydantic ValidationError)."""
        return RunManifest.model_validate({**self.to_json(), **_json_of(fields)})


def _json_of(fields: dict[str, Any]) -> dict[str, Any]:
    return {name: value.to_json() if isinstance(value, Record) else value for name, value in fields.items()}


# feedback.json and record.json -----------------------------------------------------------------------------------------
class FeedbackEpisode(Record):
    """One Episode of a Feedback document, as the runtime saw it (`kernel.outcomes.EpisodeOutcome.to_json`)."""

    index: Integer | None = None
    split: str | None = None
    status: str | None = None
    failure: str | None = None
    reason: str | None = None
    steps: Integer | None = None
    reward: Number | None = None
    terminated: bool | None = None
    truncated: bool | None = None
    policy_seconds: Number | None = None
    environment_seconds: Number | None = None
    loop_seconds: Number | None = None
    output_tail: str | None = None
    traceback: str | None = None
    summary: dict[str, Any] | None = None


class ArtifactRecord(Record):
    """One artifact kept with a Submission (`records.artifacts`): its relative path below the Submission's artifacts/,
    media type, retention ("permanent" or "bulk") and size; an evicted bulk artifact stays listed, its file gone."""

    name: str
    media_type: str | None = None
    retention: str | None = None
    bytes: Integer | None = None
    sha256: str | None = None
    evicted: bool | None = None


class FeedbackDocument(Record):
    """feedback.json (published to the agent, and kept in each Submission's record): the score, the Benchmark's values,
    the Episodes and the names of the artifacts beside it."""

    schema_id: Literal["epg.feedback/1"] = Field(default=FEEDBACK, alias="schema")
    score: Number
    episodes: list[FeedbackEpisode]
    program_digest: str | None = None
    values: dict[str, Any] | None = None
    artifacts: list[str] | None = None
    # The Episodes (by index) whose evidence did not reach the Benchmark's Feedback: over the Host's bound.
    evidence_dropped: list[Integer] | None = None
    # Each artifact of artifacts with its media type, retention, size and sha256 (when the Feedback has any).
    artifact_files: list[ArtifactRecord] | None = None

    @property
    def policy_failures(self) -> int:
        return sum(1 for episode in self.episodes if episode.failure)


class SubmissionRecord(Record):
    """submissions/<id>/record.json: one Submission, its selector, indices, Program and Feedback, and the artifacts
    kept beside it (and why any of the Feedback's were not)."""

    schema_id: Literal["epg.submission/1"] = Field(default=SUBMISSION, alias="schema")
    feedback: FeedbackDocument
    id: str | None = None
    number: Integer | None = None
    selector: str | None = None
    indices: list[Integer] | None = None
    program_digest: str | None = None
    parameters_digest: str | None = None
    artifacts: list[ArtifactRecord] | None = None
    artifacts_refused: list[str] | None = None


# validation.json and assessment.json ------------------------------------------------------------------------------------
class ValidationResult(Record):
    """One candidate's Validation: its score on the private Validation Episodes and its Feedback there."""

    submission_id: str | None = None
    program_digest: str | None = None
    score: Number | None = None
    policy_failures: Integer | None = None
    feedback: FeedbackDocument | None = None


class ValidationReport(Record):
    """validation.json: the candidates, the rule that chose them, the Episodes each ran and the one selected."""

    schema_id: Literal["epg.validation/1"] = Field(default=VALIDATION, alias="schema")
    candidates: list[str] | None = None
    rule: str | None = None
    episodes: Integer | None = None
    selected: str | None = None
    results: list[ValidationResult] | None = None
    parameters_digest: str | None = None


class AssessmentReport(FeedbackDocument):
    """assessment.json: the selected Program's Feedback on the held-out Episodes, and the starting Program's on the same
    Episodes (when the spec asks for it)."""

    schema_id: Literal["epg.assessment/1"] = Field(default=ASSESSMENT, alias="schema")  # type: ignore[assignment]  # its own id
    submission_id: str | None = None
    initial_program: FeedbackDocument | None = None
    parameters_digest: str | None = None


# suite.json ---------------------------------------------------------------------------------------------------------
class PlannedRunRecord(Record):
    """One Run of a suite's plan (`suite.spec.PlannedRun.to_json`)."""

    name: str
    run_dir: str
    spec: str
    benchmark: str | None = None
    family: str | None = None
    agent: str | None = None
    repeat: Integer | None = None
    seed: Integer | None = None


class SuiteManifest(Record):
    """suite.json: the suite's name and its plan, every Run by name."""

    schema_id: Literal["epg.suite/1"] = Field(default=SUITE, alias="schema")
    name: str | None = None
    created_at: str | None = None
    spec_dir: str | None = None
    runs: list[PlannedRunRecord]
