"""The package itself: its entry points make both Benchmarks, and importing it prints nothing on stdout."""

from __future__ import annotations

import tomllib
from pathlib import Path

from epg_sdk.testing import entry_point_ids, run_python

PACKAGE_ROOT = Path(__file__).resolve().parents[1]

USE_BOTH = """
import epg_env_highway
for make in (epg_env_highway.make_parking_benchmark, epg_env_highway.make_roundabout_benchmark):
    benchmark = make()
    environment = benchmark.make_environment(benchmark.plan("train", 0, 1)[0])
    environment.reset()
    environment.step(benchmark.validate_action(1 if benchmark.spec.id == "roundabout-v0" else [0.0, 0.0]))
    environment.summary()
    environment.close()
"""
UNSET = ("PYGAME_HIDE_SUPPORT_PROMPT",)


def test_the_entry_points_make_the_benchmarks_they_name() -> None:
    assert entry_point_ids(PACKAGE_ROOT) == {"parking-v0": "parking-v0", "roundabout-v0": "roundabout-v0"}
    project = tomllib.loads((PACKAGE_ROOT / "pyproject.toml").read_text())
    assert project["tool"]["epg"] == {"image": "env-highway", "module": "epg_env_highway", "baseline": "baseline",
                                      "no_deps": ["highway-env"], "aliases": {"parking": "parking-v0", "roundabout": "roundabout-v0"}}


def test_using_both_benchmarks_prints_nothing_on_stdout() -> None:
    result = run_python(USE_BOTH, PACKAGE_ROOT, unset=UNSET)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""


def test_pygame_alone_would_print_its_banner() -> None:
    # The control of the test above: without the package setting the variable first, pygame speaks on stdout.
    result = run_python("import pygame", PACKAGE_ROOT, unset=UNSET, timeout_s=60)
    assert result.returncode == 0, result.stderr
    assert "pygame" in result.stdout
