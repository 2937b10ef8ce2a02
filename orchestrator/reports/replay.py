"""`runs replay`: a recorded Program evaluated again on the same hidden Episodes, compared Episode by Episode.

The hidden Episodes are planned again exactly as the Run planned them: `kernel.seeds.keyed_seed` of the
Run's seed under the Host's key, for the train pool ("train", then the Submission's indices), the
Validation ("validation") and the Assessment ("assessment", on the test split). The pool is also checked
against the copy the Run kept in private/pool.json. What is compared is everything an evaluation
determines: the score, the Benchmark's values, the artifact names, and per Episode its index, split,
status, failure code, steps, reward, termination and summary (times, reasons and output tails are not).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from orchestrator.kernel.evaluation import evaluate_programs
from orchestrator.kernel.ports import EpisodeSandbox, PlannedEpisode
from orchestrator.kernel.program import Program, ProgramError
from orchestrator.kernel.seeds import keyed_seed
from orchestrator.records import safe_read
from orchestrator.records.feedback import feedback_json
from orchestrator.records.schema import RecordError
from orchestrator.reports.run_records import RunRecords, stored_program

EPISODE_FIELDS = ("index", "split", "status", "failure", "steps", "reward", "terminated", "truncated", "summary")
ASSESSMENT, VALIDATION = "assessment", "validation"


class ReplayError(ValueError):
    """The target cannot be replayed from these records (unknown Submission, unreadable record, missing Program)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Difference:
    """One value the replay did not reproduce: where, the recorded and the replayed value, and which record held it."""

    where: str
    recorded: Any
    replayed: Any
    record: str

    def line(self) -> str:
        return f"{self.record}: {self.where}: recorded {_short(self.recorded)}, replayed {_short(self.replayed)}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayReport:
    target: str
    split: str
    programs: tuple[str, ...]
    episodes: int
    compared: tuple[str, ...]  # the records compared with the replay
    differences: tuple[Difference, ...] = field(default=())

    @property
    def identical(self) -> bool:
        return not self.differences

    def to_json(self) -> dict[str, Any]:
        document = asdict(self)
        document["identical"] = self.identical
        return document


def check_target(run: RunRecords, target: str) -> None:
    """Raise ReplayError unless run recorded target ("sNNNN", "validation" or "assessment") in a form a replay can use."""
    if run.manifest.seed is None:
        raise ReplayError(f"{run.root}/run.json records no seed")
    if target == ASSESSMENT:
        if run.assessment is None or not run.assessment.episodes:
            raise ReplayError(f"{run.root}: no readable assessment.json with Episodes (the Run assessed nothing yet)")
    elif target == VALIDATION:
        if run.validation is None or not run.validation.results:
            raise ReplayError(f"{run.root}: no Validation results recorded (validation.json)")
    else:
        record = run.submission(target)
        if record is None:
            known = ", ".join(s.id for s in run.submissions) or "none"
            raise ReplayError(f"{target}: no such Submission in {run.root} (known: {known}; or assessment, validation)")
        if record.error:
            raise ReplayError(f"{target}: its record cannot be read: {record.error}")


def episode_count(run: RunRecords, target: str) -> int:
    """How many Episodes replaying target runs (every Program of it counted). Call check_target first."""
    if target == ASSESSMENT:
        assessment = run.assessment
        return 0 if assessment is None else len(assessment.episodes) * (1 if assessment.initial_program is None else 2)
    if target == VALIDATION:
        validation = run.validation
        return 0 if validation is None else (validation.episodes or 0) * len(validation.results or [])
    record = run.submission(target)
    return len(record.indices) if record is not None else 0


def replay(run: RunRecords, target: str, sandbox: EpisodeSandbox, key: bytes) -> ReplayReport:
    """Evaluate target again ("sNNNN", "validation" or "assessment") and compare with what run recorded.

    Raises ReplayError for a target these records cannot replay, and the sandbox's InfrastructureError.
    """
    check_target(run, target)
    seed = run.manifest.seed
    assert seed is not None  # check_target
    if target == ASSESSMENT:
        return _replay_assessment(run, sandbox, keyed_seed(key, seed, "assessment"))
    if target == VALIDATION:
        return _replay_validation(run, sandbox, keyed_seed(key, seed, "validation"))
    return _replay_submission(run, target, sandbox, keyed_seed(key, seed, "train"))


def _replay_submission(run: RunRecords, submission_id: str, sandbox: EpisodeSandbox, seed: int) -> ReplayReport:
    record = run.submission(submission_id)
    assert record is not None  # check_target
    budget = run.manifest.budget
    pool = sandbox.plan("train", seed, (budget.pool_size if budget is not None else None) or 0)
    if any(i >= len(pool) for i in record.indices):
        raise ReplayError(f"{submission_id}: selects indices beyond the pool of {len(pool)}")
    program = _stored_program(run, record.program_digest)
    differences = _pool_differences(run, pool, record.indices) + _digest_differences(program, record.program_digest)
    (feedback,) = evaluate_programs(sandbox, [program], [pool[i] for i in record.indices])
    replayed = feedback_json(feedback, record.program_digest)
    record_name = f"submissions/{submission_id}/record.json"
    differences += compare_feedback(record.feedback, replayed, record=record_name)
    compared = [record_name]
    published = run.published_feedback(submission_id)
    if safe_read.kind(run.root, published) is not None:
        compared.append(published)
        try:
            document = safe_read.read_record(run.root, published)
        except RecordError as exc:
            differences.append(Difference(where="the file", recorded=f"unreadable ({exc.reason})", replayed="readable Feedback",
                                          record=published))
        else:
            differences += compare_feedback(document, replayed, record=published)
    return ReplayReport(target=submission_id, split="train", programs=(record.program_digest,), episodes=len(record.indices),
                        compared=tuple(compared), differences=tuple(differences))


