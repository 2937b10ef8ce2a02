"""The Host's reads and chowns of the agent's workspace, attacked as a hostile agent would.

A second process exchanges entries of program/ and analysis/ with
renameat2(RENAME_EXCHANGE) while the Host captures or hands over. Each attack
is first shown to work against a naive reader (lstat, then read by path), so
the tests can fail; then the real capture must never read a byte from outside
program/ and never block. These tests need root (the Host's usual case).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from orchestrator.kernel.program import ProgramError, ProgramErrorCode, capture_program, capture_program_at
from orchestrator.run.workspace import AgentIdentity, capture_workspace_program, hand_over

REPO = Path(__file__).resolve().parents[2]
SWAPPER = REPO / "tests" / "fakes" / "swapper.py"
AGENT = AgentIdentity(uid=10001, gid=10001)
POLICY = b"def make_policy(context):\n    return None\n"
SECRET = b"host-secret-" + os.urandom(8).hex().encode()
DECOY = b"decoy bytes of the agent's own\n"
ATTACK_S = 3.0
# On loaded cores a round may see only one outcome (or the naive reader never lose): up to this many rounds are run
# until each outcome a test names has shown up.
MAX_ROUNDS = 6


@pytest.fixture(autouse=True)
def _as_root():
    if os.geteuid() != 0:
        pytest.fail("these tests attack a root Host and must run as root", pytrace=False)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A workspace as the Host leaves it: program/ and analysis/ owned by the agent, a root-only secret beside it."""
    root = tmp_path / "workspace"
    for name in ("program", "analysis"):
        (root / name).mkdir(parents=True)
        os.chown(root / name, AGENT.uid, AGENT.gid)
    (root / "program" / "policy.py").write_bytes(POLICY)
    vault = tmp_path / "vault"
    vault.mkdir(mode=0o700)
    (vault / "data").write_bytes(SECRET)
    os.chmod(vault / "data", 0o600)
    os.chmod(tmp_path, 0o755)
    return root


def _swap_in_background(a: Path, b: Path, seconds: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(SWAPPER), str(a), str(b), str(seconds)], stdout=subprocess.PIPE, text=True)


def _naive_capture(root: Path) -> list[bytes]:
    """The reader this project had: type from lstat, then a read that follows whatever is there."""
    found = []
    for directory, _, files in os.walk(root):
        for name in files:
            path = Path(directory) / name
            try:
                if stat.S_ISREG(path.lstat().st_mode):
                    found.append(path.read_bytes())
            except OSError:
                pass
    return found


def _attack(workspace: Path, a: Path, b: Path, capture, enough=lambda counts: True) -> dict[str, int]:
    """Swap a and b in rounds of ATTACK_S while capturing in a loop, until enough(counts) holds after a round (at most
    MAX_ROUNDS); return the outcome counts. Fails on a leaked byte."""
    counts: dict[str, int] = {}
    for _ in range(MAX_ROUNDS):
        swapper = _swap_in_background(a, b, ATTACK_S)
        try:
            while swapper.poll() is None:
                try:
                    program = capture(workspace)
                    leaked = any(SECRET in f.data for f in program.files)
                    assert not leaked, "a byte from outside program/ was captured"
                    key = "captured"
                except ProgramError as exc:
                    key = exc.code.value
                counts[key] = counts.get(key, 0) + 1
        finally:
            swapper.wait(timeout=30)
        assert int(swapper.stdout.read()) > 100, "the attacker barely ran"
        if enough(counts):
            break
    return counts


def _naive_leaks(workspace: Path, a: Path, b: Path) -> bool:
    for _ in range(MAX_ROUNDS):
        swapper = _swap_in_background(a, b, ATTACK_S)
        try:
            while swapper.poll() is None:
                if any(SECRET in data for data in _naive_capture(workspace / "program")):
                    return True
        finally:
            swapper.kill()
            swapper.wait()
    return False


def _plant_file_swap(workspace: Path) -> tuple[Path, Path]:
    (workspace / "program" / "loot").write_bytes(DECOY)
    (workspace / "analysis" / "loot").symlink_to(workspace.parent / "vault" / "data")
    return workspace / "program" / "loot", workspace / "analysis" / "loot"


