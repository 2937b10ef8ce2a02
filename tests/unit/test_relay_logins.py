"""The relay's credential from a profile or a CLI's login file on the Host: what reaches the upstream, refreshes, errors."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest
from pydantic import ValidationError
from support.relay_harness import CHAT_SSE, FakeUpstream, Relays, clear_proxy_variables, jwt, post, read_records, serving, write_codex_login

from orchestrator.relay.logins import CODEX_CLIENT_ID, MAX_LOGIN_BYTES, CodexLogin, read_login_file
from orchestrator.relay.policy import CredentialError
from orchestrator.run.preflight import preflight
from orchestrator.run.relay_setup import RelayConfigError, relay_policy
from orchestrator.run.spec import RunSpec


@pytest.fixture
def fake(monkeypatch):
    """The model upstream (any path: records it, answers an SSE stream) and the OAuth token endpoint (/oauth/token)."""
    clear_proxy_variables(monkeypatch)
    token = {"access_token": jwt(time.time() + 3600, "fresh"), "id_token": "fresh-id", "refresh_token": "rt-2"}
    with serving(FakeUpstream(answer=CHAT_SSE, token_answer=token)) as server:
        yield server


@pytest.fixture
def start(tmp_path):
    """start(spec dict, environ) -> bridge port and record path of a relay made from the spec's relay policy."""
    with Relays() as relays:
        def make(spec: dict, environ: dict | None = None) -> tuple[int, Path]:
            policy = relay_policy(RunSpec.model_validate({"benchmark": "CartPole-v1", **spec}), environ or {}, home=tmp_path)
            assert policy is not None
            started = relays.start(policy)
            return started.port, started.records

        yield make


COMMAND = {"kind": "command", "image": "agent-base", "argv": ["true"]}


def test_openai_compatible_profile_reaches_a_model_server_on_the_hosts_loopback(fake, start):
    port, records = start({"agent": COMMAND, "relay": {"profile": "openai-compatible", "upstream": fake.url}})
    status, body = post(port, "/v1/chat/completions", b'{"model": "local", "stream": true}',
                        {"Authorization": "Bearer agent-guess"})
    assert status == 200 and body.endswith(b"data: [DONE]\n\n")
    (seen,) = fake.model_calls
    assert seen["path"] == "/v1/chat/completions" and seen["body"] == b'{"model": "local", "stream": true}'
    assert seen["headers"].get("authorization") is None  # no credential named: the agent's guess is dropped too
    assert post(port, "/v1/files")[0] == 403
    assert [entry["status"] for entry in read_records(records, 2)] == [200, 403]


def test_openai_compatible_profile_sends_the_named_credential_and_needs_an_upstream(fake, start):
    spec = {"agent": COMMAND, "relay": {"profile": "openai-compatible", "upstream": fake.url, "credential_env": "LOCAL_KEY"}}
    port, _ = start(spec, {"LOCAL_KEY": "sk-local"})
    assert post(port, "/v1/responses")[0] == 200
    assert fake.model_calls[0]["headers"]["authorization"] == "Bearer sk-local"
    with pytest.raises(RelayConfigError, match="set LOCAL_KEY") as caught:
        relay_policy(RunSpec.model_validate({"benchmark": "CartPole-v1", **spec}), {})
    assert caught.value.field == "credential_env"
    no_upstream = RunSpec.model_validate({"benchmark": "CartPole-v1", "agent": COMMAND, "relay": {"profile": "openai-compatible"}})
    with pytest.raises(RelayConfigError, match="needs relay.upstream") as caught:
        relay_policy(no_upstream, {})
    assert caught.value.field == "upstream"


def test_codex_login_token_reaches_the_upstream_with_its_account(fake, start, tmp_path):
    token = jwt(time.time() + 3600, "current")
    write_codex_login(tmp_path, token)
    port, _ = start({"agent": {"kind": "codex", "model": "m"}, "relay": {"login": "codex", "upstream": fake.url}})
    assert post(port, "/v1/responses", headers={"Authorization": "Bearer provided-by-the-host-relay"})[0] == 200
    (seen,) = fake.model_calls
    assert seen["path"] == "/responses"  # the ChatGPT backend's Responses path: /v1 is not part of it
    assert seen["headers"].get_all("authorization") == [f"Bearer {token}"]
    assert seen["headers"]["chatgpt-account-id"] == "acct-42"
    assert fake.refreshes == []


