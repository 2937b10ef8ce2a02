"""The EvoPolicyGym-style packages of tests/data/evopolicygym: laid out as EvoPolicyGym 0.3's, and each one run
in-process against our `evopolicygym` (compat/): plan, one Episode with the baseline, Feedback.

The packages are written here against EvoPolicyGym 0.3's documented authoring and Program interfaces (CI has no
checkout of it). The in-process runs need compat/ in the checkout; the stdlib counter uses 3.12-only syntax, so its
run needs Python 3.12 or later (the py313 images); the syntax test shows which sources need it.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import math
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES_DIR = REPO / "tests" / "data" / "evopolicygym"
COMPAT = REPO / "compat"
# package (= import module) -> its Benchmark class
BENCHMARKS = {
    "stdlib_counter": "CounterBenchmark",
    "gym_pendulum": "PendulumBenchmark",
    "pixels": "PixelsBenchmark",
    "strict_actions": "DialBenchmark",
    "profiled": "ProfiledBenchmark",
}
NEEDS_PYTHON_312 = {"stdlib_counter"}
FRAME_BYTES = 16 * 16 * 3


def _pyproject(name: str) -> dict[str, Any]:
    return tomllib.loads((PACKAGES_DIR / name / "pyproject.toml").read_text())


def _sdk_layer_gymnasium() -> str:
    lock = (REPO / "orchestrator" / "images" / "sdk-layer.lock").read_text().splitlines()
    (pin,) = [line for line in lock if line.startswith("gymnasium==")]
    return pin


def test_the_five_packages_are_the_ones_in_the_data_directory() -> None:
    assert sorted(p.name for p in PACKAGES_DIR.iterdir() if p.is_dir()) == sorted(BENCHMARKS)


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_each_package_is_an_installable_evopolicygym_distribution_laid_out_as_theirs(name: str) -> None:
    data = _pyproject(name)
    project = data["project"]
    assert project["requires-python"] == ">=3.12"
    assert project["dependencies"][0] == "evopolicygym==0.3.*"
    assert data["build-system"]["build-backend"] == "hatchling.build"
    assert data["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == [f"src/{name}"]
    assert "epg" not in data["tool"]  # their packages have no [tool.epg]: the catalogue must recognise them without
    source = PACKAGES_DIR / name / "src" / name
    assert {"__init__.py", "benchmark.py", "environment.py", "baseline.py"} <= {p.name for p in source.iterdir()}
    assert (source / "programs" / "baseline" / "policy.py").is_file()
    assert "make_policy" in (source / "programs" / "baseline" / "policy.py").read_text()
    readme = (PACKAGES_DIR / name / "README.md").read_text()
    assert "Observation" in readme and "Action" in readme


def test_the_gymnasium_package_pins_the_gymnasium_of_our_sdk_layer() -> None:
    assert _pyproject("gym_pendulum")["project"]["dependencies"][1:] == [_sdk_layer_gymnasium()]
    for name in set(BENCHMARKS) - {"gym_pendulum"}:
        assert _pyproject(name)["project"]["dependencies"] == ["evopolicygym==0.3.*"], name


def test_only_the_stdlib_counters_sources_need_python_3_12() -> None:
    """Every source parsed with Python 3.11's grammar: the `type` statements of the counter are the only failures."""
    sources = sorted(PACKAGES_DIR.rglob("*.py"))
    needing = set()
    for path in sources:
        try:
            ast.parse(path.read_text(), filename=str(path), feature_version=(3, 11))
        except SyntaxError:
            needing.add(path.relative_to(PACKAGES_DIR).as_posix())
    assert len(sources) >= 25
    assert needing == {
        "stdlib_counter/src/stdlib_counter/environment.py",
        "stdlib_counter/src/stdlib_counter/programs/baseline/policy.py",
        "stdlib_counter/src/stdlib_counter/programs/random/policy.py",
    }
    for path in needing:  # and each parses with 3.12's grammar where the running Python has it
        if sys.version_info >= (3, 12):
            ast.parse((PACKAGES_DIR / path).read_text(), feature_version=(3, 12))


# --- in-process runs against compat/ --------------------------------------------------------------------------------


def _forget(prefixes: tuple[str, ...]) -> dict[str, ModuleType]:
    gone = {name: module for name, module in sys.modules.items() if name.split(".")[0] in prefixes}
    for name in gone:
        del sys.modules[name]
    return gone


