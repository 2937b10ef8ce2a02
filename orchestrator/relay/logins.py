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
  the new tokens back to the file so the Host's own CLI keeps a working login.
  Refresh tokens are single-use, so a refresh holds an exclusive `flock` on a
  lock file beside the login (`.auth.json.epg-lock`, kept, owned like the
  login) that every orchestrator process on the Host takes (the Runs of a
  suite, several suites), and reads the file again once it holds it: a login
  another process refreshed meanwhile is used, not refreshed twice. The
  write-back is atomic (a file made beside it, fsynced, renamed over it) and
  keeps the file's owner and mode, so a root Host leaves the user's login the
  user's. If it fails, the error is logged on the Host and this process keeps
  the new tokens in memory (the file still holds the spent refresh token) until
  the file changes. The Codex CLI itself does not take the lock: a refresh by
  the CLI at the same moment can still spend the same token.
- Claude Code (`claude` then `/login`): `$CLAUDE_CONFIG_DIR/.credentials.json`
  (default `~/.claude/.credentials.json`) holds `claudeAiOauth.accessToken` and
  `expiresAt` (ms). The relay sends it as a Bearer token with the OAuth beta
  header. Its refresh flow is not documented, so the relay does not refresh it:
  an expired login is a clear error telling the user to run Claude Code on the
  Host once, which refreshes the file.

A CredentialError's text reaches the agent (a 502 body) and the relay's record,
so it names the login ("the codex login"), never the file's Host path; the path
is logged on the Host only.
"""

from __future__ import annotations

import base64
import fcntl
import json
import logging
import os
import stat
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import httpx

from orchestrator.relay.policy import CredentialError

log = logging.getLogger(__name__)

MAX_LOGIN_BYTES = 1024 * 1024
CODEX_REFRESH_URL = "https://auth.openai.com/oauth/token"
CODEX_CLIENT_ID = "app_EMoamEEZ73f0CkXaXp7hrann"  # the Codex CLI's public OAuth client
CLAUDE_OAUTH_BETA = "oauth-2025-04-20"
_EARLY_S = 60.0  # refresh a token this long before it expires
_LOCK_POLL_S = 0.05


def default_login_file(login: str, environ: Mapping[str, str], home: Path) -> Path:
    """Where the CLI keeps its login on the Host: "codex" or "claude"."""
    if login == "codex":
        return Path(environ["CODEX_HOME"]) / "auth.json" if environ.get("CODEX_HOME") else home / ".codex" / "auth.json"
    if environ.get("CLAUDE_CONFIG_DIR"):
        return Path(environ["CLAUDE_CONFIG_DIR"]) / ".credentials.json"
    return home / ".claude" / ".credentials.json"


def lock_file(path: Path) -> Path:
    """The lock file beside a login file that every orchestrator process takes to refresh it."""
    return path.with_name(f".{path.name}.epg-lock")


def read_login_file(path: Path, name: str = "the login file") -> dict[str, Any]:
    """Return the login file's JSON object. Raises CredentialError (missing, not a regular file, too big, not JSON),
    whose text calls the file `name` and never gives its path."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise CredentialError(f"cannot open {name}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise CredentialError(f"{name} is not a regular file")
        if info.st_size > MAX_LOGIN_BYTES:
            raise CredentialError(f"{name} is over {MAX_LOGIN_BYTES} bytes")
        data = b""
        while len(data) <= MAX_LOGIN_BYTES:
            chunk = os.read(fd, MAX_LOGIN_BYTES + 1 - len(data))
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    if len(data) > MAX_LOGIN_BYTES:
        raise CredentialError(f"{name} is over {MAX_LOGIN_BYTES} bytes")
    try:
        document = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise CredentialError(f"{name} is not JSON") from None
    if not isinstance(document, dict):
        raise CredentialError(f"{name} is not a JSON object")
    return document


