"""The Host's secret seed key: where it lives, how it is made once, and how a Run finds it again.

Hidden Episodes (the train pool, Validation and Assessment) are planned from
`kernel.seeds.keyed_seed(key, seed, purpose)`, so the public code and the Run
seed alone do not determine them. The key is a file of hex digits kept outside
every run directory: by default `$XDG_DATA_HOME/epg-orchestrator/seed.key`
(else `~/.local/share/epg-orchestrator/seed.key`), generated on first use; or
the file a Run spec names in `seed_key_file`. Only its fingerprint
(`kernel.seeds.key_id`) is recorded, in run.json.
"""

from __future__ import annotations

import os
import re
import secrets
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.kernel.seeds import MIN_KEY_BYTES, key_id

KEY_BYTES = 32
_MAX_FILE_BYTES = 4096
_HEX = re.compile(r"(?:[0-9a-fA-F]{2})+")


class SeedKeyError(Exception):
    """A seed key file is missing, unreadable or malformed, or is not the key a Run was created with."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SeedKey:
    """The key (never printed, never recorded) and the file it was read from."""

    key: bytes = field(repr=False)
    path: Path

    @property
    def id(self) -> str:
        """The public fingerprint recorded in run.json as seed_key_id."""
        return key_id(self.key)


def default_key_path() -> Path:
    """Return the default key file, reading XDG_DATA_HOME and HOME now (not at import).

    `$XDG_DATA_HOME/epg-orchestrator/seed.key`; when XDG_DATA_HOME is unset, empty
    or relative (the XDG rules ignore a relative one), `~/.local/share/epg-orchestrator/seed.key`.
    Raises SeedKeyError when no absolute home directory is known either.
    """
    data_home = os.environ.get("XDG_DATA_HOME", "")
    if not os.path.isabs(data_home):
        home = os.path.expanduser("~")
        if not os.path.isabs(home):
            raise SeedKeyError("no place for the seed key: set HOME or XDG_DATA_HOME, or name a seed_key_file in the Run spec")
        data_home = os.path.join(home, ".local", "share")
    return Path(data_home) / "epg-orchestrator" / "seed.key"


def read_key(path: Path) -> bytes:
    """Return the key held in path: hex digits for at least 32 bytes, surrounding whitespace allowed.

    Raises SeedKeyError when path is missing, unreadable or malformed.
    """
    try:
        with open(path, "rb") as file:
            data = file.read(_MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise SeedKeyError(f"{path}: no such seed key file (make one with: openssl rand -hex {KEY_BYTES} > {path})") from None
    except OSError as exc:
        raise SeedKeyError(f"{path}: cannot read the seed key: {exc.strerror}") from None
    text = data.strip()
    if len(data) > _MAX_FILE_BYTES or not _HEX.fullmatch(text.decode("latin-1")):
        raise SeedKeyError(f"{path}: not a seed key: expected one line of hex digits ({2 * KEY_BYTES} or more)")
    key = bytes.fromhex(text.decode("ascii"))
    if len(key) < MIN_KEY_BYTES:
        raise SeedKeyError(f"{path}: seed key too short: {len(key)} bytes, at least {MIN_KEY_BYTES}")
    return key


def ensure_key(path: Path) -> bytes:
    """Return the key in path, generating it first (secrets.token_bytes(32)) when path does not exist.

    A missing directory is made with mode 0700. The new key is written and
    fsynced in a temporary file (O_CREAT|O_EXCL, mode 0600) beside path, then
    published with link(), which refuses an existing name: a reader never sees
    a half-written key, and when several processes race they all end with the
    one key published first. Raises SeedKeyError when the directory or file
    cannot be made, or when the existing file is malformed.
    """
    if not os.path.lexists(path):
        _publish_new_key(path)
    return read_key(path)


def _publish_new_key(path: Path) -> None:
    directory = path.parent
    try:
        directory.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.mkdir(directory, 0o700)
            os.chmod(directory, 0o700)  # whatever the umask
        except FileExistsError:
            pass
        fd, temporary = tempfile.mkstemp(dir=directory, prefix=".seed.key.")
        try:
            with os.fdopen(fd, "w") as file:
                file.write(secrets.token_bytes(KEY_BYTES).hex() + "\n")
                file.flush()
                os.fsync(file.fileno())
            try:
                os.link(temporary, path)
            except FileExistsError:
                pass  # another process published its key first: that one is the key
        finally:
            os.unlink(temporary)
        directory_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(directory_fd)
        finally:
            os.close(directory_fd)
    except OSError as exc:
        raise SeedKeyError(f"{path}: cannot create the seed key: {exc.strerror}") from None


def open_seed_key(named: str | None, spec_dir: Path, run_dir: Path) -> SeedKey:
    """Return the key of a new Run.

    named (the spec's seed_key_file, relative to spec_dir) must exist; without
    it the default store is used and its key generated on first use. Raises
    SeedKeyError as read_key and ensure_key do, and when the file lies inside
    the run directory (every file there is a record; the workspace is the agent's).
    """
    path = (spec_dir / Path(named).expanduser()) if named is not None else default_key_path()
    path = Path(os.path.abspath(path))
    if path.resolve().is_relative_to(run_dir.resolve()):
        raise SeedKeyError(f"{path}: the seed key must live outside the run directory {run_dir}")
    return SeedKey(key=read_key(path) if named is not None else ensure_key(path), path=path)


def reopen_seed_key(manifest: dict[str, Any], run_dir: Path) -> SeedKey:
    """Return the key of a Run being resumed: read from the file run.json names, with run.json's key id.

    Never generates a key. Raises SeedKeyError when run.json records no key, the
    file is missing or malformed, or it holds another key (its Episodes would differ).
    """
    recorded, named = manifest.get("seed_key_id"), manifest.get("seed_key_file")
    if not recorded or not named:
        raise SeedKeyError(f"{run_dir}: run.json records no seed_key_id; this Run cannot be resumed with secret Episodes")
    found = SeedKey(key=read_key(Path(named)), path=Path(named))
    if found.id != recorded:
        raise SeedKeyError(f"{named}: holds seed key {found.id}, but this Run was created with {recorded}; "
                           "resuming with it would plan other hidden Episodes")
    return found
