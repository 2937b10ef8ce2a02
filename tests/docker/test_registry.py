"""Images through a real registry on loopback, a plain `docker build` of images/, and the example CI script.

The registry is Debian's `docker-registry`, installed here when it is missing (CI runs as root on
a fresh machine) and served on 127.0.0.1 on a free port; the engine treats loopback registries as
insecure-allowed. When it cannot be installed or started the tests fail with the reason.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest
from docker.errors import ImageNotFound
from support.cli import invoke_cli
from support.loopback_registry import free_port, serving_registry

from orchestrator.backends.engine import DockerEngine
from orchestrator.images import registry as registries

REPO = Path(__file__).resolve().parents[2]
CI_SCRIPT = REPO / "examples" / "ci" / "env-repo-ci.sh"
EPG = f"{sys.executable} -m orchestrator.cli.app"
PRINT_VERSIONS = ["python3", "-c", "import numpy, google.protobuf; print('numpy', numpy.__version__, 'protobuf', google.protobuf.__version__)"]
VERSIONS = "numpy 2.4.6 protobuf 7.36.2"


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A registry on 127.0.0.1:PORT with its storage in a temporary directory; stopped at the end."""
    with serving_registry(tmp_path_factory.mktemp("registry")) as address:
        yield address


def _tags_in(address: str, repository: str) -> list[str]:
    with urllib.request.urlopen(f"http://{address}/v2/{repository}/tags/list", timeout=5) as response:
        return json.loads(response.read())["tags"] or []


def _run(engine: DockerEngine, image: str, command: list[str]) -> str:
    output = engine.client.containers.run(image, command, remove=True, network_disabled=True, network_mode="none")
    return output.decode().strip()


def test_policy_runtime_round_trips_through_a_loopback_registry(engine, images, registry):
    source = engine.client.images.get(images["policy-runtime"])
    name = f"registry-test-{secrets.token_hex(4)}"
    local = f"epg/{name}:{images['policy-runtime'].rpartition(':')[2]}"  # a test-only repository: other tests keep theirs
    source.tag(local)
    pushed = registries.push(engine.client, registry, [(name, local)], print)
    assert [t.remote for t in pushed] == [f"{registry}/{local}"]
    assert _tags_in(registry, f"epg/{name}") == [local.rpartition(":")[2]]
    engine.client.images.remove(local, noprune=True)
    with pytest.raises(ImageNotFound):
        engine.client.images.get(local)

    (pulled,) = registries.pull(engine.client, registry, [(name, local)], print)
    try:
        assert pulled.image_id == source.id  # the image id is the config's digest: the same after a round trip
        assert engine.client.images.get(local).id == source.id
        with pytest.raises(ImageNotFound):
            engine.client.images.get(pulled.remote)  # the registry's tag is not left behind
        assert _run(engine, local, PRINT_VERSIONS) == VERSIONS
    finally:
        engine.client.images.remove(local, noprune=True)


def test_a_pull_checked_against_the_push_refuses_an_image_moved_behind_its_tag(engine, images, registry):
    name = f"registry-test-{secrets.token_hex(4)}"
    local = f"epg/{name}:{images['policy-runtime'].rpartition(':')[2]}"
    genuine = engine.client.images.get(images["policy-runtime"])
    genuine.tag(local)
    (pushed,) = registries.push(engine.client, registry, [(name, local)], print)
    assert pushed.image_id == genuine.id
    # Whoever writes to the registry moves the tag to another image (here: the CartPole environment).
    other = engine.client.images.get(images["env-cartpole"])
    other.tag(pushed.remote)
    try:
        for line in engine.client.api.push(pushed.remote.rpartition(":")[0], tag=local.rpartition(":")[2], stream=True, decode=True):
            assert "error" not in line, line
    finally:
        engine.client.images.remove(pushed.remote, noprune=True)
    engine.client.images.remove(local, noprune=True)
    with pytest.raises(registries.RegistryError, match=rf"{name}: .* is {other.id}, not the image pushed \({genuine.id}\): refused"):
        registries.pull(engine.client, registry, [(name, local)], print, expected_ids={name: pushed.image_id})
    with pytest.raises(ImageNotFound):
        engine.client.images.get(local)  # nothing was tagged as ours
    with pytest.raises(ImageNotFound):
        engine.client.images.get(pushed.remote)  # and the registry's tag was not left behind
    (unchecked,) = registries.pull(engine.client, registry, [(name, local)], print)  # by tag alone, the swap goes through
    try:
        assert unchecked.image_id == other.id
    finally:
        engine.client.images.remove(local, noprune=True)
    with pytest.raises(registries.RegistryError, match="not among the images pushed"):
        registries.pull(engine.client, registry, [(name, local)], print, expected_ids={})


