"""check_benchmark(): an in-process conformance check of a Benchmark, returning a ConformanceReport of findings (never raising for them).

It checks the Benchmark's shape (the protocol, its spec), its planning (the right number of EpisodeSpecs, the same
ones twice, for each split), replays each BenchmarkFixture twice and compares the two replays, and, when a Policy is
given, runs a few Episodes with it and builds Feedback from them. Everything runs in this process, unisolated.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import BenchmarkError, EvaluationError
from ..policy import PolicyContext, PolicyValue, copy_policy_value
from ..program import Program
from ..results import Feedback
from ._episodes import PolicySource, callable_source, derive_policy_seed, program_source, run_episode
from .benchmark import Benchmark, BenchmarkSpec
from .environment import Environment, EpisodeRecord, EpisodeSpec, Step

SPLITS = ("train", "validation", "test")


@dataclass(frozen=True, slots=True)
class BenchmarkFixture:
    """An EpisodeSpec and a fixed sequence of Actions to replay in it. Raises TypeError when episode is not an EpisodeSpec."""

    episode: EpisodeSpec
    actions: tuple[PolicyValue, ...]

    def __post_init__(self) -> None:
        if type(self.episode) is not EpisodeSpec:
            raise TypeError("episode must be EpisodeSpec")
        object.__setattr__(self, "actions", tuple(copy_policy_value(action) for action in self.actions))


@dataclass(frozen=True, slots=True)
class ConformanceIssue:
    """One finding: a stable dotted code (`environment.nondeterministic`) and a message."""

    code: str
    message: str


@dataclass(frozen=True, slots=True)
class ConformanceReport:
    """Every finding of one check_benchmark() call; it passed when there is none."""

    benchmark_id: str
    issues: tuple[ConformanceIssue, ...]

    @property
    def passed(self) -> bool:
        """True when there is no finding."""
        return not self.issues

    def raise_for_errors(self) -> None:
        """Raise BenchmarkError naming every finding's code, if there is any."""
        if self.issues:
            raise BenchmarkError("Benchmark conformance failed: " + ", ".join(issue.code for issue in self.issues))


def check_benchmark(
    benchmark: Benchmark,
    *,
    fixtures: Sequence[BenchmarkFixture] = (),
    policy: Program | Callable[[PolicyContext], object] | None = None,
    episodes: int = 2,
    seed: int = 0,
    split: str = "validation",
) -> ConformanceReport:
    """Check benchmark in this process and return the report.

    fixtures are replayed twice each. policy, a Program or a `make_policy(context)` callable, is run for `episodes`
    Episodes of `split` planned with `seed`, and Feedback is built from their records. Only a TypeError for a policy of
    another kind is raised; everything the Benchmark does wrong is a finding.
    """
    given: object = policy
    if given is not None and type(given) is not Program and not callable(given):
        raise TypeError("policy must be a Program, a make_policy callable or None")
    subject: object = benchmark
    if not isinstance(subject, Benchmark):
        return ConformanceReport("<invalid>", (ConformanceIssue("benchmark.interface", "the object does not implement the Benchmark protocol"),))
    issues: list[ConformanceIssue] = []
    try:
        spec = benchmark.spec
    except Exception as error:
        return ConformanceReport("<invalid>", (ConformanceIssue("benchmark.spec", f"spec raised {type(error).__name__}"),))
    if type(spec) is not BenchmarkSpec:
        return ConformanceReport("<invalid>", (ConformanceIssue("benchmark.spec", "spec is not a BenchmarkSpec"),))
    issues.extend(_check_planning(benchmark, seed))
    for index, fixture in enumerate(fixtures):
        issues.extend(_check_fixture(benchmark, fixture, index))
    if policy is not None:
        issues.extend(_check_policy_episodes(benchmark, spec, policy, episodes=episodes, seed=seed, split=split))
    return ConformanceReport(spec.id, tuple(issues))


