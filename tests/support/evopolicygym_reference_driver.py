"""Inside a reference image: run EvoPolicyGym's own `evaluate` on one package's baseline and print the result as JSON.

Run as a script (`python3 driver.py MODULE SPLIT SEED COUNT TIMEOUT`) by tests/support/evopolicygym_reference.py, in a
container holding their kernel and the package; never imported by the tests. It prints exactly one JSON object:
the Benchmark id and digests, the Episodes their kernel planned (environment seeds, scenarios as repr) and the policy
seeds it derives, each Episode's status, steps, failure and return in plan order, the score, or the EvaluationError
that stopped the Evaluation.
"""

from __future__ import annotations

import importlib
import inspect
import json
import sys
import time


def _benchmark_class(module: object) -> type:
    """The one class the package exports whose name ends in Benchmark (their packages export exactly one)."""
    names = [name for name in getattr(module, "__all__", ()) if name.endswith("Benchmark")]
    classes = [getattr(module, name) for name in names if inspect.isclass(getattr(module, name))]
    if len(classes) != 1:
        raise SystemExit(f"expected one Benchmark class in {module!r}'s __all__, found {names}")
    return classes[0]


def main(module_name: str, split: str, seed: int, count: int, timeout: float) -> dict[str, object]:
    from evopolicygym import EvaluationConfig, evaluate
    from evopolicygym.errors import EvaluationError
    from evopolicygym.evaluation._service import _derive_policy_seed
    from evopolicygym.execution import ProcessExecution

    module = importlib.import_module(module_name)
    benchmark = _benchmark_class(module)()  # the default profile
    spec = benchmark.spec
    planned = tuple(benchmark.episodes(split, seed=seed, count=count))
    document: dict[str, object] = {
        "benchmark_id": spec.id,
        "environment_digest": spec.environment_digest,
        "split": split,
        "seed": seed,
        "count": count,
        "environment_seeds": [episode.environment_seed for episode in planned],
        "scenarios": [repr(episode.scenario) for episode in planned],
        "policy_seeds": [_derive_policy_seed(seed, index) for index in range(count)],
    }
    program = module.baseline_program()
    document["program_digest"] = program.digest
    started = time.monotonic()
    try:
        result = evaluate(program, benchmark, execution=ProcessExecution.unsafe(),
                          config=EvaluationConfig(split=split, episodes=count, seed=seed, episode_timeout_seconds=timeout))
    except EvaluationError as exc:
        document.update(status="evaluation_failed", error=str(exc), seconds=time.monotonic() - started)
        return document
    document.update(
        status="evaluated",
        seconds=time.monotonic() - started,
        score=result.feedback.score,
        episodes=[{"status": e.status, "reward": e.reward, "steps": e.steps, "failure": e.failure} for e in result.episodes],
        returns=[e.reward for e in result.episodes],
    )
    return document


if __name__ == "__main__":
    name, split_, seed_, count_, timeout_ = sys.argv[1:6]
    print(json.dumps(main(name, split_, int(seed_), int(count_), float(timeout_))))