def test_pull_of_an_image_the_registry_lacks_names_it(engine, registry):
    with pytest.raises(registries.RegistryError, match=r"nothing: pull of 127\.0\.0\.1:\d+/epg/nothing:0000 failed"):
        registries.pull(engine.client, registry, [("nothing", "epg/nothing:0000")], print)


def test_push_to_a_registry_that_does_not_answer_fails_clearly(engine, images):
    with pytest.raises(registries.RegistryError, match="policy-runtime: "):
        registries.push(engine.client, f"127.0.0.1:{free_port()}", [("policy-runtime", images["policy-runtime"])], print)


def test_push_of_an_image_that_is_not_built_says_so(engine):
    with pytest.raises(registries.RegistryError, match="is not built; run `epg-orchestrate images build nothing`"):
        registries.push(engine.client, "127.0.0.1:1", [("nothing", "epg/nothing:0000")], print)


@pytest.mark.parametrize("bad", ["http://127.0.0.1:5000", "127.0.0.1:5000/path", ""])
def test_a_registry_is_host_and_port_only(bad):
    with pytest.raises(registries.RegistryError, match="HOST or HOST:PORT"):
        registries.check_registry(bad)


def test_policy_runtime_builds_with_plain_docker_build_from_the_context_command(engine, images, tmp_path):
    made = invoke_cli("images", "context", "policy-runtime", str(tmp_path / "context"), "--json", timeout=900)
    assert made.exit_code == 0, made.stderr
    written = json.loads(made.stdout)
    context = Path(written["directory"])
    assert written["tag"] == images["policy-runtime"]  # the context is the builder's: same inputs, same tag
    assert (context / "Dockerfile").read_bytes() == (REPO / "images" / "policy-runtime" / "Dockerfile").read_bytes()
    assert (context / "wheels" / "requirements.txt").is_file() and any(context.glob("wheels/numpy-*.whl"))
    assert (context / "lib").is_dir()
    assert set(written["build_args"]) == {"BASE", "SMOKE"}
    tag = f"epg-test/hand-built:{secrets.token_hex(6)}"
    args = [item for key, value in written["build_args"].items() for item in ("--build-arg", f"{key}={value}")]
    built = subprocess.run(["docker", "build", "--no-cache", *args, "-t", tag, str(context)], capture_output=True, text=True, timeout=900)
    try:
        assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
        assert _run(engine, tag, PRINT_VERSIONS) == VERSIONS
        smoke = written["build_args"]["SMOKE"]
        assert _run(engine, tag, ["python3", "-c", f"import {smoke}; print('imported')"]) == "imported"
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)


def test_context_refuses_a_directory_that_is_not_empty(tmp_path):
    (tmp_path / "something").write_text("x")
    made = invoke_cli("images", "context", "policy-runtime", str(tmp_path))
    assert made.exit_code == 1
    assert "is not empty" in made.stderr


def ci_step(step: str, registry: str, out: Path, scope: str = "") -> subprocess.CompletedProcess:
    environment = {
        **os.environ, "EPG": EPG, "ENVIRONMENTS": "environments", "ENV_IMAGE": "env-cartpole", "BENCHMARK": "cartpole",
        "REGISTRY": registry, "OUT": str(out), "EPG_SCOPE": scope,
    }
    return subprocess.run(["sh", str(CI_SCRIPT), step], capture_output=True, text=True, cwd=REPO, env=environment, timeout=900)


def test_the_example_ci_script_names_its_steps(tmp_path):
    wrong = ci_step("deploy", "127.0.0.1:1", tmp_path)
    assert wrong.returncode == 2 and "usage:" in wrong.stderr
