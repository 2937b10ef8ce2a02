"""EvoPolicyGym 0.3's view of a Submission's Feedback, composed inside the agent container from ours.

Their agents read `feedback/latest.json` and `feedback/submissions/<id>/feedback.json` (with
`availability.json` and `artifacts/` beside it). The Host publishes our Feedback read-only at
`feedback/<id>/` and, before the agent starts, makes `feedback/latest.json` and
`feedback/submissions` links into `.evopolicygym/`, a directory of the workspace the agent owns
(`run.agent_container.prepare_feedback_view`). `evopolicygym-session` writes there, as the agent,
after each Submission: a whole Submission directory renamed into place, then `latest.json`
replaced by rename, so a reader sees either the previous view or the new one, never half of one.

Their fields from ours (`records.models.FeedbackDocument` and the Host API's SubmitReceipt):

| theirs | ours |
|---|---|
| `submission_id` | the receipt's (our ids, `s0001`, not `submission-000001`) |
| `program_digest`, `score` | the receipt's |
| `episode_indices` | the selector's indices, as sent |
| `episodes_used` | the number of those indices (ours counts the Run's) |
| `episodes_remaining` | the receipt's `episodes_left` |
| `content` | our `values` (the Benchmark's bounded public values) |
| `episodes[]` | our `episodes[]`: `index` as `episode_index`; status `policy_failure` as |
|  | `policy_failed`, failure `protocol_violation` as `protocol_error` (`out_of_memory` and |
|  | `crashed` have no counterpart and are kept); a failed Episode's reward is null, as theirs |
| `artifacts[]` | ours, with size and sha256 read from our published files; media type and |
|  | retention ours or (absent) guessed from the name and permanent |

Ours without a counterpart (`policy_failures`, `submissions_left`, our per-Episode timings,
output tails and tracebacks) stay in our `feedback/<id>/feedback.json`.

Imports: the standard library only.
"""

from __future__ import annotations

import hashlib
import json
import mimetypes
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

FEEDBACK_SCHEMA = "evopolicygym/feedback/v2"
AVAILABILITY_SCHEMA = "evopolicygym/artifact-availability/v1"
VIEW_DIRECTORY = ".evopolicygym"  # below the workspace, the agent's own
SUBMISSIONS = "submissions"
LATEST = "latest.json"
_STATUS = {"policy_failure": "policy_failed"}
_FAILURE = {"protocol_violation": "protocol_error"}
ARTIFACT_HASH_LIMIT = 16 * 1024 * 1024  # their per-artifact bound; a larger file is listed without a digest


def episode_document(episode: dict[str, Any], index: int) -> dict[str, Any]:
    """One Episode of their feedback.json from one of ours (at pool index `index`)."""
    status = _STATUS.get(str(episode.get("status")), str(episode.get("status")))
    failure = episode.get("failure") or None
    return {
        "episode_index": index,
        "status": status,
        "reward": episode.get("reward") if status == "completed" else None,
        "steps": episode.get("steps") or 0,
        "failure": _FAILURE.get(failure, failure) if failure else None,
    }


def artifact_documents(ours: list[Any], directory: Path) -> list[dict[str, Any]]:
    """Their artifact entries for our feedback.json's `artifacts` (names, or objects with name, media type, retention).

    directory is our published Submission directory (feedback/<id>); each file below its artifacts/ is read
    without following a link for its size and sha256. A missing or unreadable file is listed with size 0 and
    no digest.
    """
    documents = []
    for entry in ours:
        media_type: Any = None
        retention: Any = None
        if isinstance(entry, dict):
            named = entry.get("name") or entry.get("path")
            media_type, retention = entry.get("media_type"), entry.get("retention")
        else:
            named = entry
        if not isinstance(named, str):
            continue
        name = named
        size, digest = _measure(directory / "artifacts" / name)
        documents.append({
            "name": name,
            "media_type": media_type or mimetypes.guess_type(name)[0] or "application/octet-stream",
            "path": f"artifacts/{name}",
            "size": size,
            "sha256": digest,
            "retention": str(retention).lower() if retention else "permanent",
        })
    return documents


