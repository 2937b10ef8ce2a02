"""Work directories of dead processes are removed; nothing else is, whatever their contents or a swapper does meanwhile."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from fakes.swapper import exchanger

from orchestrator.backends.sandbox import DockerSandbox
from orchestrator.backends.settings import SandboxImages
from orchestrator.backends.workdirs import make_work_dir, reap_work_dirs

OTHER_UID = 10001


def _dead_pid() -> int:
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    return int(finished.stdout)


def _left_by_dead_process(parent: Path, kind: str = "sandbox") -> Path:
    """A work directory as a process that has exited made it (its own pid in the name, mode 0700)."""
    directory = parent / f"epg-{kind}-{_dead_pid()}-abcd_123"
    directory.mkdir(mode=0o700)
    return directory


def test_a_work_directory_names_its_process_and_is_private(tmp_path):
    made = make_work_dir("sandbox", tmp_path)
    assert made.parent == tmp_path and made.name.startswith(f"epg-sandbox-{os.getpid()}-")
    assert made.stat().st_mode & 0o777 == 0o700
    with pytest.raises(AssertionError):
        make_work_dir("other", tmp_path)


def test_the_dead_processes_directories_go_and_the_living_ones_stay(tmp_path):
    dead = [_left_by_dead_process(tmp_path), _left_by_dead_process(tmp_path, "k8s")]
    (dead[0] / "lane0").mkdir()
    (dead[0] / "lane0" / "runner.sock").write_text("")
    os.mkfifo(dead[0] / "lane0" / "fifo")  # removed without being opened
    living = make_work_dir("sandbox", tmp_path)
    report = reap_work_dirs(tmp_path)
    assert sorted(report.removed) == sorted(dead) and report.errors == []
    assert sorted(tmp_path.iterdir()) == [living]


def test_what_this_user_did_not_make_as_a_work_directory_stays(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("kept")
    pid = _dead_pid()
    link = tmp_path / f"epg-sandbox-{pid}-link_123"
    link.symlink_to(outside)
    shared = tmp_path / f"epg-sandbox-{pid}-mode_755"
    shared.mkdir(mode=0o755)
    os.chmod(shared, 0o755)
    plain_file = tmp_path / f"epg-k8s-{pid}-file_123"
    plain_file.write_text("")
    foreign = tmp_path / f"epg-sandbox-{pid}-foreign1"
    foreign.mkdir(mode=0o700)
    os.chown(foreign, OTHER_UID, OTHER_UID)  # the tests run as root, as the Host usually does
    unnamed = tmp_path / f"epg-{pid}-abcdefgh"  # the name of no kind
    unnamed.mkdir(mode=0o700)
    report = reap_work_dirs(tmp_path)
    assert report.removed == [] and report.errors == []
    assert (outside / "keep").read_text() == "kept" and link.is_symlink() and shared.is_dir() and plain_file.is_file()
    assert unnamed.is_dir() and foreign.is_dir()


def test_a_link_planted_inside_a_dead_directory_is_removed_not_followed(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("kept")
    dead = _left_by_dead_process(tmp_path)
    (dead / "lane0").symlink_to(outside)
    report = reap_work_dirs(tmp_path)
    assert report.removed == [dead] and not dead.exists()
    assert (outside / "keep").read_text() == "kept"


def test_a_swapper_exchanging_a_directory_with_a_link_during_the_removal_never_reaches_outside(tmp_path):
    """rmtree walks by directory descriptor: exchanging lane0 with a link to outside in a loop while it runs removes
    the link or the directory, never what the link points at."""
    outside = tmp_path / "outside"
    outside.mkdir()
    files = [outside / f"keep{i}" for i in range(50)]
    for file in files:
        file.write_text("kept")
    exchange = exchanger()
    for attempt in range(30):
        dead = _left_by_dead_process(tmp_path)
        lane, decoy = dead / "lane0", dead / "decoy"
        lane.mkdir()
        for i in range(200):
            (lane / f"f{i}").write_text("")
        decoy.symlink_to(outside)
        stop = threading.Event()
        swapper = threading.Thread(target=_swap_until, args=(stop, exchange, lane, decoy))
        swapper.start()
        try:
            reap_work_dirs(tmp_path)
        finally:
            stop.set()
            swapper.join()
        assert all(file.read_text() == "kept" for file in files), attempt
        # What the swapper kept out of the walk's way goes at the next reaping, once nothing swaps.
        assert reap_work_dirs(tmp_path).errors == [] and not dead.exists(), attempt


def _swap_until(stop: threading.Event, exchange, a: Path, b: Path) -> None:
    while not stop.is_set():
        try:
            exchange(str(a), str(b))
        except OSError:
            return  # one of the two is gone: the removal got there


def test_a_docker_sandbox_makes_its_work_directory_only_when_entered(tmp_path):
    images = SandboxImages(environment="e", policy_runtime="p", benchmark_entry="x")
    DockerSandbox(engine=None, images=images, workdir=tmp_path)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []
