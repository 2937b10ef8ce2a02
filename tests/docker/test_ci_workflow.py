"""The example CI workflow of an environment repository (examples/ci/github-actions.yml) works from a checkout.

Its steps are run in order as a runner would run them on a push to main: the workflow's YAML is
parsed, its `${{ ... }}` expressions and `if:` conditions are replaced by local values (an unknown
one fails the test), and each `run:` is given to `bash -e` in a temporary environment repository.
That repository holds a copy of environments/cartpole (its image is the one the test run builds
anyway, so `build` finds it up to date), ci/env-repo-ci.sh and the workflow itself; the second
`actions/checkout` gets the tracked files of this repository at its `path`; `setup-python` is a fresh
venv whose pip finds wheels in a local directory only; the registry is Debian's `docker-registry`
on loopback, and `docker login` writes to a temporary DOCKER_CONFIG. The pull step runs once more at
the end, as the next push's run would start, and must get back exactly the images pushed.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest
import yaml
from support.loopback_registry import serving_registry
from support.venvs import REPO, Venv, fill_wheels, make_venv, orchestrator_requirements

WORKFLOW = REPO / "examples" / "ci" / "github-actions.yml"
SCRIPT = REPO / "examples" / "ci" / "env-repo-ci.sh"
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
# The environment repository's package: this repository's CartPole, whose image the `images` fixture holds.
LOCAL_ENV = {"ENV_IMAGE": "env-cartpole", "BENCHMARK": "cartpole"}


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serving_registry(tmp_path_factory.mktemp("registry")) as address:
        yield address


def checkout_of_this_repository(destination: Path) -> Path:
    """The files git tracks here, as they are in the working tree (what actions/checkout gives of a clean tree)."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name, follow_symlinks=False)
    return destination


def substitute(text: str, values: dict[str, str]) -> str:
    """text with every `${{ EXPR }}` replaced by values[EXPR]; a KeyError names an expression the test does not know."""
    return EXPRESSION.sub(lambda match: values[match.group(1)], text)


def runs(condition: str | None, conditions: dict[str, bool]) -> bool:
    """Whether a step with this `if:` runs on a push to main; a KeyError names a condition the test does not know."""
    return True if condition is None else conditions[EXPRESSION.sub(r"\1", condition).strip()]


