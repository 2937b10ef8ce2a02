"""The Host's secret seed key: keyed derivation of hidden seeds, the key's fingerprint, and the key store."""

from __future__ import annotations

import hashlib
import multiprocessing
import re
import stat
from pathlib import Path

import pytest

from orchestrator.kernel.seeds import derive_seed, key_id, keyed_seed
from orchestrator.run import seed_key
from orchestrator.run.seed_key import SeedKey, SeedKeyError, default_key_path, ensure_key, open_seed_key, read_key, reopen_seed_key
from orchestrator.run.spec import RunSpec

KEY_A = bytes(range(32))
KEY_B = bytes(range(1, 33))


# derivation ------------------------------------------------------------------------
def test_keyed_seed_is_deterministic_for_a_key_seed_and_purpose():
    assert keyed_seed(KEY_A, 0, "train") == keyed_seed(bytes(range(32)), 0, "train")


def test_keyed_seed_differs_by_key_seed_and_purpose():
    seeds = {keyed_seed(key, seed, purpose) for key in (KEY_A, KEY_B) for seed in (0, 1, 2**40)
             for purpose in ("train", "validation", "assessment")}
    assert len(seeds) == 2 * 3 * 3


def test_keyed_seed_is_not_the_public_derivation():
    for purpose in ("train", "validation", "assessment"):
        assert keyed_seed(KEY_A, 0, purpose) not in {0, derive_seed(0, purpose)}


def test_keyed_seed_is_a_63_bit_integer():
    values = [keyed_seed(KEY_A, seed, "train") for seed in range(200)]
    assert all(type(v) is int and 0 <= v < 2**63 for v in values)
    assert max(values) >= 2**60  # the whole range is used, not a small corner of it


def test_keyed_seed_is_hmac_sha256_of_the_purpose_under_the_key():
    import hmac

    digest = hmac.new(KEY_A, b"epg-keyed-seed:7:validation", hashlib.sha256).digest()
    assert keyed_seed(KEY_A, 7, "validation") == int.from_bytes(digest[:8], "little") >> 1


@pytest.mark.parametrize("key", [b"", b"short", bytes(31)])
def test_a_short_key_is_refused_by_the_derivation(key):
    with pytest.raises(ValueError, match="at least 32 bytes"):
        keyed_seed(key, 0, "train")
    with pytest.raises(ValueError, match="at least 32 bytes"):
        key_id(key)


def test_key_id_is_a_stable_short_fingerprint_that_is_not_the_key():
    fingerprint = key_id(KEY_A)
    assert fingerprint == key_id(bytes(range(32)))
    assert re.fullmatch(r"k-[0-9a-f]{16}", fingerprint)
    assert fingerprint != key_id(KEY_B)
    assert fingerprint[2:] not in KEY_A.hex()
    # Domain-separated: not a plain hash of the key either.
    assert fingerprint[2:] != hashlib.sha256(KEY_A).hexdigest()[:16]


def test_seed_key_value_never_shows_its_key():
    value = SeedKey(key=KEY_A, path=Path("/x/seed.key"))
    assert KEY_A.hex() not in repr(value) and str(KEY_A) not in repr(value)
    assert value.id == key_id(KEY_A)


# where the key lives ------------------------------------------------------------------
def test_default_key_path_reads_xdg_data_home_at_call_time(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "one"))
    assert default_key_path() == tmp_path / "one" / "epg-orchestrator" / "seed.key"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "two"))
    assert default_key_path() == tmp_path / "two" / "epg-orchestrator" / "seed.key"


def test_default_key_path_falls_back_to_home_local_share(tmp_path, monkeypatch):
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_key_path() == tmp_path / ".local" / "share" / "epg-orchestrator" / "seed.key"


@pytest.mark.parametrize("value", ["", "relative/data"])
def test_an_empty_or_relative_xdg_data_home_is_ignored(tmp_path, monkeypatch, value):
    monkeypatch.setenv("XDG_DATA_HOME", value)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_key_path() == tmp_path / ".local" / "share" / "epg-orchestrator" / "seed.key"


# the store ------------------------------------------------------------------------------
def test_first_use_creates_a_0600_key_in_a_0700_directory(tmp_path):
    path = tmp_path / "data" / "epg-orchestrator" / "seed.key"
    key = ensure_key(path)
    assert len(key) == 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert path.read_text() == key.hex() + "\n"
    assert sorted(p.name for p in path.parent.iterdir()) == ["seed.key"]  # no temporary left behind


def test_the_key_is_made_once_and_then_read_back(tmp_path):
    path = tmp_path / "epg-orchestrator" / "seed.key"
    first = ensure_key(path)
    assert ensure_key(path) == first
    assert ensure_key(tmp_path / "other" / "seed.key") != first


def _race(path: str, barrier, results) -> None:
    barrier.wait()
    results.put(ensure_key(Path(path)).hex())


