"""Named lists of Benchmarks a suite may use, and the family each Benchmark belongs to in the published tables."""

from __future__ import annotations

# The published Core16 suite, in the order of its tables, with the family of each Benchmark.
CORE16: tuple[tuple[str, str], ...] = (
    ("Acrobot-v1", "classic control"),
    ("MountainCarContinuous-v0", "classic control"),
    ("BipedalWalker-v3", "Box2D"),
    ("CarRacing-v3", "Box2D"),
    ("Reacher-v5", "MuJoCo"),
    ("HalfCheetah-v5", "MuJoCo"),
    ("Ant-v5", "MuJoCo"),
    ("Pusher-v5", "MuJoCo"),
    ("MiniGrid-DoorKey-16x16-v0", "MiniGrid"),
    ("MiniGrid-KeyCorridorS4R3-v0", "MiniGrid"),
    ("MiniGrid-FourRooms-v0", "MiniGrid"),
    ("MiniGrid-ObstructedMaze-1Q-v1", "MiniGrid"),
    ("parking-v0", "highway-env"),
    ("roundabout-v0", "highway-env"),
    ("FetchPush-v4", "Fetch"),
    ("FetchPickAndPlace-v4", "Fetch"),
)

PRESETS: dict[str, tuple[str, ...]] = {"core16": tuple(benchmark for benchmark, _ in CORE16)}

FAMILIES: dict[str, str] = {**dict(CORE16), "CartPole-v1": "classic control"}


def family_of(benchmark_id: str, image: str) -> str:
    """The Benchmark's family: the published one, else its environment image's name without `env-`."""
    return FAMILIES.get(benchmark_id) or image.removeprefix("env-")