def _check_planning(benchmark: Benchmark, seed: int) -> list[ConformanceIssue]:
    issues: list[ConformanceIssue] = []
    for split in SPLITS:
        try:
            first = tuple(benchmark.episodes(split, seed=seed, count=3))
            second = tuple(benchmark.episodes(split, seed=seed, count=3))
        except Exception as error:
            issues.append(ConformanceIssue("benchmark.episodes", f"episodes({split!r}) raised {type(error).__name__}"))
            continue
        if len(first) != 3 or any(type(episode) is not EpisodeSpec for episode in first):
            issues.append(ConformanceIssue("benchmark.episodes", f"episodes({split!r}, count=3) did not return exactly 3 EpisodeSpecs"))
        elif first != second:
            issues.append(ConformanceIssue("benchmark.nondeterministic_plan", f"episodes({split!r}) planned different Episodes for the same seed"))
    return issues


def _check_fixture(benchmark: Benchmark, fixture: BenchmarkFixture, index: int) -> list[ConformanceIssue]:
    issues: list[ConformanceIssue] = []
    replays = [_replay(benchmark, fixture, index, issues) for _ in range(2)]
    if replays[0] is not None and replays[1] is not None and replays[0] != replays[1]:
        issues.append(ConformanceIssue("environment.nondeterministic", f"fixture {index} replayed differently the second time"))
    return issues


def _replay(benchmark: Benchmark, fixture: BenchmarkFixture, index: int, issues: list[ConformanceIssue]) -> tuple[PolicyValue, tuple[Step, ...]] | None:
    environment: object = None
    replay: tuple[PolicyValue, tuple[Step, ...]] | None = None
    try:
        environment = benchmark.make_environment(fixture.episode)
        if not isinstance(environment, Environment):
            raise TypeError("make_environment() did not return an Environment")
        initial = copy_policy_value(environment.reset())
        steps: list[Step] = []
        for action in fixture.actions:
            if steps and steps[-1].done:
                raise ValueError("the fixture has an Action after the Episode ended")
            step = environment.step(copy_policy_value(action))
            if type(step) is not Step:
                raise TypeError("step() did not return a Step")
            steps.append(step)
        replay = (initial, tuple(steps))
    except Exception as error:
        issues.append(ConformanceIssue("environment.replay", f"fixture {index} could not be replayed ({type(error).__name__})"))
    finally:
        if isinstance(environment, Environment):
            try:
                environment.close()
            except Exception as error:
                issues.append(ConformanceIssue("environment.close", f"fixture {index}'s Environment could not be closed ({type(error).__name__})"))
                replay = None
    return replay


def _check_policy_episodes(
    benchmark: Benchmark,
    spec: BenchmarkSpec,
    policy: Program | Callable[[PolicyContext], object],
    *,
    episodes: int,
    seed: int,
    split: str,
) -> list[ConformanceIssue]:
    try:
        plan = tuple(benchmark.episodes(split, seed=seed, count=episodes))
    except Exception as error:
        return [ConformanceIssue("benchmark.episodes", f"episodes({split!r}) raised {type(error).__name__}")]
    source = program_source(policy) if isinstance(policy, Program) else callable_source(policy)
    try:
        records = _run_all(benchmark, spec, plan, source, seed)
    except EvaluationError as error:
        return [ConformanceIssue("environment.episode", str(error))]
    try:
        feedback = benchmark.feedback(tuple(records))
    except Exception as error:
        return [ConformanceIssue("benchmark.feedback", f"feedback() raised {type(error).__name__}")]
    if type(feedback) is not Feedback:
        return [ConformanceIssue("benchmark.feedback", "feedback() did not return Feedback")]
    return []


def _run_all(benchmark: Benchmark, spec: BenchmarkSpec, plan: tuple[EpisodeSpec, ...], policies: PolicySource, seed: int) -> list[EpisodeRecord]:
    return [
        run_episode(benchmark.make_environment, spec, episode, policies, policy_seed=derive_policy_seed(seed, index), timeout_seconds=60.0)
        for index, episode in enumerate(plan)
    ]


__all__ = ["BenchmarkFixture", "ConformanceIssue", "ConformanceReport", "check_benchmark"]
