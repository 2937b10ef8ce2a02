"""Hidden Episodes of a Run depend on the Host's secret seed key, not only on the public code and Run seed."""

from __future__ import annotations

import json
import shutil
import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from support.cli import run_cli
from support.scripted_runs import FORKED

from orchestrator.kernel.evaluation import evaluate_programs
from orchestrator.kernel.program import capture_program
from orchestrator.kernel.seeds import derive_seed, key_id, keyed_seed
from orchestrator.run.seed_key import read_key

REPO = Path(__file__).resolve().parents[2]
BASELINE = REPO / "environments" / "cartpole" / "baseline"
KEY_ONE = bytes(range(32))
KEY_TWO = bytes(range(100, 132))
SEED = 0
TINY = {
    "benchmark": "CartPole-v1",
    "seed": SEED,
    "budget": {"episodes": 3, "max_submissions": 1, "pool_size": 4},
    "validation": {"episodes": 3, "max_candidates": 1},
    "assessment": {"episodes": 3, "include_initial_program": False},
    "sandbox": {"pool_size": 2, **FORKED},
    "agent": {"kind": "scripted", "steps": [{"program": str(BASELINE), "episodes": "0:3"}], "finish": "all"},
}


def read_json(path: Path):
    return json.loads(path.read_text())


def what_happened(feedback: dict) -> list[tuple]:
    """What each Episode was, without its timings: the same Episodes replay to the same values."""
    return [(e["index"], e["status"], e["steps"], e["reward"], e["terminated"], e["truncated"]) for e in feedback["episodes"]]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, scope) -> dict[str, Path]:
    """Tiny Runs with the same seed: "one" and "again" with one key file, "two" with another, "default" with the default store.

    Each has its own data directory: "default" keeps its key in root/data-default, the others must not touch root/data.
    """
    root = tmp_path_factory.mktemp("secret-episodes")
    (root / "one.key").write_text(KEY_ONE.hex() + "\n")
    (root / "two.key").write_text(KEY_TWO.hex() + "\n")
    run_dirs, started = {}, {}
    with ThreadPoolExecutor(max_workers=4) as pool:  # each Run in a process of its own, all at once: they are independent
        for name, key_file in (("one", "one.key"), ("two", "two.key"), ("again", "one.key"), ("default", None)):
            spec = root / f"{name}.yaml"
            spec.write_text(yaml.safe_dump({**TINY, **({"seed_key_file": key_file} if key_file else {})}))
            run_dirs[name] = root / f"run-{name}"
            data_home = root / ("data-default" if key_file is None else "data")
            started[name] = pool.submit(run_cli, "run", str(spec), "-o", str(run_dirs[name]), "--json", scope=scope,
                                        env={"XDG_DATA_HOME": str(data_home)}, timeout=300)
        results = {name: future.result() for name, future in started.items()}
    for name, result in results.items():
        assert result.exit_code == 0, f"{name}: {result.stderr}"
        assert json.loads(result.stdout)["phase"] == "done"
    assert not (root / "data").exists(), "a Run naming its key file wrote to the default key store"
    return run_dirs


def test_runs_with_different_keys_have_different_hidden_episodes(runs):
    one, two = runs["one"], runs["two"]
    assert read_json(one / "run.json")["seed_key_id"] != read_json(two / "run.json")["seed_key_id"]
    pool_one = [e["payload"] for e in read_json(one / "private" / "pool.json")]
    pool_two = [e["payload"] for e in read_json(two / "private" / "pool.json")]
    assert len(pool_one) == len(pool_two) == 4
    assert not set(pool_one) & set(pool_two)
    validated = [what_happened(read_json(r / "validation.json")["results"][0]["feedback"]) for r in (one, two)]
    assessed = [what_happened(read_json(r / "assessment.json")) for r in (one, two)]
    assert validated[0] != validated[1]
    assert assessed[0] != assessed[1]


def test_runs_with_the_same_key_and_seed_have_the_same_hidden_episodes(runs):
    one, again = runs["one"], runs["again"]
    assert read_json(one / "run.json")["seed_key_id"] == read_json(again / "run.json")["seed_key_id"] == key_id(KEY_ONE)
    assert read_json(one / "private" / "pool.json") == read_json(again / "private" / "pool.json")
    validated = [what_happened(read_json(r / "validation.json")["results"][0]["feedback"]) for r in (one, again)]
    assessed = [what_happened(read_json(r / "assessment.json")) for r in (one, again)]
    assert validated[0] == validated[1] and len(validated[0]) == 3
    assert assessed[0] == assessed[1] and len(assessed[0]) == 3


