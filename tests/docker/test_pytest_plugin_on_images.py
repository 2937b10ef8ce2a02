"""The pytest plugin against real images: a broken image fails its author's test with every fault named."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from orchestrator.backends.labels import selector

# (Not imported from conftest: with the environment packages' conftests collected too, `conftest` may name another.)
BROKEN_PACKAGE = Path(__file__).resolve().parents[1] / "environments" / "broken"
FAULTS = ("plan is deterministic", "splits are disjoint", "feedback is bounded and free of private data")


def test_a_broken_image_fails_the_authors_test_naming_each_failed_check(engine, tmp_path: Path):
    (tmp_path / "test_image.py").write_text("def test_conformance(epg_check_report):\n    pass\n")
    with subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--epg-package", str(BROKEN_PACKAGE)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ) as process:
        stdout, stderr = process.communicate(timeout=900)
    result = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-2000:]
    assert "3 conformance check(s) failed" in result.stdout, result.stdout[-3000:]
    for fault in FAULTS:
        assert f"Broken-v0: {fault}: " in result.stdout
    assert "Broken-v0: feedback is bounded and free of private data: feedback contains a hidden Episode payload" in result.stdout
    # Every container the plugin started carries its process as owner (other test files may run the plugin at the
    # same time, so the check is scoped to this process); it removed all of them.
    owner = f"{socket.gethostname()}:{process.pid}"
    assert engine.client.containers.list(all=True, filters={"label": selector(owner=owner)}, sparse=True) == []