def _replay_assessment(run: RunRecords, sandbox: EpisodeSandbox, seed: int) -> ReplayReport:
    document = run.assessment
    assert document is not None  # check_target
    digest = document.program_digest or ""
    episodes = sandbox.plan("test", seed, len(document.episodes))
    programs = [_stored_program(run, digest)]
    reference = document.initial_program
    if reference is not None:
        programs.append(_initial_program(run))
    feedbacks = evaluate_programs(sandbox, programs, episodes)
    differences = _digest_differences(programs[0], digest)
    differences += compare_feedback(document.to_json(), feedback_json(feedbacks[0], digest), record="assessment.json")
    if reference is not None:
        differences += compare_feedback(reference.to_json(), feedback_json(feedbacks[1], programs[1].digest),
                                        record="assessment.json initial_program")
    return ReplayReport(target=ASSESSMENT, split="test", programs=tuple(p.digest for p in programs), episodes=len(episodes),
                        compared=("assessment.json",), differences=tuple(differences))


def _replay_validation(run: RunRecords, sandbox: EpisodeSandbox, seed: int) -> ReplayReport:
    document = run.validation
    assert document is not None  # check_target
    results = document.results or []
    episodes = sandbox.plan("validation", seed, document.episodes or 0)
    programs = [_stored_program(run, r.program_digest or "") for r in results]
    feedbacks = evaluate_programs(sandbox, programs, episodes)
    differences: list[Difference] = []
    for result, program, feedback in zip(results, programs, feedbacks, strict=True):
        name = f"validation.json {result.submission_id}"
        recorded = result.feedback.to_json() if result.feedback is not None else {}
        differences += compare_feedback(recorded, feedback_json(feedback, program.digest), record=name)
    return ReplayReport(target=VALIDATION, split="validation", programs=tuple(p.digest for p in programs), episodes=len(episodes),
                        compared=("validation.json",), differences=tuple(differences))


def compare_feedback(recorded: dict[str, Any], replayed: dict[str, Any], *, record: str) -> list[Difference]:
    """Every determined value of replayed Feedback that differs from the recorded one, Episode by Episode."""
    differences: list[Difference] = []

    def differ(where: str, a: Any, b: Any) -> None:
        differences.append(Difference(where=where, recorded=a, replayed=b, record=record))

    if recorded.get("score") != replayed.get("score"):
        differ("score", recorded.get("score"), replayed.get("score"))
    old, new = _episodes(recorded), _episodes(replayed)
    if len(old) != len(new):
        differ("number of Episodes", len(old), len(new))
    for position, (a, b) in enumerate(zip(old, new, strict=False)):
        for name in EPISODE_FIELDS:
            if a.get(name) != b.get(name):
                differ(f"Episode {position} (index {b.get('index')}) {name}", a.get(name), b.get(name))
    for path, a, b in _value_differences(recorded.get("values"), replayed.get("values"), "values"):
        differ(path, a, b)
    if sorted(recorded.get("artifacts") or []) != sorted(replayed.get("artifacts") or []):
        differ("artifacts", recorded.get("artifacts"), replayed.get("artifacts"))
    return differences


def _value_differences(a: Any, b: Any, path: str) -> list[tuple[str, Any, Any]]:
    if isinstance(a, dict) and isinstance(b, dict):
        found = []
        for key in sorted(a.keys() | b.keys(), key=str):
            found += _value_differences(a.get(key), b.get(key), f"{path}.{key}")
        return found
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        found = []
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found += _value_differences(x, y, f"{path}[{i}]")
        return found
    return [] if a == b else [(path, a, b)]


def _pool_differences(run: RunRecords, pool: list[PlannedEpisode], indices: tuple[int, ...]) -> list[Difference]:
    """The pool indices whose plan differs from the Run's copy in private/pool.json (the hidden values are not shown)."""
    try:
        kept = {int(e["index"]): e for e in json.loads(safe_read.read_bytes(run.root, "private/pool.json", safe_read.MAX_RECORD_BYTES))}
    except (RecordError, ValueError, KeyError, TypeError, RecursionError):
        return [Difference(where="the pool", recorded="unreadable", replayed=f"{len(pool)} Episodes planned", record="private/pool.json")]
    differences = []
    for i in sorted(set(indices)):
        entry = kept.get(i)
        if entry is None or entry.get("payload") != pool[i].payload.decode("latin-1") or entry.get("policy_seed") != pool[i].policy_seed:
            differences.append(Difference(where=f"pool index {i}", recorded="the Run's plan", replayed="another plan", record="private/pool.json"))
    return differences


def _digest_differences(program: Program, digest: str) -> list[Difference]:
    if program.digest == digest:
        return []
    return [Difference(where="Program digest", recorded=digest, replayed=program.digest, record=f"programs/{digest.removeprefix('sha256:')}")]


def _stored_program(run: RunRecords, digest: str) -> Program:
    """The stored Program with digest; a digest that is not one never becomes a path. Raises ReplayError."""
    try:
        return run.program(digest)
    except ProgramError as exc:
        raise ReplayError(f"{run.root}: the stored Program {str(digest)[:80]!r} cannot be read: {exc.message}") from None


def _initial_program(run: RunRecords) -> Program:
    try:
        return stored_program(run.root, "initial_program")
    except ProgramError as exc:
        raise ReplayError(f"{run.root}/initial_program: {exc.message}") from None


def _episodes(document: dict[str, Any]) -> list[dict[str, Any]]:
    episodes = document.get("episodes")
    return [e if isinstance(e, dict) else {} for e in episodes] if isinstance(episodes, list) else []


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 80 else text[:77] + "..."
