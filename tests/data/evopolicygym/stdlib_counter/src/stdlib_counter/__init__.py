"""A counter Benchmark on the standard library alone, written against EvoPolicyGym 0.3's authoring interface."""

from .baseline import baseline_program
from .benchmark import CounterBenchmark

__all__ = ["CounterBenchmark", "baseline_program"]
