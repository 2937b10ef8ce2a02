"""Capturing a policy directory as a content-addressed Program."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

import orchestrator.kernel.program as program_module
from orchestrator.kernel.program import (
    Program,
    ProgramError,
    ProgramErrorCode,
    ProgramFile,
    ProgramLimits,
    capture_program,
    program_digest,
)

POLICY = b"def make_policy(context):\n    return None\n"


def make_dir(root: Path, files: dict[str, bytes]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return root


def capture_code(root: Path, limits: ProgramLimits = ProgramLimits()) -> ProgramErrorCode:
    with pytest.raises(ProgramError) as info:
        capture_program(root, limits)
    assert info.value.message
    return info.value.code


BASE = {"policy.py": POLICY, "helpers/util.py": b"X = 1\n", "params.json": b'{"k": 2}'}


def test_digest_ignores_file_creation_order_and_mtimes(tmp_path):
    first = make_dir(tmp_path / "a", BASE)
    second = make_dir(tmp_path / "b", dict(reversed(list(BASE.items()))))
    for index, path in enumerate(p for p in second.rglob("*") if p.is_file()):
        os.utime(path, (1_000_000 + index, 2_000_000 + 7 * index))
    assert capture_program(first).digest == capture_program(second).digest


def test_digest_ignores_pycache_directories_and_pyc_files(tmp_path):
    clean = make_dir(tmp_path / "clean", BASE)
    noisy = make_dir(
        tmp_path / "noisy",
        {**BASE, "__pycache__/policy.cpython-311.pyc": b"\x00junk", "helpers/__pycache__/util.pyc": b"x", "stale.pyc": b"y"},
    )
    captured = capture_program(noisy)
    assert captured.digest == capture_program(clean).digest
    assert [f.path for f in captured.files] == ["helpers/util.py", "params.json", "policy.py"]


def test_digest_is_independent_of_the_order_of_files_passed():
    files = [ProgramFile(path="policy.py", data=POLICY), ProgramFile(path="b/x.py", data=b"1")]
    assert program_digest(files) == program_digest(list(reversed(files))) == program_digest(tuple(files))


def test_digest_has_the_sha256_prefix_and_hex_body(tmp_path):
    digest = capture_program(make_dir(tmp_path / "p", BASE)).digest
    assert digest.startswith("sha256:")
    assert len(digest) == len("sha256:") + 64
    int(digest.removeprefix("sha256:"), 16)


def test_digest_changes_when_one_byte_changes(tmp_path):
    original = capture_program(make_dir(tmp_path / "a", BASE)).digest
    changed = capture_program(make_dir(tmp_path / "b", {**BASE, "params.json": b'{"k": 3}'})).digest
    assert changed != original


def test_digest_changes_when_a_file_is_renamed(tmp_path):
    original = capture_program(make_dir(tmp_path / "a", BASE)).digest
    renamed = dict(BASE)
    renamed["helpers/utils.py"] = renamed.pop("helpers/util.py")
    assert capture_program(make_dir(tmp_path / "b", renamed)).digest != original


def test_digest_changes_when_a_file_moves_to_another_directory(tmp_path):
    original = capture_program(make_dir(tmp_path / "a", BASE)).digest
    moved = dict(BASE)
    moved["util.py"] = moved.pop("helpers/util.py")
    assert capture_program(make_dir(tmp_path / "b", moved)).digest != original


def test_digest_changes_when_a_file_is_added(tmp_path):
    original = capture_program(make_dir(tmp_path / "a", BASE)).digest
    added = capture_program(make_dir(tmp_path / "b", {**BASE, "notes.txt": b""})).digest
    assert added != original


def test_digest_separates_path_and_content_boundaries():
    joined = [ProgramFile(path="policy.py", data=b"ab")]
    shifted = [ProgramFile(path="policy.pya", data=b"b")]
    assert program_digest(joined) != program_digest(shifted)


def test_digest_includes_the_abi_version(monkeypatch):
    files = [ProgramFile(path="policy.py", data=POLICY)]
    current = program_digest(files)
    monkeypatch.setattr(program_module, "ABI_VERSION", program_module.ABI_VERSION + 1)
    assert program_digest(files) != current


def test_capture_of_a_missing_directory_is_not_found(tmp_path):
    assert capture_code(tmp_path / "absent") is ProgramErrorCode.NOT_FOUND


def test_capture_of_a_file_is_not_a_directory(tmp_path):
    path = tmp_path / "policy.py"
    path.write_bytes(POLICY)
    assert capture_code(path) is ProgramErrorCode.NOT_A_DIRECTORY


def test_capture_without_policy_py_is_missing_entry_point(tmp_path):
    root = make_dir(tmp_path / "p", {"main.py": POLICY, "sub/policy.py": POLICY})
    assert capture_code(root) is ProgramErrorCode.MISSING_ENTRY_POINT


def test_capture_rejects_a_file_symlink(tmp_path):
    outside = tmp_path / "secret.txt"
    outside.write_text("host data")
    root = make_dir(tmp_path / "p", BASE)
    (root / "link.txt").symlink_to(outside)
    assert capture_code(root) is ProgramErrorCode.SYMLINK


def test_capture_rejects_a_directory_symlink(tmp_path):
    outside = make_dir(tmp_path / "outside", {"data.txt": b"host data"})
    root = make_dir(tmp_path / "p", BASE)
    (root / "linked").symlink_to(outside, target_is_directory=True)
    assert capture_code(root) is ProgramErrorCode.SYMLINK


def test_capture_rejects_a_fifo_as_a_special_file(tmp_path):
    root = make_dir(tmp_path / "p", BASE)
    os.mkfifo(root / "pipe")
    assert capture_code(root) is ProgramErrorCode.SPECIAL_FILE


def test_capture_rejects_more_files_than_the_limit(tmp_path):
    root = make_dir(tmp_path / "p", BASE)
    assert len(capture_program(root, ProgramLimits(max_files=3)).files) == 3
    assert capture_code(root, ProgramLimits(max_files=2)) is ProgramErrorCode.TOO_MANY_FILES


def test_capture_rejects_a_file_above_the_per_file_limit(tmp_path):
    root = make_dir(tmp_path / "p", {"policy.py": POLICY, "big.bin": b"x" * 101})
    limits = ProgramLimits(max_file_bytes=100, max_total_bytes=10_000)
    assert capture_code(root, limits) is ProgramErrorCode.FILE_TOO_LARGE
    (root / "big.bin").write_bytes(b"x" * 100)
    assert capture_program(root, limits).total_bytes == 100 + len(POLICY)


def test_capture_rejects_files_whose_total_exceeds_the_limit(tmp_path):
    root = make_dir(tmp_path / "p", {"policy.py": b"p" * 60, "a.bin": b"a" * 60})
    assert capture_code(root, ProgramLimits(max_file_bytes=100, max_total_bytes=119)) is ProgramErrorCode.TOO_LARGE
    assert capture_program(root, ProgramLimits(max_file_bytes=100, max_total_bytes=120)).total_bytes == 120


def test_program_error_carries_code_and_readable_message(tmp_path):
    with pytest.raises(ProgramError) as info:
        capture_program(tmp_path / "nowhere")
    assert str(info.value) == info.value.message
    assert "nowhere" in info.value.message


def test_written_program_captures_to_the_same_digest(tmp_path):
    original = capture_program(make_dir(tmp_path / "src", BASE))
    original.write_to(tmp_path / "dst" / "program")
    again = capture_program(tmp_path / "dst" / "program")
    assert again.digest == original.digest
    assert again.files == original.files


def test_written_program_files_are_0644_and_directories_0755(tmp_path):
    program = Program(
        digest="sha256:irrelevant",
        files=(ProgramFile(path="policy.py", data=POLICY), ProgramFile(path="a/b/c.txt", data=b"c")),
    )
    old_umask = os.umask(0o077)
    try:
        program.write_to(tmp_path / "out")
    finally:
        os.umask(old_umask)
    root = tmp_path / "out"
    modes = {p.relative_to(root).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in root.rglob("*")}
    assert modes == {"policy.py": 0o644, "a": 0o755, "a/b": 0o755, "a/b/c.txt": 0o644}
    assert stat.S_IMODE(root.stat().st_mode) == 0o755
