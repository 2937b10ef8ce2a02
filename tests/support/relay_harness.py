"""The relay tests' shared pieces: one fake model upstream, relays behind their bridges, records read back, login files."""

from __future__ import annotations

import base64
import http.client
import json
import os
import shutil
import socket
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator, TypeVar
from urllib.parse import urlsplit

import pytest

from orchestrator.hostclient.relay_bridge import serve as serve_bridge
from orchestrator.relay.policy import RelayPolicy
from orchestrator.relay.server import ModelRelay

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy", "no_proxy")
TOKEN_PATH = "/oauth/token"
# A streamed Responses answer whose usage says 12 tokens.
RESPONSES_SSE = (
    b'event: response.created\ndata: {"type":"response.created"}\n\n'
    b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"hel"}\n\n'
    b'event: response.completed\ndata: {"type":"response.completed","response":{"usage":{"input_tokens":7,"output_tokens":5,"total_tokens":12}}}\n\n'
)
# A streamed Chat Completions answer whose usage says 4 tokens.
CHAT_SSE = b'data: {"choices": [{"delta": {"content": "hi"}}], "usage": {"total_tokens": 4}}\n\ndata: [DONE]\n\n'

Server = TypeVar("Server", bound=ThreadingHTTPServer)


def clear_proxy_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset every proxy variable for the test, so the relay goes straight to the loopback upstream unless a test says otherwise."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


# For run_cli and invoke_cli (tests/support/cli.py): the proxy variables removed, so a command reaches loopback directly.
WITHOUT_PROXIES: dict[str, str | None] = dict.fromkeys(PROXY_VARIABLES)


def environment_without_proxies() -> dict[str, str]:
    """This process's environment without the proxy variables, for a subprocess that must reach loopback directly."""
    return {name: value for name, value in os.environ.items() if name not in PROXY_VARIABLES}


def free_port() -> int:
    """A loopback TCP port that was free a moment ago (nothing listens on it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class FakeUpstream(ThreadingHTTPServer):
    """A model upstream and OAuth token endpoint on a free loopback port: records every POST in `seen`, in order.

    By path: TOKEN_PATH answers `token_answer` with `token_status` (an invalid_grant error unless 200); a path ending
    in /stall, or a body holding the string "stall", is never answered (until shutdown); /stall-mid sends one chunked
    event and stops; /echo answers with the body it got; /big sends 4096 bytes; /spend answers after `spend_delay_s`
    with a usage of the body's bytes as input tokens and its max_tokens as output tokens (the most the relay should
    expect), kept in `spent`; any other path answers `answer` as an event stream with its length, or, when `paced` is
    set, one event per Event, each once the one before is set.
    """

    daemon_threads = True

    def __init__(self, answer: bytes = RESPONSES_SSE, token_answer: dict | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _UpstreamHandler)
        self.answer = answer
        self.token_answer = token_answer or {}
        self.token_status = 200
        self.paced: list[threading.Event] | None = None
        self.release = threading.Event()
        self.seen: list[dict] = []
        self.spend_delay_s = 0.3
        self.spent: list[int] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    @property
    def model_calls(self) -> list[dict]:
        """The requests seen, but for those to the token endpoint."""
        return [seen for seen in self.seen if seen["path"] != TOKEN_PATH]

    @property
    def refreshes(self) -> list[dict]:
        """The JSON bodies of the requests to the token endpoint."""
        return [json.loads(seen["body"]) for seen in self.seen if seen["path"] == TOKEN_PATH]

    def shutdown(self) -> None:
        self.release.set()  # a stalled request ends with the server
        super().shutdown()


class _UpstreamHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FakeUpstream

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        self.server.seen.append({"path": self.path, "headers": self.headers, "body": body, "peer": self.client_address[1]})
        path = urlsplit(self.path).path
        if path == TOKEN_PATH:
            answer = self.server.token_answer if self.server.token_status == 200 else {"error": "invalid_grant"}
            self._answer(self.server.token_status, "application/json", json.dumps(answer).encode())
        elif path.endswith("/stall") or b'"stall"' in body:
            self.server.release.wait(30)
        elif path.endswith("/stall-mid"):
            self._stall_mid_stream()
        elif path.endswith("/echo"):
            echo = {"body": body.decode(), "transfer_encoding": self.headers.get("transfer-encoding"), "usage": {"total_tokens": 3}}
            self._answer(200, "application/json", json.dumps(echo).encode())
        elif path.endswith("/spend"):
            self._spend(body)
        elif path.endswith("/big"):
            self._answer(200, "application/json", b"x" * 4096)
        elif self.server.paced is not None:
            self._paced(self.server.paced)
        else:
            self._answer(200, "text/event-stream", self.server.answer)

    def _answer(self, status: int, content_type: str, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _spend(self, body: bytes) -> None:
        time.sleep(self.server.spend_delay_s)  # long enough for concurrent requests to overlap
        usage = {"input_tokens": len(body), "output_tokens": json.loads(body)["max_tokens"]}
        self.server.spent.append(usage["input_tokens"] + usage["output_tokens"])
        self._answer(200, "application/json", json.dumps({"usage": usage}).encode())

    def _stall_mid_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        event = b'data: {"n": 0}\n\n'
        self.wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
        self.wfile.flush()
        self.server.release.wait(30)
        self.close_connection = True

    def _paced(self, received: list[threading.Event]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for number, event in enumerate(received):
            self.wfile.write(f'data: {{"n": {number}}}\n\n'.encode())
            self.wfile.flush()
            if not event.wait(5):
                return
        self.close_connection = True

    def log_message(self, *args) -> None:
        pass


@contextmanager
def serving(server: Server) -> Iterator[Server]:
    """Serve `server` from a thread while the block runs, then shut it down and close it."""
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@dataclass(frozen=True, slots=True, kw_only=True)
class StartedRelay:
    """A relay under test, its Unix socket, the loopback port of the bridge the agent would call it through, and its
    record's path."""

    relay: ModelRelay
    socket: Path
    port: int
    records: Path