def test_the_example_workflow_installs_the_orchestrator_from_its_checkout_then_builds_tests_and_publishes(
        images, registry, scope, tmp_path):
    workflow = yaml.safe_load(WORKFLOW.read_text())
    [job] = workflow["jobs"].values()
    repository = tmp_path / "env-repo"
    shutil.copytree(REPO / "environments" / "cartpole", repository / "environments" / "cartpole",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", ".*"))
    (repository / "ci").mkdir()
    shutil.copy2(SCRIPT, repository / "ci" / "env-repo-ci.sh")
    (repository / ".github" / "workflows").mkdir(parents=True)
    shutil.copy2(WORKFLOW, repository / ".github" / "workflows" / "images.yml")

    values = {"vars.REGISTRY": registry, "vars.EPG_ORCHESTRATOR": "local/epg-orchestrator", "vars.EPG_ORCHESTRATOR_REF": "main",
              "secrets.REGISTRY_USER": "ci", "secrets.REGISTRY_PASSWORD": "not-checked-by-this-registry"}
    conditions = {"github.event_name == 'push'": True, "always()": True}
    job_env = {key: substitute(str(value), values) for key, value in job["env"].items()} | LOCAL_ENV
    docker_config = tmp_path / "docker-config"
    docker_config.mkdir()
    wheels = fill_wheels("orchestrator", orchestrator_requirements())
    # Each run step's environment: the job's, this test run's scope label, the temporary docker config, pip offline.
    environment = {**job_env, "EPG_SCOPE": scope, "DOCKER_CONFIG": str(docker_config),
                   "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels), "PIP_NO_COMPILE": "1"}
    venv: Venv | None = None
    results: dict[str, subprocess.CompletedProcess[str]] = {}
    used: list[str] = []

    for step in job["steps"]:
        assert runs(step.get("if"), conditions), step
        action = step.get("uses", "")
        if action.startswith("actions/checkout@"):
            settings = {key: substitute(str(value), values) for key, value in (step.get("with") or {}).items()}
            if "repository" in settings:  # the orchestrator's repository, checked out beside the environment repository's files
                assert set(settings) == {"repository", "ref", "path"}, settings
                checkout = checkout_of_this_repository(repository / settings["path"])
            used.append("checkout" + (" orchestrator" if settings else ""))
        elif action.startswith("actions/setup-python@"):
            assert step["with"]["python-version"] == "3.11"
            venv = make_venv(tmp_path / "runner-python", wheels, with_pip=True)
            used.append("setup-python")
        elif action.startswith("actions/upload-artifact@"):
            assert step["with"]["path"].rstrip("/") == job_env["OUT"]
            used.append("upload-artifact")
        else:
            assert not action, f"a step this test does not know: {step}"
            assert venv is not None, "a run step before setup-python"
            started = time.monotonic()
            result = venv.run("bash", "-e", "-c", substitute(step["run"], values), cwd=repository, env=environment, timeout=1800)
            venv.timings[step["name"]] = round(time.monotonic() - started, 1)
            assert result.returncode == 0, f"{step['name']}:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
            results[step["name"]] = result
            script_step = re.search(r"env-repo-ci\.sh (\w+)", step["run"])
            used.append(script_step.group(1) if script_step else step["name"])

    assert used == ["checkout", "checkout orchestrator", "setup-python", "Install the SDK and the orchestrator from the checkout",
                    "pull", "build", "test", "Log in to the registry", "push", "upload-artifact"]

    # Installed from the checkout: the orchestrator's code (and so its images/ and sdk/) is the checkout's, editable.
    where = venv.run(venv.python, "-c", "import orchestrator.images.recipes as r; print(r.IMAGES)", cwd=tmp_path)
    assert where.stdout.strip() == str(checkout / "images"), where.stdout + where.stderr
    out = repository / job_env["OUT"]

    # build: the checkout's images are this tree's, found up to date by their content tags.
    built = json.loads((out / "build.json").read_text())
    assert [image["name"] for image in built["images"]] == ["policy-runtime", "env-cartpole"]
    assert {image["name"]: image["tag"] for image in built["images"]} == {name: images[name] for name in ("policy-runtime", "env-cartpole")}
    assert built["built"] == 0 and built["up_to_date"] == 2

    # test: the conformance checks and the baseline, in the image.
    checked = results["Check the environment image (conformance, baseline)"].stdout
    assert "CartPole-v1 in " + images["env-cartpole"] in checked
    assert "baseline runs through the sandbox" in checked and "failed" not in checked

    # login and push: to the loopback registry, with the login in the temporary docker config.
    assert "Login Succeeded" in results["Log in to the registry"].stdout
    assert registry in json.loads((docker_config / "config.json").read_text())["auths"]
    pushed = json.loads((out / "push.json").read_text())
    assert pushed["registry"] == registry
    assert [image["name"] for image in pushed["images"]][-2:] == ["policy-runtime", "env-cartpole"]
    for image in pushed["images"]:
        repository_name, _, version = image["tag"].rpartition(":")
        with urllib.request.urlopen(f"http://{registry}/v2/{repository_name}/tags/list", timeout=10) as response:
            assert version in json.loads(response.read())["tags"]
    assert {path.name for path in out.iterdir()} >= {"build.json", "push.json"}  # what upload-artifact publishes

    # The pull step once more, as the next push's run starts: it finds what this run published, each image checked
    # against push.json's ids (env-repo-ci.sh passes --pushed when the file exists).
    [pull] = [step for step in job["steps"] if "env-repo-ci.sh pull" in step.get("run", "")]
    again = venv.run("bash", "-e", "-c", pull["run"].replace("|| true", ""), cwd=repository, env=environment, timeout=900)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "pulling by tag" not in again.stderr
    pulled = json.loads((out / "pull.json").read_text())
    ids = {image["name"]: image["id"] for image in pushed["images"]}
    assert [image["name"] for image in pulled["images"]][-2:] == ["policy-runtime", "env-cartpole"]
    assert all(image["id"] == ids[image["name"]] for image in pulled["images"]), (pulled, pushed)  # the base only when it was missing
    print(f"workflow step timings (s): {venv.timings}")
