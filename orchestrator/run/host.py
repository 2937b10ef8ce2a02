"""The Host side of a Run: Submissions evaluated in the sandbox, Feedback published, every step recorded.

RunHost implements what the Host API servicer needs. The SessionState it holds
owns all budget state; RunHost only captures Programs, runs Episodes and
writes records around it.
"""

from __future__ import annotations

import traceback
from typing import Any, Callable

from orchestrator.kernel.codes import InfrastructureError
from orchestrator.kernel.errors import RequestRejected, SessionError
from orchestrator.kernel.evaluation import evaluate_programs
from orchestrator.kernel.ports import BenchmarkInfo, EpisodeSandbox, PlannedEpisode, SubmitReceipt
from orchestrator.kernel.program import ProgramError
from orchestrator.kernel.session import SessionEvent, SessionState, StatusView, SubmissionView
from orchestrator.records import schema
from orchestrator.records.atomic import PRIVATE_FILE, write_bytes, write_json
from orchestrator.records.feedback import feedback_json, publish_feedback, read_artifacts, write_artifacts
from orchestrator.records.run_dir import RunDirectory
from orchestrator.run.workspace import AgentIdentity, capture_workspace_program

Notify = Callable[[str, dict[str, Any]], None]


class RunHost:
    def __init__(
        self,
        *,
        records: RunDirectory,
        sandbox: EpisodeSandbox,
        benchmark: BenchmarkInfo,
        state: SessionState,
        pool: list[PlannedEpisode],
        instructions: str,
        agent: AgentIdentity | None = None,
        notify: Notify = lambda kind, fields: None,
    ) -> None:
        self._records = records
        self._sandbox = sandbox
        self._benchmark = benchmark
        self._state = state
        self._pool = pool
        self._instructions = instructions
        self._agent = agent
        self._notify = notify

    @property
    def state(self) -> SessionState:
        return self._state

    # RunHostPort ---------------------------------------------------------------
    def task(self) -> tuple[str, str, dict[str, Any]]:
        return self._instructions, self._benchmark.id, self._benchmark.public_json()

    def status(self) -> StatusView:
        return self._state.status()

    def feedback_path(self, submission_id: str) -> str:
        return f"feedback/{submission_id}/feedback.json"

    def max_candidates(self) -> int:
        return self._state.budget.max_candidates

    def submit(self, selector: str) -> SubmitReceipt:
        """Evaluate the workspace's Program on the selected pool indices. Raises RequestRejected.

        The Program is read as the agent (see run.workspace); every problem
        with it is INVALID_PROGRAM and spends nothing.
        """
        self._state.check(selector)  # a finished or busy Run says so before the Program is read
        try:
            program = capture_workspace_program(self._records.workspace, self._agent)
        except ProgramError as exc:
            raise RequestRejected(SessionError.INVALID_PROGRAM, f"{exc.message} (nothing was spent)") from None
        view = self._state.admit(selector, program.digest)
        self._records.store_program(program)
        self._records.append_event(
            SessionEvent.SUBMISSION_ADMITTED.value,
            id=view.id, selector=view.selector, indices=list(view.indices), program_digest=program.digest,
        )
        self._notify("submission_started", {"id": view.id, "episodes": len(view.indices)})
        try:
            (feedback,) = evaluate_programs(self._sandbox, [program], [self._pool[i] for i in view.indices])
            return self._complete(view, program.digest, feedback_json(feedback, program.digest), feedback.artifacts)
        except Exception as exc:  # any fault of the Host's side: refund, keep the evidence, answer with a code
            if self._state.in_flight() == view.id:
                self._void(view, exc)
            code = exc.code.value if isinstance(exc, InfrastructureError) else type(exc).__name__
            raise RequestRejected(SessionError.INTERNAL, f"the evaluation failed on the Host's side ({code}); nothing was spent") from None

    def finish(self, candidates: list[str]) -> tuple[str, ...]:
        chosen = self._state.finish(candidates)
        self._records.append_event(SessionEvent.FINISHED.value, candidates=list(chosen))
        self._notify("finished", {"candidates": list(chosen)})
        return chosen

    # records -------------------------------------------------------------------
    def _complete(self, view: SubmissionView, digest: str, document: dict[str, Any], artifacts: dict[str, bytes]) -> SubmitReceipt:
        # Order matters for resume: the record first, then the published copy,
        # then the event that makes the Submission count as completed.
        directory = self._records.submission(view.id)
        write_artifacts(directory, artifacts)
        write_json(directory / "record.json", {
            "schema": schema.SUBMISSION, "id": view.id, "number": view.number, "selector": view.selector, "indices": list(view.indices),
            "program_digest": digest, "feedback": document,
        })
        publish_feedback(self._records.published_feedback(view.id), document, artifacts)
        failures = sum(1 for e in document["episodes"] if e["failure"])
        # Taken while the Submission is still in flight, so no other can be admitted
        # in between: the budget exactly as this Submission left it.
        budget = self._state.status()
        self._state.complete(view.id, document["score"], failures)
        self._records.append_event(SessionEvent.SUBMISSION_COMPLETED.value, id=view.id, score=document["score"], policy_failures=failures)
        self._notify("submission_completed", {"id": view.id, "score": document["score"], "status": self._state.status(),
                                              "direction": self._benchmark.direction})
        return SubmitReceipt(submission_id=view.id, program_digest=digest, score=document["score"],
                            policy_failures=failures, feedback_path=self.feedback_path(view.id),
                            episodes_used=budget.episodes_used, episodes_left=budget.episodes_left,
                            submissions_left=budget.submissions_left)

    def _void(self, view: SubmissionView, exc: Exception) -> None:
        self._state.void(view.id)
        evidence = exc.evidence if isinstance(exc, InfrastructureError) else traceback.format_exc()
        reason = exc.code.value if isinstance(exc, InfrastructureError) else type(exc).__name__
        write_bytes(self._records.private / "diagnostics" / f"{view.id}.log", f"{exc}\n{evidence}".encode(), mode=PRIVATE_FILE)
        self._records.append_event(SessionEvent.SUBMISSION_VOIDED.value, id=view.id, reason=reason)
        self._notify("submission_voided", {"id": view.id, "reason": str(exc)})

    def recover_in_flight(self) -> str | None:
        """After a crash: complete the in-flight Submission from its record, or void it (refund)."""
        submission_id = self._state.in_flight()
        if submission_id is None:
            return None
        record_path = self._records.submission(submission_id) / "record.json"
        try:
            record = schema.read_record(record_path, schema.SUBMISSION) if record_path.exists() else None
        except schema.RecordError:
            record = None  # written atomically, so never torn; anything else is not a record to complete from
        if record is not None and isinstance(record.get("feedback"), dict) and "program_digest" in record:
            view = next(s for s in self._state.status().submissions if s.id == submission_id)
            artifacts = read_artifacts(self._records.submission(submission_id))
            self._complete(view, record["program_digest"], record["feedback"], artifacts)
            return f"{submission_id} completed from its record"
        self._state.void(submission_id)
        self._records.append_event(SessionEvent.SUBMISSION_VOIDED.value, id=submission_id, reason="orchestrator_restarted")
        return f"{submission_id} voided and refunded (interrupted before its Feedback was recorded)"