def write_login_file(path: Path, document: dict[str, Any]) -> None:
    """Replace the login file atomically with document, keeping its owner and mode.

    The new file is made beside it (0600 until it is complete), given the old file's mode, owner and group
    (fchmod, fchown of the open file), fsynced and renamed over it; a missing old file gives a 0600 file of this
    process's user. Raises OSError; nothing is left behind but the old file then.
    """
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    temporary = f".{path.name}.epg-{os.getpid()}-{threading.get_ident()}"
    try:
        try:
            old: os.stat_result | None = os.stat(path.name, dir_fd=directory, follow_symlinks=False)
        except FileNotFoundError:
            old = None
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=directory)
        try:
            data = json.dumps(document, indent=2).encode()
            written = 0
            while written < len(data):
                written += os.write(fd, data[written:])
            if old is not None and stat.S_ISREG(old.st_mode):
                os.fchmod(fd, stat.S_IMODE(old.st_mode))
                made = os.fstat(fd)
                if (made.st_uid, made.st_gid) != (old.st_uid, old.st_gid):
                    os.fchown(fd, old.st_uid, old.st_gid)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path.name, src_dir_fd=directory, dst_dir_fd=directory)
        os.fsync(directory)
    except OSError:
        try:
            os.unlink(temporary, dir_fd=directory)
        except OSError:
            pass
        raise
    finally:
        os.close(directory)


@contextmanager
def locked(path: Path, timeout_s: float, name: str = "the login") -> Iterator[None]:
    """Hold an exclusive flock on the lock file beside path (made if missing, owned like path) while the block runs.

    Raises CredentialError when the lock file cannot be opened or another process holds the lock for timeout_s.
    """
    try:
        directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fd = os.open(lock_file(path).name, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600,
                         dir_fd=directory)
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode):
                    raise OSError(0, "the lock file is not a regular file")
                login = os.stat(path.name, dir_fd=directory, follow_symlinks=False)
                if (info.st_uid, info.st_gid) != (login.st_uid, login.st_gid) and os.geteuid() == 0:
                    os.fchown(fd, login.st_uid, login.st_gid)  # made by a root Host: the user's own Runs lock it too
            except BaseException:
                os.close(fd)
                raise
        finally:
            os.close(directory)
    except OSError as exc:
        log.error("cannot open the lock file %s: %s", lock_file(path), exc.strerror)
        raise CredentialError(f"cannot lock {name} for its refresh: {exc.strerror}") from None
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise CredentialError(f"{name} has been locked by another process for {timeout_s:g} s: "
                                          "it may be refreshing it; try again") from None
                time.sleep(_LOCK_POLL_S)
        yield
    finally:
        os.close(fd)  # releases the lock


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


def _logged(path: Path, said: set[str], exc: CredentialError) -> CredentialError:
    """exc, after logging it once with the login file's path (the Host's side of an error the agent reads without it)."""
    if str(exc) not in said:
        said.add(str(exc))
        log.warning("%s: %s", path, exc)
    return exc


