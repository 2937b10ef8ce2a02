"""The relay's credential from a profile or a CLI's login file on the Host: what reaches the upstream, refreshes (once across
processes, the file's owner and mode kept, a failed write-back survived), errors (never naming the file to the agent)."""

from __future__ import annotations

import fcntl
import json
import os
import stat
import subprocess
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from pydantic import ValidationError
from support.relay_harness import (
    CHAT_SSE,
    FakeUpstream,
    Relays,
    clear_proxy_variables,
    environment_without_proxies,
    jwt,
    post,
    read_records,
    serving,
    write_codex_login,
)

from orchestrator.relay.logins import CODEX_CLIENT_ID, MAX_LOGIN_BYTES, ClaudeLogin, CodexLogin, jwt_expiry, lock_file, read_login_file
from orchestrator.relay.policy import CredentialError
from orchestrator.run.preflight import preflight
from orchestrator.run.relay_setup import RelayConfigError, parse_grant, relay_policy, with_grants
from orchestrator.run.spec import RunSpec


@pytest.fixture
def fake(monkeypatch):
    """The model upstream (any path: records it, answers an SSE stream) and the OAuth token endpoint (/oauth/token)."""
    clear_proxy_variables(monkeypatch)
    token = {"access_token": jwt(time.time() + 3600, "fresh"), "id_token": "fresh-id", "refresh_token": "rt-2"}
    with serving(FakeUpstream(answer=CHAT_SSE, token_answer=token)) as server:
        yield server


def loopback(server: FakeUpstream, credential: str) -> str:
    """The --allow-credential value that lets `credential` go to the fake upstream on loopback."""
    return f"{credential}@127.0.0.1:{server.server_address[1]}"


@pytest.fixture
def start(tmp_path):
    """start(spec dict, environ, allow) -> bridge port and record path of a relay made from the spec's relay policy,
    with the --allow-credential values in allow."""
    with Relays() as relays:
        def make(spec: dict, environ: dict | None = None, allow: tuple[str, ...] = ()) -> tuple[int, Path]:
            run_spec = with_grants(RunSpec.model_validate({"benchmark": "CartPole-v1", **spec}), map(parse_grant, allow))
            policy = relay_policy(run_spec, environ or {}, home=tmp_path)
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
    port, _ = start(spec, {"LOCAL_KEY": "sk-local"}, allow=(loopback(fake, "LOCAL_KEY"),))
    assert post(port, "/v1/responses")[0] == 200
    assert fake.model_calls[0]["headers"]["authorization"] == "Bearer sk-local"
    with pytest.raises(RelayConfigError, match="set LOCAL_KEY") as caught:
        relay_policy(with_grants(RunSpec.model_validate({"benchmark": "CartPole-v1", **spec}), [parse_grant(loopback(fake, "LOCAL_KEY"))]), {})
    assert caught.value.field == "credential_env"
    no_upstream = RunSpec.model_validate({"benchmark": "CartPole-v1", "agent": COMMAND, "relay": {"profile": "openai-compatible"}})
    with pytest.raises(RelayConfigError, match="needs relay.upstream") as caught:
        relay_policy(no_upstream, {})
    assert caught.value.field == "upstream"


def test_codex_login_token_reaches_the_upstream_with_its_account(fake, start, tmp_path):
    token = jwt(time.time() + 3600, "current")
    write_codex_login(tmp_path, token)
    port, _ = start({"agent": {"kind": "codex", "model": "m"}, "relay": {"login": "codex", "upstream": fake.url}},
                    allow=(loopback(fake, "codex-login"),))
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
    port, _ = start(spec, allow=(loopback(fake, "codex-login"),))
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
    assert sorted(p.name for p in path.parent.iterdir()) == [".auth.json.epg-lock", "auth.json"]  # no temporary file left