def _measure(path: Path) -> tuple[int, str | None]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return 0, None
    try:
        size = os.fstat(fd).st_size
        if size > ARTIFACT_HASH_LIMIT:
            return size, None
        hasher = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            hasher.update(chunk)
        return size, hasher.hexdigest()
    finally:
        os.close(fd)


def submission_documents(receipt: dict[str, Any], indices: tuple[int, ...], ours: dict[str, Any],
                         published: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Their (feedback.json, availability.json, latest.json) of one Submission.

    receipt is our SubmitReceipt as a dict, indices the pool indices submitted (in order), ours our published
    feedback.json, published its directory (feedback/<id>). Raises ValueError when ours has another number of
    Episodes than indices.
    """
    submission_id = receipt["submission_id"]
    episodes = ours.get("episodes") or []
    if len(episodes) != len(indices):
        raise ValueError(f"the Feedback of {submission_id} has {len(episodes)} Episode(s) for {len(indices)} index(es)")
    artifacts = artifact_documents(ours.get("artifacts") or [], published)
    feedback = {
        "schema": FEEDBACK_SCHEMA,
        "submission_id": submission_id,
        "program_digest": receipt["program_digest"],
        "episode_indices": list(indices),
        "episodes_used": len(indices),
        "episodes_remaining": receipt.get("episodes_left", 0),
        "score": receipt["score"],
        "content": ours.get("values") or {},
        "episodes": [episode_document(episode, index) for episode, index in zip(episodes, indices, strict=True)],
        "artifacts": artifacts,
    }
    bulk = [{"name": a["name"], "path": a["path"], "size": a["size"], "sha256": a["sha256"], "available": a["sha256"] is not None}
            for a in artifacts if a["retention"] == "bulk"]
    available = sum(1 for item in bulk if item["available"])
    availability = {
        "schema": AVAILABILITY_SCHEMA,
        "submission_id": submission_id,
        "bulk_status": "evicted" if bulk and not available else "partial" if available != len(bulk) else "available",
        "bulk_artifacts": bulk,
    }
    latest = {
        "schema": FEEDBACK_SCHEMA,
        "submission_id": submission_id,
        "program_digest": receipt["program_digest"],
        "score": receipt["score"],
        "feedback": f"{SUBMISSIONS}/{submission_id}/feedback.json",
    }
    return feedback, availability, latest


def _json_bytes(document: dict[str, Any]) -> bytes:
    return (json.dumps(document, allow_nan=False, ensure_ascii=False, indent=2, sort_keys=True) + "\n").encode()


def _write_new(path: Path, document: dict[str, Any]) -> None:
    with open(path, "xb") as stream:
        stream.write(_json_bytes(document))
        stream.flush()
        os.fsync(stream.fileno())


def publish_view(workspace: Path, submission_id: str, feedback: dict[str, Any], availability: dict[str, Any],
                 latest: dict[str, Any]) -> Path:
    """Write their view of one Submission below workspace/.evopolicygym; return the Submission's directory there.

    The Submission's directory is made whole under a temporary name and renamed into place (an earlier one of the
    same id is replaced), its `artifacts` a link to our published `feedback/<id>/artifacts`; then latest.json is
    replaced by rename. Raises OSError (e.g. when the workspace has no view directory: not in a Run).
    """
    view = workspace / VIEW_DIRECTORY
    if view.is_symlink() or not view.is_dir():
        raise FileNotFoundError(f"{view} is not a directory: the Host made no Feedback view for this workspace")
    submissions = view / SUBMISSIONS
    submissions.mkdir(mode=0o755, exist_ok=True)
    staging = submissions / f".{submission_id}.tmp-{uuid.uuid4().hex}"
    staging.mkdir(mode=0o755)
    try:
        _write_new(staging / "feedback.json", feedback)
        _write_new(staging / "availability.json", availability)
        os.symlink(f"../../../feedback/{submission_id}/artifacts", staging / "artifacts")
        target = submissions / submission_id
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    temporary = view / f".{LATEST}.tmp-{uuid.uuid4().hex}"
    try:
        _write_new(temporary, latest)
        os.chmod(temporary, 0o644)
        os.replace(temporary, view / LATEST)
    finally:
        temporary.unlink(missing_ok=True)
    return target
