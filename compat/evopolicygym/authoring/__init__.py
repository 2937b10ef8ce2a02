"""The authoring interface of Benchmark packages: everything a package imports to describe, run and judge Episodes."""

from ..artifacts import Artifact, ArtifactRetention
from ..results import Feedback
from .benchmark import Benchmark, BenchmarkSpec, ScoreDirection
from .environment import Environment, EpisodeRecord, EpisodeSpec, InvalidAction, Step, Transition
from .testing import BenchmarkFixture, ConformanceIssue, ConformanceReport, check_benchmark

__all__ = [
    "Artifact",
    "ArtifactRetention",
    "Benchmark",
    "BenchmarkFixture",
    "BenchmarkSpec",
    "ConformanceIssue",
    "ConformanceReport",
    "Environment",
    "EpisodeRecord",
    "EpisodeSpec",
    "Feedback",
    "InvalidAction",
    "ScoreDirection",
    "Step",
    "Transition",
    "check_benchmark",
]
