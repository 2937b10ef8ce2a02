"""`epg-orchestrate evopolicygym sweep`: finding a checkout's EvoPolicyGym packages, each package's steps in order with
its status, the table, and resuming, against a stub of our CLI (EPG_SWEEP_CLI) that logs each call and behaves as
told per package."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from support.cli import REPO, invoke_cli

from orchestrator.cli.evopolicygym import (
    STATUSES,
    PackageResult,
    SweepPackage,
    find_packages,
    image_name,
    read_results,
    selected,
    sweep_table,
    tail,
)

STUB = textwrap.dedent('''
    import json, os, sys, time
    from pathlib import Path

    args = sys.argv[1:]
    with open(os.environ["STUB_LOG"], "a") as log:
        log.write(json.dumps(args) + "\\n")
    root = Path(args[args.index("--environments") + 1])
    plan = json.loads(Path(os.environ["STUB_PLAN"]).read_text()).get(root.name, {})
    step = {"images": "build", "env": "env", "evaluate": "evaluate"}[args[0]]
    behaviour = plan.get(step, "ok")
    if behaviour == "hang":
        Path(os.environ["STUB_LOG"]).with_suffix(".pid").write_text(str(os.getpid()))
        time.sleep(300)
    if behaviour == "fail":
        for number in range(40):
            print(f"{step} progress line {number}", file=sys.stderr)
        print(f"error: {root.name}: {step} broke | badly", file=sys.stderr)
        sys.exit(3)
    if behaviour == "checks":
        report = {"benchmarks": ["a-v1"], "ok": False, "finished": True,
                  "checks": [{"benchmark": "a-v1", "name": "determinism", "ok": False, "detail": "two plans differ"}]}
        print(json.dumps(report))
        sys.exit(1)
    if step == "env":
        print(json.dumps({"benchmarks": plan.get("benchmarks", [root.name + "/first-v1", root.name + "/second-v1"]), "ok": True,
                          "finished": True, "checks": []}))
    elif step == "evaluate":
        print(json.dumps({"score": plan.get("score", 2.5)} if behaviour == "ok" else {"episodes": []}))
    else:
        print(json.dumps({"images": [], "built": 1, "up_to_date": 0}))
''')


def write_package(base: Path, path: str, *, depends: str = "evopolicygym==0.3.*", baseline: bool = True) -> Path:
    root = base / path
    module = root.name
    (root / "src" / module).mkdir(parents=True)
    (root / "pyproject.toml").write_text(textwrap.dedent(f'''
        [project]
        name = "evopolicygym-benchmark-{module}"
        version = "0.1.0"
        requires-python = ">=3.12"
        dependencies = ["{depends}", "numpy>=2"]

        [build-system]
        requires = ["hatchling"]
        build-backend = "hatchling.build"

        [tool.hatch.build.targets.wheel]
        packages = ["src/{module}"]
    '''))
    (root / "src" / module / "__init__.py").write_text("")
    if baseline:
        (root / "src" / module / "programs" / "baseline").mkdir(parents=True)
        (root / "src" / module / "programs" / "baseline" / "policy.py").write_text("def make_policy(context): ...\n")
    return root


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A checkout as theirs is laid out: the kernel's pyproject.toml at the root, packages nested under environments/."""
    root = tmp_path / "EvoPolicyGym"
    root.mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "evopolicygym"\nversion = "0.3.0"\ndependencies = []\n')
    for path in ("gymnasium/classic_control/cartpole", "gymnasium/toy_text/taxi", "minigrid/minigrid/doorkey", "ale/atari",
                 "atcoder/ahc054/treants_forest"):
        write_package(root / "environments", path)
    return root


class Stub:
    """The stub CLI: its command line, its plan file, and the calls it logged."""

    def __init__(self, directory: Path) -> None:
        self.script = directory / "stub_cli.py"
        self.script.write_text(STUB)
        self.log = directory / "calls.jsonl"
        self.plan = directory / "plan.json"
        self.plan.write_text("{}")

    def behave(self, plan: dict[str, dict[str, Any]]) -> None:
        self.plan.write_text(json.dumps(plan))

    def env(self) -> dict[str, str]:
        return {"EPG_SWEEP_CLI": f"{sys.executable} {self.script}", "STUB_LOG": str(self.log), "STUB_PLAN": str(self.plan)}

    def calls(self) -> list[list[str]]:
        if not self.log.exists():
            return []
        calls = [json.loads(line) for line in self.log.read_text().splitlines()]
        self.log.unlink()
        return calls


@pytest.fixture
def stub(tmp_path: Path) -> Stub:
    directory = tmp_path / "stub"
    directory.mkdir()
    return Stub(directory)


def sweep(checkout: Path, out: Path, stub: Stub, *extra: str) -> Any:
    return invoke_cli("evopolicygym", "sweep", str(checkout), "--out", str(out), *extra, env=stub.env(), timeout=120)


