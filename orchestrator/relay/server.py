"""The Host side of the model relay: an HTTP server on a Unix socket that forwards allowed requests upstream.

The agent container has no network. Its model client talks HTTP to a local
bridge that forwards bytes to this server's Unix socket; this server forwards
only allowed paths to the one upstream named in the spec, adds the Host's
credential (it never enters the container), streams the response back as it
arrives, and records every exchange in order.

The agent is hostile, so nothing it sends makes the Host hold more than the
policy's bounds (`RelayBounds`): the socket admits only the agent's uid; at
most max_connections connections (one thread each) and max_in_flight
requests past their head; a request's host, path, body framing and the
limits are checked on its head, so a refused body is never read; a head and
body must arrive within read_timeout_s; a refused request is recorded as a
short summary, never its body, and refusals count against limits that end
the agent phase; the Run's records are bounded in size; and relay.max_tokens
is held by reserving each request's most before it is forwarded.

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

import io
import json
import logging
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from orchestrator.relay.connections import BoundedUnixServer, DeadlineReader, HeadTooLarge, RequestTimeout, SocketWriter
from orchestrator.relay.http_body import BodyError, declared_body, read_request_body
from orchestrator.relay.policy import (
    CREDENTIAL_HEADERS,
    CredentialError,
    RelayPolicy,
    forwarded_query,
    path_allowed,
    unmetered_reason,
)
from orchestrator.relay.record import ExchangeRecord
from orchestrator.relay.spend import TokenLedger, reservation
from orchestrator.relay.usage import count_tokens

log = logging.getLogger(__name__)

_HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "proxy-authorization", "proxy-authenticate",
               "transfer-encoding", "te", "trailer", "upgrade", "host", "content-length", "expect"}
# Never forwarded upstream: hop-by-hop headers, any credential the agent sends, its Accept-Encoding (the relay
# asks for identity, so the record holds readable text).
_DROPPED_REQUEST = {*_HOP_BY_HOP, *CREDENTIAL_HEADERS, "accept-encoding"}
_LIST_HEADERS = {"anthropic-beta"}
_POOL = httpx.Limits(max_connections=32, max_keepalive_connections=8, keepalive_expiry=30.0)
_SHOWN_PATH = 256  # of an agent's path, in a refusal's record and message


class _UpstreamFailure(Exception):
    """The upstream failed mid-exchange: `status` is what the agent gets if no response has begun."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


@dataclass(slots=True)
class RelayCounters:
    """What one relay saw. limit_reached: why the agent phase should end ("" while it need not)."""

    requests: int = 0
    refused: int = 0
    errors: int = 0
    tokens: int = 0
    request_bytes: int = 0
    response_bytes: int = 0
    refused_bytes: int = 0
    refused_connections: int = 0
    unrecorded: int = 0
    limit_reached: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"requests": self.requests, "refused": self.refused, "errors": self.errors, "tokens": self.tokens,
                "request_bytes": self.request_bytes, "response_bytes": self.response_bytes,
                "refused_bytes": self.refused_bytes, "refused_connections": self.refused_connections,
                "unrecorded": self.unrecorded, "limit_reached": self.limit_reached or None}


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
    reserved: int = 0
    after_limit: bool = False  # the relay's limit had been reached when it arrived


