"""Artifacts: named, typed, bounded files a Benchmark publishes with its Feedback, and their limits."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypeAlias

ARTIFACT_MAX_BYTES = 16 * 1024 * 1024
FEEDBACK_MAX_ARTIFACTS = 1024
FEEDBACK_MAX_ARTIFACT_BYTES = FEEDBACK_MAX_ARTIFACTS * ARTIFACT_MAX_BYTES

ArtifactRetention: TypeAlias = Literal["permanent", "bulk"]
ARTIFACT_RETENTIONS: frozenset[str] = frozenset({"permanent", "bulk"})


def check_artifact_name(name: object) -> str:
    """Return name when it is a relative POSIX path with no empty, `.` or `..` component, no backslash and no NUL.

    Raises TypeError when name is not a str, ValueError otherwise.
    """
    if type(name) is not str:
        raise TypeError("artifact name must be text")
    if not name or name[0] == "/" or "\\" in name or "\x00" in name:
        raise ValueError(f"artifact name must be a relative POSIX path: {name!r}")
    for part in name.split("/"):
        if part in ("", ".", ".."):
            raise ValueError(f"artifact name has an empty, '.' or '..' component: {name!r}")
    return name


@dataclass(frozen=True, slots=True)
class Artifact:
    """One public file: a relative POSIX path name (`episode-000/replay.gif`), a media type, its bytes and a retention.

    `permanent` artifacts are kept with the record; `bulk` ones may be evicted, oldest first, within a bound.
    Raises TypeError for a name or media type that is not a str or content that is not exact bytes, and ValueError for
    an unsafe name (see check_artifact_name), an empty or multi-line media type, content over ARTIFACT_MAX_BYTES or an
    unknown retention.
    """

    name: str
    media_type: str
    content: bytes = field(repr=False)
    retention: ArtifactRetention = "permanent"

    def __post_init__(self) -> None:
        check_artifact_name(self.name)
        if type(self.media_type) is not str:
            raise TypeError("artifact media_type must be text")
        if not self.media_type or "\n" in self.media_type or "\r" in self.media_type:
            raise ValueError("artifact media_type must be a non-empty single line")
        if type(self.content) is not bytes:
            raise TypeError("artifact content must be exact bytes")
        if len(self.content) > ARTIFACT_MAX_BYTES:
            raise ValueError(f"artifact {self.name} holds {len(self.content)} bytes, more than the {ARTIFACT_MAX_BYTES} allowed")
        if self.retention not in ARTIFACT_RETENTIONS:
            raise ValueError("artifact retention must be 'permanent' or 'bulk'")

    @property
    def size(self) -> int:
        """The content's length in bytes."""
        return len(self.content)

    def read_bytes(self) -> bytes:
        """Return the content."""
        return self.content


__all__ = [
    "ARTIFACT_MAX_BYTES",
    "Artifact",
    "ArtifactRetention",
    "FEEDBACK_MAX_ARTIFACTS",
    "FEEDBACK_MAX_ARTIFACT_BYTES",
]
