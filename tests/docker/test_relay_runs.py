"""Runs through the Host's relay: a CLI login file as the credential (never in the container), a stalled model server."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import yaml
from support.cli import run_cli
from support.relay_harness import (
    CHAT_SSE,
    WITHOUT_PROXIES,
    FakeUpstream,
    command_agent_spec,
    jwt,
    serving,
    write_codex_login,
)

REPO = Path(__file__).resolve().parents[2]


def run_through_the_relay(spec: dict, tmp_path: Path, scope: str, allow: tuple[str, ...] = ()) -> tuple[dict, Path]:
    """Run `spec` with `epg-orchestrate run` (proxy variables unset: the fake upstream is on loopback), given each
    `--allow-credential` value in allow.

    Returns the manifest and the run directory; AssertionError unless the command succeeded and the agent finished.
    """
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    run_dir = tmp_path / "run"
    result = run_cli("run", str(tmp_path / "spec.yaml"), "-o", str(run_dir), "--json", *(f"--allow-credential={value}" for value in allow),
                     scope=scope, env=WITHOUT_PROXIES)
    assert result.exit_code == 0, result.stderr[-3000:]
    manifest = json.loads(result.stdout)
    assert manifest["terminal_reason"] == "finish_called", (run_dir / "agent" / "stdout.log").read_text()[-3000:]
    return manifest, run_dir


def exchanges_of(run_dir: Path) -> list[dict]:
    """The exchanges the relay recorded in the Run directory (relay/exchanges.1.jsonl), in order."""
    return [json.loads(line) for line in (run_dir / "relay" / "exchanges.1.jsonl").read_text().splitlines()]


EXPIRED = jwt(time.time() - 60, "expired-" + os.urandom(8).hex())
FRESH = jwt(time.time() + 3600, "fresh-" + os.urandom(8).hex())
REFRESH_OLD, REFRESH_NEW = "rt-old-" + os.urandom(8).hex(), "rt-new-" + os.urandom(8).hex()
SECRETS = [EXPIRED, FRESH, REFRESH_OLD, REFRESH_NEW]

# Inside the agent container: call the model through the bridge, search every readable file and the environment for
# any of the login's tokens (sent hex-encoded, so the command itself holds none), then submit and finish.
AGENT_SCRIPT = f'''set -e
python3 -m orchestrator.hostclient.relay_bridge --port 8765 &
python3 - <<'EOF'
import json, os, subprocess, time, urllib.error, urllib.request
for _ in range(100):  # until the bridge listens: urlopen reports a refused connection as URLError
    try:
        request = urllib.request.Request("http://127.0.0.1:8765/v1/responses", data=b'{{"model": "m", "input": "hi"}}',
                                         method="POST", headers={{"Authorization": "Bearer provided-by-the-host-relay"}})
        with urllib.request.urlopen(request, timeout=20) as response:
            call = {{"status": response.status, "body": response.read().decode()}}
        break
    except urllib.error.HTTPError:
        raise  # the relay answered: no retry
    except urllib.error.URLError:
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


@pytest.fixture
def fake_upstream():
    """The ChatGPT backend's Responses path and the OAuth token endpoint, on the Host's loopback."""
    token = {"access_token": FRESH, "id_token": "id-new", "refresh_token": REFRESH_NEW}
    with serving(FakeUpstream(token_answer=token)) as server:
        yield server


def test_codex_login_on_the_host_reaches_the_upstream_refreshed_and_never_the_container(fake_upstream, tmp_path, scope):
    login = write_codex_login(tmp_path / "host-home", EXPIRED, id_token="id-old", refresh_token=REFRESH_OLD, account_id="acct-7")
    relay = {"login": "codex", "login_file": str(login), "upstream": fake_upstream.url,
             "refresh_url": f"{fake_upstream.url}/oauth/token", "timeout_s": 20}
    manifest, run_dir = run_through_the_relay(command_agent_spec(AGENT_SCRIPT, relay), tmp_path, scope,
                                              allow=(f"codex-login@127.0.0.1:{fake_upstream.server_address[1]}",))

    # The Host's relay refreshed the expired login once and sent the fresh token with the account to the upstream.
    assert [(s["path"], s["headers"]["authorization"], s["headers"]["chatgpt-account-id"]) for s in fake_upstream.seen] == [
        ("/oauth/token", None, None), ("/responses", f"Bearer {FRESH}", "acct-7")]
    assert json.loads(fake_upstream.seen[0]["body"])["refresh_token"] == REFRESH_OLD
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
    assert [(e["path"], e["status"], e["tokens"]) for e in exchanges_of(run_dir)] == [("/v1/responses", 200, 12)]
    assert manifest["relay"]["requests"] == 1 and manifest["relay"]["errors"] == 0


# A command agent of the openai-compatible profile: a chat completion, then one the model server never answers.
STALL_SCRIPT = '''set -e
python3 -m orchestrator.hostclient.relay_bridge --port 8765 &
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


def test_stalled_model_server_on_the_host_ends_the_agents_request_with_a_recorded_504_in_time(tmp_path, scope):
    # A model server on the Host's loopback speaking Chat Completions; a request saying "stall" is never answered.
    model_server = FakeUpstream(answer=CHAT_SSE)
    relay = {"profile": "openai-compatible", "upstream": model_server.url, "timeout_s": 2}
    with serving(model_server):
        manifest, run_dir = run_through_the_relay(command_agent_spec(STALL_SCRIPT, relay), tmp_path, scope)
    first, stalled = json.loads((run_dir / "workspace" / "analysis" / "calls.json").read_text())
    assert first["status"] == 200 and first["body"].endswith("data: [DONE]\n\n")
    assert stalled["status"] == 504 and json.loads(stalled["body"])["error"]["type"] == "relay_upstream_error"
    assert 1.5 < stalled["seconds"] < 10, stalled
    assert [(e["status"], e["error"], e["tokens"]) for e in exchanges_of(run_dir)] == [
        (200, None, 4), (504, "upstream timed out (read, 2 s)", 0)]
    assert manifest["relay"]["requests"] == 2 and manifest["relay"]["errors"] == 1
