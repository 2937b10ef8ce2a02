"""Where a spec's relay may send a Host credential: only to where it is documented to go, unless the person running
the spec grants more on the command line (`--allow-credential NAME@HOST`); `spec check` and `run` say where each goes."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError
from support.cli import invoke_cli
from support.relay_harness import write_codex_login

from orchestrator.relay.logins import CodexLogin
from orchestrator.relay.policy import StaticCredential
from orchestrator.run.relay_setup import CredentialRoute, RelayConfigError, credential_routes, parse_grant, relay_policy, with_grants
from orchestrator.run.spec import RunSpec, SpecError, load_spec

KEYS = {"OPENAI_API_KEY": "sk-openai", "ANTHROPIC_API_KEY": "sk-ant", "GEMINI_API_KEY": "g-key", "DASHSCOPE_API_KEY": "ds-key",
        "AWS_SECRET_ACCESS_KEY": "aws-secret", "LOCAL_KEY": "sk-local"}
CODEX = {"kind": "codex", "model": "m"}
COMMAND = {"kind": "command", "image": "agent-base", "argv": ["true"]}


def spec_of(agent: dict, relay: dict | None = None, allow: tuple[str, ...] = ()) -> RunSpec:
    spec = RunSpec.model_validate({"benchmark": "CartPole-v1", "agent": agent, "relay": relay or {}})
    return with_grants(spec, [parse_grant(value) for value in allow])


def refusal(spec: RunSpec, home: Path | None = None) -> RelayConfigError:
    with pytest.raises(RelayConfigError) as caught:
        relay_policy(spec, KEYS, home=home)
    return caught.value


@pytest.mark.parametrize(("agent", "relay", "upstream", "sent"), [
    (CODEX, {}, "https://api.openai.com", {"Authorization": "Bearer sk-openai"}),
    ({"kind": "claude-code", "model": "m"}, {}, "https://api.anthropic.com", {"x-api-key": "sk-ant"}),
    ({"kind": "gemini", "model": "m"}, {}, "https://generativelanguage.googleapis.com", {"x-goog-api-key": "g-key"}),
    ({"kind": "qwen-code", "model": "m"}, {}, "https://dashscope-intl.aliyuncs.com/compatible-mode", {"Authorization": "Bearer ds-key"}),
    # A provider's key to its own host, named explicitly or through a profile, is still where it belongs.
    (CODEX, {"credential_env": "OPENAI_API_KEY", "upstream": "https://API.openai.com:443/"}, "https://API.openai.com:443",
     {"Authorization": "Bearer sk-openai"}),
    (COMMAND, {"profile": "openai-compatible", "upstream": "https://api.openai.com", "credential_env": "OPENAI_API_KEY"},
     "https://api.openai.com", {"Authorization": "Bearer sk-openai"}),
    # No credential, no leave needed: a model server anywhere.
    (COMMAND, {"profile": "openai-compatible", "upstream": "http://10.1.2.3:8000"}, "http://10.1.2.3:8000", {}),
])
def test_provider_keys_go_to_their_documented_hosts_without_leave(agent, relay, upstream, sent):
    policy = relay_policy(spec_of(agent, relay), KEYS)
    assert policy is not None and policy.upstream == upstream and policy.credential.headers() == sent


def test_a_login_from_the_clis_own_file_goes_to_its_documented_hosts_without_leave(tmp_path):
    write_codex_login(tmp_path, "token")
    spec = spec_of(CODEX, {"login": "codex"})
    policy = relay_policy(spec, {}, home=tmp_path)
    assert policy is not None and policy.upstream == "https://chatgpt.com/backend-api/codex"
    assert isinstance(policy.credential, CodexLogin) and policy.credential.refresh_url == "https://auth.openai.com/oauth/token"
    assert credential_routes(spec, {}, home=tmp_path) == [CredentialRoute("codex-login", "chatgpt.com", "model requests"),
                                                          CredentialRoute("codex-login", "auth.openai.com", "login refresh")]


def test_a_key_bound_for_another_host_is_refused_without_leave_and_sent_with_it():
    refused = refusal(spec_of(CODEX, {"upstream": "https://collector.example"}))
    assert refused.field == "upstream"
    assert str(refused) == ("the spec sends OPENAI_API_KEY to collector.example (its place is api.openai.com); "
                            "allow it with --allow-credential OPENAI_API_KEY@collector.example if you mean it")
    # Leave for another credential, another host or another port is no leave for this one.
    for allow in ("ANTHROPIC_API_KEY@collector.example", "OPENAI_API_KEY@other.example", "OPENAI_API_KEY@collector.example:8443"):
        assert refusal(spec_of(CODEX, {"upstream": "https://collector.example"}, (allow,))).field == "upstream"
    policy = relay_policy(spec_of(CODEX, {"upstream": "https://collector.example"}, ("OPENAI_API_KEY@Collector.Example",)), KEYS)
    assert policy is not None and policy.upstream == "https://collector.example"
    assert policy.credential.headers() == {"Authorization": "Bearer sk-openai"}


def test_a_provider_key_over_plain_http_or_to_a_local_server_needs_leave():
    assert "over plain http" in str(refusal(spec_of(CODEX, {"upstream": "http://api.openai.com"})))
    local = {"profile": "openai-compatible", "upstream": "http://127.0.0.1:8000", "credential_env": "OPENAI_API_KEY"}
    assert "--allow-credential OPENAI_API_KEY@127.0.0.1:8000" in str(refusal(spec_of(COMMAND, local)))
    assert relay_policy(spec_of(COMMAND, local, ("OPENAI_API_KEY@127.0.0.1:8000",)), KEYS) is not None


def test_credential_env_naming_a_variable_that_is_no_providers_key_is_refused_without_leave():
    refused = refusal(spec_of(CODEX, {"credential_env": "AWS_SECRET_ACCESS_KEY"}))
    assert refused.field == "credential_env"
    assert str(refused) == ("the spec sends AWS_SECRET_ACCESS_KEY to api.openai.com (AWS_SECRET_ACCESS_KEY is not a model "
                            "provider's key variable); allow it with --allow-credential AWS_SECRET_ACCESS_KEY@api.openai.com "
                            "if you mean it")
    # Another provider's key is not this provider's either.
    assert refusal(spec_of(CODEX, {"credential_env": "GEMINI_API_KEY"})).field == "credential_env"
    profile = {"profile": "openai-compatible", "upstream": "https://models.example", "credential_env": "LOCAL_KEY"}
    assert refusal(spec_of(COMMAND, profile)).field == "credential_env"
    policy = relay_policy(spec_of(CODEX, {"credential_env": "AWS_SECRET_ACCESS_KEY"}, ("AWS_SECRET_ACCESS_KEY@api.openai.com",)), KEYS)
    assert policy is not None and policy.credential == StaticCredential(header="authorization", value="aws-secret")


def test_a_refresh_url_on_another_host_is_refused_without_leave(tmp_path):
    write_codex_login(tmp_path, "token")
    relay = {"login": "codex", "refresh_url": "https://tokens.example/oauth/token"}
    refused = refusal(spec_of(CODEX, relay), home=tmp_path)
    assert refused.field == "refresh_url"
    assert str(refused) == ("the spec sends the codex login's refresh token to tokens.example (its place is auth.openai.com); "
                            "allow it with --allow-credential codex-login@tokens.example if you mean it")
    policy = relay_policy(spec_of(CODEX, relay, ("codex-login@tokens.example",)), {}, home=tmp_path)
    assert policy is not None and policy.credential.refresh_url == "https://tokens.example/oauth/token"
    # The login's model requests to another host need their own leave.
    assert refusal(spec_of(CODEX, {"login": "codex", "upstream": "https://proxy.example"}), home=tmp_path).field == "upstream"


def test_a_login_file_the_spec_names_needs_leave_even_for_the_documented_hosts(tmp_path):
    other = write_codex_login(tmp_path / "someone-else", "token")
    relay = {"login": "codex", "login_file": str(other)}
    refused = refusal(spec_of(CODEX, relay), home=tmp_path)
    assert refused.field == "login_file" and "--allow-credential codex-login@chatgpt.com" in str(refused)
    allow = ("codex-login@chatgpt.com", "codex-login@auth.openai.com")
    policy = relay_policy(spec_of(CODEX, relay, allow), {}, home=tmp_path)
    assert policy is not None and policy.credential.path == other
    # Naming the CLI's own file is no choice of credential.
    own = write_codex_login(tmp_path, "token")
    assert relay_policy(spec_of(CODEX, {"login": "codex", "login_file": str(own)}), {}, home=tmp_path) is not None


def test_leave_cannot_come_from_the_spec_file(tmp_path):
    for key in ("_grants", "granted", "allow_credential"):
        with pytest.raises(ValidationError):
            RunSpec.model_validate({"benchmark": "CartPole-v1", "agent": CODEX,
                                    "relay": {"upstream": "https://collector.example", key: [["OPENAI_API_KEY", "collector.example"]]}})
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({"benchmark": "CartPole-v1", "agent": CODEX, "relay": {"upstream": "https://collector.example",
                                    "_grants": [["OPENAI_API_KEY", "collector.example"]]}}))
    with pytest.raises(SpecError, match="relay._grants: unknown key"):
        load_spec(path)


@pytest.mark.parametrize(("text", "problem"), [
    ("OPENAI_API_KEY", "is not NAME@HOST"),
    ("@api.openai.com", "is not NAME@HOST"),
    ("OPENAI API KEY@api.openai.com", "neither an environment variable's name"),
    ("OPENAI_API_KEY@https://api.openai.com", "is not a host name"),
    ("OPENAI_API_KEY@api.openai.com/v1", "is not a host name"),
])
def test_malformed_allow_credential_values_are_refused(text, problem):
    with pytest.raises(ValueError, match=problem):
        parse_grant(text)


def test_allow_credential_values_name_hosts_as_the_relay_reaches_them():
    assert str(parse_grant("OPENAI_API_KEY@API.OpenAI.com:443")) == "OPENAI_API_KEY@api.openai.com"
    assert str(parse_grant("codex-login@127.0.0.1:8000")) == "codex-login@127.0.0.1:8000"
    assert str(parse_grant("claude-login@[::1]:9000")) == "claude-login@[::1]:9000"


# The command line ------------------------------------------------------------------------------------------------


def write_spec(tmp_path: Path, relay: dict, agent: dict = CODEX) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({"benchmark": "CartPole-v1", "agent": agent, "relay": relay}))
    return path


def test_spec_check_prints_which_credential_goes_to_which_host_never_its_value(tmp_path):
    result = invoke_cli("spec", "check", str(write_spec(tmp_path, {})), env={"OPENAI_API_KEY": "sk-never-printed"})
    assert result.exit_code == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[1:] == ["relay: OPENAI_API_KEY -> api.openai.com (model requests)"]
    document = json.loads(invoke_cli("spec", "check", str(write_spec(tmp_path, {})), "--json",
                                     env={"OPENAI_API_KEY": "sk-never-printed"}).stdout)
    assert document["valid"] and document["relay"] == [{"credential": "OPENAI_API_KEY", "host": "api.openai.com",
                                                        "purpose": "model requests"}]
    assert "sk-never-printed" not in result.stdout + result.stderr + json.dumps(document)
    local = invoke_cli("spec", "check", str(write_spec(tmp_path, {"profile": "openai-compatible", "upstream": "http://127.0.0.1:8000"},
                                                       COMMAND)))
    assert local.exit_code == 0 and local.stdout.splitlines()[1:] == ["relay: no credential -> 127.0.0.1:8000 (model requests)"]


def test_spec_check_refuses_a_credential_for_another_host_and_names_the_flag_that_allows_it(tmp_path):
    spec = write_spec(tmp_path, {"upstream": "https://collector.example"})
    refused = invoke_cli("spec", "check", str(spec), env={"OPENAI_API_KEY": "sk-x"})
    assert refused.exit_code == 1
    assert refused.stderr.strip() == (f"{spec}: relay.upstream: the spec sends OPENAI_API_KEY to collector.example (its place is "
                                      "api.openai.com); allow it with --allow-credential OPENAI_API_KEY@collector.example if you mean it")
    allowed = invoke_cli("spec", "check", str(spec), "--allow-credential", "OPENAI_API_KEY@collector.example", env={"OPENAI_API_KEY": "sk-x"})
    assert allowed.exit_code == 0, allowed.stdout + allowed.stderr
    assert allowed.stdout.splitlines()[1:] == ["relay: OPENAI_API_KEY -> collector.example (model requests)"]
    malformed = invoke_cli("spec", "check", str(spec), "--allow-credential", "collector.example")
    assert malformed.exit_code == 2 and "--allow-credential" in malformed.stdout + malformed.stderr


class _RecordingDriver:
    """Stands in for the Run: checks the relay as the real driver does when it starts, returns a finished manifest."""

    seen: list[RunSpec] = []

    def __init__(self, options, notify) -> None:
        self.options = options

    def execute(self) -> dict:
        _RecordingDriver.seen.append(self.options.spec)
        relay_policy(self.options.spec, KEYS)
        return {"terminal_reason": "finished", "phase": "done"}


def test_run_prints_where_each_credential_goes_and_carries_the_leave_to_the_run(tmp_path, monkeypatch):
    monkeypatch.setattr("orchestrator.run.driver.RunDriver", _RecordingDriver)
    monkeypatch.setattr(_RecordingDriver, "seen", [])
    spec = write_spec(tmp_path, {"upstream": "https://collector.example"})
    refused = invoke_cli("run", str(spec), "-o", str(tmp_path / "run"), env={"OPENAI_API_KEY": "sk-x"})
    assert refused.exit_code == 1 and "relay.upstream: the spec sends OPENAI_API_KEY to collector.example" in refused.stderr
    assert "--allow-credential OPENAI_API_KEY@collector.example" in refused.stderr and _RecordingDriver.seen == []
    ran = invoke_cli("run", str(spec), "-o", str(tmp_path / "run"), "--allow-credential", "OPENAI_API_KEY@collector.example",
                     env={"OPENAI_API_KEY": "sk-x"})
    assert ran.exit_code == 0, ran.stdout + ran.stderr
    assert "relay: OPENAI_API_KEY -> collector.example (model requests)" in ran.stderr.splitlines()
    (given,) = _RecordingDriver.seen
    assert given.relay.granted == (("OPENAI_API_KEY", "collector.example"),)


def test_suite_run_checks_each_runs_credential_with_the_leave_given_and_passes_it_to_every_run(tmp_path, monkeypatch):
    from orchestrator.suite import scheduler

    started: list[list[str]] = []

    class RecordingScheduler:
        def __init__(self, directory, options, notify) -> None:
            self.directory, self.options = directory, options

        def execute(self):
            started.extend(scheduler.run_command(self.directory, run, self.options) for run in self.directory.read_manifest()["runs"])
            return []

    monkeypatch.setattr("orchestrator.suite.scheduler.SuiteScheduler", RecordingScheduler)  # imported by `suite run` when it runs
    monkeypatch.setattr("orchestrator.cli.suite._build_images", lambda *args: None)
    suite = tmp_path / "suite.yaml"
    suite.write_text(yaml.safe_dump({"name": "far", "benchmarks": ["cartpole"],
                                     "agents": [{"name": "cx", "agent": CODEX, "relay": {"upstream": "https://collector.example"}}]}))
    short = Path(tempfile.mkdtemp(prefix="s-"))  # a Run's socket paths must stay short
    refused = invoke_cli("suite", "run", str(suite), "-o", str(short / "refused"), env={"OPENAI_API_KEY": "sk-x"})
    assert refused.exit_code == 1 and "--allow-credential OPENAI_API_KEY@collector.example" in refused.stderr
    assert started == [] and not (short / "refused").exists()
    allowed = invoke_cli("suite", "run", str(suite), "-o", str(short / "allowed"), "--allow-credential",
                         "OPENAI_API_KEY@collector.example", env={"OPENAI_API_KEY": "sk-x"})
    assert "Runs are not done" in allowed.stderr, allowed.stdout + allowed.stderr  # the stand-in ran none of them
    shutil.rmtree(short)
    (argv,) = started
    assert argv[argv.index("--allow-credential") + 1] == "OPENAI_API_KEY@collector.example"
