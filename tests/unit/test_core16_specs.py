"""The published Core16 protocol as ready specs: examples/core16/<benchmark>.yaml."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.images.catalogue import discover, resolve_benchmark
from orchestrator.run.spec import load_spec

REPO = Path(__file__).resolve().parents[2]
SPECS = sorted((REPO / "examples" / "core16").glob("*.yaml"))
# The sixteen Benchmarks of the published suite.
PUBLISHED = {"Acrobot-v1", "MountainCarContinuous-v0", "BipedalWalker-v3", "CarRacing-v3", "HalfCheetah-v5", "Ant-v5", "Pusher-v5",
             "Reacher-v5", "MiniGrid-DoorKey-16x16-v0", "MiniGrid-KeyCorridorS4R3-v0", "MiniGrid-FourRooms-v0",
             "MiniGrid-ObstructedMaze-1Q-v1", "parking-v0", "roundabout-v0", "FetchPush-v4", "FetchPickAndPlace-v4"}


def test_there_is_one_spec_per_benchmark_of_the_published_suite():
    assert {load_spec(path)[0].benchmark for path in SPECS} == PUBLISHED
    assert len(SPECS) == len({load_spec(path)[0].benchmark for path in SPECS})


@pytest.mark.parametrize("path", SPECS, ids=lambda path: path.stem)
def test_each_spec_is_the_published_protocol_on_a_known_benchmark(path):
    spec, _ = load_spec(path)
    budget = spec.budget
    assert (budget.episodes, budget.max_episodes_per_submission, budget.pool_size) == (128, 128, 1024)
    assert budget.max_submissions >= 128  # one Episode per Submission is allowed
    assert (spec.validation.episodes, spec.validation.candidates) == (64, "all_completed")
    assert spec.assessment.episodes == 256
    package, benchmark_id, _ = resolve_benchmark(spec.benchmark, discover())
    assert benchmark_id == spec.benchmark and package.root.parent.name == "environments"