class _Handler(BaseHTTPRequestHandler):
    """One agent connection: requests read under the relay's deadlines, handled by the relay."""

    protocol_version = "HTTP/1.1"
    relay: ModelRelay  # set on the relay's own subclass
    reader: DeadlineReader
    rfile: io.BufferedReader  # over the reader (setup), so the idle wait can peek
    began: float
    handled: bool = False  # this request was answered or refused

    def setup(self) -> None:
        self.connection = self.request
        self.reader = DeadlineReader(self.connection, self.relay.policy.bounds.idle_timeout_s)
        self.rfile = io.BufferedReader(self.reader)
        self.wfile = SocketWriter(self.connection)
        self.began = time.time()

    def finish(self) -> None:
        for stream in (self.wfile, self.rfile):
            try:
                stream.close()
            except OSError:
                pass  # the agent went away; the server closes the socket

    def handle_one_request(self) -> None:
        bounds = self.relay.policy.bounds
        self.reader.end_request()
        try:
            waiting = self.rfile.peek(1)  # the idle wait: nothing is held for the agent meanwhile
        except OSError:  # idle past idle_timeout_s, or gone
            waiting = b""
        if not waiting:
            self.close_connection = True
            return
        self.reader.begin_request(bounds.read_timeout_s, bounds.max_head_bytes)
        self.began = time.time()
        self.command, self.path, self.requestline, self.request_version = "", "", "", self.protocol_version
        self.handled = False
        try:
            super().handle_one_request()
        except HeadTooLarge as exc:
            self.close_connection = True
            self.relay._refuse(self, _Exchange(method="", path="", began=self.began), 431, str(exc))
            return
        if self.reader.timed_out and not self.handled:  # the head trickled past its deadline
            self.close_connection = True
            exchange = _Exchange(method=self.command or "", path=_shown(self.path or ""), began=self.began)
            self.relay._refuse(self, exchange, 408, f"request head not received within {bounds.read_timeout_s:g} s")

    def handle_expect_100(self) -> bool:
        return True  # "100 Continue" is sent by the relay once the head passed its checks, never before

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """A malformed request line or head, or an unsupported method: a refusal like any other."""
        self.close_connection = True
        reason = message or self.responses.get(code, ("",))[0] or "malformed request"
        self.relay._refuse(self, _Exchange(method=self.command or "", path=_shown(self.path or ""), began=self.began),
                           code, reason[:200])

    def do_GET(self) -> None:
        self.relay._handle(self)

    def do_POST(self) -> None:
        self.relay._handle(self)

    def do_PUT(self) -> None:
        self.relay._handle(self)

    def do_DELETE(self) -> None:
        self.relay._handle(self)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("relay: " + format, *args)


