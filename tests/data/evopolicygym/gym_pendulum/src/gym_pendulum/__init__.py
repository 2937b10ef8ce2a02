"""Gymnasium's Pendulum-v1 on a 50-step horizon, written against EvoPolicyGym 0.3's authoring interface."""

from .baseline import baseline_program
from .benchmark import PendulumBenchmark

__all__ = ["PendulumBenchmark", "baseline_program"]
