"""`env new` and `env test IMAGE | NAME | DIR` against the real engine, as an environment author types them."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import CliResult, invoke_cli, run_cli

REPO = Path(__file__).resolve().parents[2]
TEST_ENVIRONMENTS = REPO / "tests" / "environments"
BROKEN_CHECKS = {"plan is deterministic", "splits are disjoint", "feedback is bounded and free of private data"}
AUTHOR_DOCKERFILE = """\
ARG BASE
FROM ${BASE}
COPY wheels /tmp/author-wheels
RUN python3 -m pip install --no-index --no-deps --no-cache-dir --disable-pip-version-check /tmp/author-wheels/*.whl \\
    && rm -rf /tmp/author-wheels
COPY baseline /opt/author/baseline
LABEL org.evopolicygym.baseline=/opt/author/baseline org.evopolicygym.managed=false
"""


def env_new(directory: Path, gym_id: str, benchmark_id: str, name: str) -> Path:
    made = invoke_cli("env", "new", str(directory), "--gymnasium", gym_id, "--benchmark-id", benchmark_id, "--name", name, "--failure-return", "-4000")
    assert made.exit_code == 0, made.stderr
    return directory


def report_of(result: CliResult) -> dict:
    assert result.stdout.strip(), result.stderr
    return json.loads(result.stdout)


def failed(report: dict) -> set[str]:
    return {check["name"] for check in report["checks"] if not check["ok"]}


# A name of this test run's own, so that the images it builds and removes are never another run's on a shared engine.
PENDULUM = f"test-pendulum-{secrets.token_hex(3)}"


@pytest.fixture(scope="module")
def new_package(engine, tmp_path_factory) -> Path:
    yield env_new(tmp_path_factory.mktemp("authors") / PENDULUM, "Pendulum-v1", "EpgTestPendulum-v1", PENDULUM)
    for image in engine.client.images.list(filters={"label": f"org.evopolicygym.image=env-{PENDULUM}"}):
        engine.client.images.remove(image.id, force=True)


@pytest.fixture(scope="module")
def author_image(engine, images, tmp_path_factory) -> str:
    """An image from an author's own Dockerfile FROM env-cartpole, adding their package as a wheel built on the host."""
    package = env_new(tmp_path_factory.mktemp("author") / "author-acrobot", "Acrobot-v1", "EpgTestAuthorAcrobot-v1", "author-acrobot")
    context = tmp_path_factory.mktemp("author-context")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                            "--wheel-dir", str(context / "wheels"), str(package)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    shutil.copytree(package / "baseline", context / "baseline")
    (context / "Dockerfile").write_text(AUTHOR_DOCKERFILE)
    tag = f"epg-test-author-acrobot:{os.getpid()}"
    engine.client.images.build(path=str(context), tag=tag, buildargs={"BASE": images["env-cartpole"]}, rm=True, forcerm=True)
    yield tag
    engine.client.images.remove(tag)  # by its tag: the same build elsewhere may share the image id under another tag


def test_new_package_passes_env_test_as_a_directory_and_as_its_image(new_package, scope):
    from_directory = report_of(run_cli("env", "test", str(new_package), "--json", "-n", "2", scope=scope, timeout=1200))
    assert from_directory["ok"] is True and failed(from_directory) == set()
    assert from_directory["benchmarks"] == ["EpgTestPendulum-v1"]
    assert from_directory["image"].startswith(f"epg/env-{PENDULUM}:")
    names = [check["name"] for check in from_directory["checks"]]
    assert "splits are disjoint" in names and "baseline runs through the sandbox (2 Episodes)" in names
    assert from_directory["checks"][-1]["detail"].startswith("score ")

    result = run_cli("env", "test", from_directory["image"], "--json", "-n", "2", "--environments", str(new_package.parent), scope=scope, timeout=1200)
    from_image = report_of(result)
    assert result.exit_code == 0, result.stderr
    assert from_image["image_id"] == from_directory["image_id"]
    assert from_image["ok"] is True and [c["name"] for c in from_image["checks"]] == names
    assert from_image["checks"][-1]["detail"].startswith("score ")


def test_image_from_an_authors_own_dockerfile_passes_env_test_unchanged(author_image, scope):
    result = run_cli("env", "test", author_image, "--json", "-n", "1", scope=scope, timeout=1200)
    report = report_of(result)
    assert result.exit_code == 0, (result.stderr, report)
    # The label inherited from env-cartpole names CartPole-v1; the author's entry point adds theirs.
    assert set(report["benchmarks"]) == {"CartPole-v1", "EpgTestAuthorAcrobot-v1"}
    authors = [check for check in report["checks"] if check["benchmark"] == "EpgTestAuthorAcrobot-v1"]
    assert len(authors) == 7 and all(check["ok"] for check in authors)
    # Its baseline was copied out of the image (org.evopolicygym.baseline) and ran through the sandbox.
    assert authors[-1]["name"].startswith("baseline runs through the sandbox") and authors[-1]["detail"].startswith("score ")


def test_broken_image_fails_env_test_with_exactly_its_faults_named(builder, scope):
    (image,) = [result.tag for result in builder.ensure(["env-broken"])]
    result = run_cli("env", "test", image, "--json", "-n", "1", "--environments", str(TEST_ENVIRONMENTS), scope=scope, timeout=1200)
    report = report_of(result)
    assert result.exit_code == 1
    assert report["ok"] is False and report["benchmarks"] == ["Broken-v0"]
    assert failed(report) == BROKEN_CHECKS
    details = {check["name"]: check["detail"] for check in report["checks"]}
    assert details["feedback is bounded and free of private data"] == "feedback contains a hidden Episode payload"
    assert "share Episodes" in details["splits are disjoint"]


def test_env_test_table_names_the_failed_checks(builder, scope):
    (image,) = [result.tag for result in builder.ensure(["env-broken"])]
    result = run_cli("env", "test", image, "-n", "1", "--environments", str(TEST_ENVIRONMENTS), scope=scope, timeout=1200)
    assert result.exit_code == 1
    failed_rows = [line for line in result.stdout.splitlines() if "FAILED" in line]
    assert len(failed_rows) == 3 and all(any(name in row for name in BROKEN_CHECKS) for row in failed_rows)


def test_env_test_of_nothing_checkable_is_a_user_error(tmp_path):
    result = invoke_cli("env", "test", "no-such-image-or-benchmark:v0")
    assert result.exit_code == 1
    assert "no image in the engine" in result.stderr
    result = invoke_cli("env", "test", str(tmp_path))
    assert result.exit_code == 1 and "not an environment package" in result.stderr
