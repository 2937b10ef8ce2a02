"""The Host side of a Run: Submissions evaluated in the sandbox, Feedback published, every step recorded.

RunHost implements what the Host API servicer needs. The SessionState it holds
owns all budget state; RunHost only captures Programs, runs Episodes and
writes records around it, and ends the agent's side of the Run (close): once
close returns, no Submission is in flight and none can start, so nothing of
the agent phase is written after it.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from typing import Any, Callable

from orchestrator.kernel.evaluation import evaluate_programs
from orchestrator.kernel.infrastructure import InfrastructureError
from orchestrator.kernel.outcomes import ArtifactDetails, ArtifactRetention
from orchestrator.kernel.ports import BenchmarkInfo, EpisodeSandbox, PlannedEpisode, SubmitReceipt
from orchestrator.kernel.program import ProgramError
from orchestrator.kernel.rejections import RejectionCode, RequestRejected
from orchestrator.kernel.session import SessionState, StatusView, SubmissionState, SubmissionView
from orchestrator.records import schema
from orchestrator.records.artifacts import DEFAULT_BULK_ARTIFACTS_BYTES, evict_bulk_artifacts, kept_artifacts
from orchestrator.records.atomic import PRIVATE_FILE, write_bytes, write_json
from orchestrator.records.events import Finished, SubmissionAdmitted, SubmissionCompleted, SubmissionVoided
from orchestrator.records.feedback import feedback_json, publish_feedback, read_artifacts, write_artifacts
from orchestrator.records.models import ArtifactRecord, SubmissionRecord, parse
from orchestrator.records.progress import Notify, RunProgress
from orchestrator.records.run_dir import RunDirectory
from orchestrator.run.workspace import AgentIdentity, capture_workspace_program

log = logging.getLogger(__name__)

# How often close() asks the sandbox again to cancel: the evaluation may start its batch after the first request.
CANCEL_REPEAT_S = 0.5
PHASE_ENDED = "agent_phase_ended"  # the void reason of a Submission the end of the agent phase cut short


class RunHost:
    def __init__(
        self,
        *,
        records: RunDirectory,
        sandbox: EpisodeSandbox,
        benchmark: BenchmarkInfo,
        state: SessionState,
        episode_pool: list[PlannedEpisode],
        instructions: str,
        agent: AgentIdentity | None = None,
        notify: Notify = lambda kind, fields: None,
        bulk_artifacts_bytes: int = DEFAULT_BULK_ARTIFACTS_BYTES,
    ) -> None:
        self._records = records
        self._bulk_artifacts_bytes = bulk_artifacts_bytes
        self._sandbox = sandbox
        self._benchmark = benchmark
        self._state = state
        self._episode_pool = episode_pool
        self._instructions = instructions
        self._agent = agent
        self._notify = notify
        # Held while a Submission is admitted and logged, and while it is settled (completed or voided) and logged,
        # so that close() returns only once the last record of the agent phase is written.
        self._settling = threading.RLock()
        self._cancelled = False  # close() asked the sandbox to stop the Submission in flight

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
        """Evaluate the workspace's Program on the selected indices of the Episode pool. Raises RequestRejected.

        The Program is read as the agent (see run.workspace); every problem
        with it is INVALID_PROGRAM and spends nothing.
        """
        self._state.check(selector)  # a finished, closed or busy Run says so before the Program is read
        try:
            program = capture_workspace_program(self._records.workspace, self._agent)
        except ProgramError as exc:
            raise RequestRejected(RejectionCode.INVALID_PROGRAM, f"{exc.message} (nothing was spent)") from None
        with self._settling:
            view = self._state.admit(selector, program.digest)
            try:
                self._records.store_program(program)
                self._records.append(SubmissionAdmitted(id=view.id, selector=view.selector, indices=list(view.indices),
                                                        program_digest=program.digest))
            except Exception as exc:  # a full disk, most likely: the log holds nothing of it, so neither does the state
                self._state.withdraw(view.id)
                log.exception("the admission of %s could not be recorded", view.id)
                raise RequestRejected(RejectionCode.INTERNAL,
                                      f"the Host could not record the Submission ({_fault_code(exc)}); nothing was spent") from None
        self._notify(RunProgress.SUBMISSION_STARTED, {"id": view.id, "episodes": len(view.indices)})
        try:
            (feedback,) = evaluate_programs(self._sandbox, [program], [self._episode_pool[i] for i in view.indices])
        except Exception as exc:  # any fault of the Host's side: refund, keep the evidence, answer with a code
            raise self._failed(view, exc) from None
        with self._settling:
            if self._state.in_flight() != view.id:  # close() voided it meanwhile: nothing of it is written
                raise RequestRejected(RejectionCode.SESSION_CLOSED,
                                      f"the agent phase ended before {view.id} was evaluated; nothing was spent")
            try:
                receipt = self._complete(view, program.digest, feedback_json(feedback, program.digest), feedback.artifacts,
                                         feedback.artifact_details)
            except Exception as exc:
                raise self._failed(view, exc) from None
        self._notify_completed(receipt)  # outside the lock: a listener may act on the Run (tests submit from it)
        return receipt

    def _failed(self, view: SubmissionView, exc: Exception) -> RequestRejected:
        """Settle the Submission an exception ended; return the refusal for the agent, saying what it cost.

        Still in flight, it is voided (refunded): nothing was spent. Completed already (the exception came after
        the SessionState charged it, while its completion was logged), it stays charged, and the refusal says so
        and where its published Feedback is; its record.json, written before the charge, completes it on a resume too.
        """
        cancelled = self._cancelled
        code = _fault_code(exc)
        evidence = exc.evidence if isinstance(exc, InfrastructureError) else traceback.format_exc()
        with self._settling:
            if self._state.in_flight() == view.id:
                self._void(view, PHASE_ENDED if cancelled else code, str(exc), evidence)
            charged = self._view(view.id).state is SubmissionState.COMPLETED
        if charged:
            try:
                write_bytes(self._records.private / "diagnostics" / f"{view.id}.log", f"{exc}\n{evidence}".encode(), mode=PRIVATE_FILE)
            except OSError:  # the same full disk, most likely: the answer below must still reach the agent
                log.exception("the evidence of %s could not be written", view.id)
            return RequestRejected(RejectionCode.INTERNAL, f"{view.id} was evaluated and its {len(view.indices)} Episode(s) were spent, "
                                   f"but the Host failed to record it ({code}); its Feedback is at {self.feedback_path(view.id)}")
        if cancelled:
            return RequestRejected(RejectionCode.SESSION_CLOSED, f"the agent phase ended before {view.id} was evaluated; nothing was spent")
        return RequestRejected(RejectionCode.INTERNAL, f"the evaluation failed on the Host's side ({code}); nothing was spent")

    def finish(self, candidates: list[str]) -> tuple[str, ...]:
        with self._settling:
            chosen = self._state.finish(candidates)
            self._records.append(Finished(candidates=list(chosen)))
        self._notify(RunProgress.FINISHED, {"candidates": list(chosen)})
        return chosen

    def close(self, *, grace_s: float, cancel: Callable[[], object] = lambda: None, cancel_wait_s: float = 0.0,
              clock: Callable[[], float] = time.monotonic) -> str | None:
        """End the agent's side of the Run; return how the Submission in flight ended ("completed" or "voided"), or None.

        From the call on, Submit and Finish are refused with session_closed.
        A Submission in flight gets grace_s to complete. Then cancel is called
        (again every CANCEL_REPEAT_S: its batch may start after the first call)
        so that the sandbox starts no further Episode of it; the evaluation
        then gives up and voids it (refunded, reason "agent_phase_ended").
        If it has not within cancel_wait_s, close voids it itself, and
        whatever that evaluation returns later is discarded unwritten. Either
        way its submission_completed or submission_voided event is logged, and
        its Feedback published, before close returns.
        """
        self._state.close()
        submission_id = self._state.in_flight()
        if submission_id is None:
            with self._settling:  # a finish or an admission being logged right now is logged before close returns
                return None
        if not self._state.wait_until_settled(grace_s):
            self._cancelled = True
            deadline = clock() + cancel_wait_s
            while True:
                cancel()
                left = deadline - clock()
                if self._state.wait_until_settled(min(max(0.0, left), CANCEL_REPEAT_S)) or left <= 0:
                    break
        with self._settling:  # the evaluation's own settling, if it won, is fully logged once this is held
            if self._state.in_flight() == submission_id:
                view = self._view(submission_id)
                self._void(view, PHASE_ENDED, f"the evaluation of {submission_id} did not stop within"
                           f" {grace_s + cancel_wait_s:.0f} s of the end of the agent phase", "")
            return self._view(submission_id).state.value

    def _view(self, submission_id: str) -> SubmissionView:
        return next(s for s in self._state.status().submissions if s.id == submission_id)

    # records -------------------------------------------------------------------
    def _complete(self, view: SubmissionView, digest: str, document: dict[str, Any], artifacts: dict[str, bytes],
                  details: dict[str, ArtifactDetails], evicted: tuple[ArtifactRecord, ...] = ()) -> SubmitReceipt:
        # Order matters for resume: the record first, then the published copy,
        # then the event that makes the Submission count as completed.
        directory = self._records.submission(view.id)
        kept = kept_artifacts(artifacts, details)
        refused = kept.refused + write_artifacts(directory, kept.files)
        write_json(directory / "record.json", SubmissionRecord.model_validate({
            "schema": schema.SUBMISSION, "id": view.id, "number": view.number, "selector": view.selector, "indices": list(view.indices),
            "program_digest": digest, "parameters_digest": self._benchmark.parameters_digest, "feedback": document,
            "artifacts": [record.to_json() for record in [*kept.records, *evicted]],
            **({"artifacts_refused": refused} if refused else {}),
        }).to_json())
        publish_feedback(self._records.published_feedback(view.id), document, kept.files)
        failures = sum(1 for e in document["episodes"] if e["failure"])
        # Taken while the Submission is still in flight, so no other can be admitted
        # in between: the budget exactly as this Submission left it.
        budget = self._state.status()
        self._state.complete(view.id, document["score"], failures)
        self._records.append(SubmissionCompleted(id=view.id, score=document["score"], policy_failures=failures))
        self._evict_bulk()
        return SubmitReceipt(submission_id=view.id, program_digest=digest, score=document["score"],
                            policy_failures=failures, feedback_path=self.feedback_path(view.id),
                            episodes_used=budget.episodes_used, episodes_left=budget.episodes_left,
                            submissions_left=budget.submissions_left)

    def _evict_bulk(self) -> None:
        """Evict the Run's oldest bulk artifacts (kept and published copies) past its bound; permanent ones stay.

        After the Submission is completed: a record that cannot be rewritten (a full disk) is logged and evicted on a
        later Submission's turn, never a reason to void a Submission whose Feedback is published.
        """
        submissions = [(self._records.submission(s.id), [self._records.published_feedback(s.id)])
                       for s in sorted(self._state.status().submissions, key=lambda s: s.number)]
        try:
            evicted = evict_bulk_artifacts(submissions, self._bulk_artifacts_bytes)
        except OSError:
            log.exception("the Run's bulk artifacts could not be evicted now")
            return
        if evicted:
            log.info("bulk artifacts evicted (the Run's bound is %d bytes): %s", self._bulk_artifacts_bytes, ", ".join(evicted))

    def _notify_completed(self, receipt: SubmitReceipt) -> None:
        self._notify(RunProgress.SUBMISSION_COMPLETED, {"id": receipt.submission_id, "score": receipt.score, "status": self._state.status(),
                                              "direction": self._benchmark.direction})

    def _void(self, view: SubmissionView, reason: str, message: str, evidence: str) -> None:
        """Refund the in-flight Submission: Host-private evidence, then the event. Call with _settling held."""
        self._state.void(view.id)
        write_bytes(self._records.private / "diagnostics" / f"{view.id}.log", f"{message}\n{evidence}".encode(), mode=PRIVATE_FILE)
        self._records.append(SubmissionVoided(id=view.id, reason=reason))
        self._notify(RunProgress.SUBMISSION_VOIDED, {"id": view.id, "reason": message})

    def recover_in_flight(self) -> str | None:
        """After a crash: complete the in-flight Submission from its record, or void it (refund)."""
        submission_id = self._state.in_flight()
        if submission_id is None:
            return None
        record_path = self._records.submission(submission_id) / "record.json"
        try:
            record = (parse(SubmissionRecord, record_path, schema.read_record(record_path, schema.SUBMISSION))
                      if record_path.exists() else None)
        except schema.RecordError:
            record = None  # written atomically, so never torn; anything else is not a record to complete from
        if record is not None and record.program_digest is not None:
            view = self._view(submission_id)
            # A record written before artifacts were listed names them (plain file names) in its Feedback only.
            listed = record.artifacts if record.artifacts is not None else [
                ArtifactRecord(name=name) for name in record.feedback.artifacts or []]
            artifacts = read_artifacts(self._records.submission(submission_id), [a.name for a in listed if not a.evicted])
            details = {a.name: ArtifactDetails(media_type=a.media_type or "", retention=_retention(a.retention)) for a in listed}
            self._notify_completed(self._complete(view, record.program_digest, record.feedback.to_json(), artifacts, details,
                                                  tuple(a for a in listed if a.evicted)))
            return f"{submission_id} completed from its record"
        self._state.void(submission_id)
        self._records.append(SubmissionVoided(id=submission_id, reason="orchestrator_restarted"))
        return f"{submission_id} voided and refunded (interrupted before its Feedback was recorded)"


def _retention(recorded: str | None) -> ArtifactRetention:
    """The retention a record names (permanent for none, or for a value this version does not know)."""
    try:
        return ArtifactRetention(recorded or ArtifactRetention.PERMANENT.value)
    except ValueError:
        return ArtifactRetention.PERMANENT


def _fault_code(exc: Exception) -> str:
    """What the agent may be told of a fault of the Host's side: its infrastructure code, else the exception's type."""
    return exc.code.value if isinstance(exc, InfrastructureError) else type(exc).__name__
