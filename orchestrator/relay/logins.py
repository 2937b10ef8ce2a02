"""A CLI's subscription login on the Host as the relay's credential: read from its own file, refreshed where documented.

The file is read by the Host-side relay only, for every forwarded request (so a
login the Host's CLI refreshed meanwhile is picked up), and never mounted or
copied into a container. Reads are race-free: O_NOFOLLOW, the type and size from
fstat of the open descriptor, at most MAX_LOGIN_BYTES.

- Codex CLI (`codex login`, ChatGPT): `$CODEX_HOME/auth.json` (default
  `~/.codex/auth.json`) holds `tokens.access_token` (a JWT), `refresh_token`
  and `account_id`. The relay sends the access token as a Bearer token with
  `ChatGPT-Account-Id`; once the token's `exp` is less than a minute away it
  refreshes it at the OAuth token endpoint as the Codex CLI does, and writes
  the new tokens back to the file (atomically, 0600) so the Host's own CLI
  keeps a working login (refresh tokens are single-use).
- Claude Code (`claude` then `/login`): `$CLAUDE_CONFIG_DIR/.credentials.json`
  (default `~/.claude/.credentials.json`) holds `claudeAiOauth.accessToken` and
  `expiresAt` (ms). The relay sends it as a Bearer token with the OAuth beta
  header. Its refresh flow is not documented, so the relay does not refresh it:
  an expired login is a clear error telling the user to run Claude Code on the
  Host once, which refreshes the file.
"""

from __future__ import annotations

import base64
import json
import os
import stat
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping

import httpx

from orchestrator.relay.policy import CredentialError

MAX_LOGIN_BYTES = 1024 * 1024
CODEX_REFRESH_URL = "https://auth.openai.com/oauth/token"
CODEX_CLIENT_ID = "app_EMoamEEZ73f0CkXaXp7hrann"  # the Codex CLI's public OAuth client
CLAUDE_OAUTH_BETA = "oauth-2025-04-20"
_EARLY_S = 60.0  # refresh a token this long before it expires


def default_login_file(login: str, environ: Mapping[str, str], home: Path) -> Path:
    """Where the CLI keeps its login on the Host: "codex" or "claude"."""
    if login == "codex":
        return Path(environ["CODEX_HOME"]) / "auth.json" if environ.get("CODEX_HOME") else home / ".codex" / "auth.json"
    if environ.get("CLAUDE_CONFIG_DIR"):
        return Path(environ["CLAUDE_CONFIG_DIR"]) / ".credentials.json"
    return home / ".claude" / ".credentials.json"


def read_login_file(path: Path) -> dict[str, Any]:
    """Return the login file's JSON object. Raises CredentialError (missing, not a regular file, too big, not JSON)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise CredentialError(f"cannot open the login file {path}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise CredentialError(f"the login file {path} is not a regular file")
        if info.st_size > MAX_LOGIN_BYTES:
            raise CredentialError(f"the login file {path} is over {MAX_LOGIN_BYTES} bytes")
        data = b""
        while len(data) <= MAX_LOGIN_BYTES:
            chunk = os.read(fd, MAX_LOGIN_BYTES + 1 - len(data))
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    if len(data) > MAX_LOGIN_BYTES:
        raise CredentialError(f"the login file {path} is over {MAX_LOGIN_BYTES} bytes")
    try:
        document = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise CredentialError(f"the login file {path} is not JSON") from None
    if not isinstance(document, dict):
        raise CredentialError(f"the login file {path} is not a JSON object")
    return document


def write_login_file(path: Path, document: dict[str, Any]) -> None:
    """Replace the login file atomically with document: a 0600 file made beside it, fsynced, renamed over it."""
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    temporary = f".{path.name}.epg-{os.getpid()}-{threading.get_ident()}"
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=directory)
        try:
            os.write(fd, json.dumps(document, indent=2).encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path.name, src_dir_fd=directory, dst_dir_fd=directory)
        os.fsync(directory)
    except OSError as exc:
        try:
            os.unlink(temporary, dir_fd=directory)
        except OSError:
            pass
        raise CredentialError(f"cannot write the refreshed login to {path}: {exc.strerror}") from None
    finally:
        os.close(directory)


def jwt_expiry(token: str) -> float | None:
    """The `exp` claim of a JWT (seconds since the epoch), or None if token is not one."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, UnicodeDecodeError):
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    return float(exp) if isinstance(exp, (int, float)) else None


