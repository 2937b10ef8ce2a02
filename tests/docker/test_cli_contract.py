"""The CLI's contract where it needs the engine: --json of the image, gc and evaluate commands, checks only the engine can make.

Exit codes: 0 ok, 1 bad input (or a failed check), 2 usage, 3 infrastructure. The commands run in this process
through typer's runner; the contract that needs no engine is in tests/unit/test_cli_json_and_exit_codes.py and
tests/unit/test_cli_reads_bad_records.py.
"""

from __future__ import annotations

import io
import json
import secrets

import pytest
import yaml
from docker.errors import NotFound
from docker.models.images import ImageCollection
from support.cli import REPO, invoke_cli

from orchestrator.backends.labels import CHECKOUT, IMAGE, INPUTS, MANAGED, PACKAGE, SCOPE, selector
from orchestrator.images.ownership import path_id

BASELINE = REPO / "environments" / "cartpole" / "baseline"


# --json per command -------------------------------------------------------------------------------

def test_images_list_json_gives_each_image_its_tag_state_and_size(images, engine):
    result = invoke_cli("images", "list", "--json")
    assert result.exit_code == 0, result.stderr
    listed = {row["name"]: row for row in result.json()["images"]}
    runtime = listed["policy-runtime"]
    assert runtime == {"name": "policy-runtime", "tag": images["policy-runtime"], "present": True, "pinned": None, "size_bytes": runtime["size_bytes"]}
    assert runtime["size_bytes"] == engine.client.images.get(images["policy-runtime"]).attrs["Size"] > 50 * 2**20
    assert listed["env-cartpole"]["tag"] == images["env-cartpole"] and listed["env-cartpole"]["present"] is True
    assert listed["agent-codex"]["pinned"].startswith("codex ")
    # The disk of the built images together: their shared layers (the base, at least) once, so less than the sum of sizes.
    built = [row for row in listed.values() if row["present"]]
    disk = result.json()["disk_bytes"]
    base = engine.client.images.get(images["policy-runtime"]).history()[-1]["Size"]
    assert max(row["size_bytes"] for row in built) <= disk <= sum(row["size_bytes"] for row in built) - (len(built) - 1) * base


def test_images_prune_json_lists_the_outdated_image_it_removed_and_keeps_the_current_ones(images, engine, builder, monkeypatch):
    """An image of ours whose inputs are no longer current is removed and listed; the current images and the base stay.

    The engine is shared with other checkouts and test runs: prune here sees only this test's stale image, the current
    images and the base, so it cannot remove anything of theirs.
    """
    own = f"test-prune-{secrets.token_hex(4)}"
    stale = f"epg-test/stale-{own}:1"
    dockerfile = f"FROM {images['env-probe']}\nLABEL org.evopolicygym.test=stale\n".encode()
    # Labelled as this checkout's build of the probe package, as images build labels what it makes.
    labels = {MANAGED: "true", IMAGE: "env-probe", INPUTS: "0" * 64, SCOPE: own,
              CHECKOUT: path_id(REPO), PACKAGE: path_id(REPO / "tests" / "environments" / "probe")}
    engine.client.images.build(fileobj=io.BytesIO(dockerfile), tag=stale, labels=labels, rm=True, forcerm=True)
    kept_ids = {engine.client.images.get(tag).id for tag in images.values()} | {builder.base_id()}
    listing = ImageCollection.list

    def visible(collection, *args, **kwargs):
        return [image for image in listing(collection, *args, **kwargs) if image.labels.get(SCOPE) == own or image.id in kept_ids]

    monkeypatch.setattr(ImageCollection, "list", visible)
    try:
        result = invoke_cli("images", "prune", "--json", "--environments", "tests/environments")
        assert result.exit_code == 0, result.stderr
        assert result.json() == {"removed": [stale], "kept": []}
        assert not engine.image_exists(stale)
        assert all(engine.image_exists(tag) for tag in images.values())
        assert engine.client.images.get(builder.base_id())
    finally:
        if engine.image_exists(stale):
            engine.client.images.remove(stale, force=True)


