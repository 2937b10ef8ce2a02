"""The package itself: its entry points make both Benchmarks, and using them prints nothing on stdout."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tomllib
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[1]

USE_BOTH = """
import epg_env_box2d
for make in (epg_env_box2d.make_bipedal_benchmark, epg_env_box2d.make_carracing_benchmark):
    benchmark = make()
    environment = benchmark.make_environment(benchmark.plan("train", 0, 1)[0])
    environment.reset()
    environment.step(benchmark.validate_action([0.0] * benchmark.spec.action_space["shape"][0]))
    environment.summary()
    environment.close()
"""


def quiet_environment() -> dict[str, str]:
    environment = {key: value for key, value in os.environ.items() if key not in ("PYGAME_HIDE_SUPPORT_PROMPT", "SDL_VIDEODRIVER", "DISPLAY")}
    return {**environment, "PYTHONPATH": os.pathsep.join([str(PACKAGE_ROOT), *sys.path])}


def test_the_entry_points_make_the_benchmarks_they_name() -> None:
    project = tomllib.loads((PACKAGE_ROOT / "pyproject.toml").read_text())
    entries = project["project"]["entry-points"]["epg.benchmarks"]
    assert set(entries) == {"BipedalWalker-v3", "CarRacing-v3"}
    for benchmark_id, entry in entries.items():
        module, _, factory = entry.partition(":")
        assert getattr(importlib.import_module(module), factory)().spec.id == benchmark_id
    assert project["tool"]["epg"] == {"image": "env-box2d", "module": "epg_env_box2d", "baseline": "baseline",
                                      "aliases": {"bipedal": "BipedalWalker-v3", "carracing": "CarRacing-v3"}}


def test_the_lock_pins_the_published_versions() -> None:
    pins = dict(line.split("==") for line in (PACKAGE_ROOT / "requirements.lock").read_text().splitlines() if line and not line.startswith("#"))
    assert (pins["gymnasium"], pins["box2d"], pins["numpy"]) == ("1.3.0", "2.3.10", "2.4.6")
    assert "pygame-ce" in pins and "pygame" not in pins and "box2d-py" not in pins


def test_using_both_benchmarks_prints_nothing_on_stdout_and_needs_no_display() -> None:
    result = subprocess.run([sys.executable, "-c", USE_BOTH], capture_output=True, text=True, env=quiet_environment(), timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""


def test_pygame_alone_would_print_its_banner() -> None:
    # The control of the test above: without the package setting the variable first, pygame speaks on stdout.
    result = subprocess.run([sys.executable, "-c", "import pygame"], capture_output=True, text=True, env=quiet_environment(), timeout=60)
    assert result.returncode == 0, result.stderr
    assert "pygame" in result.stdout
