"""A pixel grid Benchmark with uint8 frames, per-step frame metrics and path artifacts, written against EvoPolicyGym 0.3."""

from .baseline import baseline_program
from .benchmark import PixelsBenchmark

__all__ = ["PixelsBenchmark", "baseline_program"]
