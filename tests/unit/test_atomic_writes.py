"""Atomic writes: permission bits chosen by the caller whatever the umask, and no trace of a failed write."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from orchestrator.records.atomic import PUBLIC_FILE, make_directory, write_bytes, write_json
from orchestrator.records.feedback import publish_feedback, write_artifacts

DOCUMENT = {"score": 12.5, "program_digest": "sha256:00", "values": {}, "episodes": [], "artifacts": ["episodes.csv"]}


@pytest.fixture
def hostile_umask():
    """Run the test under a root-like umask of 077, restored afterwards."""
    previous = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(previous)


def bits(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_published_feedback_is_readable_by_others_under_a_hostile_umask(tmp_path, hostile_umask):
    directory = tmp_path / "workspace" / "feedback" / "s0001"
    target = publish_feedback(directory, DOCUMENT, {"episodes.csv": b"index,return\n0,9\n", "../escape": b"x"})
    assert target == directory / "feedback.json"
    assert json.loads(target.read_text()) == DOCUMENT
    assert (directory / "artifacts" / "episodes.csv").read_bytes() == b"index,return\n0,9\n"
    assert sorted(p.name for p in (directory / "artifacts").iterdir()) == ["episodes.csv"]
    assert {bits(p) for p in (target, directory / "artifacts" / "episodes.csv")} == {0o644}
    # Every directory publish made, down from the first one that existed, is 0755.
    for made in (tmp_path / "workspace", tmp_path / "workspace" / "feedback", directory, directory / "artifacts"):
        assert bits(made) == 0o755, made


def test_publish_repairs_the_bits_of_its_existing_directories(tmp_path, hostile_umask):
    directory = tmp_path / "s0001"
    (directory / "artifacts").mkdir(parents=True)
    assert bits(directory) == 0o700
    publish_feedback(directory, DOCUMENT, {"episodes.csv": b"x"})
    assert bits(directory) == 0o755 and bits(directory / "artifacts") == 0o755


def test_publish_without_artifacts_makes_no_artifacts_directory(tmp_path, hostile_umask):
    publish_feedback(tmp_path / "s0001", DOCUMENT, {})
    assert sorted(p.name for p in (tmp_path / "s0001").iterdir()) == ["feedback.json"]


def test_published_files_are_not_writable_by_others_under_an_open_umask(tmp_path):
    previous = os.umask(0)
    try:
        directory = tmp_path / "s0001"
        target = publish_feedback(directory, DOCUMENT, {"episodes.csv": b"x"})
    finally:
        os.umask(previous)
    assert bits(target) == 0o644 and bits(directory / "artifacts" / "episodes.csv") == 0o644
    assert bits(directory) == 0o755 and bits(directory / "artifacts") == 0o755


def test_private_records_are_owner_only_by_default(tmp_path):
    previous = os.umask(0)
    try:
        write_bytes(tmp_path / "private" / "diagnostics" / "s0001.log", b"evidence")
        write_json(tmp_path / "private" / "pool.json", [{"index": 0}])
        write_artifacts(tmp_path / "submissions" / "s0001", {"episodes.csv": b"x"})
    finally:
        os.umask(previous)
    for path in (tmp_path / "private" / "diagnostics" / "s0001.log", tmp_path / "private" / "pool.json",
                 tmp_path / "submissions" / "s0001" / "artifacts" / "episodes.csv"):
        assert bits(path) == 0o600, path


def test_explicit_mode_replaces_the_bits_of_the_file_it_replaces(tmp_path, hostile_umask):
    target = tmp_path / "TASK.md"
    write_bytes(target, b"old")
    assert bits(target) == 0o600
    write_bytes(target, b"# Task\n", mode=PUBLIC_FILE)
    assert target.read_bytes() == b"# Task\n" and bits(target) == 0o644


def test_failed_write_leaves_the_old_file_and_no_temp_file(tmp_path, monkeypatch):
    target = tmp_path / "feedback.json"
    write_json(target, {"score": 1})

    def broken_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="Input/output error"):
        write_json(target, {"score": 2}, mode=PUBLIC_FILE)
    monkeypatch.undo()
    assert json.loads(target.read_text()) == {"score": 1} and bits(target) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["feedback.json"]


def test_failed_rename_leaves_no_temp_file(tmp_path):
    target = tmp_path / "feedback.json"
    (target / "occupied").mkdir(parents=True)  # a non-empty directory cannot be replaced by a file
    with pytest.raises(OSError):
        write_bytes(target, b"{}", mode=PUBLIC_FILE)
    assert [p.name for p in tmp_path.iterdir()] == ["feedback.json"]
    assert [p.name for p in target.iterdir()] == ["occupied"]


def test_unserialisable_value_writes_nothing(tmp_path):
    with pytest.raises(TypeError):
        write_json(tmp_path / "record.json", {"score": object()})
    assert list(tmp_path.iterdir()) == []


def test_make_directory_refuses_a_symlink_instead_of_following_it(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    os.chmod(elsewhere, 0o700)
    (tmp_path / "s0001").symlink_to(elsewhere)
    with pytest.raises(OSError):
        make_directory(tmp_path / "s0001", 0o755)
    assert bits(elsewhere) == 0o700
