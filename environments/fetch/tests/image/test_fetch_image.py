"""The env-fetch image, tested the way an author tests theirs: with the epg pytest plugin, and `env test` on that image.

The image is the one `epg-orchestrate images build env-fetch` makes (built here through the
image builder when `--epg-image` is not given). The plugin's `epg_baseline` runs the baseline
of an image holding exactly one Benchmark; this one holds two, so the baseline and the
uniform-random Program go through the sandbox with `epg-orchestrate env test IMAGE --baseline
DIR`, which checks every Benchmark of that very image. Its containers carry a scope label of
this module's own, and none may be left afterwards.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.docker

BENCHMARKS = ("FetchPickAndPlace-v4", "FetchPush-v4")  # in sorted order, as the image lists them
SANDBOX_CHECK = "baseline runs through the sandbox (3 Episodes)"


@pytest.fixture(scope="module")
def epg_package_dir() -> Path:
    """This package, whatever directory pytest runs from."""
    return Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def env_test(epg_image: str, epg_package_dir: Path):
    """Return run(program_dir) -> the JSON report of `env test IMAGE --baseline program_dir -n 3`; checks for leftovers."""
    scope = f"test-fetch-{secrets.token_hex(4)}"

    def run(program: Path) -> dict:
        result = subprocess.run(
            [sys.executable, "-m", "orchestrator.cli.app", "env", "test", epg_image, "--baseline", str(program), "-n", "3", "--json",
             "--environments", str(epg_package_dir.parent)],
            capture_output=True, text=True, timeout=1200, env={**os.environ, "EPG_SCOPE": scope},
        )
        assert result.returncode in (0, 1), result.stderr[-3000:]
        return json.loads(result.stdout)

    yield run
    leftovers = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=org.evopolicygym.scope={scope}"],
                               capture_output=True, text=True, check=True).stdout.split()
    assert leftovers == [], f"env test left containers {leftovers}"


def test_every_conformance_check_passes_inside_the_image(epg_check_report):
    assert epg_check_report.benchmarks == BENCHMARKS
    assert all(len(report.checks) >= 6 for report in epg_check_report.reports)


@pytest.mark.parametrize("program", ["baseline", "random"])
def test_the_program_completes_every_episode_of_both_benchmarks_through_the_sandbox(env_test, epg_image, epg_package_dir, program):
    report = env_test(epg_package_dir / program)
    assert report["image"] == epg_image and report["benchmarks"] == list(BENCHMARKS)
    assert report["ok"] is True, [c for c in report["checks"] if not c["ok"]]
    sandbox = {c["benchmark"]: c["detail"] for c in report["checks"] if c["name"] == SANDBOX_CHECK}
    assert set(sandbox) == set(BENCHMARKS)
    assert all(detail.startswith("score ") for detail in sandbox.values())
