"""The package itself: its entry points make both Benchmarks, it registers the Fetch ids, and it prints nothing on stdout."""

from __future__ import annotations

import tomllib
from pathlib import Path

from epg_sdk.testing import entry_point_ids, locked_pins, run_python

PACKAGE_ROOT = Path(__file__).resolve().parents[1]

USE_BOTH = """
import epg_env_fetch
for make in (epg_env_fetch.make_push_benchmark, epg_env_fetch.make_pick_and_place_benchmark):
    benchmark = make()
    environment = benchmark.make_environment(benchmark.plan("train", 0, 1)[0])
    environment.reset()
    environment.step(benchmark.validate_action([0.0, 0.0, 0.0, 0.0]))
    environment.summary()
    environment.close()
"""

REGISTRY = """
import gymnasium
before = {"FetchPush-v4", "FetchPickAndPlace-v4"} & set(gymnasium.registry)
import epg_env_fetch
after = {"FetchPush-v4", "FetchPickAndPlace-v4"} & set(gymnasium.registry)
print(sorted(before), sorted(after))
"""


def test_the_entry_points_make_the_benchmarks_they_name() -> None:
    assert entry_point_ids(PACKAGE_ROOT) == {"FetchPush-v4": "FetchPush-v4", "FetchPickAndPlace-v4": "FetchPickAndPlace-v4"}
    project = tomllib.loads((PACKAGE_ROOT / "pyproject.toml").read_text())
    assert project["tool"]["epg"] == {
        "image": "env-fetch", "module": "epg_env_fetch", "baseline": "baseline", "no_deps": ["gymnasium-robotics"],
        "aliases": {"fetchpush": "FetchPush-v4", "fetchpickandplace": "FetchPickAndPlace-v4"}}


def test_the_lock_pins_the_published_versions_and_no_gl_or_unused_distribution() -> None:
    pins = locked_pins(PACKAGE_ROOT)
    assert (pins["gymnasium"], pins["gymnasium-robotics"], pins["mujoco"], pins["numpy"]) == ("1.3.0", "1.4.2", "3.9.0", "2.4.6")
    assert not {"jinja2", "markupsafe", "setuptools"} & {name.lower() for name in pins}


def test_importing_the_package_registers_the_fetch_ids() -> None:
    result = run_python(REGISTRY, PACKAGE_ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[] ['FetchPickAndPlace-v4', 'FetchPush-v4']"


def test_using_both_benchmarks_prints_nothing_on_stdout() -> None:
    result = run_python(USE_BOTH, PACKAGE_ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
