"""The Host side of the model relay.

The agent container has no network. Its model client talks HTTP to a local
bridge that forwards bytes to this server's Unix socket; this server forwards
only allowed paths to the one upstream named in the spec, adds the real
credential from the Host's environment (it never enters the container),
streams the response back, and records every exchange in order.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import socketserver
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

# Headers never forwarded upstream: hop-by-hop ones, and any credential the agent may send.
_DROPPED = {"authorization", "x-api-key", "proxy-authorization", "connection", "keep-alive", "transfer-encoding",
            "te", "trailer", "upgrade", "host", "content-length", "accept-encoding"}
MAX_REQUEST_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class RelayPolicy:
    """What the relay lets through. credential_header: "authorization" (Bearer) or "x-api-key"."""

    upstream: str
    allow_paths: tuple[str, ...]
    credential: str = field(repr=False)
    credential_header: str = "authorization"
    max_requests: int | None = None
    max_tokens: int | None = None

    @property
    def upstream_host(self) -> str:
        return urlsplit(self.upstream).netloc


@dataclass(slots=True)
class RelayCounters:
    requests: int = 0
    refused: int = 0
    tokens: int = 0
    request_bytes: int = 0
    response_bytes: int = 0
    limit_reached: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"requests": self.requests, "refused": self.refused, "tokens": self.tokens,
                "request_bytes": self.request_bytes, "response_bytes": self.response_bytes,
                "limit_reached": self.limit_reached or None}


def count_tokens(body: bytes) -> int:
    """Tokens reported by a provider response: a JSON body or server-sent events (OpenAI, Anthropic or Gemini usage)."""
    total = 0
    texts = [body]
    if b"\ndata:" in body or body.startswith(b"data:") or body.startswith(b"event:"):
        texts = [line[5:].strip() for line in body.splitlines() if line.startswith(b"data:")]
    gemini = 0  # Gemini's usageMetadata is cumulative: each streamed chunk may repeat it, the last one counts
    for text in texts:
        try:
            document = json.loads(text)
        except (ValueError, UnicodeDecodeError):
            continue
        total += _usage_tokens(document)
        metadata = document.get("usageMetadata") if isinstance(document, dict) else None
        if isinstance(metadata, dict) and isinstance(metadata.get("totalTokenCount"), int):
            gemini = max(gemini, metadata["totalTokenCount"])
    return total + gemini


def _usage_tokens(document: Any) -> int:
    if not isinstance(document, dict):
        return 0
    usage = document.get("usage")
    if usage is None and isinstance(document.get("response"), dict):
        usage = document["response"].get("usage")  # OpenAI Responses: response.completed
    if usage is None and isinstance(document.get("message"), dict):
        usage = document["message"].get("usage")  # Anthropic: message_start
    if not isinstance(usage, dict):
        return 0
    if isinstance(usage.get("total_tokens"), int):
        return usage["total_tokens"]
    return sum(v for k, v in usage.items() if k in ("input_tokens", "output_tokens") and isinstance(v, int))


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class ModelRelay:
    """Serves the relay on a Unix socket. The lock guards the counters and the record file."""

    def __init__(self, policy: RelayPolicy, socket_path: Path, record_path: Path) -> None:
        self.policy = policy
        self.counters = RelayCounters()
        self._socket_path = socket_path
        self._record_path = record_path
        self._lock = threading.Lock()
        self._sequence = 0
        record_path.parent.mkdir(parents=True, exist_ok=True)
        socket_path.unlink(missing_ok=True)
        relay = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                relay._handle(self)

            def do_POST(self) -> None:
                relay._handle(self)

            def do_PUT(self) -> None:
                relay._handle(self)

            def do_DELETE(self) -> None:
                relay._handle(self)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("relay: " + format, *args)

        self._server = _UnixHTTPServer(str(socket_path), Handler)
        os.chmod(socket_path, 0o666)
        self._thread = threading.Thread(target=self._server.serve_forever, name="epg-relay", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._socket_path.unlink(missing_ok=True)

    # one exchange ----------------------------------------------------------------
    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("content-length") or 0)
        if length > MAX_REQUEST_BYTES:
            self._refuse(handler, b"", 413, f"request body over {MAX_REQUEST_BYTES} bytes")
            return
        body = handler.rfile.read(length) if length else b""
        target = urlsplit(handler.path)
        path = target.path or "/"
        if target.netloc and target.netloc != self.policy.upstream_host:
            self._refuse(handler, body, 403, f"host {target.netloc} is not the allowed upstream")
            return
        if not any(path == allowed or path.startswith(allowed.rstrip("/") + "/") for allowed in self.policy.allow_paths):
            self._refuse(handler, body, 403, f"path {path} is not allowed")
            return
        with self._lock:
            limit = self._limit_locked()
            if limit:
                self.counters.limit_reached = limit
            else:
                self.counters.requests += 1  # counted when admitted, so a limit holds under concurrency
        if limit:
            self._refuse(handler, body, 429, f"relay limit reached: {limit}")
            return
        self._forward(handler, body, path + (f"?{target.query}" if target.query else ""))

    def _limit_locked(self) -> str:
        if self.policy.max_requests is not None and self.counters.requests >= self.policy.max_requests:
            return f"{self.policy.max_requests} requests"
        if self.policy.max_tokens is not None and self.counters.tokens >= self.policy.max_tokens:
            return f"{self.policy.max_tokens} tokens"
        return ""

    def _forward(self, handler: BaseHTTPRequestHandler, body: bytes, path: str) -> None:
        upstream = urlsplit(self.policy.upstream)
        connection_class = http.client.HTTPSConnection if upstream.scheme == "https" else http.client.HTTPConnection
        connection = connection_class(upstream.netloc, timeout=600)
        dropped = _DROPPED | {self.policy.credential_header}  # the agent's placeholder of the header the relay sets
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in dropped}
        if self.policy.credential_header == "authorization":
            headers["Authorization"] = f"Bearer {self.policy.credential}"
        else:
            headers[self.policy.credential_header] = self.policy.credential
        began = time.time()
        received = bytearray()
        try:
            connection.request(handler.command, upstream.path.rstrip("/") + path, body=body, headers=headers)
            response = connection.getresponse()
            handler.send_response(response.status)
            for key, value in response.getheaders():
                if key.lower() not in _DROPPED:
                    handler.send_header(key, value)
            handler.send_header("Transfer-Encoding", "chunked")
            handler.end_headers()
            while True:
                chunk = response.read1(65536)
                if not chunk:
                    break
                received += chunk
                handler.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                handler.wfile.flush()
            handler.wfile.write(b"0\r\n\r\n")
            status = response.status
        except (OSError, http.client.HTTPException) as exc:
            status = 502
            if not received:
                self._send(handler, 502, {"error": {"type": "relay_upstream_error", "message": str(exc)}})
        finally:
            connection.close()
        self._record(handler.command, path, body, status, bytes(received), began, refused="")

    # refusals and records -------------------------------------------------------
    def _refuse(self, handler: BaseHTTPRequestHandler, body: bytes, status: int, reason: str) -> None:
        self._send(handler, status, {"error": {"type": "relay_refused", "message": reason}})
        self._record(handler.command, handler.path, body, status, b"", time.time(), refused=reason)

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, document: dict[str, Any]) -> None:
        data = json.dumps(document).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def _record(self, method: str, path: str, body: bytes, status: int, response: bytes, began: float, refused: str) -> None:
        tokens = 0 if refused else count_tokens(response)
        with self._lock:
            self._sequence += 1
            if refused:
                self.counters.refused += 1
            else:
                self.counters.tokens += tokens
            self.counters.request_bytes += len(body)
            self.counters.response_bytes += len(response)
            entry = {
                "seq": self._sequence, "time": round(began, 3), "method": method, "path": path, "status": status,
                "refused": refused or None, "tokens": tokens,
                "request": body.decode("utf-8", "replace"), "response": response.decode("utf-8", "replace"),
            }
            with open(self._record_path, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(entry) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