@pytest.fixture
def load(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Return a function importing one package (and compat's evopolicygym) fresh; both are forgotten afterwards, so
    another test file's `evopolicygym` is neither used here nor replaced by ours."""
    if not (COMPAT / "evopolicygym" / "__init__.py").is_file():
        pytest.skip("compat/evopolicygym (our evopolicygym) is not in this checkout yet: the packages cannot be imported")
    prefixes = ("evopolicygym", *BENCHMARKS)
    saved = _forget(prefixes)
    monkeypatch.syspath_prepend(str(COMPAT))

    def load_package(name: str) -> ModuleType:
        if name in NEEDS_PYTHON_312 and sys.version_info < (3, 12):
            pytest.skip(f"{name} uses `type` statements: it runs on Python 3.12+ (the py313 images), not {sys.version.split()[0]}")
        monkeypatch.syspath_prepend(str(PACKAGES_DIR / name / "src"))
        return importlib.import_module(name)

    yield load_package
    _forget(prefixes)
    sys.modules.update(saved)


def _policy(module: str, program: str, benchmark: Any, *, policy_seed: int) -> Any:
    """make_policy of a package's Program directory, given a PolicyContext as the Host would build it."""
    path = PACKAGES_DIR / module / "src" / module / "programs" / program / "policy.py"
    spec = importlib.util.spec_from_file_location(f"_epg_test_policy_{module}_{program}", path)
    assert spec is not None and spec.loader is not None
    policy_module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(policy_module)
    context_type = importlib.import_module("evopolicygym.policy").PolicyContext
    s = benchmark.spec
    context = context_type(observation_space=s.observation_space, action_space=s.action_space, metadata=s.metadata,
                           environment_parameters=s.environment_parameters, policy_seed=policy_seed)
    return policy_module.make_policy(context)


def _play(benchmark: Any, episode: Any, policy: Any, *, policy_seed: int) -> Any:
    """One Episode as EvoPolicyGym's evaluator runs it: InvalidAction raised by step ends it as the policy's
    invalid action, and the EpisodeRecord holds the whole trajectory."""
    authoring = importlib.import_module("evopolicygym.authoring")
    environment = benchmark.make_environment(episode)
    transitions, failure = [], None
    try:
        initial = observation = environment.reset()
        for _ in range(benchmark.spec.max_episode_steps):
            action = policy.act(observation)
            try:
                step = environment.step(action)
            except authoring.InvalidAction:
                failure = "invalid_action"
                break
            transitions.append(authoring.Transition(action=action, step=step))
            observation = step.observation
            if step.terminated or step.truncated:
                break
    finally:
        environment.close()
    return authoring.EpisodeRecord(episode=episode, policy_seed=policy_seed, initial_observation=initial,
                                   transitions=tuple(transitions), policy_failure=failure)


def _evaluate(package: ModuleType, name: str, *, episodes: int = 2, program: str = "baseline", benchmark: Any = None,
              seed: int = 7) -> tuple[Any, list[Any], Any]:
    benchmark = benchmark or getattr(package, BENCHMARKS[name])()
    planned = benchmark.episodes("train", seed=seed, count=episodes)
    records = [_play(benchmark, episode, _policy(name, program, benchmark, policy_seed=index), policy_seed=index)
               for index, episode in enumerate(planned)]
    return benchmark, records, benchmark.feedback(records)


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_each_package_plans_deterministically_runs_its_baseline_and_builds_feedback(load: Any, name: str) -> None:
    package = load(name)
    benchmark = getattr(package, BENCHMARKS[name])()
    authoring = importlib.import_module("evopolicygym.authoring")
    assert isinstance(benchmark, authoring.Benchmark) and isinstance(benchmark.spec, authoring.BenchmarkSpec)
    assert benchmark.spec.max_episode_steps <= 50
    plan = benchmark.episodes("train", seed=7, count=3)
    assert plan == benchmark.episodes("train", seed=7, count=3)
    assert plan != benchmark.episodes("validation", seed=7, count=3) and plan != benchmark.episodes("train", seed=8, count=3)
    assert all(type(e) is authoring.EpisodeSpec and 0 <= e.environment_seed < 2**64 for e in plan)
    program = package.baseline_program()
    assert "policy.py" in program.files
    _, records, feedback = _evaluate(package, name)
    assert [r.policy_failure for r in records] == [None, None]
    assert all(r.steps >= 1 and (r.transitions[-1].step.terminated or r.transitions[-1].step.truncated) for r in records)
    assert type(feedback) is authoring.Feedback and math.isfinite(feedback.score)
    assert feedback.score == pytest.approx(sum(r.total_reward for r in records) / 2)


def test_stdlib_counter_scenarios_are_tuples_with_an_unsigned_64_bit_seed_and_observations_dicts_of_tuples(load: Any) -> None:
    package = load("stdlib_counter")
    plan = package.CounterBenchmark().episodes("test", seed=2**64 - 1, count=16)
    assert all(type(e.scenario) is tuple and len(e.scenario) == 3 for e in plan)
    assert max(e.scenario[2] for e in plan) >= 2**63  # a gust seed past the signed range
    _, records, feedback = _evaluate(package, "stdlib_counter")
    first = records[0].initial_observation
    assert type(first) is dict and type(first["bounds"]) is tuple and first["last_moves"] == ()
    assert all(type(t.step.observation["last_moves"]) is tuple and type(t.action) is int for t in records[0].transitions)
    assert feedback.content["steps"] == tuple(r.steps for r in records)


def test_gym_pendulum_observations_are_lists_of_floats_and_its_random_program_follows_the_policy_seed(load: Any) -> None:
    package = load("gym_pendulum")
    _, records, _ = _evaluate(package, "gym_pendulum")
    observations = [records[0].initial_observation, *(t.step.observation for t in records[0].transitions)]
    assert all(type(o) is list and len(o) == 3 and all(type(v) is float for v in o) for o in observations)
    assert records[0].steps == 50 and records[0].transitions[-1].step.truncated
    assert all(type(t.step.metrics["angle"]) is float for t in records[0].transitions)
    _, random_records, _ = _evaluate(package, "gym_pendulum", program="random")
    actions = [[t.action for t in r.transitions] for r in random_records]  # policy seeds 0 and 1
    assert actions[0] != actions[1] and all(type(a) is float and -2.0 <= a <= 2.0 for a in actions[0] + actions[1])


def test_pixels_feedback_publishes_every_frame_of_every_step_as_path_artifacts_with_media_types_and_retention(load: Any) -> None:
    package = load("pixels")
    policy_module = importlib.import_module("evopolicygym.policy")
    _, records, feedback = _evaluate(package, "pixels", episodes=3)
    frame = records[0].initial_observation["frame"]
    assert type(frame) is policy_module.TensorValue and (frame.dtype, frame.shape) == ("uint8", (16, 16, 3))
    assert all(type(t.step.metrics["visits"]) is policy_module.TensorValue for r in records for t in r.transitions)
    artifacts = {a.name: a for a in feedback.artifacts}
    expected = {"summary.json": ("application/json", "permanent")}
    for index in range(3):
        expected[f"episode-{index:03d}/frames.bin"] = ("application/octet-stream", "bulk")
        expected[f"episode-{index:03d}/replay.ppm"] = ("image/x-portable-pixmap", "permanent")
    assert {name: (a.media_type, a.retention) for name, a in artifacts.items()} == expected
    summary = json.loads(artifacts["summary.json"].content)
    steps = [r.steps for r in records]
    assert summary["steps"] == steps and summary["observation_frames"] == sum(steps) + 3 and summary["metric_frames"] == sum(steps)
    for index, record in enumerate(records):
        frames = artifacts[f"episode-{index:03d}/frames.bin"].content
        assert len(frames) == (record.steps + 1) * FRAME_BYTES
        assert frames[-FRAME_BYTES:] == record.transitions[-1].step.observation["frame"].data  # the last step's frame too
        replay = artifacts[f"episode-{index:03d}/replay.ppm"].content
        header = f"P6\n{16 * (record.steps + 1)} 16\n255\n".encode()
        assert replay.startswith(header) and len(replay) == len(header) + len(frames)
    assert summary["reached"] == 3  # the baseline reads the frame and walks to the target


def test_strict_actions_raises_invalid_action_inside_step_and_its_invalid_program_fails_the_episode(load: Any) -> None:
    package = load("strict_actions")
    authoring = importlib.import_module("evopolicygym.authoring")
    benchmark = package.DialBenchmark()
    (episode,) = benchmark.episodes("train", seed=1, count=1)
    for action in (10, -1, True, 3.0, "3", None):
        environment = benchmark.make_environment(episode)
        environment.reset()
        with pytest.raises(authoring.InvalidAction):
            environment.step(action)
    _, valid, baseline = _evaluate(package, "strict_actions", benchmark=benchmark)
    assert [r.policy_failure for r in valid] == [None, None] and baseline.content["invalid_actions"] == 0
    assert baseline.score == 20.0  # the baseline answers every hint right
    _, invalid, feedback = _evaluate(package, "strict_actions", program="invalid", benchmark=benchmark)
    assert [(r.policy_failure, r.steps) for r in invalid] == [("invalid_action", 0), ("invalid_action", 0)]
    assert feedback.content["invalid_actions"] == 2 and feedback.score == -1.0


def test_profiled_has_three_profiles_with_distinct_ids_and_parameters_and_refuses_an_unknown_one(load: Any) -> None:
    package = load("profiled")
    assert package.PROFILES == ("calm", "breezy", "stormy")
    benchmarks = [package.ProfiledBenchmark(package.ProfiledConfig(profile=p)) for p in package.PROFILES]
    ids = [b.spec.id for b in benchmarks]
    assert len(set(ids)) == 3 and package.ProfiledBenchmark().spec.id == ids[0]
    parameters = [dict(b.spec.environment_parameters) for b in benchmarks]
    assert [p["profile"] for p in parameters] == list(package.PROFILES)
    assert len({json.dumps(p, sort_keys=True) for p in parameters}) == 3
    assert [b.spec.max_episode_steps for b in benchmarks] == [10, 20, 30]
    assert benchmarks[0].episodes("train", seed=3, count=2) != benchmarks[2].episodes("train", seed=3, count=2)
    _, records, feedback = _evaluate(package, "profiled", benchmark=benchmarks[2])
    assert [r.steps for r in records] == [30, 30] and feedback.content["profile"] == "stormy"
    with pytest.raises(ValueError):
        package.ProfiledConfig(profile="hurricane")
    with pytest.raises(TypeError):
        package.ProfiledBenchmark(config="stormy")  # type: ignore[arg-type]