def by_package(out: Path) -> dict[str, dict[str, Any]]:
    return {line["package"]: line for line in json.loads((out / "sweep.json").read_text())["packages"]}


def test_find_packages_takes_every_package_depending_on_evopolicygym_and_not_the_kernel_or_other_projects(tmp_path: Path) -> None:
    root = tmp_path / "checkout"
    environments = root / "environments"
    (root).mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "evopolicygym"\ndependencies = ["numpy"]\n')
    write_package(environments, "gymnasium/classic_control/cartpole")
    write_package(environments, "minigrid/babyai", depends="evopolicygym >= 0.3")
    write_package(environments, "crafter/crafter", depends="EvoPolicyGym[extras]==0.3.1")
    write_package(environments, "other/project", depends="gymnasium")  # not an EvoPolicyGym package
    write_package(environments, "gymnasium/classic_control/cartpole/tests/inner")  # inside a package: never searched
    write_package(environments, ".hidden/secret")
    write_package(environments, "a/b/c/d/too_deep")
    packages = find_packages(root)
    assert [(p.path, p.family, p.module) for p in packages] == [
        ("crafter/crafter", "crafter", "crafter"),
        ("gymnasium/classic_control/cartpole", "gymnasium", "cartpole"),
        ("minigrid/babyai", "minigrid", "babyai"),
    ]
    assert packages[1].baseline == environments / "gymnasium/classic_control/cartpole/src/cartpole/programs/baseline"
    assert [p.path for p in find_packages(environments / "minigrid")] == ["babyai"]  # a directory of packages, not a checkout
    (one,) = find_packages(environments / "crafter" / "crafter")  # one package
    assert (one.root, one.path, one.module) == (environments / "crafter" / "crafter", "crafter", "crafter")
    assert [p.path for p in selected(packages, ["gymnasium/*", "crafter"])] == ["crafter/crafter", "gymnasium/classic_control/cartpole"]


def test_each_package_goes_through_build_env_test_and_evaluate_and_stops_at_the_first_failure(checkout: Path, tmp_path: Path,
                                                                                               stub: Stub) -> None:
    stub.behave({"taxi": {"build": "fail"}, "doorkey": {"env": "checks"}, "atari": {"evaluate": "fail"},
                 "treants_forest": {"evaluate": "no-score"}, "cartpole": {"score": 487.25}})
    out = tmp_path / "out"
    result = sweep(checkout, out, stub, "--episodes", "2")
    assert result.exit_code == 1, result.stderr
    lines = by_package(out)
    assert {name: line["status"] for name, line in lines.items()} == {
        "cartpole": "passed", "taxi": "build_failed", "doorkey": "env_test_failed", "atari": "evaluate_failed",
        "treants_forest": "evaluate_failed",
    }
    assert lines["cartpole"]["baseline_mean"] == 487.25 and lines["cartpole"]["reason"] == ""
    assert lines["cartpole"]["benchmarks"] == ["cartpole/first-v1", "cartpole/second-v1"]
    assert [s["step"] for s in lines["cartpole"]["steps"]] == ["images build", "env test", "evaluate"]
    assert lines["taxi"]["reason"].endswith("error: taxi: build broke | badly") and "line 27" not in lines["taxi"]["reason"]
    assert [s["step"] for s in lines["taxi"]["steps"]] == ["images build"] and lines["taxi"]["baseline_mean"] is None
    assert lines["doorkey"]["reason"] == "a-v1: determinism: two plans differ"
    assert lines["atari"]["reason"].endswith("error: atari: evaluate broke | badly")
    assert lines["treants_forest"]["reason"].startswith("evaluate printed no score")
    calls = stub.calls()
    cartpole = checkout / "environments" / "gymnasium" / "classic_control" / "cartpole"
    mine = [call for call in calls if str(cartpole) in call]
    assert [call[:2] for call in mine] == [["images", "build"], ["env", "test"], ["evaluate", str(cartpole / "src/cartpole/programs/baseline")]]
    assert mine[1][2] == str(cartpole) and mine[1][mine[1].index("-n") + 1] == "2"
    evaluate = mine[2]
    assert evaluate[evaluate.index("--benchmark") + 1] == "cartpole/first-v1" and evaluate[evaluate.index("--episodes") + 1] == "2"
    assert evaluate[evaluate.index("--environments") + 1] == str(cartpole) and "--json" in evaluate
    assert not [call for call in calls if call[0] != "images" and "taxi" in " ".join(call)]  # a failed build stops there
    assert (out / "logs" / "gymnasium/toy_text/taxi" / "images-build.log").read_text().count("progress line") == 40