def test_expired_codex_login_is_refreshed_once_and_written_back_for_the_hosts_cli(fake, start, tmp_path):
    path = write_codex_login(tmp_path, jwt(time.time() - 10, "expired"))
    spec = {"agent": {"kind": "codex", "model": "m"},
            "relay": {"login": "codex", "upstream": fake.url, "refresh_url": f"{fake.url}/oauth/token"}}
    port, _ = start(spec)
    fresh = fake.token_answer["access_token"]
    assert [post(port, "/v1/responses")[0] for _ in range(2)] == [200, 200]
    assert fake.refreshes == [{"client_id": CODEX_CLIENT_ID, "grant_type": "refresh_token", "refresh_token": "rt-1",
                               "scope": "openid profile email"}]
    assert [s["headers"]["authorization"] for s in fake.model_calls] == [f"Bearer {fresh}"] * 2
    written = json.loads(path.read_text())
    assert written["tokens"] == {"id_token": "fresh-id", "access_token": fresh, "refresh_token": "rt-2",
                                 "account_id": "acct-42"}
    assert written["auth_mode"] == "chatgpt" and written["last_refresh"] != "2026-01-01T00:00:00Z"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in path.parent.iterdir()) == ["auth.json"]


def test_a_failed_refresh_is_a_502_the_agent_reads_and_the_record_keeps(fake, start, tmp_path):
    write_codex_login(tmp_path, jwt(time.time() - 10, "expired"))
    fake.token_status = 400
    port, records = start({"agent": {"kind": "codex", "model": "m"},
                           "relay": {"login": "codex", "upstream": fake.url, "refresh_url": f"{fake.url}/oauth/token"}})
    status, body = post(port, "/v1/responses")
    assert status == 502 and json.loads(body)["error"]["type"] == "relay_credential_error"
    (entry,) = read_records(records, 1)
    assert entry["status"] == 502 and "refreshing the ChatGPT login failed (HTTP 400)" in entry["error"]
    assert fake.model_calls == []


def claude_login(tmp_path: Path, expires_at_s: float) -> None:
    path = tmp_path / ".claude" / ".credentials.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps({"claudeAiOauth": {"accessToken": "sk-ant-oat01-host", "refreshToken": "sk-ant-ort01-host",
                                                  "expiresAt": int(expires_at_s * 1000), "scopes": ["user:inference"],
                                                  "subscriptionType": "max"}}))


def test_claude_login_is_sent_as_a_bearer_token_with_the_oauth_beta(fake, start, tmp_path):
    claude_login(tmp_path, time.time() + 3600)
    port, _ = start({"agent": {"kind": "claude-code", "model": "m"}, "relay": {"login": "claude", "upstream": fake.url}})
    status, _ = post(port, "/v1/messages", headers={"x-api-key": "provided-by-the-host-relay",
                                                    "anthropic-beta": "fine-grained-tool-streaming-2025-05-14"})
    assert status == 200
    (seen,) = fake.model_calls
    assert seen["headers"]["authorization"] == "Bearer sk-ant-oat01-host" and seen["headers"].get("x-api-key") is None
    assert seen["headers"]["anthropic-beta"] == "fine-grained-tool-streaming-2025-05-14, oauth-2025-04-20"


def test_expired_claude_login_tells_the_agent_how_to_refresh_it(fake, start, tmp_path):
    claude_login(tmp_path, time.time() - 10)
    port, _ = start({"agent": {"kind": "claude-code", "model": "m"}, "relay": {"login": "claude", "upstream": fake.url}})
    status, body = post(port, "/v1/messages")
    assert status == 502 and "run Claude Code on the Host once" in json.loads(body)["error"]["message"]
    assert fake.model_calls == []


def test_login_file_reads_refuse_symlinks_special_files_and_oversized_files(tmp_path):
    real = write_codex_login(tmp_path, "t")
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
