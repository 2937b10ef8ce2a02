"""The model relay of a Run: its policy from the spec and the Host's environment, per agent kind, profile or login;
and the rule on where a credential may go.

A spec is often written by someone else than the person who runs it, so it does not decide alone where a Host
credential goes. Without leave a credential goes only where it is documented to go: a provider's own key
variable (DEFAULTS) to that provider's host, a CLI's login from the CLI's own file to the login's host (LOGINS)
and the Codex login's refresh token to its token endpoint, all over https. Anything else (another variable,
another host, plain http, another login file) needs `--allow-credential NAME@HOST` from the person running it
(`with_grants`); NAME is the variable, or `codex-login` / `claude-login`. A relay that sends no credential (the
openai-compatible profile without credential_env) may go anywhere.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

import httpx

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
    # opencode and Cline (their OpenAI-compatible providers), Aider and mini-SWE-agent (LiteLLM's OpenAI provider):
    # Chat Completions
    "opencode": ("https://api.openai.com", "OPENAI_API_KEY", "authorization", ("/v1/chat/completions",)),
    "aider": ("https://api.openai.com", "OPENAI_API_KEY", "authorization", ("/v1/chat/completions",)),
    "mini-swe-agent": ("https://api.openai.com", "OPENAI_API_KEY", "authorization", ("/v1/chat/completions",)),
    "cline": ("https://api.openai.com", "OPENAI_API_KEY", "authorization", ("/v1/chat/completions",)),
}
AGENT_IMAGES = {
    "codex": "agent-codex",
    "claude-code": "agent-claude-code",
    "gemini": "agent-gemini",
    "qwen-code": "agent-qwen-code",
    "opencode": "agent-opencode",
    "aider": "agent-aider",
    "mini-swe-agent": "agent-mini-swe-agent",
    "cline": "agent-cline",
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


# What --allow-credential calls a login (a key is called by its variable).
LOGIN_CREDENTIALS = {"codex": "codex-login", "claude": "claude-login"}
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HOST = re.compile(r"^([A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?$")


@dataclass(frozen=True, slots=True)
class CredentialGrant:
    """Leave, from the person running a spec, to send one credential (a variable's name, codex-login or claude-login)
    to one host (HOST or HOST:PORT, as `destination` gives it)."""

    credential: str
    host: str

    def __str__(self) -> str:
        return f"{self.credential}@{self.host}"


@dataclass(frozen=True, slots=True)
class CredentialRoute:
    """Where a Run's relay sends which credential: its name (a variable, a login; "" for none), the host, and what for."""

    credential: str
    host: str
    purpose: str = "model requests"

    def __str__(self) -> str:
        return f"{self.credential or 'no credential'} -> {self.host} ({self.purpose})"


def parse_grant(text: str) -> CredentialGrant:
    """Return the grant written NAME@HOST or NAME@HOST:PORT. Raises ValueError saying what is wrong."""
    credential, at, host = text.rpartition("@")
    if not at or not credential or not host:
        raise ValueError(f"{text!r} is not NAME@HOST (e.g. OPENAI_API_KEY@api.openai.com or codex-login@chatgpt.com)")
    if credential not in LOGIN_CREDENTIALS.values() and not _VARIABLE.match(credential):
        raise ValueError(f"{credential!r} is neither an environment variable's name nor one of "
                         f"{', '.join(LOGIN_CREDENTIALS.values())}")
    if not _HOST.match(host):
        raise ValueError(f"{host!r} is not a host name or address with an optional port")
    return CredentialGrant(credential, destination(f"https://{host}"))


def with_grants(spec: RunSpec, grants: Iterable[CredentialGrant]) -> RunSpec:
    """A copy of spec whose relay may also send each granted credential to its host (relay_policy checks them)."""
    relay = spec.relay.model_copy()
    relay._grants = tuple(sorted({(grant.credential, grant.host) for grant in grants} | set(spec.relay.granted)))
    return spec.model_copy(update={"relay": relay})


def destination(url: str) -> str:
    """The host a URL's requests go to, as httpx connects to it: HOST (lower case), or HOST:PORT when the port is not
    the scheme's default. Raises ValueError for a URL without a host."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise ValueError(f"{url!r} is not a URL: {exc}") from None
    host = parsed.host
    if not host:
        raise ValueError(f"{url!r} names no host")
    if ":" in host:
        host = f"[{host}]"
    default = {"https": 443, "http": 80}.get(parsed.scheme)
    port = parsed.port
    if port is not None and port != default:
        return f"{host}:{port}"
    return host


def _documented() -> frozenset[tuple[str, str, str]]:
    """The (credential, host, purpose) routes that need no leave, over https."""
    routes = {(variable, destination(upstream), "model requests") for upstream, variable, _, _ in DEFAULTS.values()}
    routes |= {(LOGIN_CREDENTIALS[login], destination(upstream), "model requests") for login, (upstream, _, _) in LOGINS.items()}
    routes.add((LOGIN_CREDENTIALS["codex"], destination(CODEX_REFRESH_URL), "login refresh"))
    return frozenset(routes)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Plan:
    """What the spec and the defaults make of a relay before any credential is read."""

    upstream: str
    paths: tuple[str, ...]
    credential: str = ""  # a variable, codex-login or claude-login; "" sends none
    header: str = "authorization"
    login: str = ""
    login_path: Path | None = None
    foreign_file: bool = False  # a login file the spec names that is not the CLI's own
    refresh_url: str = ""
    strip_prefix: str = ""

    def routes(self) -> list[tuple[CredentialRoute, str]]:
        """Each route with its URL: the model requests, then the login's refresh."""
        routes = [(CredentialRoute(self.credential, destination(self.upstream)), self.upstream)]
        if self.refresh_url:
            routes.append((CredentialRoute(self.credential, destination(self.refresh_url), "login refresh"), self.refresh_url))
        return routes


def relay_policy(spec: RunSpec, environ: Mapping[str, str] = os.environ, home: Path | None = None) -> RelayPolicy | None:
    """Return the relay policy of a Run whose agent needs a model provider, else None. Raises RelayConfigError.

    An agent kind with a provider (codex, claude-code) always gets a relay; any other agent gets one when the spec
    names a relay profile or login. A credential that would go anywhere but where it is documented to go (see the
    module) is refused unless the spec was given leave for it (`with_grants`). A login's file is checked here (it
    holds a login) but not refreshed.
    """
    plan = _plan(spec, environ, home)
    if plan is None:
        return None
    _check_routes(spec, plan)
    if plan.login_path is not None:
        credential: Credential = _login(plan)
    else:
        value = environ.get(plan.credential, "") if plan.credential else ""
        if plan.credential and not value:
            relay = spec.relay
            who = f"the {relay.profile} profile" if relay.profile and relay.credential_env else f"the {spec.agent.kind} agent"
            raise RelayConfigError(f"{who} needs a provider credential: set {plan.credential} in the Host's environment")
        credential = StaticCredential(header=plan.header, value=value)
    return _policy(spec, plan.upstream, plan.paths, credential, strip_prefix=plan.strip_prefix)


def credential_routes(spec: RunSpec, environ: Mapping[str, str] = os.environ, home: Path | None = None) -> list[CredentialRoute]:
    """Where the spec's relay would send which credential (names only, no value is read); [] without a relay.

    Raises RelayConfigError when the relay cannot be planned (a profile without an upstream).
    """
    plan = _plan(spec, environ, home)
    return [route for route, _ in plan.routes()] if plan is not None else []


def _plan(spec: RunSpec, environ: Mapping[str, str], home: Path | None) -> _Plan | None:
    kind, relay = spec.agent.kind, spec.relay
    if relay.login is not None:
        own = default_login_file(relay.login, environ, home or Path(environ.get("HOME") or Path.home()))
        path = Path(relay.login_file).expanduser() if relay.login_file else own
        upstream, strip_prefix, paths = LOGINS[relay.login]
        return _Plan(upstream=relay.upstream or upstream, paths=paths, credential=LOGIN_CREDENTIALS[relay.login],
                     login=relay.login, login_path=path, foreign_file=os.path.abspath(path) != os.path.abspath(own),
                     refresh_url=(relay.refresh_url or CODEX_REFRESH_URL) if relay.login == "codex" else "",
                     strip_prefix=strip_prefix)
    if relay.profile is not None:
        upstream, variable, header, paths = PROFILES[relay.profile]
        if not relay.upstream:
            raise RelayConfigError(f"the {relay.profile} profile needs relay.upstream (the server's base URL)", "upstream")
    elif kind in DEFAULTS:
        upstream, variable, header, paths = DEFAULTS[kind]
    else:
        return None
    return _Plan(upstream=relay.upstream or upstream, paths=paths, credential=relay.credential_env or variable, header=header)


def _check_routes(spec: RunSpec, plan: _Plan) -> None:
    """Raise RelayConfigError, at the first field at fault, for each route of a credential that has no leave to go there."""
    if not plan.credential:
        return
    documented, granted = _documented(), set(spec.relay.granted)
    problems: dict[CredentialGrant, tuple[str, str]] = {}
    for route, url in plan.routes():
        grant = CredentialGrant(route.credential, route.host)
        if (route.credential, route.host) in granted or grant in problems:
            continue
        at = "refresh_url" if route.purpose == "login refresh" else "upstream"
        if not plan.login and route.credential not in {credential for credential, _, _ in documented}:
            field, reason = "credential_env", f"{route.credential} is not a model provider's key variable"
        elif (route.credential, route.host, route.purpose) not in documented:
            homes = sorted(host for credential, host, purpose in documented if (credential, purpose) == (route.credential, route.purpose))
            field = at if plan.login or spec.relay.upstream else "credential_env"
            reason = f"its place is {' or '.join(homes)}"
        elif plan.foreign_file:
            field, reason = "login_file", "read from a file the spec names, not the CLI's own"
        elif httpx.URL(url).scheme != "https":
            field, reason = at, "over plain http"
        else:
            continue
        what = route.credential
        if plan.login:
            what = f"the {plan.login} login's refresh token" if route.purpose == "login refresh" else f"the {plan.login} login"
        problems[grant] = (field, f"the spec sends {what} to {route.host} ({reason}); "
                                  f"allow it with --allow-credential {grant} if you mean it")
    if problems:
        fields = list(problems.values())
        raise RelayConfigError("; ".join(text for _, text in fields), fields[0][0])


def _login(plan: _Plan) -> CodexLogin | ClaudeLogin:
    """The login credential of the plan, its file checked. Raises RelayConfigError naming the file (the Host's side)."""
    assert plan.login_path is not None
    credential: CodexLogin | ClaudeLogin
    if plan.login == "codex":
        credential = CodexLogin(path=plan.login_path, refresh_url=plan.refresh_url)
    else:
        credential = ClaudeLogin(path=plan.login_path)
    try:
        credential.check()
    except CredentialError as exc:
        raise RelayConfigError(f"{exc} ({plan.login_path})", "login") from None
    return credential


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
