"""What the relay lets through: the upstream, the allowed paths, the Host's credential, the limits and bounds."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

from orchestrator.relay.bounds import RelayBounds

# Headers that carry a provider credential: whatever the agent sends in them is dropped, the Host's goes in one.
CREDENTIAL_HEADERS = ("authorization", "x-api-key", "x-goog-api-key")
MAX_REQUEST_BYTES = 32 * 1024 * 1024
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
# Endpoints whose spending the relay would not see (batches, background work, stored files): never relayed.
_UNMETERED_SEGMENTS = {"batches", "files", "uploads"}
_UNMETERED_METHODS = ("batch", "async")


class CredentialError(Exception):
    """The Host's credential cannot be had now (an unreadable or expired login); the agent gets a 502 saying so."""


class Credential(Protocol):
    """Where the relay gets the headers that authenticate it upstream; asked once per forwarded request."""

    def headers(self) -> dict[str, str]:
        """Return the headers to add (never logged). Raises CredentialError."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class StaticCredential:
    """A key from the Host's environment. header: "authorization" (sent as "Bearer KEY"), or a raw-value header
    such as "x-api-key" or "x-goog-api-key". An empty key sends nothing (a local model server needing none)."""

    header: str
    value: str = field(repr=False)

    def headers(self) -> dict[str, str]:
        if not self.value:
            return {}
        if self.header == "authorization":
            return {"Authorization": f"Bearer {self.value}"}
        return {self.header: self.value}


@dataclass(frozen=True, slots=True, kw_only=True)
class RelayPolicy:
    """What the relay lets through.

    allow_paths: an exact path (e.g. "/v1/messages" allows neither "/v1/messages/batches" nor any other path below
    it); a "*" inside a path stands for one run of characters without "/" or ":" (e.g.
    "/v1beta/models/*:generateContent"); a path ending in "/" or "*" allows every path it begins. Batch, file and
    background endpoints are refused whatever it says (unmetered_reason).
    strip_prefix: removed from an allowed path before it is appended to the upstream's own path (a ChatGPT
    login's upstream serves /v1/responses as /backend-api/codex/responses).
    timeout_s: the longest the upstream may keep the relay waiting, to connect, to take the request, for its
    response to begin and between two pieces of it; then the agent gets a 504 (or its stream ends) and the
    exchange is recorded with the error.
    """

    upstream: str
    allow_paths: tuple[str, ...]
    credential: Credential = field(repr=False)
    strip_prefix: str = ""
    max_requests: int | None = None
    max_tokens: int | None = None
    timeout_s: float = 300.0
    max_request_bytes: int = MAX_REQUEST_BYTES
    max_response_bytes: int = MAX_RESPONSE_BYTES
    bounds: RelayBounds = RelayBounds()

    @property
    def upstream_host(self) -> str:
        return urlsplit(self.upstream).netloc

    def upstream_url(self, path: str, query: str) -> str:
        """The upstream URL of an allowed request path and its forwarded query."""
        if self.strip_prefix and path.startswith(self.strip_prefix):
            path = path[len(self.strip_prefix):] or "/"
        return self.upstream.rstrip("/") + path + (f"?{query}" if query else "")


def path_allowed(path: str, allowed: str) -> bool:
    """Whether the request path is allowed by one allow_paths entry (see RelayPolicy).

    A path with a dot segment or an encoded dot, slash or backslash is never allowed: the upstream might
    resolve it to a path outside the prefix.
    """
    lowered = path.lower()
    if any(part in (".", "..") for part in path.split("/")) or any(c in lowered for c in ("%2e", "%2f", "%5c", "\\")):
        return False
    if allowed.endswith("/") or allowed.endswith("*"):
        prefix = allowed[:-1] if allowed.endswith("*") else allowed
        if "*" not in prefix:
            return path.startswith(prefix)
        return re.match(_pattern(prefix), path) is not None
    if "*" in allowed:
        return re.fullmatch(_pattern(allowed), path) is not None
    return path == allowed


def _pattern(allowed: str) -> str:
    return "[^/:]+".join(re.escape(part) for part in allowed.split("*"))


def unmetered_reason(path: str, document: Any) -> str:
    """Why a request would spend without the relay seeing its usage, or "" when it would not: a batch, file or upload
    endpoint (OpenAI /v1/batches and /v1/files, Anthropic /v1/messages/batches, Gemini :batchGenerateContent and the
    other batch or asynchronous methods), or a Responses request with "background": true."""
    segments = path.split("/")
    if any(segment in _UNMETERED_SEGMENTS for segment in segments):
        return f"{path}: batch and file endpoints are not relayed"
    method = segments[-1].rsplit(":", 1)[1] if ":" in segments[-1] else ""
    if method.lower().startswith(_UNMETERED_METHODS):
        return f"{path}: batch and asynchronous methods are not relayed"
    if isinstance(document, dict) and document.get("background") not in (None, False):
        return "background requests are not relayed"
    return ""


def forwarded_query(query: str) -> str:
    """The query string sent upstream: without any `key` parameter (the Gemini API's credential parameter)."""
    kept = [part for part in query.split("&") if part and part.split("=", 1)[0] != "key"]
    return "&".join(kept)
