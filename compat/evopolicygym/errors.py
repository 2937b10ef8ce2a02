"""The exceptions the evopolicygym interfaces raise for expected failures (a bad Program directory, a failed Benchmark)."""


class EvoPolicyGymError(Exception):
    """Base of every expected evopolicygym failure."""


class ProgramError(EvoPolicyGymError, ValueError):
    """A Program directory cannot be captured."""


class ProgramSourceError(ProgramError):
    """The directory is missing, is not a real directory, lacks policy.py, or holds a symlink, special file or non-canonical name."""


class ProgramLimitError(ProgramError):
    """The directory exceeds a ProgramLimits bound (files, bytes per file, total bytes)."""


class ProgramChangedError(ProgramError):
    """A file or the directory listing changed while it was being captured."""


class BenchmarkError(EvoPolicyGymError):
    """A Benchmark failed a conformance check or a trusted operation."""


class EvaluationError(EvoPolicyGymError):
    """An evaluation could not produce a result because of the Benchmark or the evaluator, not the Policy."""


__all__ = [
    "BenchmarkError",
    "EvaluationError",
    "EvoPolicyGymError",
    "ProgramChangedError",
    "ProgramError",
    "ProgramLimitError",
    "ProgramSourceError",
]