def _plant_directory_swap(workspace: Path) -> tuple[Path, Path]:
    (workspace / "program" / "sub").mkdir()
    (workspace / "program" / "sub" / "data").write_bytes(DECOY)
    (workspace / "analysis" / "sub").symlink_to(workspace.parent / "vault", target_is_directory=True)
    return workspace / "program" / "sub", workspace / "analysis" / "sub"


def in_process(workspace: Path):
    return capture_workspace_program(workspace, None)


def as_agent(workspace: Path):
    return capture_workspace_program(workspace, AGENT)


@pytest.mark.parametrize("capture", [in_process, as_agent], ids=["descriptors", "descriptors-as-agent-uid"])
def test_file_swap_with_a_symlink_never_captures_the_target(workspace, capture):
    a, b = _plant_file_swap(workspace)
    assert _naive_leaks(workspace, a, b), "the attack should beat a path-following reader"
    def enough(counts):
        return counts.get("captured", 0) > 0 and counts.get("symlink", 0) + counts.get("changed", 0) > 0

    counts = _attack(workspace, a, b, capture, enough)
    assert enough(counts), counts


@pytest.mark.parametrize("capture", [in_process, as_agent], ids=["descriptors", "descriptors-as-agent-uid"])
def test_directory_swap_with_a_symlink_never_captures_the_target(workspace, capture):
    a, b = _plant_directory_swap(workspace)
    assert _naive_leaks(workspace, a, b), "the attack should beat a path-following reader"
    counts = _attack(workspace, a, b, capture, lambda counts: counts.get("captured", 0) > 0)
    assert counts.get("captured", 0) > 0 and set(counts) - {"captured"} <= {"symlink", "changed"}, counts


def test_fifo_swap_never_blocks_the_capture(workspace):
    (workspace / "program" / "pipe").write_bytes(DECOY)
    os.mkfifo(workspace / "analysis" / "pipe")
    finished = threading.Event()
    counts: dict[str, int] = {}

    def capture_loop():
        counts.update(_attack(workspace, workspace / "program" / "pipe", workspace / "analysis" / "pipe", in_process))
        finished.set()

    threading.Thread(target=capture_loop, daemon=True).start()
    assert finished.wait(ATTACK_S + 20), "a capture blocked on a FIFO"
    assert counts.get("special_file", 0) + counts.get("changed", 0) > 0, counts


def test_capture_as_the_agent_cannot_read_what_the_agent_cannot(workspace):
    secret = workspace / "program" / "root-only.txt"
    secret.write_bytes(SECRET)
    os.chmod(secret, 0o600)
    assert any(SECRET in f.data for f in capture_workspace_program(workspace, None).files)
    with pytest.raises(ProgramError) as info:
        capture_workspace_program(workspace, AGENT)
    assert info.value.code is ProgramErrorCode.UNREADABLE and "root-only.txt" in info.value.message


def test_capture_as_the_agent_gives_the_same_program(workspace):
    (workspace / "program" / "lib").mkdir()
    (workspace / "program" / "lib" / "util.py").write_bytes(b"X = 1\n")
    assert capture_workspace_program(workspace, AGENT) == capture_workspace_program(workspace, None)


def test_a_symlinked_program_directory_is_refused(workspace, tmp_path):
    os.rename(workspace / "program", workspace / "real")
    (workspace / "program").symlink_to(workspace / "real", target_is_directory=True)
    with pytest.raises(ProgramError) as info:
        capture_workspace_program(workspace, AGENT)
    assert info.value.code is ProgramErrorCode.NOT_A_DIRECTORY


def test_a_file_name_that_is_not_utf8_is_invalid_program(workspace):
    with open(os.path.join(os.fsencode(workspace / "program"), b"bad-\xff.txt"), "wb") as handle:
        handle.write(b"x")
    with pytest.raises(ProgramError) as info:
        capture_workspace_program(workspace, AGENT)
    assert info.value.code is ProgramErrorCode.INVALID_NAME and "bad-" in info.value.message