class ModelRelay:
    """Serves the relay on a Unix socket until close(). The lock guards the counters, the ledger and the record.

    owner_uid: the uid that may connect (with root): the agent's. None: the Host's own uid, which is right when the
    agent runs as the Host's uid, and otherwise refuses the agent (fails closed). Raises OSError when the socket
    cannot be made or given to owner_uid (a Host that is not root naming another uid).
    """

    def __init__(self, policy: RelayPolicy, socket_path: Path, record_path: Path, *, owner_uid: int | None = None) -> None:
        self.policy = policy
        self.counters = RelayCounters()
        self._socket_path = socket_path
        self._lock = threading.Lock()
        self._sequence = 0
        self._closed = False
        self._ledger = TokenLedger(limit=policy.max_tokens)
        self._slots = threading.BoundedSemaphore(policy.bounds.max_in_flight)
        timeout = httpx.Timeout(policy.timeout_s, connect=min(policy.timeout_s, 30.0))
        self._client = httpx.Client(timeout=timeout, limits=_POOL, trust_env=True, follow_redirects=False)
        record_path.parent.mkdir(parents=True, exist_ok=True)
        self._record_file = ExchangeRecord(record_path, policy.bounds.max_record_bytes)
        socket_path.unlink(missing_ok=True)
        handler = type("RelayHandler", (_Handler,), {"relay": self})
        self._server = BoundedUnixServer(socket_path, handler, max_connections=policy.bounds.max_connections,
                                         owner_uid=owner_uid, on_refused=self._connection_refused)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="epg-relay", daemon=True)
        self._thread.start()

    @property
    def open_connections(self) -> int:
        """The agent connections being served now."""
        return self._server.open_connections

    def close(self) -> None:
        """Stop serving, end every open connection, and note in the record how many refusals it does not hold."""
        if self._closed:
            return
        self._closed = True
        self._server.shutdown()
        self._server.server_close()
        self._server.close_connections()
        self._client.close()
        self._socket_path.unlink(missing_ok=True)
        with self._lock:
            if self.counters.unrecorded:
                self._sequence += 1
                self._record_file.append({
                    "seq": self._sequence, "time": round(time.time(), 3), "method": "", "path": "", "status": 429,
                    "refused": f"{self.counters.unrecorded} more requests refused after the limit ({self.counters.limit_reached}); "
                               "counted, not recorded one by one",
                    "error": None, "seconds": 0.0, "tokens": 0, "request": "", "response": ""}, durable=True)

    # one exchange ----------------------------------------------------------------
    def _handle(self, handler: _Handler) -> None:
        target = urlsplit(handler.path)
        path = target.path or "/"
        exchange = _Exchange(method=handler.command, path=_shown(handler.path), began=handler.began)
        refusal = self._head_refusal(handler, target.netloc, path, exchange)
        if refusal is not None:
            self._refuse_unread(handler, exchange, *refusal)
            return
        if not self._slots.acquire(blocking=False):
            self._refuse_unread(handler, exchange, 503, f"too many requests in flight ({self.policy.bounds.max_in_flight})")
            return
        try:
            self._admit_and_forward(handler, exchange, target.query, path)
        finally:
            self._slots.release()

    def _head_refusal(self, handler: _Handler, netloc: str, path: str, exchange: _Exchange) -> tuple[int, str] | None:
        """Why the request is refused from its head alone (host, path, body framing, limits), or None."""
        with self._lock:
            if self.counters.limit_reached:
                exchange.after_limit = True
                return 429, f"relay limit reached: {self.counters.limit_reached}"
        if netloc and netloc != self.policy.upstream_host:
            return 403, f"host {netloc[:_SHOWN_PATH]} is not the allowed upstream"
        if not any(path_allowed(path, allowed) for allowed in self.policy.allow_paths):
            return 403, f"path {_shown(path)} is not allowed"
        unmetered = unmetered_reason(path, None)
        if unmetered:
            return 403, _shown(unmetered)
        try:
            declared_body(handler.headers, self.policy.max_request_bytes)
        except BodyError as exc:
            return exc.status, str(exc)
        with self._lock:
            limit = self.counters.limit_reached or self._limit_locked()
            if limit:
                self.counters.limit_reached = limit
                return 429, f"relay limit reached: {limit}"
        return None

    def _admit_and_forward(self, handler: _Handler, exchange: _Exchange, query: str, path: str) -> None:
        """Read the body of a request whose head passed, check it, hold its reservation, and forward it."""
        if handler.headers.get("Expect", "").lower() == "100-continue":
            handler.send_response_only(100)
            handler.end_headers()
        handler.reader.begin_body()
        try:
            exchange.body = read_request_body(handler.rfile, handler.headers, self.policy.max_request_bytes)
        except BodyError as exc:
            self._refuse_unread(handler, exchange, exc.status, str(exc))
            return
        except RequestTimeout:
            self._refuse_unread(handler, exchange, 408, f"request body not received within {self.policy.bounds.read_timeout_s:g} s")
            return
        handler.reader.end_request()
        document = _json_object(exchange.body)
        unmetered = unmetered_reason(path, document)
        if unmetered:
            self._refuse(handler, exchange, 403, _shown(unmetered))
            return
        refusal = self._reserve(exchange, reservation(exchange.body, document, self.policy.bounds.default_output_tokens))
        if refusal:
            self._refuse(handler, exchange, 429, refusal)
            return
        forwarded = forwarded_query(query)
        exchange.path = path + (f"?{forwarded}" if forwarded else "")
        self._forward(handler, exchange, self.policy.upstream_url(path, forwarded))

    def _reserve(self, exchange: _Exchange, tokens: int) -> str:
        """Admit the request: count it and hold its tokens; return why it is refused instead, or ""."""
        with self._lock:
            limit = self.counters.limit_reached or self._limit_locked()
            if limit:
                self.counters.limit_reached = limit
                return f"relay limit reached: {limit}"
            if not self._ledger.reserve(tokens):
                if self._ledger.never_fits(tokens):
                    self.counters.limit_reached = f"{self.policy.max_tokens} tokens"
                    return f"relay limit reached: {self.policy.max_tokens} tokens (this request may use {tokens})"
                return f"{self.policy.max_tokens} tokens: requests in flight hold the rest; retry when they end"
            exchange.reserved = tokens
            self.counters.requests += 1  # counted when admitted, so a limit holds under concurrency
        return ""

    def _limit_locked(self) -> str:
        if self.policy.max_requests is not None and self.counters.requests >= self.policy.max_requests:
            return f"{self.policy.max_requests} requests"
        if self._ledger.exhausted():
            return f"{self.policy.max_tokens} tokens"
        return ""

    def _forward(self, handler: _Handler, exchange: _Exchange, url: str) -> None:
        """Forward one admitted request. The exchange is recorded before the agent gets the end of its answer, so a
        client that waits for one answer before its next request finds its exchanges recorded in order."""
        handler.handled = True
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
    def _refuse_unread(self, handler: _Handler, exchange: _Exchange, status: int, reason: str) -> None:
        """Refuse a request whose body may be (partly) unread: the connection closes after the answer, since the rest of
        its stream cannot be trusted to be a next request."""
        if _body_may_follow(handler):
            handler.close_connection = True
        self._refuse(handler, exchange, status, reason)

    def _refuse(self, handler: _Handler, exchange: _Exchange, status: int, reason: str) -> None:
        """Answer a refusal, count it and the bytes read of it, and record its summary (never its body)."""
        handler.handled = True
        exchange.status, exchange.refused = status, reason
        with self._lock:
            self.counters.refused += 1
            self.counters.refused_bytes += handler.reader.read_bytes
            self._check_refusals_locked()
            if exchange.after_limit:
                self.counters.unrecorded += 1  # past the limit the agent is being stopped: counted, not recorded
            else:
                self._sequence += 1
                self._record_file.append(self._entry(exchange, tokens=0, with_bodies=False), durable=False)
                self._check_record_locked()
        self._send_json(handler, status, {"error": {"type": "relay_refused", "message": reason}})

    def _connection_refused(self) -> None:
        with self._lock:
            self.counters.refused_connections += 1
            self._check_refusals_locked()

    def _check_refusals_locked(self) -> None:
        bounds, counters = self.policy.bounds, self.counters
        if counters.limit_reached:
            return
        if counters.refused >= bounds.max_refused:
            counters.limit_reached = f"too many refused requests ({counters.refused})"
        elif counters.refused_bytes >= bounds.max_refused_bytes:
            counters.limit_reached = f"refused requests reached {_size(bounds.max_refused_bytes)}"
        elif counters.refused_connections >= bounds.max_refused_connections:
            counters.limit_reached = (f"too many refused connections ({counters.refused_connections}, "
                                      f"over {bounds.max_connections} at once)")

    def _check_record_locked(self) -> None:
        if self._record_file.full and not self.counters.limit_reached:
            self.counters.limit_reached = f"the relay record reached {_size(self._record_file.max_bytes)}"

    @staticmethod
    def _send_json(handler: BaseHTTPRequestHandler, status: int, document: dict[str, Any]) -> None:
        """Answer with a JSON document; an agent that went away is not an error of the relay."""
        data = json.dumps(document).encode()
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data)))
            if handler.close_connection:
                handler.send_header("Connection", "close")
            handler.end_headers()
            handler.wfile.write(data)
            handler.wfile.flush()
        except OSError:
            handler.close_connection = True

    def _record(self, exchange: _Exchange) -> None:
        """Record a forwarded exchange, settle its token reservation and count it."""
        tokens = count_tokens(bytes(exchange.response))
        with self._lock:
            self._ledger.settle(exchange.reserved, tokens)
            self.counters.tokens = self._ledger.counted
            if exchange.error:
                self.counters.errors += 1
            self.counters.request_bytes += len(exchange.body)
            self.counters.response_bytes += len(exchange.response)
            self._sequence += 1
            self._record_file.append(self._entry(exchange, tokens=tokens, with_bodies=True), durable=True)
            if not self.counters.limit_reached and self._ledger.exhausted():
                self.counters.limit_reached = f"{self.policy.max_tokens} tokens"
            self._check_record_locked()
        if exchange.error:
            log.warning("relay: %s %s: %s", exchange.method, exchange.path, exchange.error)

    def _entry(self, exchange: _Exchange, *, tokens: int, with_bodies: bool) -> dict[str, Any]:
        entry = {
            "seq": self._sequence, "time": round(exchange.began, 3), "method": exchange.method, "path": exchange.path,
            "status": exchange.status, "refused": exchange.refused or None, "error": exchange.error or None,
            "seconds": round(time.time() - exchange.began, 3), "tokens": tokens,
            "request": exchange.body.decode("utf-8", "replace") if with_bodies else "",
            "response": bytes(exchange.response).decode("utf-8", "replace") if with_bodies else "",
        }
        if not with_bodies:
            entry["request_bytes"] = len(exchange.body)
        return entry


def _body_may_follow(handler: BaseHTTPRequestHandler) -> bool:
    """Whether the request's head announces a body (a length above 0, or a transfer coding).

    Asked only of a request whose head was parsed (its handler's do_ method runs), so its headers are there.
    """
    headers = handler.headers
    length = (headers.get("content-length") or "0").strip()
    return bool(headers.get("transfer-encoding")) or length != "0"


def _shown(text: str) -> str:
    """An agent's path or reason as recorded: at most _SHOWN_PATH characters."""
    return text if len(text) <= _SHOWN_PATH else text[:_SHOWN_PATH] + f"... ({len(text)} characters)"


def _size(count: int) -> str:
    return f"{count // (1024 * 1024)} MiB" if count >= 1024 * 1024 and count % (1024 * 1024) == 0 else f"{count} bytes"


def _json_object(body: bytes) -> Any:
    """The request body as JSON, or None when it is not JSON."""
    if not body:
        return None
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


def _what(exc: httpx.TimeoutException) -> str:
    return {httpx.ConnectTimeout: "connect", httpx.ReadTimeout: "read", httpx.WriteTimeout: "write",
            httpx.PoolTimeout: "pool"}.get(type(exc), "timeout")
