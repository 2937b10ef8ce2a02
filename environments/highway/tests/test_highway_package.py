"""The package itself: its entry points make both Benchmarks, and importing it prints nothing on stdout."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tomllib
from pathlib import Path

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


def quiet_environment() -> dict[str, str]:
    environment = {key: value for key, value in os.environ.items() if key != "PYGAME_HIDE_SUPPORT_PROMPT"}
    return {**environment, "PYTHONPATH": os.pathsep.join([str(PACKAGE_ROOT), *sys.path])}


def test_the_entry_points_make_the_benchmarks_they_name() -> None:
    project = tomllib.loads((PACKAGE_ROOT / "pyproject.toml").read_text())
    entries = project["project"]["entry-points"]["epg.benchmarks"]
    assert set(entries) == {"parking-v0", "roundabout-v0"}
    for benchmark_id, entry in entries.items():
        module, _, factory = entry.partition(":")
        assert getattr(importlib.import_module(module), factory)().spec.id == benchmark_id
    assert project["tool"]["epg"] == {"image": "env-highway", "module": "epg_env_highway", "baseline": "baseline",
                                      "no_deps": ["highway-env"], "aliases": {"parking": "parking-v0", "roundabout": "roundabout-v0"}}


def test_using_both_benchmarks_prints_nothing_on_stdout() -> None:
    result = subprocess.run([sys.executable, "-c", USE_BOTH], capture_output=True, text=True, env=quiet_environment(), timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""


def test_pygame_alone_would_print_its_banner() -> None:
    # The control of the test above: without the package setting the variable first, pygame speaks on stdout.
    result = subprocess.run([sys.executable, "-c", "import pygame"], capture_output=True, text=True, env=quiet_environment(), timeout=60)
    assert result.returncode == 0, result.stderr
    assert "pygame" in result.stdout