class Relays:
    """The relays one test starts, each behind its own bridge; leaving the block closes them and removes their files."""

    def __init__(self) -> None:
        # Under /tmp rather than pytest's tmp_path: a Unix socket's path has to stay short.
        self.directory = Path(tempfile.mkdtemp(dir="/tmp", prefix="epg-relay-"))
        self._made: list[ModelRelay] = []

    def start(self, policy: RelayPolicy, **options) -> StartedRelay:
        """Start a relay of `policy` (with ModelRelay's keyword options) and a bridge to it on a free loopback port;
        raises AssertionError if the bridge does not start."""
        number = len(self._made)
        socket_path, records = self.directory / f"relay{number}.sock", self.directory / f"records{number}.jsonl"
        relay = ModelRelay(policy, socket_path, records, **options)
        self._made.append(relay)
        port = free_port()
        ready = threading.Event()
        threading.Thread(target=serve_bridge, args=(port, str(socket_path), ready), daemon=True).start()
        assert ready.wait(5), "the relay bridge did not start listening"
        return StartedRelay(relay=relay, socket=socket_path, port=port, records=records)

    def __enter__(self) -> Relays:
        return self

    def __exit__(self, *exc_info) -> None:
        for relay in self._made:
            relay.close()
        shutil.rmtree(self.directory)


def read_records(path: Path, count: int) -> list[dict]:
    """The relay record's entries, once `count` are written (an entry follows the end of its response); AssertionError after 5 s."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        lines = path.read_text().splitlines() if path.exists() else []
        if len(lines) >= count:
            return [json.loads(line) for line in lines]
        time.sleep(0.01)
    raise AssertionError(f"fewer than {count} relay records")


def post(port: int, path: str, body: bytes = b"{}", headers: dict | None = None) -> tuple[int, bytes]:
    """POST a JSON body to the bridge on `port`; returns the status and the whole response body."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("POST", path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def jwt(exp: float, marker: str) -> str:
    """An unsigned JWT whose payload holds `exp` and `marker` (what the relay reads of a login's access token)."""
    def part(document: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(document).encode()).decode().rstrip("=")
    return f"{part({'alg': 'none'})}.{part({'exp': int(exp), 'marker': marker})}.c2ln"


def write_codex_login(home: Path, access_token: str, *, id_token: str = "id-1", refresh_token: str = "rt-1",
                      account_id: str = "acct-42") -> Path:
    """Write the Codex CLI's ChatGPT login file under `home` (.codex/auth.json, mode 0600); returns its path."""
    path = home / ".codex" / "auth.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"auth_mode": "chatgpt", "OPENAI_API_KEY": None, "last_refresh": "2026-01-01T00:00:00Z",
                                "tokens": {"id_token": id_token, "access_token": access_token, "refresh_token": refresh_token,
                                           "account_id": account_id}}))
    path.chmod(0o600)
    return path


def command_agent_spec(script: str, relay: dict) -> dict:
    """The Run spec of a command agent running `script` through `relay`: CartPole, one Submission, one Validation and one Assessment Episode."""
    return {
        "benchmark": "CartPole-v1",
        "agent": {"kind": "command", "image": "agent-base", "argv": ["sh", "-c", script]},
        "budget": {"episodes": 2, "max_submissions": 1, "pool_size": 2},
        "validation": {"episodes": 1, "max_candidates": 1},
        "assessment": {"episodes": 1, "include_initial_program": False},
        "limits": {"agent_wall_clock_s": 180},
        "sandbox": {"pool_size": 1, "prestart_memory_mib": 0},
        "relay": relay,
    }
