"""The package itself: its entry points make both Benchmarks, and using them prints nothing on stdout."""

from __future__ import annotations

import tomllib
from pathlib import Path

from epg_sdk.testing import entry_point_ids, locked_pins, run_python

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
UNSET = ("PYGAME_HIDE_SUPPORT_PROMPT", "SDL_VIDEODRIVER", "DISPLAY")


def test_the_entry_points_make_the_benchmarks_they_name() -> None:
    assert entry_point_ids(PACKAGE_ROOT) == {"BipedalWalker-v3": "BipedalWalker-v3", "CarRacing-v3": "CarRacing-v3"}
    project = tomllib.loads((PACKAGE_ROOT / "pyproject.toml").read_text())
    assert project["tool"]["epg"] == {"image": "env-box2d", "module": "epg_env_box2d", "baseline": "baseline",
                                      "aliases": {"bipedal": "BipedalWalker-v3", "carracing": "CarRacing-v3"}}


def test_the_lock_pins_the_published_versions() -> None:
    pins = locked_pins(PACKAGE_ROOT)
    assert (pins["gymnasium"], pins["box2d"], pins["numpy"]) == ("1.3.0", "2.3.10", "2.4.6")
    assert "pygame-ce" in pins and "pygame" not in pins and "box2d-py" not in pins


def test_using_both_benchmarks_prints_nothing_on_stdout_and_needs_no_display() -> None:
    result = run_python(USE_BOTH, PACKAGE_ROOT, unset=UNSET)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""


def test_pygame_alone_would_print_its_banner() -> None:
    # The control of the test above: without the package setting the variable first, pygame speaks on stdout.
    result = run_python("import pygame", PACKAGE_ROOT, unset=UNSET, timeout_s=60)
    assert result.returncode == 0, result.stderr
    assert "pygame" in result.stdout