def test_gc_scope_json_counts_what_it_reaped_and_leaves_other_scopes_alone(images, engine, scope):
    """gc --scope X removes exactly the container, network and volume labelled X and counts them; a resource of another
    scope (another test run on the same engine) stays."""
    own, other = f"{scope}-gc-{secrets.token_hex(3)}", f"{scope}-gc-other-{secrets.token_hex(3)}"

    def labels(value: str) -> dict[str, str]:
        return {MANAGED: "true", SCOPE: value}

    container = engine.client.containers.create(images["env-probe"], command=["true"], labels=labels(own), network_mode="none")
    bystander = engine.client.containers.create(images["env-probe"], command=["true"], labels=labels(other), network_mode="none")
    network = engine.client.networks.create(f"epg-{own}", internal=True, labels=labels(own))
    volume = engine.client.volumes.create(f"epg-{own}", labels=labels(own))
    try:
        result = invoke_cli("gc", "--scope", own, "--json")
        assert result.exit_code == 0, result.stderr
        assert result.json() == {"containers": 1, "networks": 1, "volumes": 1, "directories": 0, "errors": []}
        for gone in (lambda: engine.client.containers.get(container.id), lambda: engine.client.networks.get(network.id),
                     lambda: engine.client.volumes.get(volume.name)):
            with pytest.raises(NotFound):
                gone()
        assert engine.client.containers.get(bystander.id).labels[SCOPE] == other
        again = invoke_cli("gc", "--scope", own, "--json")
        assert again.json() == {"containers": 0, "networks": 0, "volumes": 0, "directories": 0, "errors": []}
    finally:
        engine.reap(selector(scope=own))
        engine.reap(selector(scope=other))


def test_evaluate_json_and_evaluation_json_carry_their_provenance(scope, tmp_path, images):
    # --out, the short name of --output (tests/unit/test_cli_json_and_exit_codes.py), writes the files
    result = invoke_cli("evaluate", str(BASELINE), "-b", "cartpole", "-n", "2", "--json", "--out", str(tmp_path / "out"), scope=scope)
    assert result.exit_code == 0, result.stderr
    document = result.json()
    assert document == json.loads((tmp_path / "out" / "evaluation.json").read_text())
    assert document["schema"] == "epg.evaluation/1"
    assert json.loads((tmp_path / "out" / "feedback.json").read_text())["schema"] == "epg.feedback/1"
    assert document["software"]["orchestrator"] == "0.1.0" and document["software"]["epg_sdk"] == "0.1.0"
    assert document["images"]["policy_runtime"]["tag"] == images["policy-runtime"]
    assert document["images"]["environment"]["tag"] == images["env-cartpole"]
    assert all(entry["id"].startswith("sha256:") for entry in document["images"].values())
    assert document["benchmark_package"] == {"name": "epg-env-cartpole", "version": "0.1.0", "image": "env-cartpole"}
    assert document["episodes_run"] == 2 and document["wall_seconds"] > 0
    assert document["started_at"] <= document["ended_at"] and document["ended_at"].endswith("Z")


# spec check: what only the engine can check ----------------------------------------------------------

def test_spec_check_reports_a_missing_agent_image_as_field_path_and_reason_and_run_refuses_it(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"benchmark": "CartPole-v1", "agent": {"kind": "command", "image": "epg-test/no-such-image:0", "argv": ["true"]}}))
    problem = "agent.image: the engine has no image 'epg-test/no-such-image:0'"
    text = invoke_cli("spec", "check", str(spec))
    assert text.exit_code == 1
    assert f"{spec}: {problem}" in text.stderr
    result = invoke_cli("spec", "check", str(spec), "--json")
    assert result.exit_code == 1 and result.json()["valid"] is False
    assert any(line.startswith(problem) for line in result.json()["problems"]), result.json()["problems"]
    refused = invoke_cli("run", str(spec), "-o", str(tmp_path / "run"))
    assert refused.exit_code == 1 and problem in refused.stderr
    assert not (tmp_path / "run").exists()


def test_images_list_never_makes_a_missing_base(engine):
    result = invoke_cli("images", "list", "--base", "epg-test/no-such-base:0", "--json")
    assert result.exit_code == 0, result.stderr
    listed = result.json()["images"]
    assert {row["name"] for row in listed} >= {"policy-runtime", "env-cartpole", "agent-base"}
    assert all(row["tag"] is None and row["present"] is False and row["size_bytes"] == 0 for row in listed)
    assert "pulling" not in result.stderr and "bootstrapping" not in result.stderr
    assert not engine.image_exists("epg-test/no-such-base:0")