def test_sweep_md_is_a_table_of_package_family_benchmarks_status_baseline_mean_time_and_reason(checkout: Path, tmp_path: Path,
                                                                                               stub: Stub) -> None:
    stub.behave({"taxi": {"build": "fail"}, "cartpole": {"score": 487.25, "benchmarks": ["a", "b", "c", "d", "e"]}})
    out = tmp_path / "out"
    sweep(checkout, out, stub)
    text = (out / "sweep.md").read_text()
    assert "**4 of 5 packages passed**: 1 build_failed." in text
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert rows[0] == "| package | family | benchmarks | status | baseline mean | time | reason |"
    cells = {row.split(" | ")[0][2:]: row for row in rows[1:]}
    assert set(cells) == {"ale/atari", "atcoder/ahc054/treants_forest", "gymnasium/classic_control/cartpole",
                          "gymnasium/toy_text/taxi", "minigrid/minigrid/doorkey"}
    assert cells["gymnasium/classic_control/cartpole"].startswith(
        "| gymnasium/classic_control/cartpole | gymnasium | a, b, c (+2 more) | passed | 487.2 | ")
    taxi = cells["gymnasium/toy_text/taxi"]
    assert "| build_failed | - |" in taxi and taxi.endswith("error: taxi: build broke \\| badly |")
    assert "progress line" not in taxi  # the reason's last line: the whole reason is in sweep.json
    assert all(row.count(" | ") == 6 for row in rows)  # the reason's pipe is escaped
    long = PackageResult(package="p", path="f/p", family="f", status="evaluate_failed", reason="first\n" + "why " * 200)
    (row,) = sweep_table([long]).splitlines()[2:]
    assert row.endswith(" | " + ("why " * 60)[:237] + "... |")


def test_a_resumed_sweep_skips_packages_recorded_as_passed_unless_again(checkout: Path, tmp_path: Path, stub: Stub) -> None:
    stub.behave({"taxi": {"build": "fail"}})
    out = tmp_path / "out"
    sweep(checkout, out, stub)
    stub.calls()
    stub.behave({})  # taxi's build works now
    result = sweep(checkout, out, stub)
    assert result.exit_code == 0, result.stderr
    calls = stub.calls()
    assert {Path(call[call.index("--environments") + 1]).name for call in calls} == {"taxi"} and len(calls) == 3
    assert set(line["status"] for line in by_package(out).values()) == {"passed"}
    assert sweep(checkout, out, stub, "--again", "--only", "ale/*").exit_code == 0
    assert {Path(call[call.index("--environments") + 1]).name for call in stub.calls()} == {"atari"}
    assert len(by_package(out)) == 5  # the packages not selected this time keep their lines


