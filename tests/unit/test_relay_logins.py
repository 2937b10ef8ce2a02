"""The relay's credential from a profile or a CLI's login file on the Host: what reaches the upstream, refreshes, errors."""

from __future__ import annotations

import base64
import http.client
import json
import os
import socket
import stat
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from pydantic import ValidationError

from orchestrator.relay.logins import CODEX_CLIENT_ID, MAX_LOGIN_BYTES, CodexLogin, read_login_file
from orchestrator.relay.policy import CredentialError
from orchestrator.relay.server import ModelRelay
from orchestrator.run.preflight import preflight
from orchestrator.run.relay_setup import RelayConfigError, relay_policy
from orchestrator.run.spec import RunSpec
from orchestrator.session.relay_bridge import serve as serve_bridge

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy", "no_proxy")


def jwt(exp: float, marker: str) -> str:
    def part(document: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(document).encode()).decode().rstrip("=")
    return f"{part({'alg': 'none'})}.{part({'exp': int(exp), 'marker': marker})}.c2ln"


class Fake(BaseHTTPRequestHandler):
    """The model upstream (any path: records it, answers an SSE stream) and the OAuth token endpoint (/oauth/token)."""

    protocol_version = "HTTP/1.1"
    seen: list[dict] = []
    refreshes: list[dict] = []
    token_status = 200
    fresh_token = ""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.path == "/oauth/token":
            Fake.refreshes.append(json.loads(body))
            answer = {"access_token": Fake.fresh_token, "id_token": "fresh-id", "refresh_token": "rt-2"}
            data = json.dumps(answer if Fake.token_status == 200 else {"error": "invalid_grant"}).encode()
            self.send_response(Fake.token_status)
            self.send_header("Content-Type", "application/json")
        else:
            Fake.seen.append({"path": self.path, "headers": self.headers, "body": body})
            data = b'data: {"choices": [{"delta": {"content": "hi"}}]}\n\ndata: [DONE]\n\n'
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def fake(monkeypatch):
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    Fake.seen, Fake.refreshes, Fake.token_status, Fake.fresh_token = [], [], 200, jwt(time.time() + 3600, "fresh")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Fake)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def start(tmp_path):
    """start(spec dict, environ) -> bridge port and record path of a relay made from the spec's relay policy."""
    directory = Path(tempfile.mkdtemp(dir="/tmp", prefix="epg-relay-login-"))
    made: list[ModelRelay] = []

    def make(spec: dict, environ: dict | None = None) -> tuple[int, Path]:
        policy = relay_policy(RunSpec.model_validate({"benchmark": "CartPole-v1", **spec}), environ or {}, home=tmp_path)
        assert policy is not None
        relay = ModelRelay(policy, directory / f"r{len(made)}.sock", directory / f"r{len(made)}.jsonl")
        made.append(relay)
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        ready = threading.Event()
        threading.Thread(target=serve_bridge, args=(port, str(directory / f"r{len(made) - 1}.sock"), ready), daemon=True).start()
        assert ready.wait(5)
        return port, directory / f"r{len(made) - 1}.jsonl"

    yield make
    for relay in made:
        relay.close()