def test_concurrent_first_uses_all_end_with_one_key(tmp_path):
    context = multiprocessing.get_context("fork")
    path = tmp_path / "epg-orchestrator" / "seed.key"
    barrier, results = context.Barrier(8), context.Queue()
    processes = [context.Process(target=_race, args=(str(path), barrier, results)) for _ in range(8)]
    for process in processes:
        process.start()
    keys = [results.get(timeout=30) for _ in processes]
    for process in processes:
        process.join(timeout=30)
        assert process.exitcode == 0
    assert len(set(keys)) == 1
    assert read_key(path).hex() == keys[0]
    assert sorted(p.name for p in path.parent.iterdir()) == ["seed.key"]


def test_losing_the_creation_race_keeps_the_winners_key(tmp_path, monkeypatch):
    path = tmp_path / "epg-orchestrator" / "seed.key"
    winner = ensure_key(path)
    # This process saw no key, then another published one before its own link().
    monkeypatch.setattr(seed_key.os.path, "lexists", lambda _: False)
    assert ensure_key(path) == winner
    assert sorted(p.name for p in path.parent.iterdir()) == ["seed.key"]


def test_a_key_made_by_openssl_rand_hex_is_read(tmp_path):
    path = tmp_path / "shared.key"
    path.write_text("AB" * 32 + "\n")
    assert read_key(path) == b"\xab" * 32


@pytest.mark.parametrize("content, reason", [
    (b"", "not a seed key"),
    (b"\n", "not a seed key"),
    (b"ab" * 31, "too short: 31 bytes"),
    (b"zz" * 32, "not a seed key"),
    (b"abc" * 23, "not a seed key"),  # an odd number of digits
    (b"ab" * 16 + b" " + b"ab" * 16, "not a seed key"),
    (bytes(range(256)), "not a seed key"),
    (b"ab" * 5000, "not a seed key"),
])
def test_a_malformed_key_file_is_a_clear_error(tmp_path, content, reason):
    path = tmp_path / "seed.key"
    path.write_bytes(content)
    with pytest.raises(SeedKeyError, match=reason) as caught:
        read_key(path)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(SeedKeyError, match=reason):
        ensure_key(path)  # never replaced by a fresh key


def test_a_key_directory_that_cannot_be_made_is_a_clear_error(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(SeedKeyError, match="cannot create the seed key"):
        ensure_key(tmp_path / "file" / "epg-orchestrator" / "seed.key")


# keys of Runs ------------------------------------------------------------------------------
def test_a_new_run_without_a_named_file_uses_the_default_store(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    opened = open_seed_key(None, tmp_path / "specs", tmp_path / "run")
    assert opened.path == tmp_path / "data" / "epg-orchestrator" / "seed.key"
    assert opened.key == read_key(opened.path)


def test_a_named_key_file_is_relative_to_the_spec_and_must_exist(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    specs = tmp_path / "specs"
    specs.mkdir()
    with pytest.raises(SeedKeyError, match="no such seed key file"):
        open_seed_key("keys/team.key", specs, tmp_path / "run")
    assert not (specs / "keys").exists() and not (tmp_path / "data").exists()
    (specs / "keys").mkdir()
    (specs / "keys" / "team.key").write_text(KEY_B.hex())
    opened = open_seed_key("keys/team.key", specs, tmp_path / "run")
    assert (opened.key, opened.path) == (KEY_B, specs / "keys" / "team.key")


def test_a_key_inside_the_run_directory_is_refused(tmp_path):
    run_dir = tmp_path / "run"
    (run_dir / "workspace").mkdir(parents=True)
    (run_dir / "workspace" / "seed.key").write_text(KEY_A.hex())
    with pytest.raises(SeedKeyError, match="outside the run directory"):
        open_seed_key("run/workspace/seed.key", tmp_path, run_dir)


def test_a_resumed_run_gets_the_key_its_run_json_names(tmp_path):
    path = tmp_path / "team.key"
    path.write_text(KEY_A.hex())
    reopened = reopen_seed_key({"seed_key_id": key_id(KEY_A), "seed_key_file": str(path)}, tmp_path / "run")
    assert reopened.key == KEY_A


def test_resuming_with_another_key_is_a_clear_error(tmp_path):
    path = tmp_path / "team.key"
    path.write_text(KEY_B.hex())
    with pytest.raises(SeedKeyError, match=f"created with {key_id(KEY_A)}"):
        reopen_seed_key({"seed_key_id": key_id(KEY_A), "seed_key_file": str(path)}, tmp_path / "run")


def test_resuming_never_generates_a_key(tmp_path):
    path = tmp_path / "gone" / "seed.key"
    with pytest.raises(SeedKeyError, match="no such seed key file"):
        reopen_seed_key({"seed_key_id": key_id(KEY_A), "seed_key_file": str(path)}, tmp_path / "run")
    assert not path.parent.exists()


def test_resuming_a_run_that_recorded_no_key_is_a_clear_error(tmp_path):
    with pytest.raises(SeedKeyError, match="records no seed_key_id"):
        reopen_seed_key({"phase": "agent"}, tmp_path / "run")


def test_the_run_spec_names_an_optional_key_file():
    base = {"benchmark": "CartPole-v1", "agent": {"kind": "scripted", "steps": [{"program": "p", "episodes": "0"}]}}
    assert RunSpec.model_validate(base).seed_key_file is None
    assert RunSpec.model_validate({**base, "seed_key_file": "keys/team.key"}).seed_key_file == "keys/team.key"
