"""A drifting-point Benchmark with a typed Config(profile=...) and three profiles, written against EvoPolicyGym 0.3."""

from .baseline import baseline_program
from .benchmark import ProfiledBenchmark
from .config import PROFILES, ProfiledConfig

__all__ = ["PROFILES", "ProfiledBenchmark", "ProfiledConfig", "baseline_program"]
