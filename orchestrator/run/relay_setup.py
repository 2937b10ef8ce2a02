"""The model relay of a Run: its policy from the spec and the Host's environment, per agent kind, profile or login."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from orchestrator.relay.logins import CODEX_REFRESH_URL, ClaudeLogin, CodexLogin, default_login_file
from orchestrator.relay.policy import Credential, CredentialError, RelayPolicy, StaticCredential
from orchestrator.run.spec import RunSpec

# upstream, credential variable, credential header, allowed paths (exact: see RelayPolicy.allow_paths)
DEFAULTS: dict[str, tuple[str, str, str, tuple[str, ...]]] = {
    "codex": ("https://api.openai.com", "OPENAI_API_KEY", "authorization", ("/v1/responses",)),
    "claude-code": ("https://api.anthropic.com", "ANTHROPIC_API_KEY", "x-api-key", ("/v1/messages", "/v1/messages/count_tokens")),
    "gemini": ("https://generativelanguage.googleapis.com", "GEMINI_API_KEY", "x-goog-api-key",
               ("/v1beta/models/*:generateContent", "/v1beta/models/*:streamGenerateContent", "/v1beta/models/*:countTokens")),
    "qwen-code": ("https://dashscope-intl.aliyuncs.com/compatible-mode", "DASHSCOPE_API_KEY", "authorization", ("/v1/chat/completions",)),
}
AGENT_IMAGES = {
    "codex": "agent-codex",
    "claude-code": "agent-claude-code",
    "gemini": "agent-gemini",
    "qwen-code": "agent-qwen-code",
}


class RelayConfigError(Exception):
    """The relay cannot be set up (for example, the credential variable is not set on the Host).

    `field` names the relay key at fault, for a `relay.FIELD: reason` line.
    """

    def __init__(self, message: str, field: str = "credential_env") -> None:
        super().__init__(message)
        self.field = field


# relay.profile: the same shape; an empty upstream must be given in the spec, an empty variable sends no credential
# unless relay.credential_env names one.
PROFILES: dict[str, tuple[str, str, str, tuple[str, ...]]] = {
    "openai-compatible": ("", "", "authorization", ("/v1/chat/completions", "/v1/responses", "/v1/models")),
}
# relay.login: upstream, the prefix the upstream does not have, allowed paths. A ChatGPT login's model traffic goes to
# the ChatGPT backend, which serves the Responses API at /backend-api/codex/responses.
LOGINS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "codex": ("https://chatgpt.com/backend-api/codex", "/v1", ("/v1/responses",)),
    "claude": ("https://api.anthropic.com", "", ("/v1/messages", "/v1/messages/count_tokens")),
}


def relay_policy(spec: RunSpec, environ: Mapping[str, str] = os.environ, home: Path | None = None) -> RelayPolicy | None:
    """Return the relay policy of a Run whose agent needs a model provider, else None. Raises RelayConfigError.

    An agent kind with a provider (codex, claude-code) always gets a relay; any other agent gets one when the spec
    names a relay profile or login. A login's file is checked here (it holds a login) but not refreshed.
    """
    kind, relay = spec.agent.kind, spec.relay
    if relay.login is not None:
        return _login_policy(spec, environ, home or Path(environ.get("HOME") or Path.home()))
    if relay.profile is not None:
        upstream, variable, header, paths = PROFILES[relay.profile]
        if not relay.upstream:
            raise RelayConfigError(f"the {relay.profile} profile needs relay.upstream (the server's base URL)", "upstream")
    elif kind in DEFAULTS:
        upstream, variable, header, paths = DEFAULTS[kind]
    else:
        return None
    variable = relay.credential_env or variable
    credential = environ.get(variable, "") if variable else ""
    if variable and not credential:
        who = f"the {relay.profile} profile" if relay.profile and relay.credential_env else f"the {kind} agent"
        raise RelayConfigError(f"{who} needs a provider credential: set {variable} in the Host's environment")
    return _policy(spec, relay.upstream or upstream, paths, StaticCredential(header=header, value=credential))


def _login_policy(spec: RunSpec, environ: Mapping[str, str], home: Path) -> RelayPolicy:
    relay = spec.relay
    assert relay.login is not None
    path = Path(relay.login_file).expanduser() if relay.login_file else default_login_file(relay.login, environ, home)
    credential: CodexLogin | ClaudeLogin
    if relay.login == "codex":
        credential = CodexLogin(path=path, refresh_url=relay.refresh_url or CODEX_REFRESH_URL)
    else:
        credential = ClaudeLogin(path=path)
    try:
        credential.check()
    except CredentialError as exc:
        raise RelayConfigError(str(exc), "login") from None
    upstream, strip_prefix, paths = LOGINS[relay.login]
    return _policy(spec, relay.upstream or upstream, paths, credential, strip_prefix=strip_prefix)


def _policy(spec: RunSpec, upstream: str, paths: tuple[str, ...], credential: Credential, strip_prefix: str = "") -> RelayPolicy:
    relay = spec.relay
    return RelayPolicy(
        upstream=upstream.rstrip("/"),
        allow_paths=tuple(relay.allow_paths or paths),
        credential=credential,
        strip_prefix=strip_prefix,
        max_requests=relay.max_requests,
        max_tokens=relay.max_tokens,
        timeout_s=relay.timeout_s,
    )
