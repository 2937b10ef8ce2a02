"""The published form of Feedback: what an agent or a user reads. Never a seed, a scenario or a private path."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from orchestrator.kernel.evaluation import Evaluation
from orchestrator.kernel.jsonable import jsonable
from orchestrator.kernel.ports import EvaluationFeedback
from orchestrator.records import schema
from orchestrator.records.atomic import PRIVATE_FILE, PUBLIC_DIRECTORY, PUBLIC_FILE, make_directory, write_bytes, write_json
from orchestrator.records.models import FeedbackDocument

_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def feedback_json(feedback: EvaluationFeedback, program_digest: str) -> dict[str, Any]:
    """The Feedback document (feedback.json, `records.models.FeedbackDocument`): score, Benchmark values, and per-Episode
    runtime observations."""
    return FeedbackDocument.model_validate({
        "schema": schema.FEEDBACK,
        "score": feedback.score,
        "program_digest": program_digest,
        "values": jsonable(feedback.values),
        "episodes": [outcome.to_json() for outcome in feedback.episodes],
        "artifacts": sorted(name for name in feedback.artifacts if _SAFE_NAME.match(name)),
        **({"evidence_dropped": list(feedback.evidence_dropped)} if feedback.evidence_dropped else {}),
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
        **(provenance or {}),
    )
    return document


def write_artifacts(directory: Path, artifacts: dict[str, bytes], *, mode: int = PRIVATE_FILE) -> None:
    """Write artifacts below directory/artifacts with permission bits mode; names that are not plain file names are skipped."""
    for name, data in artifacts.items():
        if _SAFE_NAME.match(name):
            write_bytes(directory / "artifacts" / name, data, mode=mode)


def read_artifacts(directory: Path) -> dict[str, bytes]:
    """The artifacts written below directory/artifacts by write_artifacts."""
    folder = directory / "artifacts"
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())} if folder.is_dir() else {}


def publish_feedback(directory: Path, document: dict[str, Any], artifacts: dict[str, bytes]) -> Path:
    """Write artifacts/ and feedback.json (the document of feedback_json) below directory; return its path.

    The agent reads these as another user through a read-only mount, so files
    are 0644 and every directory made here 0755, whatever the Host's umask.
    Raises OSError.
    """
    make_directory(directory, PUBLIC_DIRECTORY)
    if any(_SAFE_NAME.match(name) for name in artifacts):
        make_directory(directory / "artifacts", PUBLIC_DIRECTORY)
    write_artifacts(directory, artifacts, mode=PUBLIC_FILE)
    target = directory / "feedback.json"
    write_json(target, document, mode=PUBLIC_FILE)
    return target
