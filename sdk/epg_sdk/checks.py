"""Conformance checks of a Benchmark, as library code: a report, never an exception.

Every environment package's tests call check_benchmark; it is also the basis
of checking an environment image in isolation. cycle_actions and feedback_bytes
serve authors' own tests of the same properties.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from epg_sdk.benchmark import Benchmark, EpisodeRecord, Feedback, InvalidAction, as_artifact
from epg_sdk.evopolicygym.exact import encoder_for
from epg_sdk.planning import SPLITS
from epg_sdk.protocol import values

FEEDBACK_LIMIT_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class Check:
    name: str
    ok: bool
    detail: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckReport:
    benchmark_id: str
    checks: tuple[Check, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)

    def failures(self) -> list[str]:
        return [f"{c.name}: {c.detail}" for c in self.checks if not c.ok]


def check_benchmark(
    benchmark: Benchmark,
    *,
    action: Callable[[Any, int], Any] | None = None,
    plan_count: int = 16,
    steps: int = 30,
) -> CheckReport:
    """Run every conformance check on benchmark and return the report.

    action(observation, step) chooses the actions of the replay checks
    (default: the first valid action of the action space's description).

    An EvoPolicyGym Benchmark (program_abi "policy/v2") is checked with exact values, an Episode its
    Environment ends with InvalidAction is a trajectory like any other (their action spaces are free-form, so
    the default action may be refused), and its Feedback is built from Episodes it really ran, evidence and all.
    """
    spec_id = _safe(lambda: benchmark.spec.id, "?")
    choose = action or _default_action(benchmark)
    checks = [
        _run("spec is complete and encodable", lambda: _spec(benchmark)),
        _run("plan is deterministic", lambda: _deterministic_plan(benchmark, plan_count)),
        _run("splits are disjoint", lambda: _disjoint_splits(benchmark, plan_count)),
        _run("the same Episode replays identically", lambda: _replay(benchmark, choose, steps)),
        _run("observations are encodable values", lambda: _encodable(benchmark, choose, steps)),
        _run("feedback is bounded and free of private data", lambda: _feedback(benchmark, choose)),
    ]
    return CheckReport(benchmark_id=spec_id, checks=tuple(checks))


def cycle_actions(actions: Sequence[Any]) -> Callable[[Any, int], Any]:
    """An action function for check_benchmark: step i sends actions[i % len(actions)], whatever the observation."""
    chosen = list(actions)
    if not chosen:
        raise ValueError("cycle_actions needs at least one action")
    return lambda observation, step: chosen[step % len(chosen)]


def feedback_bytes(feedback: Feedback) -> int:
    """The size in bytes of a Feedback's values as the protocol encodes them: what FEEDBACK_LIMIT_BYTES bounds."""
    return len(values.encode(feedback.values).SerializeToString())


def _run(name: str, check: Callable[[], str | None]) -> Check:
    try:
        problem = check()
    except Exception as exc:  # a Benchmark's fault is a failed check, reported
        return Check(name=name, ok=False, detail=f"{type(exc).__name__}: {exc}")
    return Check(name=name, ok=problem is None, detail=problem or "")


def _safe(call: Callable[[], Any], default: Any) -> Any:
    try:
        return call()
    except Exception:
        return default


def _default_action(benchmark: Benchmark) -> Callable[[Any, int], Any]:
    space = benchmark.spec.action_space
    if benchmark.spec.program_abi == "policy/v2":
        return _exact_default_action(space)
    if space.get("type") == "discrete":
        return lambda observation, step: int(space.get("start", 0))
    if space.get("type") == "box":
        low, high = np.asarray(space["low"], dtype=float), np.asarray(space["high"], dtype=float)
        middle = np.where(np.isfinite(low) & np.isfinite(high), (low + high) / 2, 0.0)
        return lambda observation, step: middle.astype(space.get("dtype", "float32"))
    raise ValueError(f"give an action function for action spaces of type {space.get('type')!r}")


def _middle(bounds: Any) -> float | None:
    if isinstance(bounds, dict) and all(isinstance(bounds.get(key), (int, float)) for key in ("minimum", "maximum")):
        return (float(bounds["minimum"]) + float(bounds["maximum"])) / 2
    return None


def _exact_default_action(space: Any) -> Callable[[Any, int], Any]:
    """The default action of an EvoPolicyGym action space, as their packages describe them: the first of its
    "values", the middle of a float's bounds, the middle of each component of an array; else 0 (which their
    Environment may refuse: the Episode then ends with InvalidAction, still a trajectory to replay)."""
    action: Any = 0
    if isinstance(space, dict):
        listed = space.get("values")
        components = space.get("components")
        items = space.get("items")
        shape = space.get("shape")
        if isinstance(listed, list) and listed:
            action = listed[0]
        elif space.get("type") == "float" and _middle(space) is not None:
            action = _middle(space)
        elif isinstance(components, list) and components and all(_middle(c) is not None for c in components):
            action = [_middle(c) for c in components]
        elif _middle(items) is not None and isinstance(shape, list) and len(shape) == 1 and isinstance(shape[0], int):
            action = [_middle(items)] * shape[0]
    return lambda observation, step: action


def _spec(benchmark: Benchmark) -> str | None:
    spec = benchmark.spec
    if not spec.id or not spec.description:
        return "id and description must not be empty"
    if spec.horizon < 1:
        return "horizon must be at least 1"
    if spec.direction not in ("maximize", "minimize"):
        return f"direction {spec.direction!r} is neither maximize nor minimize"
    if not math.isfinite(spec.failure_return):
        return "failure_return must be finite"
    encode = encoder_for(spec.program_abi)
    for name in ("observation_space", "action_space", "parameters", "metadata"):
        encode(getattr(spec, name))
    return None


def _deterministic_plan(benchmark: Benchmark, count: int) -> str | None:
    for split in SPLITS:
        first, second = benchmark.plan(split, 7, count), benchmark.plan(split, 7, count)
        if first != second:
            return f"two plans of {split} with the same seed differ"
        if len(first) != count or len(set(first)) != count:
            return f"the {split} plan does not hold {count} distinct Episodes"
        if benchmark.plan(split, 8, count) == first:
            return f"the {split} plan ignores its seed"
    return None


def _disjoint_splits(benchmark: Benchmark, count: int) -> str | None:
    for seed in (0, 1, 12345):
        plans = {split: set(benchmark.plan(split, seed, count)) for split in SPLITS}
        for a, b in (("train", "validation"), ("train", "test"), ("validation", "test")):
            if plans[a] & plans[b]:
                return f"{a} and {b} share Episodes under seed {seed}"
    return None


def _trajectory(benchmark: Benchmark, payload: bytes, choose: Callable[[Any, int], Any], steps: int) -> list[Any]:
    exact = benchmark.spec.program_abi == "policy/v2"
    encode = encoder_for(benchmark.spec.program_abi)
    environment = benchmark.make_environment(payload)
    try:
        observation = environment.reset()
        trajectory: list[Any] = [encode(observation).SerializeToString(deterministic=True)]
        for step in range(steps):
            try:
                result = environment.step(benchmark.validate_action(choose(observation, step)))
            except InvalidAction:
                if not exact:
                    raise
                trajectory.append("invalid action")
                break
            observation = result.observation
            trajectory.append((encode(observation).SerializeToString(deterministic=True), result.reward, result.terminated, result.truncated))
            if result.terminated or result.truncated:
                break
        return trajectory
    finally:
        environment.close()


def _replay(benchmark: Benchmark, choose: Callable[[Any, int], Any], steps: int) -> str | None:
    payload = benchmark.plan("train", 3, 1)[0]
    if _trajectory(benchmark, payload, choose, steps) != _trajectory(benchmark, payload, choose, steps):
        return "two Episodes of the same payload and actions diverged"
    return None


def _encodable(benchmark: Benchmark, choose: Callable[[Any, int], Any], steps: int) -> str | None:
    _trajectory(benchmark, benchmark.plan("validation", 3, 1)[0], choose, steps)
    return None


def _feedback(benchmark: Benchmark, choose: Callable[[Any, int], Any]) -> str | None:
    payloads = benchmark.plan("test", 5, 4)
    if benchmark.spec.program_abi == "policy/v2":
        records = [_ran_record(benchmark, i, payload, choose, failed=i % 2 == 1) for i, payload in enumerate(payloads)]
    else:
        records = [
            EpisodeRecord(index=i, status="completed" if i % 2 == 0 else "policy_failure", failure=None if i % 2 == 0 else "timeout",
                          steps=10, total_reward=float(i), terminated=True, truncated=False)
            for i in range(len(payloads))
        ]
    feedback = benchmark.feedback(records)
    if not math.isfinite(feedback.score):
        return "the score is not finite"
    encoded = encoder_for(benchmark.spec.program_abi)(feedback.values).SerializeToString()
    if len(encoded) > FEEDBACK_LIMIT_BYTES:
        return f"feedback values take {len(encoded)} bytes, over {FEEDBACK_LIMIT_BYTES}"
    blob = encoded + b"".join(as_artifact(value).data for value in feedback.artifacts.values())
    leaked = [p for p in payloads if p and p in blob]
    if leaked:
        return "feedback contains a hidden Episode payload"
    return None


def _ran_record(benchmark: Benchmark, index: int, payload: bytes, choose: Callable[[Any, int], Any], *, failed: bool) -> EpisodeRecord:
    """The record of an Episode really run with choose, up to the horizon, with its evidence; a failed one stops
    after its first step and counts as the policy's timeout."""
    environment = benchmark.make_environment(payload)
    steps, total, terminated, truncated, failure = 0, 0.0, False, False, "timeout" if failed else None
    try:
        observation = environment.reset()
        while steps < (1 if failed else benchmark.spec.horizon):
            try:
                result = environment.step(benchmark.validate_action(choose(observation, steps)))
            except InvalidAction:
                failure = "invalid_action"
                break
            steps, total, observation = steps + 1, total + result.reward, result.observation
            terminated, truncated = result.terminated, result.truncated
            if terminated or truncated:
                break
        gather = getattr(environment, "evidence", None)
        evidence = gather(policy_seed=index) if gather is not None else b""
    finally:
        environment.close()
    if failure is not None:
        terminated = truncated = False
    return EpisodeRecord(index=index, status="completed" if failure is None else "policy_failure", failure=failure, steps=steps,
                         total_reward=total, terminated=terminated, truncated=truncated, evidence=evidence)


def report_json(report: CheckReport) -> dict[str, Any]:
    return {"benchmark": report.benchmark_id, "ok": report.ok,
            "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in report.checks]}


ENTRY_POINT_GROUP = "epg.benchmarks"


def installed_benchmarks() -> dict[str, str]:
    """Return the Benchmarks installed distributions register (id -> "module:factory"), from their entry points."""
    from importlib.metadata import entry_points

    return {entry.name: entry.value for entry in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)}


def main(argv: list[str] | None = None) -> int:
    """Inside an environment image: check the Benchmark --entry names (module:attribute, or an EvoPolicyGym class
    with ?profile=NAME, as the runner loads it); print the report as JSON.

    With --list instead, print {"benchmarks": {id: entry}} for the entry-point Benchmarks installed in the image.
    """
    parser = argparse.ArgumentParser(prog="epg-check-benchmark")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--entry")
    action.add_argument("--list", action="store_true")
    args = parser.parse_args(argv)
    if args.list:
        print(json.dumps({"benchmarks": installed_benchmarks()}))
        sys.stdout.flush()
        return 0
    from epg_sdk.evopolicygym.discovery import load

    benchmark = load(args.entry)
    report = check_benchmark(benchmark)
    print(json.dumps(report_json(report)))
    sys.stdout.flush()
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
