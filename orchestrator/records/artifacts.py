"""A Feedback's artifacts on disk: which are kept (names, sizes, counts), where they go below a Submission's or an
evaluation's directory (relative POSIX paths, never through a link), their media types and retention, and the
eviction of a Run's bulk artifacts, oldest first, past the Run's bound.

An artifact's name comes from the Benchmark (trusted code, but a name is still a path): it must be a relative POSIX
path of plain components ("episode-000/replay.gif"), and it is written from the artifact directory's descriptor one
component at a time with O_NOFOLLOW, so a symbolic link planted anywhere below the directory (or as the directory)
makes that artifact unwritten, never followed. The bounds are the reference kernel's: 16 MiB an artifact and 1,024
artifacts a Feedback.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import logging
import mimetypes
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from orchestrator.kernel.outcomes import ArtifactDetails, ArtifactRetention
from orchestrator.kernel.program import SAFE_DIR_FLAGS
from orchestrator.records import schema
from orchestrator.records.atomic import PRIVATE_DIRECTORY, PRIVATE_FILE, write_json
from orchestrator.records.models import ArtifactRecord, SubmissionRecord, parse

log = logging.getLogger(__name__)

MiB = 1 << 20
MAX_ARTIFACT_BYTES = 16 * MiB
MAX_ARTIFACTS = 1024
MAX_NAME_BYTES = 1024
MAX_COMPONENT_BYTES = 255
MAX_DEPTH = 16
DEFAULT_BULK_ARTIFACTS_BYTES = 1024 * MiB  # `records.bulk_artifacts_bytes` of a Run spec
FALLBACK_MEDIA_TYPE = "application/octet-stream"
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def name_problem(name: str) -> str | None:
    """Why name cannot name an artifact, or None: it must be a relative POSIX path of plain components (no "", ".",
    "..", backslash or NUL), at most MAX_NAME_BYTES long, MAX_COMPONENT_BYTES a component and MAX_DEPTH deep."""
    if not name or name.startswith("/"):
        return "not a relative path"
    if "\\" in name or "\0" in name or any(ord(c) < 32 for c in name):
        return "a backslash, NUL or control character in the name"
    parts = name.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "an empty, '.' or '..' component"
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES or len(parts) > MAX_DEPTH:
        return f"longer than {MAX_NAME_BYTES} bytes or deeper than {MAX_DEPTH} components"
    if any(len(part.encode("utf-8", "surrogatepass")) > MAX_COMPONENT_BYTES for part in parts):
        return f"a component longer than {MAX_COMPONENT_BYTES} bytes"
    return None


def media_type_of(name: str, given: str) -> str:
    """given when it is a single line, else the type the name's extension says (Python's mimetypes table, the same on
    every Host), else application/octet-stream."""
    given = given.strip()
    if given and "\n" not in given and "\r" not in given and len(given) <= 255:
        return given
    return _media_types().guess_type(name, strict=False)[0] or FALLBACK_MEDIA_TYPE


@functools.cache
def _media_types() -> mimetypes.MimeTypes:
    """Python's own table only (not the machine's mime.types files), so a name gets the same type on every Host."""
    return mimetypes.MimeTypes()


@dataclass(frozen=True, slots=True, kw_only=True)
class KeptArtifacts:
    """The artifacts of one Feedback the Host keeps, in the Feedback's order, and why each other one was not."""

    files: dict[str, bytes]
    records: list[ArtifactRecord]
    refused: list[str]

    @property
    def names(self) -> list[str]:
        return [record.name for record in self.records]


def kept_artifacts(artifacts: Mapping[str, bytes], details: Mapping[str, ArtifactDetails] | None = None) -> KeptArtifacts:
    """The artifacts of a Feedback the Host keeps: safe names, at most MAX_ARTIFACT_BYTES each, the first
    MAX_ARTIFACTS of them; each with its media type (the runner's, or guessed from the name) and retention."""
    files: dict[str, bytes] = {}
    records: list[ArtifactRecord] = []
    refused: list[str] = []
    for name, data in artifacts.items():
        problem = name_problem(name)
        if problem is None and len(data) > MAX_ARTIFACT_BYTES:
            problem = f"{len(data)} bytes, over {MAX_ARTIFACT_BYTES}"
        if problem is None and len(files) >= MAX_ARTIFACTS:
            problem = f"more than {MAX_ARTIFACTS} artifacts"
        if problem is not None:
            refused.append(f"{name!r}: {problem}")
            continue
        given = (details or {}).get(name) or ArtifactDetails()
        files[name] = data
        records.append(ArtifactRecord(name=name, media_type=media_type_of(name, given.media_type),
                                      retention=given.retention.value, bytes=len(data), sha256=hashlib.sha256(data).hexdigest()))
    return KeptArtifacts(files=files, records=records, refused=refused)


def write_artifact_files(parent: Path, files: Mapping[str, bytes], *, file_mode: int = PRIVATE_FILE,
                         directory_mode: int = PRIVATE_DIRECTORY) -> list[str]:
    """Write files below parent/artifacts (made when missing), each by its relative path; return why any was not.

    parent is the Host's own directory (a Submission's, a published Feedback's, an evaluation's --out). Below it
    nothing is followed: "artifacts" and every directory of a name are opened from their parent's descriptor with
    O_NOFOLLOW, so a symbolic link or a file in the way leaves that artifact unwritten (and said) and nothing is
    written outside. Each file is written atomically (temp file, fchmod, fsync, rename within its directory).
    Raises OSError when parent itself cannot be opened.
    """
    problems: list[str] = []
    if not files:
        return problems
    top = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            root = _directory_at(top, "artifacts", directory_mode)
        except OSError as exc:
            return [f"artifacts/: {_why(exc)}; no artifact written"]
        try:
            for name, data in files.items():
                try:
                    _write_below(root, name, data, file_mode, directory_mode)
                except OSError as exc:
                    problems.append(f"{name!r}: {_why(exc)}; not written")
        finally:
            os.close(root)
    finally:
        os.close(top)
    for problem in problems:
        log.warning("artifact below %s: %s", parent, problem)
    return problems


