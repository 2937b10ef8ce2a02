"""What the relay lets through: the upstream, the allowed paths, the Host's credential, the limits and bounds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import urlsplit

# Headers that carry a provider credential: whatever the agent sends in them is dropped, the Host's goes in one.
CREDENTIAL_HEADERS = ("authorization", "x-api-key", "x-goog-api-key")
MAX_REQUEST_BYTES = 32 * 1024 * 1024
MAX_RESPONSE_BYTES = 64 * 1024 * 1024


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

    allow_paths: a path ending in "/" or "*" allows every path it begins (e.g. "/v1beta/models/" allows
    "/v1beta/models/M:streamGenerateContent"); any other allows itself and the paths below it.
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
    if allowed.endswith("*"):
        return path.startswith(allowed[:-1])
    if allowed.endswith("/"):
        return path.startswith(allowed)
    return path == allowed or path.startswith(allowed + "/")


def forwarded_query(query: str) -> str:
    """The query string sent upstream: without any `key` parameter (the Gemini API's credential parameter)."""
    kept = [part for part in query.split("&") if part and part.split("=", 1)[0] != "key"]
    return "&".join(kept)
