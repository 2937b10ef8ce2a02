"""Runs through the Host's relay: a CLI login file as the credential (never in the container), a stalled model server."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PROXY_VARIABLES = {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy", "no_proxy"}


def jwt(exp: float, marker: str) -> str:
    def part(document: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(document).encode()).decode().rstrip("=")
    return f"{part({'alg': 'none'})}.{part({'exp': int(exp), 'marker': marker + os.urandom(8).hex()})}.c2ln"


EXPIRED = jwt(time.time() - 60, "expired-")
FRESH = jwt(time.time() + 3600, "fresh-")
REFRESH_OLD, REFRESH_NEW = "rt-old-" + os.urandom(8).hex(), "rt-new-" + os.urandom(8).hex()
SECRETS = [EXPIRED, FRESH, REFRESH_OLD, REFRESH_NEW]

# Inside the agent container: call the model through the bridge, search every readable file and the environment for
# any of the login's tokens (sent hex-encoded, so the command itself holds none), then submit and finish.
AGENT_SCRIPT = f'''set -e
python3 -m orchestrator.session.relay_bridge --port 8765 &
python3 - <<'EOF'
import json, os, subprocess, time, urllib.request
for _ in range(100):
    try:
        request = urllib.request.Request("http://127.0.0.1:8765/v1/responses", data=b'{{"model": "m", "input": "hi"}}',
                                         method="POST", headers={{"Authorization": "Bearer provided-by-the-host-relay"}})
        with urllib.request.urlopen(request, timeout=20) as response:
            call = {{"status": response.status, "body": response.read().decode()}}
        break
    except ConnectionError:
        time.sleep(0.1)
secrets = [bytes.fromhex(h) for h in {[s.encode().hex() for s in SECRETS]!r}]
hits = [k for k, v in os.environ.items() if any(s.decode() in v for s in secrets)]
found = subprocess.run(["grep", "-rlsF", "-D", "skip", "--exclude-dir=proc", "--exclude-dir=sys", "--exclude-dir=dev",
                        "-f", "-", "/"], input=b"\\n".join(secrets) + b"\\n", capture_output=True)
hits += found.stdout.decode(errors="replace").split()
json.dump({{"call": call, "hits": hits, "grep_status": found.returncode}}, open("analysis/login_probe.json", "w"))
EOF
epg-session submit --episodes 0:1
epg-session finish s0001
'''


class Fake(BaseHTTPRequestHandler):
    """The ChatGPT backend's Responses path and the OAuth token endpoint, on the Host's loopback."""

    protocol_version = "HTTP/1.1"
    seen: list[dict] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        Fake.seen.append({"path": self.path, "authorization": self.headers.get("authorization"),
                          "account": self.headers.get("chatgpt-account-id"), "body": body.decode()})
        if self.path == "/oauth/token":
            data = json.dumps({"access_token": FRESH, "id_token": "id-new", "refresh_token": REFRESH_NEW}).encode()
        else:
            data = b'event: response.completed\ndata: {"type":"response.completed","response":{"usage":{"total_tokens":9}}}\n\n'
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def fake_upstream():
    Fake.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Fake)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_codex_login_on_the_host_reaches_the_upstream_refreshed_and_never_the_container(fake_upstream, tmp_path, scope):
    login = tmp_path / "host-home" / ".codex" / "auth.json"
    login.parent.mkdir(parents=True)
    login.write_text(json.dumps({"auth_mode": "chatgpt", "OPENAI_API_KEY": None, "last_refresh": "2026-01-01T00:00:00Z",
                                 "tokens": {"id_token": "id-old", "access_token": EXPIRED, "refresh_token": REFRESH_OLD,
                                            "account_id": "acct-7"}}))
    login.chmod(0o600)
    spec = {
        "benchmark": "CartPole-v1",
        "agent": {"kind": "command", "image": "agent-base", "argv": ["sh", "-c", AGENT_SCRIPT]},
        "budget": {"episodes": 2, "max_submissions": 1, "pool_size": 2},
        "validation": {"episodes": 1, "max_candidates": 1},
        "assessment": {"episodes": 1, "include_initial_program": False},
        "limits": {"agent_wall_clock_s": 180},
        "sandbox": {"pool_size": 1, "prestart_memory_mib": 0},
        "relay": {"login": "codex", "login_file": str(login), "upstream": fake_upstream,
                  "refresh_url": f"{fake_upstream}/oauth/token", "timeout_s": 20},
    }
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    run_dir = tmp_path / "run"
    environment = {k: v for k, v in os.environ.items() if k not in PROXY_VARIABLES}
    result = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli.app", "run", str(tmp_path / "spec.yaml"), "-o", str(run_dir), "--json"],
        capture_output=True, text=True, cwd=REPO, timeout=600, env={**environment, "EPG_SCOPE": scope},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    manifest = json.loads(result.stdout)
    assert manifest["terminal_reason"] == "finished", (run_dir / "agent" / "stdout.log").read_text()[-3000:]

    # The Host's relay refreshed the expired login once and sent the fresh token with the account to the upstream.
    assert [(s["path"], s["authorization"], s["account"]) for s in Fake.seen] == [
        ("/oauth/token", None, None), ("/responses", f"Bearer {FRESH}", "acct-7")]
    assert json.loads(Fake.seen[0]["body"])["refresh_token"] == REFRESH_OLD
    written = json.loads(login.read_text())["tokens"]
    assert (written["access_token"], written["refresh_token"]) == (FRESH, REFRESH_NEW)

    # The agent got the upstream's answer, and no token anywhere in its container: environment, any file, its mounts.
    probe = json.loads((run_dir / "workspace" / "analysis" / "login_probe.json").read_text())
    assert probe["call"]["status"] == 200 and "response.completed" in probe["call"]["body"]
    assert probe["grep_status"] in (1, 2), probe  # grep ran to the end: 1 nothing found, 2 some file unreadable
    assert probe["hits"] == []
    readable = [p for p in run_dir.rglob("*") if p.is_file()]  # the whole run directory, Host-private part too
    leaked = [str(p) for p in readable for s in SECRETS if s in p.read_text(errors="replace")]
    assert leaked == []
    exchanges = [json.loads(line) for line in (run_dir / "relay" / "exchanges.1.jsonl").read_text().splitlines()]
    assert [(e["path"], e["status"], e["tokens"]) for e in exchanges] == [("/v1/responses", 200, 9)]
    assert manifest["relay"]["requests"] == 1 and manifest["relay"]["errors"] == 0


# A command agent of the openai-compatible profile: a chat completion, then one the model server never answers.
STALL_SCRIPT = '''set -e
python3 -m orchestrator.session.relay_bridge --port 8765 &
python3 - <<'EOF'
import json, time, urllib.error, urllib.request
def chat(content):
    request = urllib.request.Request("http://127.0.0.1:8765/v1/chat/completions", method="POST",
                                     data=json.dumps({"model": "local", "stream": True, "messages": [{"role": "user", "content": content}]}).encode())
    began = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return {"status": response.status, "body": response.read().decode(), "seconds": time.monotonic() - began}
    except urllib.error.HTTPError as exc:
        return {"status": exc.code, "body": exc.read().decode(), "seconds": time.monotonic() - began}
for _ in range(100):
    try:
        first = chat("hello")
        break
    except urllib.error.URLError:
        time.sleep(0.1)
json.dump([first, chat("stall")], open("analysis/calls.json", "w"))
EOF
epg-session submit --episodes 0:1
epg-session finish s0001
'''


class ModelServer(BaseHTTPRequestHandler):
    """A model server on the Host's loopback speaking Chat Completions; a request saying "stall" is never answered."""

    protocol_version = "HTTP/1.1"
    release = threading.Event()

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        if b"stall" in body:
            ModelServer.release.wait(60)
            return
        data = b'data: {"choices": [{"delta": {"content": "hi"}}], "usage": {"total_tokens": 4}}\n\ndata: [DONE]\n\n'
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