@dataclass(slots=True, kw_only=True)
class CodexLogin:
    """A Codex CLI ChatGPT login as the relay's credential. The lock makes concurrent requests refresh once."""

    path: Path
    refresh_url: str = CODEX_REFRESH_URL
    timeout_s: float = 30.0
    clock: Callable[[], float] = time.time
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def check(self) -> None:
        """Raise CredentialError unless the file holds a ChatGPT login (nothing is refreshed)."""
        self._tokens(read_login_file(self.path))

    def headers(self) -> dict[str, str]:
        with self._lock:
            tokens = self._tokens(read_login_file(self.path))
            expiry = jwt_expiry(tokens["access_token"])
            if expiry is not None and expiry - self.clock() < _EARLY_S:
                tokens = self._refresh(tokens)
        headers = {"Authorization": f"Bearer {tokens['access_token']}"}
        if isinstance(tokens.get("account_id"), str) and tokens["account_id"]:
            headers["ChatGPT-Account-Id"] = tokens["account_id"]
        return headers

    def _tokens(self, document: dict[str, Any]) -> dict[str, Any]:
        tokens = document.get("tokens")
        if not isinstance(tokens, dict) or not isinstance(tokens.get("access_token"), str) or not tokens["access_token"]:
            raise CredentialError(f"{self.path} holds no ChatGPT login: run `codex login` on the Host")
        return tokens

    def _refresh(self, tokens: dict[str, Any]) -> dict[str, Any]:
        refresh_token = tokens.get("refresh_token")
        if not isinstance(refresh_token, str) or not refresh_token:
            raise CredentialError(f"the ChatGPT login in {self.path} expired and has no refresh token: run `codex login`")
        try:
            with httpx.Client(timeout=self.timeout_s, trust_env=True) as client:
                answer = client.post(self.refresh_url, json={
                    "client_id": CODEX_CLIENT_ID, "grant_type": "refresh_token", "refresh_token": refresh_token,
                    "scope": "openid profile email"})
        except httpx.HTTPError as exc:
            raise CredentialError(f"refreshing the ChatGPT login failed: {exc or type(exc).__name__}") from None
        try:
            fresh = answer.json() if answer.status_code == 200 else None
        except ValueError:
            fresh = None
        if not isinstance(fresh, dict) or not isinstance(fresh.get("access_token"), str):
            raise CredentialError(f"refreshing the ChatGPT login failed (HTTP {answer.status_code}): run `codex login` on the Host")
        # Write back what the CLI would: the file may have changed since it was read, so start from it again.
        document = read_login_file(self.path)
        updated = dict(self._tokens(document))
        for key in ("access_token", "id_token", "refresh_token"):
            if isinstance(fresh.get(key), str) and fresh[key]:
                updated[key] = fresh[key]
        document["tokens"] = updated
        document["last_refresh"] = datetime.fromtimestamp(self.clock(), timezone.utc).isoformat().replace("+00:00", "Z")
        write_login_file(self.path, document)
        return updated


@dataclass(slots=True, kw_only=True)
class ClaudeLogin:
    """A Claude Code login (Claude subscription) as the relay's credential; never refreshed here (see the module)."""

    path: Path
    clock: Callable[[], float] = time.time

    def check(self) -> None:
        """Raise CredentialError unless the file holds a Claude login (an expired one passes: the Host's CLI may
        refresh it before the agent's first request)."""
        self._oauth()

    def headers(self) -> dict[str, str]:
        oauth = self._oauth()
        expires = oauth.get("expiresAt")
        if isinstance(expires, (int, float)) and expires / 1000 - self.clock() < _EARLY_S:
            raise CredentialError(f"the Claude login in {self.path} has expired: run Claude Code on the Host once "
                                  "(e.g. `claude -p hi`), which refreshes it; the relay reads it again on the next request")
        return {"Authorization": f"Bearer {oauth['accessToken']}", "anthropic-beta": CLAUDE_OAUTH_BETA}

    def _oauth(self) -> dict[str, Any]:
        oauth = read_login_file(self.path).get("claudeAiOauth")
        if not isinstance(oauth, dict) or not isinstance(oauth.get("accessToken"), str) or not oauth["accessToken"]:
            raise CredentialError(f"{self.path} holds no Claude login: run `claude` on the Host and `/login`")
        return oauth