def test_a_failed_refresh_is_a_502_the_agent_reads_and_the_record_keeps(fake, start, tmp_path):
    write_codex_login(tmp_path, jwt(time.time() - 10, "expired"))
    fake.token_status = 400
    port, records = start({"agent": {"kind": "codex", "model": "m"},
                           "relay": {"login": "codex", "upstream": fake.url, "refresh_url": f"{fake.url}/oauth/token"}},
                          allow=(loopback(fake, "codex-login"),))
    status, body = post(port, "/v1/responses")
    assert status == 502 and json.loads(body)["error"]["type"] == "relay_credential_error"
    (entry,) = read_records(records, 1)
    assert entry["status"] == 502 and "refreshing the codex login failed (HTTP 400)" in entry["error"]
    assert str(tmp_path) not in body.decode() and str(tmp_path) not in json.dumps(entry)
    assert fake.model_calls == []


def claude_login(tmp_path: Path, expires_at_s: float) -> None:
    path = tmp_path / ".claude" / ".credentials.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps({"claudeAiOauth": {"accessToken": "sk-ant-oat01-host", "refreshToken": "sk-ant-ort01-host",
                                                  "expiresAt": int(expires_at_s * 1000), "scopes": ["user:inference"],
                                                  "subscriptionType": "max"}}))


def test_claude_login_is_sent_as_a_bearer_token_with_the_oauth_beta(fake, start, tmp_path):
    claude_login(tmp_path, time.time() + 3600)
    port, _ = start({"agent": {"kind": "claude-code", "model": "m"}, "relay": {"login": "claude", "upstream": fake.url}},
                    allow=(loopback(fake, "claude-login"),))
    status, _ = post(port, "/v1/messages", headers={"x-api-key": "provided-by-the-host-relay",
                                                    "anthropic-beta": "fine-grained-tool-streaming-2025-05-14"})
    assert status == 200
    (seen,) = fake.model_calls
    assert seen["headers"]["authorization"] == "Bearer sk-ant-oat01-host" and seen["headers"].get("x-api-key") is None
    assert seen["headers"]["anthropic-beta"] == "fine-grained-tool-streaming-2025-05-14, oauth-2025-04-20"


def test_expired_claude_login_tells_the_agent_how_to_refresh_it(fake, start, tmp_path):
    claude_login(tmp_path, time.time() - 10)
    port, _ = start({"agent": {"kind": "claude-code", "model": "m"}, "relay": {"login": "claude", "upstream": fake.url}},
                    allow=(loopback(fake, "claude-login"),))
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
    assert found == ["relay.login_file: the spec sends the codex login to chatgpt.com (read from a file the spec names, not "
                     "the CLI's own); allow it with --allow-credential codex-login@chatgpt.com if you mean it; the spec sends "
                     "the codex login's refresh token to auth.openai.com (read from a file the spec names, not the CLI's own); "
                     "allow it with --allow-credential codex-login@auth.openai.com if you mean it"]
    granted = with_grants(spec, [parse_grant("codex-login@chatgpt.com"), parse_grant("codex-login@auth.openai.com")])
    found = [p for p in preflight(granted, tmp_path, [], environ={}) if p.startswith("relay.")]
    # The Host's own check names the file; what the agent could read never does (test_error_texts_...).
    assert found == [f"relay.login: cannot open the codex login file: No such file or directory ({tmp_path / 'none.json'})"]


class TokenEndpoint(ThreadingHTTPServer):
    """An OAuth token endpoint on loopback that counts the uses of each refresh token, as the real one would treat
    them: the first use of one answers new tokens (after `delay_s`, so that concurrent refreshes overlap), any
    later use `invalid_grant`."""

    daemon_threads = True

    def __init__(self, delay_s: float = 0.5) -> None:
        super().__init__(("127.0.0.1", 0), _TokenHandler)
        self.delay_s = delay_s
        self.uses: Counter[str] = Counter()
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/oauth/token"


