"""The env-box2d image, tested the way an author tests theirs: with the epg pytest plugin.

The image is the one `epg-orchestrate images build env-box2d` makes (built here through the
image builder when `--epg-image` is not given). It holds two Benchmarks, so the baseline runs
through the sandbox once per Benchmark with the plugin's `epg_baselines` fixture (each Episode in
a fresh hardened policy container). This is the family's one trip through the sandbox: what a
Program receives (uint8 frames, float32 vectors) and does with it is tested in-process in
`tests/test_box2d_programs.py`, through the same policy runtime and codec.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.docker

BENCHMARKS = ("BipedalWalker-v3", "CarRacing-v3")
CARRACING_END_CAUSES = {"fell", "finished", "left_playfield", "time_limit", "policy_failure"}
TRACE_LIMIT_CHARS = 2000


def test_every_conformance_check_passes_inside_the_image(epg_check_report):
    assert epg_check_report.benchmarks == BENCHMARKS
    assert all(len(report.checks) >= 6 for report in epg_check_report.reports)


def test_the_baseline_completes_every_episode_of_both_benchmarks_through_the_sandbox(epg_completed_baselines):
    assert set(epg_completed_baselines) == set(BENCHMARKS)
    for benchmark_id, feedback in epg_completed_baselines.items():
        assert [row["summary"]["end"] for row in feedback.values["episodes"]] != [], benchmark_id
    walker, racer = epg_completed_baselines["BipedalWalker-v3"], epg_completed_baselines["CarRacing-v3"]
    assert all(row["summary"]["distance_m"] > 10.0 for row in walker.values["episodes"])
    assert all(row["summary"]["tiles_visited"] > 0 for row in racer.values["episodes"])
    assert all(e.steps == 1000 for e in racer.episodes) and racer.score > 0.0


def test_the_road_followers_carracing_feedback_agrees_with_itself(epg_completed_baselines):
    """The package's Feedback of pixel Episodes run in the image: end causes, summaries, trace and the CSV artifact."""
    racer = epg_completed_baselines["CarRacing-v3"]
    values, count = racer.values, len(racer.episodes)
    assert values["policy_failures"] == 0 and [row["index"] for row in values["episodes"]] == list(range(count))
    assert sum(values["ends"].values()) == count and set(values["ends"]) == CARRACING_END_CAUSES
    for row in values["episodes"]:
        summary = row["summary"]
        assert summary["end"] in ("finished", "left_playfield", "time_limit") and summary["steps"] == row["steps"]
        assert 0 <= summary["tiles_visited"] <= summary["track_tiles"] and 0 <= summary["off_track_steps"] <= summary["steps"]
        assert isinstance(summary["trace"], str) and 0 < len(summary["trace"]) <= TRACE_LIMIT_CHARS
        assert summary["trace"].startswith("50 t")
    csv_header = racer.artifacts["episodes.csv"].decode().splitlines()[0]
    assert csv_header.endswith("end,tiles_visited,track_tiles,tiles_fraction,off_track_steps,off_track_fraction")


SHARED_MEMORY_PROBE = '''
import numpy as np


def shared_mappings():
    """The permissions of this process's mappings of the runner's observation memfd."""
    with open("/proc/self/maps") as maps:
        return [line.split()[1] for line in maps if "memfd:epg-observations" in line]


class Probe:
    def __init__(self, context):
        space = context.action_space
        self.action = np.asarray(space["low"], dtype=space["dtype"])
        self.frames = len(context.observation_space["shape"]) == 3
        mappings = shared_mappings()
        if self.frames and mappings != ["r--s"]:
            raise RuntimeError(f"a frame Benchmark without one read-only shared mapping: {mappings}")
        if not self.frames and mappings:
            raise RuntimeError(f"a vector Benchmark with a shared mapping: {mappings}")

    def act(self, observation):
        if self.frames and (observation.shape != (96, 96, 3) or not observation.flags.writeable):
            raise RuntimeError(f"a frame of shape {observation.shape}, writable {observation.flags.writeable}")
        observation[...] = 0  # the Program's own copy
        return self.action


def make_policy(context):
    return Probe(context)
'''


def test_carracing_frames_reach_the_policy_container_through_read_only_shared_memory(epg_env_test, tmp_path):
    """The runner offers a sealed memfd with Start; the runtime in the policy container maps it read-only (r--s) and
    every 96x96x3 frame arrives through it, while BipedalWalker's vector stays on the socket (no mapping)."""
    program = tmp_path / "probe"
    program.mkdir()
    (program / "policy.py").write_text(SHARED_MEMORY_PROBE)
    report = epg_env_test(program, episodes=1)
    sandbox = {c["benchmark"]: c for c in report["checks"] if c["name"].startswith("baseline runs through the sandbox")}
    assert set(sandbox) == set(BENCHMARKS)
    assert all(check["ok"] for check in sandbox.values()), sandbox
