"""The Host side of the model relay: an HTTP server on a Unix socket that forwards allowed requests upstream.

The agent container has no network. Its model client talks HTTP to a local
bridge that forwards bytes to this server's Unix socket; this server forwards
only allowed paths to the one upstream named in the spec, adds the Host's
credential (it never enters the container), streams the response back as it
arrives, and records every exchange in order.

The upstream is reached with one httpx client per relay, so one pool of
kept-alive connections per upstream; the Host's HTTPS_PROXY, HTTP_PROXY,
ALL_PROXY, NO_PROXY and SSL_CERT_FILE are honoured (read when the relay
opens). A request body is read whole (by Content-Length or chunked, bounded)
before it goes upstream with its length: the record and the limits need it
whole, and every upstream takes a sized body. An upstream that fails, stalls
past the policy's timeout or answers with too much is recorded with the error
and shown to the agent as a JSON 502 or 504, or, once its response has begun,
as a stream that ends without its last chunk: a turn never hangs.
"""

from __future__ import annotations

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

import httpx

from orchestrator.relay.http_body import BodyError, read_request_body
from orchestrator.relay.policy import CREDENTIAL_HEADERS, CredentialError, RelayPolicy, forwarded_query, path_allowed
from orchestrator.relay.usage import count_tokens

log = logging.getLogger(__name__)

_HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "proxy-authorization", "proxy-authenticate",
               "transfer-encoding", "te", "trailer", "upgrade", "host", "content-length", "expect"}
# Never forwarded upstream: hop-by-hop headers, any credential the agent sends, its Accept-Encoding (the relay
# asks for identity, so the record holds readable text).
_DROPPED_REQUEST = {*_HOP_BY_HOP, *CREDENTIAL_HEADERS, "accept-encoding"}
_LIST_HEADERS = {"anthropic-beta"}
_POOL = httpx.Limits(max_connections=32, max_keepalive_connections=8, keepalive_expiry=30.0)


