"""A Benchmark whose Environment refuses out-of-range actions by raising InvalidAction from step (EvoPolicyGym 0.3)."""

from .baseline import baseline_program
from .benchmark import DialBenchmark

__all__ = ["DialBenchmark", "baseline_program"]
