"""Running Episodes in the calling process, with no isolation: the Episode loop shared by evaluate() and check_benchmark().

A Policy run here has the authority of the calling process; it cannot be stopped mid-call, so a deadline is checked
after each call returns. Isolated evaluation, with enforced limits, is `epg-orchestrate evaluate`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import EvaluationError
from ..policy import Policy, PolicyContext, copy_policy_value
from ..program import Program
from ..results import EpisodeSummary, PolicyFailureCode
from .benchmark import BenchmarkSpec
from .environment import Environment, EpisodeRecord, EpisodeSpec, InvalidAction, Step, Transition

PolicyFactory = Callable[[PolicyContext], object]
_POLICY_SEED_DOMAIN = b"evopolicygym/policy-seed/v1\x00"


def derive_policy_seed(seed: int, index: int) -> int:
    """Return the policy seed of the Episode at index of a plan made with seed: the first 8 bytes (big-endian) of a domain-tagged SHA-256 of both."""
    material = _POLICY_SEED_DOMAIN + seed.to_bytes(8, "big") + index.to_bytes(8, "big")
    return int.from_bytes(hashlib.sha256(material).digest()[:8], "big")


@contextmanager
def program_policies(program: Program) -> Iterator[PolicyFactory]:
    """Yield a factory that makes one Policy per call from the Program's `policy.py:make_policy`, importing the Program afresh each time.

    The Program is written to a temporary directory that is removed on exit; its modules are imported under private
    names and removed from sys.modules after each Policy is made, so module state does not carry from one Episode to the
    next. A failing import or make_policy raises whatever it raised.
    """
    with tempfile.TemporaryDirectory(prefix="evopolicygym-program-") as scratch:
        root = Path(scratch) / "program"
        program.write_to(root)
        counter = iter(range(sys.maxsize))

        def make(context: PolicyContext) -> object:
            return _import_and_make(root, f"_evopolicygym_program_{next(counter)}", context)

        yield make


def _import_and_make(root: Path, name: str, context: PolicyContext) -> object:
    before = set(sys.modules)
    sys.path.insert(0, str(root))
    try:
        spec = importlib.util.spec_from_file_location(name, root / "policy.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module.make_policy(context)
    finally:
        sys.path.remove(str(root))
        for added in set(sys.modules) - before:
            origin = getattr(sys.modules[added], "__file__", None) or ""
            if added == name or origin.startswith(str(root)):
                del sys.modules[added]


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
    policies: PolicyFactory,
    *,
    policy_seed: int,
    timeout_seconds: float,
    clock: Callable[[], float] = time.monotonic,
) -> EpisodeRecord:
    """Run one Episode in this process and return its record; the Policy's own failures become its policy_failure.

    A Policy that raises (when made or acting) fails with `exception`, one that returns something other than a
    PolicyValue with `protocol_error`, one past the Episode's deadline with `timeout`, and an Action the Environment
    refuses with InvalidAction with `invalid_action`. Raises EvaluationError when the Benchmark or Environment fails:
    no Environment, a failing reset, step or close, a step that returns no Step, or an Episode not ended within
    max_episode_steps.
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
    policies: PolicyFactory,
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
        return EpisodeRecord(episode=episode, policy_seed=policy_seed, initial_observation=initial, transitions=tuple(transitions), policy_failure=failure)

    try:
        policy = policies(policy_context(spec, policy_seed))
    except Exception:
        return ended("exception")
    if clock() > deadline:
        return ended("timeout")
    if not isinstance(policy, Policy):
        return ended("protocol_error")
    observation = initial
    for _ in range(spec.max_episode_steps):
        try:
            answer = policy.act(copy_policy_value(observation))
        except Exception:
            return ended("exception")
        if clock() > deadline:
            return ended("timeout")
        try:
            action = copy_policy_value(answer)
        except (TypeError, ValueError):
            return ended("protocol_error")
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


__all__ = ["derive_policy_seed", "policy_context", "program_policies", "run_episode", "summarize"]