def read_artifact_files(parent: Path, names: list[str]) -> dict[str, bytes]:
    """The artifacts of names below parent/artifacts, read without following a link (a missing or unreadable one is
    left out)."""
    found: dict[str, bytes] = {}
    for name in names:
        if name_problem(name) is not None:
            continue
        try:
            fd = _open_below(parent, ["artifacts", *name.split("/")], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue
        with os.fdopen(fd, "rb") as handle:
            if stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                found[name] = handle.read(MAX_ARTIFACT_BYTES + 1)[:MAX_ARTIFACT_BYTES]
    return found


def remove_artifact_file(parent: Path, name: str) -> bool:
    """Unlink parent/artifacts/name without following a link; return whether a file was removed."""
    if name_problem(name) is not None:
        return False
    parts = ["artifacts", *name.split("/")]
    try:
        directory = _open_below(parent, parts[:-1], SAFE_DIR_FLAGS)
    except OSError:
        return False
    try:
        os.unlink(parts[-1], dir_fd=directory)
        return True
    except OSError:
        return False
    finally:
        os.close(directory)


def evict_bulk_artifacts(submissions: list[tuple[Path, list[Path]]], bound: int) -> list[str]:
    """Evict the oldest bulk artifacts of a Run until its kept bulk artifacts total at most bound bytes; return the
    evicted ones as "submission id/name".

    submissions lists, oldest first, each Submission's directory (its record.json lists its artifacts) with the other
    directories holding copies of its artifacts (its published Feedback). An evicted artifact's files are removed and
    its entry in record.json stays, marked evicted; permanent artifacts are never evicted. A record that cannot be
    read is skipped (its artifacts are not counted). Raises OSError when a record cannot be rewritten.
    """
    loaded: list[tuple[Path, list[Path], SubmissionRecord]] = []
    total = 0
    for directory, copies in submissions:
        path = directory / "record.json"
        try:
            record = parse(SubmissionRecord, path, schema.read_record(path, schema.SUBMISSION))
        except (schema.RecordError, OSError):
            continue
        loaded.append((directory, copies, record))
        total += sum(a.bytes or 0 for a in record.artifacts or [] if a.retention == ArtifactRetention.BULK.value and not a.evicted)
    evicted: list[str] = []
    for directory, copies, record in loaded:
        if total <= bound:
            break
        entries = [artifact.to_json() for artifact in record.artifacts or []]
        changed = False
        for entry in entries:
            if total <= bound:
                break
            if entry.get("retention") != ArtifactRetention.BULK.value or entry.get("evicted"):
                continue
            for place in (directory, *copies):
                remove_artifact_file(place, entry["name"])
            entry["evicted"] = True
            total -= entry.get("bytes") or 0
            evicted.append(f"{directory.name}/{entry['name']}")
            changed = True
        if changed:
            write_json(directory / "record.json", SubmissionRecord.model_validate({**record.to_json(), "artifacts": entries}).to_json())
    return evicted


def _directory_at(parent: int, name: str, mode: int) -> int:
    """The directory name below the descriptor parent, made with mode when missing, opened without following a link."""
    try:
        os.mkdir(name, mode, dir_fd=parent)
    except FileExistsError:
        pass
    fd = os.open(name, SAFE_DIR_FLAGS, dir_fd=parent)
    try:
        os.fchmod(fd, mode)  # whatever the umask; a directory of ours (opened without following a link)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write_below(root: int, name: str, data: bytes, file_mode: int, directory_mode: int) -> None:
    parts = name.split("/")
    current = os.dup(root)
    try:
        for part in parts[:-1]:
            child = _directory_at(current, part, directory_mode)
            os.close(current)
            current = child
        temp = f".{parts[-1][:200]}.{os.urandom(6).hex()}.tmp"
        fd = os.open(temp, _WRITE_FLAGS, file_mode, dir_fd=current)
        try:
            with os.fdopen(fd, "wb") as handle:
                os.fchmod(handle.fileno(), file_mode)
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp, parts[-1], src_dir_fd=current, dst_dir_fd=current)  # a link at the name is replaced, not followed
        except BaseException:
            try:
                os.unlink(temp, dir_fd=current)
            except FileNotFoundError:
                pass
            raise
        os.fsync(current)
    finally:
        os.close(current)


def _open_below(parent: Path, parts: list[str], last_flags: int) -> int:
    """Open parent/parts[0]/... from parent's descriptor, no component followed as a link; the last with last_flags."""
    current = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            child = os.open(part, SAFE_DIR_FLAGS, dir_fd=current)
            os.close(current)
            current = child
        return os.open(parts[-1], last_flags, dir_fd=current)
    finally:
        os.close(current)


def _why(exc: OSError) -> str:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return "a symbolic link or a file is in the way (not followed)"
    if exc.errno == errno.EISDIR:
        return "a directory is in the way"
    return exc.strerror or type(exc).__name__
