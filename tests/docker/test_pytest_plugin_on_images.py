"""The pytest plugin against real images: a broken image fails its author's test with every fault named."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# (Not imported from conftest: with the environment packages' conftests collected too, `conftest` may name another.)
BROKEN_PACKAGE = Path(__file__).resolve().parents[1] / "environments" / "broken"
FAULTS = ("plan is deterministic", "splits are disjoint", "feedback is bounded and free of private data")


def test_a_broken_image_fails_the_authors_test_naming_each_failed_check(engine, tmp_path: Path):
    (tmp_path / "test_image.py").write_text("def test_conformance(epg_check_report):\n    pass\n")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--epg-package", str(BROKEN_PACKAGE)],
        cwd=tmp_path, capture_output=True, text=True, timeout=900, check=False,
    )
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-2000:]
    assert "3 conformance check(s) failed" in result.stdout, result.stdout[-3000:]
    for fault in FAULTS:
        assert f"Broken-v0: {fault}: " in result.stdout
    assert "Broken-v0: feedback is bounded and free of private data: feedback contains a hidden Episode payload" in result.stdout
    # The plugin alone starts containers through testcontainers in this run; it removed all of them.
    assert engine.client.containers.list(all=True, filters={"label": ["org.testcontainers=true"]}, sparse=True) == []