def call(port: int, path: str, body: bytes = b"{}", headers: dict | None = None) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("POST", path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response.status, data


def records_of(path: Path, count: int) -> list[dict]:
    """The record's entries once `count` are written (an entry follows the end of its response)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        lines = path.read_text().splitlines() if path.exists() else []
        if len(lines) >= count:
            return [json.loads(line) for line in lines]
        time.sleep(0.01)
    raise AssertionError(f"fewer than {count} relay records")


COMMAND = {"kind": "command", "image": "agent-base", "argv": ["true"]}


def test_openai_compatible_profile_reaches_a_model_server_on_the_hosts_loopback(fake, start):
    port, records = start({"agent": COMMAND, "relay": {"profile": "openai-compatible", "upstream": fake}})
    status, body = call(port, "/v1/chat/completions", b'{"model": "local", "stream": true}',
                        {"Authorization": "Bearer agent-guess"})
    assert status == 200 and body.endswith(b"data: [DONE]\n\n")
    (seen,) = Fake.seen
    assert seen["path"] == "/v1/chat/completions" and seen["body"] == b'{"model": "local", "stream": true}'
    assert seen["headers"].get("authorization") is None  # no credential named: the agent's guess is dropped too
    assert call(port, "/v1/files")[0] == 403
    assert [entry["status"] for entry in records_of(records, 2)] == [200, 403]


def test_openai_compatible_profile_sends_the_named_credential_and_needs_an_upstream(fake, start):
    spec = {"agent": COMMAND, "relay": {"profile": "openai-compatible", "upstream": fake, "credential_env": "LOCAL_KEY"}}
    port, _ = start(spec, {"LOCAL_KEY": "sk-local"})
    assert call(port, "/v1/responses")[0] == 200
    assert Fake.seen[0]["headers"]["authorization"] == "Bearer sk-local"
    with pytest.raises(RelayConfigError, match="set LOCAL_KEY") as caught:
        relay_policy(RunSpec.model_validate({"benchmark": "CartPole-v1", **spec}), {})
    assert caught.value.field == "credential_env"
    no_upstream = RunSpec.model_validate({"benchmark": "CartPole-v1", "agent": COMMAND, "relay": {"profile": "openai-compatible"}})
    with pytest.raises(RelayConfigError, match="needs relay.upstream") as caught:
        relay_policy(no_upstream, {})
    assert caught.value.field == "upstream"


def codex_login(tmp_path: Path, access_token: str) -> Path:
    path = tmp_path / ".codex" / "auth.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps({"auth_mode": "chatgpt", "OPENAI_API_KEY": None, "last_refresh": "2026-01-01T00:00:00Z",
                                "tokens": {"id_token": "id-1", "access_token": access_token, "refresh_token": "rt-1",
                                           "account_id": "acct-42"}}))
    path.chmod(0o600)
    return path


def test_codex_login_token_reaches_the_upstream_with_its_account(fake, start, tmp_path):
    token = jwt(time.time() + 3600, "current")
    codex_login(tmp_path, token)
    port, _ = start({"agent": {"kind": "codex", "model": "m"}, "relay": {"login": "codex", "upstream": fake}})
    assert call(port, "/v1/responses", headers={"Authorization": "Bearer provided-by-the-host-relay"})[0] == 200
    (seen,) = Fake.seen
    assert seen["path"] == "/responses"  # the ChatGPT backend's Responses path: /v1 is not part of it
    assert seen["headers"].get_all("authorization") == [f"Bearer {token}"]
    assert seen["headers"]["chatgpt-account-id"] == "acct-42"
    assert Fake.refreshes == []


def test_expired_codex_login_is_refreshed_once_and_written_back_for_the_hosts_cli(fake, start, tmp_path):
    path = codex_login(tmp_path, jwt(time.time() - 10, "expired"))
    spec = {"agent": {"kind": "codex", "model": "m"},
            "relay": {"login": "codex", "upstream": fake, "refresh_url": f"{fake}/oauth/token"}}
    port, _ = start(spec)
    assert [call(port, "/v1/responses")[0] for _ in range(2)] == [200, 200]
    assert Fake.refreshes == [{"client_id": CODEX_CLIENT_ID, "grant_type": "refresh_token", "refresh_token": "rt-1",
                               "scope": "openid profile email"}]
    assert [s["headers"]["authorization"] for s in Fake.seen] == [f"Bearer {Fake.fresh_token}"] * 2
    written = json.loads(path.read_text())
    assert written["tokens"] == {"id_token": "fresh-id", "access_token": Fake.fresh_token, "refresh_token": "rt-2",
                                 "account_id": "acct-42"}
    assert written["auth_mode"] == "chatgpt" and written["last_refresh"] != "2026-01-01T00:00:00Z"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in path.parent.iterdir()) == ["auth.json"]


def test_a_failed_refresh_is_a_502_the_agent_reads_and_the_record_keeps(fake, start, tmp_path):
    codex_login(tmp_path, jwt(time.time() - 10, "expired"))
    Fake.token_status = 400
    port, records = start({"agent": {"kind": "codex", "model": "m"},
                           "relay": {"login": "codex", "upstream": fake, "refresh_url": f"{fake}/oauth/token"}})
    status, body = call(port, "/v1/responses")
    assert status == 502 and json.loads(body)["error"]["type"] == "relay_credential_error"
    (entry,) = records_of(records, 1)
    assert entry["status"] == 502 and "refreshing the ChatGPT login failed (HTTP 400)" in entry["error"]
    assert Fake.seen == []


def claude_login(tmp_path: Path, expires_at_s: float) -> None:
    path = tmp_path / ".claude" / ".credentials.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps({"claudeAiOauth": {"accessToken": "sk-ant-oat01-host", "refreshToken": "sk-ant-ort01-host",
                                                  "expiresAt": int(expires_at_s * 1000), "scopes": ["user:inference"],
                                                  "subscriptionType": "max"}}))


def test_claude_login_is_sent_as_a_bearer_token_with_the_oauth_beta(fake, start, tmp_path):
    claude_login(tmp_path, time.time() + 3600)
    port, _ = start({"agent": {"kind": "claude-code", "model": "m"}, "relay": {"login": "claude", "upstream": fake}})
    status, _ = call(port, "/v1/messages", headers={"x-api-key": "provided-by-the-host-relay",
                                                    "anthropic-beta": "fine-grained-tool-streaming-2025-05-14"})
    assert status == 200
    (seen,) = Fake.seen
    assert seen["headers"]["authorization"] == "Bearer sk-ant-oat01-host" and seen["headers"].get("x-api-key") is None
    assert seen["headers"]["anthropic-beta"] == "fine-grained-tool-streaming-2025-05-14, oauth-2025-04-20"


def test_expired_claude_login_tells_the_agent_how_to_refresh_it(fake, start, tmp_path):
    claude_login(tmp_path, time.time() - 10)
    port, _ = start({"agent": {"kind": "claude-code", "model": "m"}, "relay": {"login": "claude", "upstream": fake}})
    status, body = call(port, "/v1/messages")
    assert status == 502 and "run Claude Code on the Host once" in json.loads(body)["error"]["message"]
    assert Fake.seen == []


def test_login_file_reads_refuse_symlinks_special_files_and_oversized_files(tmp_path):
    real = codex_login(tmp_path, "t")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    with pytest.raises(CredentialError, match="cannot open"):
        read_login_file(link)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(CredentialError, match="not a regular file"):
        read_login_file(fifo)
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"pad": "x" * MAX_LOGIN_BYTES}))
    with pytest.raises(CredentialError, match="over"):
        read_login_file(big)
    (tmp_path / "list.json").write_text("[]")
    with pytest.raises(CredentialError, match="not a JSON object"):
        read_login_file(tmp_path / "list.json")
    (tmp_path / "empty.json").write_text("{}")
    with pytest.raises(CredentialError, match="holds no ChatGPT login"):
        CodexLogin(path=tmp_path / "empty.json").check()


def test_login_spec_mistakes_are_one_line_each(tmp_path):
    def problems(relay: dict) -> list[str]:
        try:
            RunSpec.model_validate({"benchmark": "CartPole-v1", "agent": {"kind": "codex", "model": "m"}, "relay": relay})
        except ValidationError as exc:
            return [error["msg"] for error in exc.errors()]
        return []

    assert problems({"login": "codex", "credential_env": "X"}) == [
        "Value error, login and credential_env are two credentials: give one"]
    assert problems({"login": "codex", "login_file": "auth.json"}) == [
        "Value error, login_file must be an absolute path or start with ~"]
    assert problems({"login": "claude", "refresh_url": "http://127.0.0.1:1/t"}) == [
        "Value error, refresh_url: only the codex login is refreshed by the relay"]
    spec = RunSpec.model_validate({"benchmark": "CartPole-v1", "agent": {"kind": "codex", "model": "m"},
                                   "relay": {"login": "codex", "login_file": str(tmp_path / "none.json")}})
    found = [p for p in preflight(spec, tmp_path, [], environ={}) if p.startswith("relay.")]
    assert found == [f"relay.login: cannot open the login file {tmp_path / 'none.json'}: No such file or directory"]
