"""The agent's request body: its framing checked from the head alone, then read whole and bounded (by Content-Length, or
chunked transfer coding)."""

from __future__ import annotations

from typing import BinaryIO, Protocol

_MAX_LINE = 4096  # a chunk-size line or a trailer line
_MAX_TRAILERS = 64


class Headers(Protocol):
    """A request head's fields by name (the handler's email.message.Message, or a plain dict)."""

    def get(self, name: str, /) -> str | None: ...


class BodyError(Exception):
    """The request body is malformed (400) or over the bound (413). `status` says which."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


def declared_body(headers: Headers, limit: int) -> int | None:
    """What the request head says of its body, checked before any of it is read: its length, or None when it is
    chunked. Raises BodyError for an unsupported transfer coding, a malformed length or one over limit."""
    encoding = (headers.get("transfer-encoding") or "").lower()
    if encoding:
        if [part.strip() for part in encoding.split(",")] != ["chunked"]:
            raise BodyError(400, f"unsupported transfer coding: {encoding[:100]}")
        return None
    text = headers.get("content-length")
    if text is None:
        return 0
    text = text.strip()
    if not (text.isascii() and text.isdigit()):
        raise BodyError(400, "malformed Content-Length")
    length = int(text) if len(text) <= 19 else limit + 1  # a length of more digits is over any limit
    if length > limit:
        raise BodyError(413, f"request body over {limit} bytes")
    return length


def read_request_body(stream: BinaryIO, headers: Headers, limit: int) -> bytes:
    """Return the body of a request whose header block was just read from stream. Raises BodyError.

    A body sent with `Transfer-Encoding: chunked` is decoded (trailers are read and dropped); else
    Content-Length bytes are read; else there is none. Never reads more than limit bytes of body.
    """
    length = declared_body(headers, limit)
    if length is None:
        return _read_chunked(stream, limit)
    body = stream.read(length)
    if len(body) != length:
        raise BodyError(400, "request body shorter than its Content-Length")
    return body


def _read_chunked(stream: BinaryIO, limit: int) -> bytes:
    body = bytearray()
    while True:
        line = _line(stream)
        size_text = line.split(b";", 1)[0].strip()  # chunk extensions are allowed and ignored
        try:
            size = int(size_text, 16)
        except ValueError:
            raise BodyError(400, "malformed chunk size") from None
        if size < 0 or size_text.startswith((b"-", b"+")):
            raise BodyError(400, "malformed chunk size")
        if size == 0:
            break
        if len(body) + size > limit:
            raise BodyError(413, f"request body over {limit} bytes")
        chunk = stream.read(size)
        if len(chunk) != size or _line(stream) != b"":
            raise BodyError(400, "truncated chunk")
        body += chunk
    for _ in range(_MAX_TRAILERS + 1):  # trailers, up to the empty line
        if not _line(stream):
            return bytes(body)
    raise BodyError(400, "too many trailer lines")


def _line(stream: BinaryIO) -> bytes:
    line = stream.readline(_MAX_LINE + 1)
    if len(line) > _MAX_LINE:
        raise BodyError(400, "chunk line too long")
    if not line.endswith(b"\n"):
        raise BodyError(400, "truncated chunked body")
    return line.rstrip(b"\r\n")
