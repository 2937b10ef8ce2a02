"""The Benchmark names at the package's top level (`evopolicygym.Benchmark`), defined in evopolicygym.authoring.benchmark."""

from .authoring.benchmark import Benchmark, BenchmarkSpec

__all__ = ["Benchmark", "BenchmarkSpec"]
