"""The package's metadata and its promise that state observations need neither a display nor GL."""

from __future__ import annotations

import tomllib
from pathlib import Path

from epg_sdk.testing import entry_point_ids, locked_pins, run_python

PACKAGE = Path(__file__).resolve().parents[1]
IDS = ["HalfCheetah-v5", "Ant-v5", "Pusher-v5", "Reacher-v5"]


def test_the_entry_points_and_aliases_name_the_four_benchmarks() -> None:
    project = tomllib.loads((PACKAGE / "pyproject.toml").read_text())
    assert project["project"]["name"] == "epg-env-mujoco"
    assert list(project["project"]["entry-points"]["epg.benchmarks"]) == IDS
    assert entry_point_ids(PACKAGE) == {benchmark_id: benchmark_id for benchmark_id in IDS}
    epg = project["tool"]["epg"]
    assert (epg["image"], epg["module"], epg["baseline"]) == ("env-mujoco", "epg_env_mujoco", "baseline")
    assert epg["aliases"] == {"halfcheetah": "HalfCheetah-v5", "ant": "Ant-v5", "pusher": "Pusher-v5", "reacher": "Reacher-v5"}


def test_the_lock_pins_the_published_versions_and_no_gl_library() -> None:
    pins = locked_pins(PACKAGE)
    assert (pins["gymnasium"], pins["mujoco"], pins["numpy"]) == ("1.3.0", "3.9.0", "2.4.6")
    assert not {"pyopengl-accelerate", "osmesa", "egl"} & set(pins)


def test_the_benchmarks_make_and_step_without_a_display_or_a_gl_backend() -> None:
    script = (
        "import sys, numpy as np, epg_env_mujoco as m\n"
        "for make in (m.make_halfcheetah_benchmark, m.make_ant_benchmark, m.make_pusher_benchmark, m.make_reacher_benchmark):\n"
        "    b = make(); e = b.make_environment(b.plan('train', 0, 1)[0]); e.reset()\n"
        "    e.step(np.zeros(b.spec.action_space['shape'], np.float32)); e.close()\n"
        "print('OpenGL' in sys.modules, 'MUJOCO_GL' in __import__('os').environ)\n"
    )
    result = run_python(script, PACKAGE, unset=("DISPLAY", "WAYLAND_DISPLAY", "MUJOCO_GL", "PYOPENGL_PLATFORM"))
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout == "False False\n"  # no GL binding was imported, nothing printed on stdout