def test_a_step_over_its_timeout_is_stopped_and_the_package_recorded_as_timeout(checkout: Path, tmp_path: Path, stub: Stub) -> None:
    stub.behave({"doorkey": {"env": "hang"}})
    out = tmp_path / "out"
    started = time.monotonic()
    result = sweep(checkout, out, stub, "--only", "doorkey", "--timeout", "1", "--json")
    assert time.monotonic() - started < 60
    assert result.exit_code == 1
    (line,) = result.json()["packages"]
    assert line["status"] == "timeout" and line["reason"].startswith("env test did not end within 1 s")
    assert [s["exit_code"] for s in line["steps"]] == [0, None]
    pid = int(stub.log.with_suffix(".pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the hanging step is gone, not left running


def test_jobs_sweep_packages_at_once_with_the_same_records(checkout: Path, tmp_path: Path, stub: Stub) -> None:
    stub.behave({"taxi": {"build": "fail"}, "atari": {"score": -3.0}})
    sweep(checkout, tmp_path / "one", stub)
    result = sweep(checkout, tmp_path / "two", stub, "--jobs", "3", "--json")
    assert result.exit_code == 1

    def essentials(out: Path) -> list[tuple[Any, ...]]:
        return [(line["path"], line["status"], line["baseline_mean"], line["benchmarks"]) for line in by_package(out).values()]

    assert essentials(tmp_path / "one") == essentials(tmp_path / "two")
    assert result.json()["counts"] == {"passed": 4, "build_failed": 1, "env_test_failed": 0, "evaluate_failed": 0, "timeout": 0}


def test_a_checkout_without_packages_a_foreign_sweep_json_or_a_step_command_that_cannot_start_is_refused(tmp_path: Path, checkout: Path, stub: Stub) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = sweep(empty, tmp_path / "out", stub)
    assert result.exit_code == 1 and "no EvoPolicyGym package" in result.stderr
    out = tmp_path / "foreign"
    out.mkdir()
    (out / "sweep.json").write_text('{"schema": "something-else", "packages": []}')
    result = sweep(checkout, out, stub)
    assert result.exit_code == 1 and "not a sweep record" in result.stderr
    assert stub.calls() == []
    result = sweep(checkout, tmp_path / "out", stub, "--cli", str(tmp_path / "no-such-command"))
    assert result.exit_code == 3 and "error: the sweep stopped:" in result.stderr and "no-such-command" in result.stderr
    assert "Traceback" not in result.stderr


def test_records_read_back_refuse_an_unknown_status_and_tail_is_bounded(tmp_path: Path) -> None:
    line = PackageResult(package="p", path="f/p", family="f", status="passed").to_json()
    (tmp_path / "sweep.json").write_text(json.dumps({"schema": "epg-orchestrator/evopolicygym-sweep/v1",
                                                     "packages": [line, {**line, "path": "f/q", "status": "maybe"}]}))
    with pytest.raises(ValueError, match=r"packages\[1\]: unknown status 'maybe'"):
        read_results(tmp_path)
    text = "\n".join(f"line {n} " + "x" * 400 for n in range(100))
    bounded = tail(text)
    assert len(bounded) == 2000 and bounded.endswith("line 99 " + "x" * 400) and "line 87" not in bounded
    assert STATUSES == ("passed", "build_failed", "env_test_failed", "evaluate_failed", "timeout")
    assert sweep_table([]).count("\n") == 2


def test_image_name_is_the_catalogues_and_a_directory_it_does_not_know_gets_the_env_epg_name(tmp_path: Path) -> None:
    ours = REPO / "environments" / "cartpole"
    assert image_name(SweepPackage(root=ours, path="cartpole", family="cartpole", module="epg_env_cartpole")) == "env-cartpole"
    unknown = tmp_path / "Odd_Name.2"
    unknown.mkdir()
    assert image_name(SweepPackage(root=unknown, path="x/Odd_Name.2", family="x", module="odd")) == "env-epg-odd-name-2"


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_sigterm_stops_the_steps_under_way_records_nothing_for_them_and_exits_130(checkout: Path, tmp_path: Path, stub: Stub,
                                                                                jobs: str) -> None:
    stub.behave({"cartpole": {"env": "hang"}})
    out = tmp_path / "out"
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli.app", "evopolicygym", "sweep", str(checkout), "--out", str(out), "--only", "*/c*",
         "--jobs", jobs], env={**os.environ, **stub.env()}, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    pid_file = stub.log.with_suffix(".pid")
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists():
            assert process.poll() is None and time.monotonic() < deadline, process.stderr.read() if process.stderr else ""
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 130
        with pytest.raises(ProcessLookupError):
            os.kill(int(pid_file.read_text()), 0)  # the hanging env test was stopped with the sweep
    finally:  # a failing test leaves neither the sweep nor its stub running
        process.kill()
        process.wait()
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
    recorded = read_results(out)
    assert "gymnasium/classic_control/cartpole" not in recorded  # swept again next time, not recorded as failed


MIRROR = Path("/work/.mirror/Linzwcs+EvoPolicyGym/repo")


@pytest.fixture
def reference_checkout(tmp_path: Path) -> Path:
    """EvoPolicyGym's own repository: the checkout EPG_EVOPOLICYGYM_CHECKOUT names, else its packages' tree taken from
    the mirror with `git archive` (the kernel's pyproject.toml and environments/)."""
    named = os.environ.get("EPG_EVOPOLICYGYM_CHECKOUT")
    if named:
        return Path(named)
    if not MIRROR.is_dir():
        pytest.skip(f"no EvoPolicyGym checkout: set EPG_EVOPOLICYGYM_CHECKOUT, or keep its mirror at {MIRROR}")
    archive = subprocess.run(["git", "-C", str(MIRROR), "archive", "HEAD", "pyproject.toml", "environments"], capture_output=True,
                             check=True, timeout=120).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(tmp_path / "EvoPolicyGym", filter="data")
    return tmp_path / "EvoPolicyGym"


def test_the_references_63_packages_are_found_with_their_baselines_and_not_its_kernel_or_a_vendored_project(
        reference_checkout: Path, tmp_path: Path, stub: Stub) -> None:
    packages = find_packages(reference_checkout)
    assert len(packages) == 63
    assert all((p.root / "src" / p.module).is_dir() and (p.baseline / "policy.py").is_file() for p in packages)
    assert not [p for p in packages if "vendor" in p.path.split("/")]  # jackdaw/balatro/vendor/jackdaw is the package's own
    assert {"gymnasium", "minigrid", "atcoder", "dm_control", "jackdaw"} <= {p.family for p in packages}
    out = tmp_path / "out"
    result = sweep(reference_checkout, out, stub, "--only", "gymnasium/classic_control/*", "--json")
    assert result.exit_code == 0, result.stderr
    assert sorted(line["package"] for line in result.json()["packages"]) == [
        "acrobot", "cartpole", "mountain_car", "mountain_car_continuous", "pendulum"]