def test_a_very_deep_tree_is_invalid_program(workspace):
    path = workspace / "program"
    for _ in range(40):
        path = path / "d"
    path.mkdir(parents=True)
    with pytest.raises(ProgramError) as info:
        capture_program(workspace / "program")
    assert info.value.code is ProgramErrorCode.TOO_DEEP


def test_a_file_that_grows_past_its_limit_is_read_only_up_to_it(tmp_path):
    from orchestrator.kernel.program import ProgramLimits

    root = tmp_path / "p"
    root.mkdir()
    (root / "policy.py").write_bytes(POLICY)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        (root / "big").write_bytes(b"x" * 1000)
        with pytest.raises(ProgramError) as info:
            capture_program_at(fd, ProgramLimits(max_file_bytes=999))
    finally:
        os.close(fd)
    assert info.value.code is ProgramErrorCode.FILE_TOO_LARGE


# the hand-over ---------------------------------------------------------------------------
def test_hand_over_never_chowns_through_a_symlink_or_a_hard_link(workspace, tmp_path):
    host_file = tmp_path / "host-file"
    host_file.write_bytes(b"host")
    host_dir = tmp_path / "host-dir"
    host_dir.mkdir()
    (workspace / "analysis" / "to-file").symlink_to(host_file)
    (workspace / "analysis" / "to-dir").symlink_to(host_dir, target_is_directory=True)
    (workspace / "analysis" / "dangling").symlink_to(tmp_path / "nowhere")
    os.link(host_file, workspace / "analysis" / "hard-link")
    os.mkfifo(workspace / "analysis" / "pipe")
    hand_over(workspace, ("program", "analysis"), AGENT)
    assert (host_file.stat().st_uid, host_dir.stat().st_uid) == (0, 0)
    assert (workspace / "program" / "policy.py").stat().st_uid == AGENT.uid


def test_hand_over_survives_a_very_deep_tree(workspace):
    path = os.fsencode(workspace / "analysis")
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(1100):  # deeper than PATH_MAX allows by path: built with descriptors
        os.mkdir("d", dir_fd=fd)
        child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.close(fd)
    try:
        assert hand_over(workspace, ("program", "analysis"), AGENT) >= 1
        assert (workspace / "analysis" / "d").stat().st_uid == AGENT.uid
    finally:
        subprocess.run(["rm", "-rf", str(workspace / "analysis" / "d")], check=True)  # too deep for shutil.rmtree


def _naive_hand_over(root: Path) -> None:
    """The hand-over this project had: os.walk, then os.chown by path (which follows links)."""
    for directory, _, files in os.walk(root):
        for entry in [directory, *(os.path.join(directory, f) for f in files)]:
            try:
                os.chown(entry, AGENT.uid, AGENT.gid)
            except OSError:
                pass


def _hand_over_under_attack(workspace: Path, host_dir: Path, hand) -> bool:
    """Swap analysis/sub with a symlink to host_dir while hand(workspace) runs in a loop; True if host_dir changed owner."""
    swapper = _swap_in_background(workspace / "analysis" / "sub", workspace / "analysis" / "link", ATTACK_S)
    try:
        while swapper.poll() is None:
            hand(workspace)
            if (host_dir / "file").stat().st_uid != 0 or host_dir.stat().st_uid != 0:
                return True
        return False
    finally:
        swapper.kill()
        swapper.wait()


def test_hand_over_while_directories_are_swapped_for_symlinks(workspace, tmp_path):
    host_dir = tmp_path / "host-dir"
    host_dir.mkdir()
    (host_dir / "file").write_bytes(b"host")
    (workspace / "analysis" / "sub").mkdir()
    (workspace / "analysis" / "sub" / "file").write_bytes(b"agent")
    (workspace / "analysis" / "link").symlink_to(host_dir, target_is_directory=True)
    assert _hand_over_under_attack(workspace, host_dir, lambda w: _naive_hand_over(w / "analysis")), \
        "the attack should beat a path-following hand-over"
    os.chown(host_dir, 0, 0)
    os.chown(host_dir / "file", 0, 0)
    assert not _hand_over_under_attack(workspace, host_dir, lambda w: hand_over(w, ("analysis",), AGENT))
    assert (host_dir.stat().st_uid, (host_dir / "file").stat().st_uid) == (0, 0)