def test_stalled_model_server_on_the_host_ends_the_agents_request_with_a_recorded_504_in_time(tmp_path, scope):
    ModelServer.release = threading.Event()
    server = ThreadingHTTPServer(("127.0.0.1", 0), ModelServer)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    spec = {
        "benchmark": "CartPole-v1",
        "agent": {"kind": "command", "image": "agent-base", "argv": ["sh", "-c", STALL_SCRIPT]},
        "budget": {"episodes": 2, "max_submissions": 1, "pool_size": 2},
        "validation": {"episodes": 1, "max_candidates": 1},
        "assessment": {"episodes": 1, "include_initial_program": False},
        "limits": {"agent_wall_clock_s": 180},
        "sandbox": {"pool_size": 1, "prestart_memory_mib": 0},
        "relay": {"profile": "openai-compatible", "upstream": f"http://127.0.0.1:{server.server_address[1]}", "timeout_s": 2},
    }
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    run_dir = tmp_path / "run"
    environment = {k: v for k, v in os.environ.items() if k not in PROXY_VARIABLES}
    try:
        result = subprocess.run(
            [sys.executable, "-m", "orchestrator.cli.app", "run", str(tmp_path / "spec.yaml"), "-o", str(run_dir), "--json"],
            capture_output=True, text=True, cwd=REPO, timeout=600, env={**environment, "EPG_SCOPE": scope},
        )
    finally:
        ModelServer.release.set()
        server.shutdown()
        server.server_close()
    assert result.returncode == 0, result.stderr[-3000:]
    manifest = json.loads(result.stdout)
    assert manifest["terminal_reason"] == "finished", (run_dir / "agent" / "stdout.log").read_text()[-3000:]
    first, stalled = json.loads((run_dir / "workspace" / "analysis" / "calls.json").read_text())
    assert first["status"] == 200 and first["body"].endswith("data: [DONE]\n\n")
    assert stalled["status"] == 504 and json.loads(stalled["body"])["error"]["type"] == "relay_upstream_error"
    assert 1.5 < stalled["seconds"] < 10, stalled
    exchanges = [json.loads(line) for line in (run_dir / "relay" / "exchanges.1.jsonl").read_text().splitlines()]
    assert [(e["status"], e["error"], e["tokens"]) for e in exchanges] == [
        (200, None, 4), (504, "upstream timed out (read, 2 s)", 0)]
    assert manifest["relay"]["requests"] == 2 and manifest["relay"]["errors"] == 1
