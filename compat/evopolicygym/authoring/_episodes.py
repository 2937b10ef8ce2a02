"""Running Episodes in the calling process, with no isolation: the Episode loop shared by evaluate() and check_benchmark().

A Policy run here has the authority of the calling process and cannot be stopped mid-call: the Episode's deadline is
checked after each call returns. Isolated evaluation, with enforced limits, is `epg-orchestrate evaluate`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TypeVar

from ..errors import EvaluationError
from ..policy import Policy, PolicyContext, copy_policy_value
from ..program import Program
from ..results import EpisodeSummary, PolicyFailureCode
from .benchmark import BenchmarkSpec
from .environment import Environment, EpisodeRecord, EpisodeSpec, InvalidAction, Step, Transition

_Result = TypeVar("_Result")


@dataclass(frozen=True, slots=True)
class PolicyScope:
    """One Episode's Policy side: make() makes the Policy (and may raise), run(function) calls function as the Policy's code runs."""

    make: Callable[[], object]
    enter: Callable[[], AbstractContextManager[object]] = nullcontext

    def run(self, function: Callable[[], _Result]) -> _Result:
        """Return function() called inside the Policy's scope (its working directory and import root)."""
        with self.enter():
            return function()


# Opens one Episode's PolicyScope for a PolicyContext, and releases what it holds on exit.
PolicySource = Callable[[PolicyContext], AbstractContextManager[PolicyScope]]

_POLICY_SEED_DOMAIN = b"evopolicygym/policy-seed/v1\x00"
_SUBMISSION_MODULE = "_evopolicygym_submission"


def derive_policy_seed(seed: int, index: int) -> int:
    """Return the policy seed of the Episode at index of a plan made with seed: the first 8 bytes (big-endian) of a domain-tagged SHA-256 of both."""
    material = _POLICY_SEED_DOMAIN + seed.to_bytes(8, "big") + index.to_bytes(8, "big")
    return int.from_bytes(hashlib.sha256(material).digest()[:8], "big")


def program_source(program: Program) -> PolicySource:
    """Return a PolicySource that gives each Episode a fresh copy of program, imported afresh.

    While the Policy's code runs (its import, make_policy, each act) the copy is the working directory and the first
    entry of sys.path, as in a Policy process of its own; the Environment's code runs with neither. After the Episode
    the modules loaded from the copy are dropped from sys.modules and the copy is removed.
    """

    @contextmanager
    def episode(context: PolicyContext) -> Iterator[PolicyScope]:
        with tempfile.TemporaryDirectory(prefix="evopolicygym-episode-") as scratch:
            root = Path(scratch) / "program"
            program.write_to(root)
            modules = set(sys.modules)
            try:
                yield PolicyScope(make=lambda: _make_policy(root, context), enter=lambda: _inside(root))
            finally:
                for name in set(sys.modules) - modules:
                    origin = getattr(sys.modules[name], "__file__", None) or ""
                    if name == _SUBMISSION_MODULE or origin.startswith(str(root) + os.sep):
                        del sys.modules[name]

    return episode


def callable_source(make_policy: Callable[[PolicyContext], object]) -> PolicySource:
    """Return a PolicySource that makes each Episode's Policy by calling make_policy(context)."""

    @contextmanager
    def episode(context: PolicyContext) -> Iterator[PolicyScope]:
        yield PolicyScope(make=lambda: make_policy(context))

    return episode


@contextmanager
def _inside(root: Path) -> Iterator[None]:
    previous_directory = os.getcwd()
    sys.path.insert(0, str(root))
    os.chdir(root)
    try:
        yield
    finally:
        os.chdir(previous_directory)
        if str(root) in sys.path:
            sys.path.remove(str(root))


def _make_policy(root: Path, context: PolicyContext) -> object:
    spec = importlib.util.spec_from_file_location(_SUBMISSION_MODULE, root / "policy.py")
    if spec is None or spec.loader is None:
        raise ImportError("policy.py cannot be loaded")
    module = importlib.util.module_from_spec(spec)
    sys.modules[_SUBMISSION_MODULE] = module
    spec.loader.exec_module(module)
    make_policy = getattr(module, "make_policy", None)
    if not callable(make_policy):
        raise TypeError("policy.py must define a callable make_policy")
    return make_policy(context)