def test_the_run_records_the_key_id_and_never_the_key(runs):
    for name, key in (("one", KEY_ONE), ("two", KEY_TWO)):
        run_dir = runs[name]
        manifest = read_json(run_dir / "run.json")
        assert manifest["seed_key_id"] == key_id(key)
        assert manifest["seed_key_file"] == str(run_dir.parent / f"{name}.key")
        for path in (p for p in run_dir.rglob("*") if p.is_file()):
            data = path.read_bytes()
            assert key not in data and key.hex().encode() not in data.lower(), f"{path} holds the seed key"


def test_a_run_without_a_key_file_makes_one_in_the_users_data_directory(runs):
    run_dir = runs["default"]
    path = run_dir.parent / "data-default" / "epg-orchestrator" / "seed.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    key = read_key(path)
    manifest = read_json(run_dir / "run.json")
    assert (manifest["seed_key_id"], manifest["seed_key_file"]) == (key_id(key), str(path))
    assert read_json(run_dir / "private" / "pool.json") != read_json(runs["one"] / "private" / "pool.json")
    for file in (p for p in run_dir.rglob("*") if p.is_file()):
        assert key.hex().encode() not in file.read_bytes().lower(), f"{file} holds the seed key"


def test_hidden_episodes_cannot_be_computed_from_the_code_and_seed_alone(runs, open_sandbox):
    one = runs["one"]
    pool = [e["payload"].encode("latin-1") for e in read_json(one / "private" / "pool.json")]
    baseline = capture_program(BASELINE)
    with open_sandbox("CartPole-v1") as sandbox:
        # The Run's pool is the keyed plan, and not what the seed alone plans.
        assert [e.payload for e in sandbox.plan("train", keyed_seed(KEY_ONE, SEED, "train"), 4)] == pool
        assert not {e.payload for e in sandbox.plan("train", SEED, 4)} & set(pool)
        for split, purpose, report in (("validation", "validation", "validation.json"), ("test", "assessment", "assessment.json")):
            keyed = sandbox.plan(split, keyed_seed(KEY_ONE, SEED, purpose), 3)
            public = sandbox.plan(split, derive_seed(SEED, purpose), 3)
            raw = sandbox.plan(split, SEED, 3)
            assert not {e.payload for e in keyed} & {e.payload for e in public + raw}
            document = read_json(one / report)
            ran = what_happened(document["results"][0]["feedback"] if split == "validation" else document)
            # Replaying the keyed plan reproduces the Run's Episodes; the plans of the public derivation do not.
            (feedback,) = evaluate_programs(sandbox, [baseline], keyed + public)
            replayed = [(o.index, o.status.value, o.steps, o.reward, o.terminated, o.truncated) for o in feedback.episodes]
            assert replayed[:3] == ran
            assert replayed[3:] != ran


def test_resume_refuses_a_key_other_than_the_runs_own(runs, scope, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(runs["one"], copy)
    manifest = read_json(copy / "run.json")
    (copy / "run.json").write_text(json.dumps({**manifest, "phase": "assessment",
                                               "seed_key_file": str(runs["one"].parent / "two.key")}))
    result = run_cli("run", "--resume", str(copy), "--json", scope=scope, env={"XDG_DATA_HOME": str(tmp_path / "data")}, timeout=300)
    assert result.exit_code == 1
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1 and f"created with {key_id(KEY_ONE)}" in message and key_id(KEY_TWO) in message
    assert "Traceback" not in result.stderr
    assert read_json(copy / "run.json")["phase"] == "assessment"
    assert not (tmp_path / "data").exists()


def test_resume_with_the_runs_key_plans_the_same_episodes(runs, scope, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(runs["one"], copy)
    before = read_json(copy / "assessment.json")
    (copy / "assessment.json").unlink()
    (copy / "run.json").write_text(json.dumps({**read_json(copy / "run.json"), "phase": "assessment"}))
    result = run_cli("run", "--resume", str(copy), "--json", scope=scope, env={"XDG_DATA_HOME": str(tmp_path / "data")}, timeout=300)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["phase"] == "done"
    assert what_happened(read_json(copy / "assessment.json")) == what_happened(before)
