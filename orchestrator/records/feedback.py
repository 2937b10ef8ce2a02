"""The published form of Feedback: what an agent or a user reads. Never a seed, a scenario or a private path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.kernel.evaluation import Evaluation
from orchestrator.kernel.jsonable import jsonable
from orchestrator.kernel.ports import EvaluationFeedback
from orchestrator.records import schema
from orchestrator.records.artifacts import kept_artifacts, read_artifact_files, write_artifact_files
from orchestrator.records.atomic import PRIVATE_DIRECTORY, PRIVATE_FILE, PUBLIC_DIRECTORY, PUBLIC_FILE, make_directory, write_json
from orchestrator.records.models import FeedbackDocument


def feedback_json(feedback: EvaluationFeedback, program_digest: str) -> dict[str, Any]:
    """The Feedback document (feedback.json, `records.models.FeedbackDocument`): score, Benchmark values, and per-Episode
    runtime observations."""
    kept = kept_artifacts(feedback.artifacts, feedback.artifact_details)
    return FeedbackDocument.model_validate({
        "schema": schema.FEEDBACK,
        "score": feedback.score,
        "program_digest": program_digest,
        "values": jsonable(feedback.values),
        "episodes": [outcome.to_json() for outcome in feedback.episodes],
        "artifacts": sorted(kept.names),
        **({"evidence_dropped": list(feedback.evidence_dropped)} if feedback.evidence_dropped else {}),
        **({"artifact_files": [record.to_json() for record in sorted(kept.records, key=lambda r: r.name)]} if kept.records else {}),
    }).to_json()


def evaluation_json(evaluation: Evaluation, provenance: dict[str, Any] | None = None) -> dict[str, Any]:
    """The result of a direct evaluation (the user chose split and seed, so they are shown), with what produced it."""
    document = feedback_json(evaluation.feedback, evaluation.program.digest)
    document.update(
        schema=schema.EVALUATION,
        benchmark=evaluation.benchmark.id,
        primary_metric=evaluation.benchmark.primary_metric,
        split=evaluation.split,
        seed=evaluation.seed,
        parameters_digest=evaluation.benchmark.parameters_digest,
        **(provenance or {}),
    )
    if evaluation.reproduction_seeds:
        document["reproduction"] = reproduction_json(evaluation)
    return document


def reproduction_json(evaluation: Evaluation) -> dict[str, Any]:
    """What reproduction mode adds to an evaluation's result, to compare one to one with EvoPolicyGym 0.3's own evaluate:
    its seed, split and count, each Episode's policy seed and return in plan order (None for a policy failure, as
    its results have no return for one)."""
    episodes = evaluation.feedback.episodes
    return {
        "of": "evopolicygym-0.3",
        "seed": evaluation.seed,
        "split": evaluation.split,
        "count": len(episodes),
        "policy_seeds": list(evaluation.reproduction_seeds),
        "returns": [None if e.failure is not None else e.reward for e in episodes],
    }


def write_artifacts(directory: Path, artifacts: dict[str, bytes], *, mode: int = PRIVATE_FILE) -> list[str]:
    """Write the artifacts the Host keeps (`records.artifacts.kept_artifacts`) below directory/artifacts by their
    relative paths, with permission bits mode, never through a link; return why any was not kept or written."""
    kept = kept_artifacts(artifacts)
    directory_mode = PUBLIC_DIRECTORY if mode == PUBLIC_FILE else PRIVATE_DIRECTORY
    if kept.files:
        directory.mkdir(parents=True, exist_ok=True)
    return kept.refused + write_artifact_files(directory, kept.files, file_mode=mode, directory_mode=directory_mode)


def read_artifacts(directory: Path, names: list[str]) -> dict[str, bytes]:
    """The artifacts of names written below directory/artifacts by write_artifacts (missing ones left out)."""
    return read_artifact_files(directory, names)


def publish_feedback(directory: Path, document: dict[str, Any], artifacts: dict[str, bytes]) -> Path:
    """Write artifacts/ and feedback.json (the document of feedback_json) below directory; return its path.

    The agent reads these as another user through a read-only mount, so files
    are 0644 and every directory made here 0755, whatever the Host's umask.
    Raises OSError.
    """
    make_directory(directory, PUBLIC_DIRECTORY)
    write_artifacts(directory, artifacts, mode=PUBLIC_FILE)
    target = directory / "feedback.json"
    write_json(target, document, mode=PUBLIC_FILE)
    return target