def policy_context(spec: BenchmarkSpec, policy_seed: int) -> PolicyContext:
    """Return the PolicyContext a Policy of this Benchmark is made with."""
    return PolicyContext(
        observation_space=spec.observation_space,
        action_space=spec.action_space,
        metadata=spec.metadata,
        environment_parameters=spec.environment_parameters,
        policy_seed=policy_seed,
    )


def run_episode(
    make_environment: Callable[[EpisodeSpec], object],
    spec: BenchmarkSpec,
    episode: EpisodeSpec,
    policies: PolicySource,
    *,
    policy_seed: int,
    timeout_seconds: float,
    clock: Callable[[], float] = time.monotonic,
) -> EpisodeRecord:
    """Run one Episode in this process and return its record; the Policy's own failures become its policy_failure.

    As in a Policy process of its own: a Policy that cannot be imported or made, or whose make_policy returns an object
    without act(), fails with `exception`; an act() that raises TypeError, ValueError or RecursionError, or returns
    something other than a PolicyValue, with `protocol_error`; an act() that raises anything else with `exception`; a
    Policy still running past the Episode's deadline with `timeout`; an Action the Environment refuses with
    InvalidAction with `invalid_action`. Raises EvaluationError when the Benchmark or Environment fails: no Environment,
    a failing reset, step or close, a step that returns no Step, or an Episode not ended within max_episode_steps.
    """
    deadline = clock() + timeout_seconds
    try:
        environment = make_environment(episode)
    except Exception as error:
        raise EvaluationError("the Benchmark could not make an Environment") from error
    if not isinstance(environment, Environment):
        raise EvaluationError("make_environment() returned something that is not an Environment")
    try:
        record = _play(environment, spec, episode, policies, policy_seed=policy_seed, deadline=deadline, clock=clock)
    finally:
        try:
            environment.close()
        except Exception as error:
            raise EvaluationError("the Environment could not be closed") from error
    return record


def _play(
    environment: Environment,
    spec: BenchmarkSpec,
    episode: EpisodeSpec,
    policies: PolicySource,
    *,
    policy_seed: int,
    deadline: float,
    clock: Callable[[], float],
) -> EpisodeRecord:
    try:
        initial = copy_policy_value(environment.reset())
    except Exception as error:
        raise EvaluationError("the Environment could not be reset") from error
    transitions: list[Transition] = []

    def ended(failure: PolicyFailureCode | None) -> EpisodeRecord:
        return EpisodeRecord(
            episode=episode, policy_seed=policy_seed, initial_observation=initial, transitions=tuple(transitions), policy_failure=failure
        )

    with policies(policy_context(spec, policy_seed)) as scope:
        try:
            policy = scope.run(scope.make)
        except (Exception, SystemExit):
            return ended("exception")
        if not isinstance(policy, Policy):
            return ended("exception")
        if clock() > deadline:
            return ended("timeout")
        observation = initial
        for _ in range(spec.max_episode_steps):
            try:
                action = copy_policy_value(scope.run(partial(policy.act, copy_policy_value(observation))))
            except (TypeError, ValueError, RecursionError):
                return ended("protocol_error")
            except (Exception, SystemExit):
                return ended("exception")
            if clock() > deadline:
                return ended("timeout")
            try:
                step = environment.step(action)
            except InvalidAction:
                return ended("invalid_action")
            except Exception as error:
                raise EvaluationError("the Environment's step failed") from error
            if type(step) is not Step:
                raise EvaluationError("the Environment's step returned something that is not a Step")
            transitions.append(Transition(action=action, step=step))
            if step.done:
                return ended(None)
            observation = step.observation
    raise EvaluationError(f"the Environment did not end the Episode within max_episode_steps ({spec.max_episode_steps})")


def summarize(record: EpisodeRecord) -> EpisodeSummary:
    """Return the public summary of an Episode: its total reward when completed, its failure code when the Policy failed."""
    if record.policy_failure is not None:
        return EpisodeSummary(status="policy_failed", reward=None, steps=record.steps, failure=record.policy_failure)
    return EpisodeSummary(status="completed", reward=record.total_reward, steps=record.steps)


__all__ = ["PolicyScope", "PolicySource", "callable_source", "derive_policy_seed", "policy_context", "program_source", "run_episode", "summarize"]