class _UpstreamFailure(Exception):
    """The upstream failed mid-exchange: `status` is what the agent gets if no response has begun."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


@dataclass(slots=True)
class RelayCounters:
    requests: int = 0
    refused: int = 0
    errors: int = 0
    tokens: int = 0
    request_bytes: int = 0
    response_bytes: int = 0
    limit_reached: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"requests": self.requests, "refused": self.refused, "errors": self.errors, "tokens": self.tokens,
                "request_bytes": self.request_bytes, "response_bytes": self.response_bytes,
                "limit_reached": self.limit_reached or None}


@dataclass(slots=True, kw_only=True)
class _Exchange:
    """One request and what came of it, as recorded."""

    method: str
    path: str
    body: bytes = b""
    began: float = field(default_factory=time.time)
    status: int = 0
    response: bytearray = field(default_factory=bytearray)
    refused: str = ""
    error: str = ""


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class ModelRelay:
    """Serves the relay on a Unix socket until close(). The lock guards the counters and the record file."""

    def __init__(self, policy: RelayPolicy, socket_path: Path, record_path: Path) -> None:
        self.policy = policy
        self.counters = RelayCounters()
        self._socket_path = socket_path
        self._record_path = record_path
        self._lock = threading.Lock()
        self._sequence = 0
        timeout = httpx.Timeout(policy.timeout_s, connect=min(policy.timeout_s, 30.0))
        self._client = httpx.Client(timeout=timeout, limits=_POOL, trust_env=True, follow_redirects=False)
        record_path.parent.mkdir(parents=True, exist_ok=True)
        socket_path.unlink(missing_ok=True)
        relay = self

        class Handler(BaseHTTPRequestHandler):
            # No socket timeout on the agent's side: a CLI keeps its connection idle while it runs tools, and a
            # connection closed under it races its next request. Its threads end when its container does.
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
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="epg-relay", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._client.close()
        self._socket_path.unlink(missing_ok=True)

    # one exchange ----------------------------------------------------------------
    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        exchange = _Exchange(method=handler.command, path=handler.path)
        try:
            exchange.body = read_request_body(handler.rfile, handler.headers, self.policy.max_request_bytes)
        except BodyError as exc:
            handler.close_connection = True  # the rest of the stream cannot be trusted to be a next request
            self._refuse(handler, exchange, exc.status, str(exc))
            return
        target = urlsplit(handler.path)
        path = target.path or "/"
        if target.netloc and target.netloc != self.policy.upstream_host:
            self._refuse(handler, exchange, 403, f"host {target.netloc} is not the allowed upstream")
            return
        if not any(path_allowed(path, allowed) for allowed in self.policy.allow_paths):
            self._refuse(handler, exchange, 403, f"path {path} is not allowed")
            return
        with self._lock:
            limit = self._limit_locked()
            if limit:
                self.counters.limit_reached = limit
            else:
                self.counters.requests += 1  # counted when admitted, so a limit holds under concurrency
        if limit:
            self._refuse(handler, exchange, 429, f"relay limit reached: {limit}")
            return
        query = forwarded_query(target.query)
        exchange.path = path + (f"?{query}" if query else "")
        self._forward(handler, exchange, self.policy.upstream_url(path, query))

    def _limit_locked(self) -> str:
        if self.policy.max_requests is not None and self.counters.requests >= self.policy.max_requests:
            return f"{self.policy.max_requests} requests"
        if self.policy.max_tokens is not None and self.counters.tokens >= self.policy.max_tokens:
            return f"{self.policy.max_tokens} tokens"
        return ""

    def _forward(self, handler: BaseHTTPRequestHandler, exchange: _Exchange, url: str) -> None:
        """Forward one admitted request. The exchange is recorded before the agent gets the end of its answer, so a
        client that waits for one answer before its next request finds its exchanges recorded in order."""
        reply: tuple[int, dict[str, Any]] | None = None
        complete = False
        try:
            request = self._client.build_request(exchange.method, url, headers=self._upstream_headers(handler),
                                                 content=exchange.body)
            response = self._send(request)
            try:
                self._stream(handler, response, exchange)
                complete = True
            finally:
                response.close()
        except _UpstreamFailure as exc:
            exchange.error = str(exc)
            if exchange.status:
                handler.close_connection = True  # the agent's stream ends without its last chunk: an error it sees
            else:
                exchange.status = exc.status
                reply = (exc.status, {"error": {"type": "relay_upstream_error", "message": str(exc)}})
        except CredentialError as exc:
            exchange.error, exchange.status = str(exc), 502
            reply = (502, {"error": {"type": "relay_credential_error", "message": str(exc)}})
        except OSError as exc:  # the agent went away; nothing to tell it
            exchange.error = f"agent connection lost: {exc}"
            handler.close_connection = True
        finally:
            self._record(exchange)
        if reply is not None:
            self._send_json(handler, *reply)
        elif complete:
            try:
                handler.wfile.write(b"0\r\n\r\n")
                handler.wfile.flush()
            except OSError:
                handler.close_connection = True

    def _upstream_headers(self, handler: BaseHTTPRequestHandler) -> list[tuple[str, str]]:
        """The agent's end-to-end headers, then the Host's credential and identity coding. Raises CredentialError.

        A header the credential sets replaces the agent's, but for list headers (`anthropic-beta`), which join both.
        """
        added = self.policy.credential.headers()
        names = {key.lower() for key in added}
        sent = [(k, v) for k, v in handler.headers.items() if k.lower() not in _DROPPED_REQUEST]
        headers = [(k, v) for k, v in sent if k.lower() not in names]
        for key, value in added.items():
            if key.lower() in _LIST_HEADERS:
                value = ", ".join([*(v for k, v in sent if k.lower() == key.lower()), value])
            headers.append((key, value))
        headers.append(("Accept-Encoding", "identity"))
        return headers

    def _send(self, request: httpx.Request) -> httpx.Response:
        try:
            return self._client.send(request, stream=True)
        except httpx.TimeoutException as exc:
            raise _UpstreamFailure(504, f"upstream timed out ({_what(exc)}, {self.policy.timeout_s:g} s)") from None
        except httpx.HTTPError as exc:
            raise _UpstreamFailure(502, f"upstream unreachable: {exc or type(exc).__name__}") from None

    def _stream(self, handler: BaseHTTPRequestHandler, response: httpx.Response, exchange: _Exchange) -> None:
        """Pass the response to the agent as it arrives, re-chunked, all but the last chunk. Raises _UpstreamFailure, OSError."""
        handler.send_response(response.status_code)
        for key, value in response.headers.multi_items():
            if key.lower() not in _HOP_BY_HOP:
                handler.send_header(key, value)
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        exchange.status = response.status_code
        limit = self.policy.max_response_bytes
        try:
            for chunk in response.iter_raw():
                if len(exchange.response) + len(chunk) > limit:
                    raise _UpstreamFailure(502, f"upstream response over {limit} bytes")
                exchange.response += chunk
                handler.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                handler.wfile.flush()
        except httpx.TimeoutException as exc:
            raise _UpstreamFailure(504, f"upstream timed out ({_what(exc)}, {self.policy.timeout_s:g} s)") from None
        except httpx.HTTPError as exc:
            raise _UpstreamFailure(502, f"upstream failed mid-response: {exc or type(exc).__name__}") from None

    # refusals and records -------------------------------------------------------
    def _refuse(self, handler: BaseHTTPRequestHandler, exchange: _Exchange, status: int, reason: str) -> None:
        exchange.status, exchange.refused = status, reason
        self._record(exchange)
        self._send_json(handler, status, {"error": {"type": "relay_refused", "message": reason}})

    @staticmethod
    def _send_json(handler: BaseHTTPRequestHandler, status: int, document: dict[str, Any]) -> None:
        """Answer with a JSON document; an agent that went away is not an error of the relay."""
        data = json.dumps(document).encode()
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
            handler.wfile.flush()
        except OSError:
            handler.close_connection = True

    def _record(self, exchange: _Exchange) -> None:
        response = bytes(exchange.response)
        tokens = 0 if exchange.refused else count_tokens(response)
        with self._lock:
            self._sequence += 1
            if exchange.refused:
                self.counters.refused += 1
            else:
                self.counters.tokens += tokens
            if exchange.error:
                self.counters.errors += 1
            self.counters.request_bytes += len(exchange.body)
            self.counters.response_bytes += len(response)
            entry = {
                "seq": self._sequence, "time": round(exchange.began, 3), "method": exchange.method, "path": exchange.path,
                "status": exchange.status, "refused": exchange.refused or None, "error": exchange.error or None,
                "seconds": round(time.time() - exchange.began, 3), "tokens": tokens,
                "request": exchange.body.decode("utf-8", "replace"), "response": response.decode("utf-8", "replace"),
            }
            with open(self._record_path, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(entry) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
        if exchange.error:
            log.warning("relay: %s %s: %s", exchange.method, exchange.path, exchange.error)


def _what(exc: httpx.TimeoutException) -> str:
    return {httpx.ConnectTimeout: "connect", httpx.ReadTimeout: "read", httpx.WriteTimeout: "write",
            httpx.PoolTimeout: "pool"}.get(type(exc), "timeout")