class _TokenHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: TokenEndpoint

    def do_POST(self) -> None:
        spent = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))["refresh_token"]
        with self.server.lock:
            self.server.uses[spent] += 1
            first = self.server.uses[spent] == 1
        time.sleep(self.server.delay_s)
        answer = ({"access_token": jwt(time.time() + 3600, f"after-{spent}"), "id_token": f"id-after-{spent}",
                   "refresh_token": f"{spent}-next"} if first else {"error": "invalid_grant"})
        data = json.dumps(answer).encode()
        self.send_response(200 if first else 400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def token_endpoint(monkeypatch):
    clear_proxy_variables(monkeypatch)
    with serving(TokenEndpoint()) as server:
        yield server


# One process of the Host (a suite's Run, say) asking a Codex login for its headers: it says "ready" once imported,
# waits for a line on stdin so that all start together, then prints the headers (or the error) as JSON. Its second
# argument, when not "-", caps the size of the files it may write (as a full disk would) for its writes to fail.
_HEADERS_PROCESS = """
import json, resource, signal, sys
from pathlib import Path
from orchestrator.relay.logins import CodexLogin
from orchestrator.relay.policy import CredentialError
path, url, cap = sys.argv[1:4]
if cap != "-":
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(cap), int(cap)))
login = CodexLogin(path=Path(path), refresh_url=url)
print("ready", flush=True)
sys.stdin.readline()
answers = []
for _ in range(2):
    try:
        answers.append(login.headers()["Authorization"])
    except CredentialError as exc:
        answers.append("error: " + str(exc))
print(json.dumps(answers), flush=True)
"""


def headers_processes(path: Path, url: str, count: int, cap: str = "-") -> list[tuple[list[str], str]]:
    """Start `count` processes asking the login at path for its headers twice, all at once; return each one's answers
    and its stderr."""
    environ = {**environment_without_proxies(), "PYTHONPATH": os.pathsep.join(sys.path)}
    processes = [subprocess.Popen([sys.executable, "-c", _HEADERS_PROCESS, str(path), url, cap], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environ)
                 for _ in range(count)]
    try:
        for process in processes:
            assert process.stdout.readline() == "ready\n", process.stderr.read()
        for process in processes:
            process.stdin.write("go\n")
            process.stdin.flush()
        results = []
        for process in processes:
            stdout, stderr = process.communicate(timeout=60)
            assert process.returncode == 0, stderr
            results.append((json.loads(stdout), stderr))
        return results
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()


def test_processes_refreshing_one_login_at_once_spend_its_refresh_token_once(token_endpoint, tmp_path):
    path = write_codex_login(tmp_path, jwt(time.time() - 10, "expired"), refresh_token="rt-1")
    results = headers_processes(path, token_endpoint.url, 4)
    assert token_endpoint.uses == {"rt-1": 1}
    fresh = json.loads(path.read_text())["tokens"]
    assert fresh["refresh_token"] == "rt-1-next" and jwt_expiry(fresh["access_token"]) > time.time() + 3000
    # Every process sends the one fresh token: those that waited for the lock read it from the file.
    assert {answer for answers, _ in results for answer in answers} == {f"Bearer {fresh['access_token']}"}


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give the login file to another user")
def test_a_root_hosts_write_back_keeps_the_login_files_owner_and_mode(token_endpoint, tmp_path):
    path = write_codex_login(tmp_path, jwt(time.time() - 10, "expired"), refresh_token="rt-1")
    os.chown(path, 4321, 4322)
    path.chmod(0o640)
    assert CodexLogin(path=path, refresh_url=token_endpoint.url).headers()["Authorization"].startswith("Bearer ")
    assert token_endpoint.uses == {"rt-1": 1} and json.loads(path.read_text())["tokens"]["refresh_token"] == "rt-1-next"
    info = path.stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (4321, 4322, 0o640)
    lock = lock_file(path).stat()  # the user's own CLI or Runs can take the lock a root Host made
    assert (lock.st_uid, lock.st_gid) == (4321, 4322)


def test_a_failed_write_back_keeps_the_fresh_token_for_the_process_and_says_so_on_the_host(token_endpoint, tmp_path):
    path = write_codex_login(tmp_path, jwt(time.time() - 10, "expired"), refresh_token="rt-1")
    before = path.read_text()
    ((answers, stderr),) = headers_processes(path, token_endpoint.url, 1, cap="64")  # the login is ~400 bytes
    # Refreshed once; both requests carry the new token, the second without spending the new refresh token.
    assert token_endpoint.uses == {"rt-1": 1}
    assert answers[0] == answers[1] and answers[0].startswith("Bearer ") and not answers[0].startswith("Bearer error")
    assert jwt_expiry(answers[0].removeprefix("Bearer ")) > time.time() + 3000
    assert f"could not be written to {path}" in stderr  # loudly, on the Host's side
    assert path.read_text() == before
    assert sorted(p.name for p in path.parent.iterdir()) == [".auth.json.epg-lock", "auth.json"]


def test_error_texts_the_agent_reads_never_name_the_login_files_path(token_endpoint, tmp_path, caplog):
    home = tmp_path / "private-home-of-the-researcher"
    home.mkdir()
    texts: list[str] = []

    def error_of(login) -> str:
        with pytest.raises(CredentialError) as caught:
            login.headers()
        texts.append(str(caught.value))
        return str(caught.value)

    assert error_of(CodexLogin(path=home / "missing.json")) == "cannot open the codex login file: No such file or directory"
    (home / "garbled.json").write_text("{")
    assert error_of(CodexLogin(path=home / "garbled.json")) == "the codex login file is not JSON"
    (home / "empty.json").write_text("{}")
    assert "holds no ChatGPT login" in error_of(CodexLogin(path=home / "empty.json"))
    assert "holds no Claude login" in error_of(ClaudeLogin(path=home / "empty.json"))
    no_refresh = write_codex_login(home / "a", jwt(time.time() - 10, "expired"), refresh_token="")
    assert "has no refresh token" in error_of(CodexLogin(path=no_refresh))
    spent = write_codex_login(home / "b", jwt(time.time() - 10, "expired"), refresh_token="rt-spent")
    token_endpoint.uses["rt-spent"] = 1
    assert "refreshing the codex login failed (HTTP 400)" in error_of(CodexLogin(path=spent, refresh_url=token_endpoint.url))
    claude = home / ".claude" / ".credentials.json"
    claude.parent.mkdir()
    claude.write_text(json.dumps({"claudeAiOauth": {"accessToken": "t", "expiresAt": 0}}))
    assert "the claude login has expired" in error_of(ClaudeLogin(path=claude))
    assert all(str(tmp_path) not in text for text in texts), texts
    # The Host's log says which file.
    assert str(home / "missing.json") in caplog.text and str(spent) in caplog.text


def test_a_refresh_waits_a_bounded_time_for_another_processs_lock_and_spends_nothing_meanwhile(token_endpoint, tmp_path):
    path = write_codex_login(tmp_path, jwt(time.time() - 10, "expired"), refresh_token="rt-1")
    holder = os.open(lock_file(path), os.O_RDONLY | os.O_CREAT, 0o600)  # as another process refreshing it would
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)
        began = time.monotonic()
        with pytest.raises(CredentialError, match="locked by another process for 0.3 s"):
            CodexLogin(path=path, refresh_url=token_endpoint.url, lock_timeout_s=0.3).headers()
        assert 0.3 <= time.monotonic() - began < 5
    finally:
        os.close(holder)
    assert token_endpoint.uses == {}


def test_a_lock_file_that_is_a_link_is_not_followed(token_endpoint, tmp_path):
    path = write_codex_login(tmp_path / "home", jwt(time.time() - 10, "expired"), refresh_token="rt-1")
    elsewhere = tmp_path / "elsewhere"
    lock_file(path).symlink_to(elsewhere)
    with pytest.raises(CredentialError, match="cannot lock the codex login for its refresh"):
        CodexLogin(path=path, refresh_url=token_endpoint.url).headers()
    assert not elsewhere.exists() and token_endpoint.uses == {}