@dataclass(slots=True, kw_only=True)
class CodexLogin:
    """A Codex CLI ChatGPT login as the relay's credential, refreshed once across threads and processes (see the module).

    lock_timeout_s: the longest a refresh waits for another process's (which is bounded by its own timeout_s).
    """

    path: Path
    refresh_url: str = CODEX_REFRESH_URL
    timeout_s: float = 30.0
    lock_timeout_s: float = 90.0
    clock: Callable[[], float] = time.time
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    # Tokens refreshed here whose write-back failed, and the refresh token they replaced: used while the file
    # still holds that spent token.
    _kept: dict[str, Any] | None = field(default=None, repr=False)
    _spent: str | None = field(default=None, repr=False)
    _said: set[str] = field(default_factory=set, repr=False)

    def check(self) -> None:
        """Raise CredentialError unless the file holds a ChatGPT login (nothing is refreshed)."""
        self._tokens(read_login_file(self.path, "the codex login file"))

    def headers(self) -> dict[str, str]:
        try:
            tokens = self._current()
            if self._expiring(tokens):
                with self._lock, locked(self.path, self.lock_timeout_s, "the codex login"):
                    tokens = self._current()  # another process may have refreshed it while this one waited
                    if self._expiring(tokens):
                        tokens = self._refresh(tokens)
        except CredentialError as exc:
            raise _logged(self.path, self._said, exc) from None
        headers = {"Authorization": f"Bearer {tokens['access_token']}"}
        if isinstance(tokens.get("account_id"), str) and tokens["account_id"]:
            headers["ChatGPT-Account-Id"] = tokens["account_id"]
        return headers

    def _current(self) -> dict[str, Any]:
        tokens = self._tokens(read_login_file(self.path, "the codex login file"))
        if self._kept is not None:
            if tokens.get("refresh_token") == self._spent:
                return self._kept
            self._kept = self._spent = None  # the file changed since (a new `codex login`): it is the login again
        return tokens

    def _expiring(self, tokens: dict[str, Any]) -> bool:
        expiry = jwt_expiry(tokens["access_token"])
        return expiry is not None and expiry - self.clock() < _EARLY_S

    def _tokens(self, document: dict[str, Any]) -> dict[str, Any]:
        tokens = document.get("tokens")
        if not isinstance(tokens, dict) or not isinstance(tokens.get("access_token"), str) or not tokens["access_token"]:
            raise CredentialError("the codex login file holds no ChatGPT login: run `codex login` on the Host")
        return tokens

    def _refresh(self, tokens: dict[str, Any]) -> dict[str, Any]:
        refresh_token = tokens.get("refresh_token")
        if not isinstance(refresh_token, str) or not refresh_token:
            raise CredentialError("the codex login expired and has no refresh token: run `codex login` on the Host")
        try:
            with httpx.Client(timeout=self.timeout_s, trust_env=True) as client:
                answer = client.post(self.refresh_url, json={
                    "client_id": CODEX_CLIENT_ID, "grant_type": "refresh_token", "refresh_token": refresh_token,
                    "scope": "openid profile email"})
        except httpx.HTTPError as exc:
            raise CredentialError(f"refreshing the codex login failed: {exc or type(exc).__name__}") from None
        try:
            fresh = answer.json() if answer.status_code == 200 else None
        except ValueError:
            fresh = None
        if not isinstance(fresh, dict) or not isinstance(fresh.get("access_token"), str):
            raise CredentialError(f"refreshing the codex login failed (HTTP {answer.status_code}): run `codex login` on the Host")
        updated = dict(tokens)
        for key in ("access_token", "id_token", "refresh_token"):
            if isinstance(fresh.get(key), str) and fresh[key]:
                updated[key] = fresh[key]
        self._write_back(updated, refresh_token)
        return updated

    def _write_back(self, updated: dict[str, Any], spent: str) -> None:
        """Write the refreshed tokens into the file as the CLI would; on failure keep them here and say so loudly."""
        try:
            # The rest of the file may have changed since it was read: start from it again.
            document = read_login_file(self.path, "the codex login file")
            tokens = document.get("tokens")
            document["tokens"] = {**(tokens if isinstance(tokens, dict) else {}), **updated}
            document["last_refresh"] = datetime.fromtimestamp(self.clock(), timezone.utc).isoformat().replace("+00:00", "Z")
            write_login_file(self.path, document)
        except (OSError, CredentialError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            log.error("the refreshed codex login could not be written to %s (%s): this process keeps it in memory, but "
                      "the file still holds the refresh token just spent; run `codex login` on the Host once the Run "
                      "has ended", self.path, reason)
            self._kept, self._spent = updated, spent
        else:
            self._kept = self._spent = None


@dataclass(slots=True, kw_only=True)
class ClaudeLogin:
    """A Claude Code login (Claude subscription) as the relay's credential; never refreshed here (see the module)."""

    path: Path
    clock: Callable[[], float] = time.time
    _said: set[str] = field(default_factory=set, repr=False)

    def check(self) -> None:
        """Raise CredentialError unless the file holds a Claude login (an expired one passes: the Host's CLI may
        refresh it before the agent's first request)."""
        self._oauth()

    def headers(self) -> dict[str, str]:
        try:
            oauth = self._oauth()
            expires = oauth.get("expiresAt")
            if isinstance(expires, (int, float)) and expires / 1000 - self.clock() < _EARLY_S:
                raise CredentialError("the claude login has expired: run Claude Code on the Host once "
                                      "(e.g. `claude -p hi`), which refreshes it; the relay reads it again on the next request")
        except CredentialError as exc:
            raise _logged(self.path, self._said, exc) from None
        return {"Authorization": f"Bearer {oauth['accessToken']}", "anthropic-beta": CLAUDE_OAUTH_BETA}

    def _oauth(self) -> dict[str, Any]:
        oauth = read_login_file(self.path, "the claude login file").get("claudeAiOauth")
        if not isinstance(oauth, dict) or not isinstance(oauth.get("accessToken"), str) or not oauth["accessToken"]:
            raise CredentialError("the claude login file holds no Claude login: run `claude` on the Host and `/login`")
        return oauth
