"""Everything is labelled and reaped by label: by the sandbox, on start-up and by `gc`; `images prune` keeps to its checkout's images."""

from __future__ import annotations

import io
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from support.cli import invoke_cli

from orchestrator.backends.container_spec import ContainerSpec
from orchestrator.backends.labels import CHECKOUT, IMAGE, INPUTS, MANAGED, PACKAGE, SCOPE, LabelSet, owner_id, selector
from orchestrator.backends.workdirs import make_work_dir
from orchestrator.images.builder import ImageBuilder, default_cache_dir
from orchestrator.images.catalogue import discover
from orchestrator.images.ownership import Ledger, path_id
from orchestrator.kernel.program import capture_program
from orchestrator.orphans import reap_orphans

TEST_ENVIRONMENTS = Path(__file__).resolve().parents[1] / "environments"


def _labelled(engine, images, scope, owner, sandbox_id):
    labels = LabelSet(sandbox=sandbox_id, owner=owner, scope=scope).for_role("policy")
    return engine.start(ContainerSpec(image=images["policy-runtime"], command=("sleep", "300"), labels=labels))


def _dead_owner() -> str:
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    return f"{socket.gethostname()}:{finished.stdout.strip()}"


def test_sandbox_leaves_no_container_even_when_policies_crash(open_sandbox, write_program, engine, scope):
    crashing = write_program("import os\nos._exit(3)\n")
    with open_sandbox() as sandbox:
        episode = sandbox.plan("train", 0, 1)[0]
        sandbox.run_episode(episode, capture_program(crashing))
        sandbox_id = sandbox.labels.sandbox
        runners = engine.client.containers.list(all=True, filters={"label": selector(sandbox=sandbox_id, role="runner")})
        assert runners
        # Under its read-only root the runner works in its tmpfs, where a simulator writing beside itself can write.
        assert runners[0].exec_run(["sh", "-c", "pwd && touch ./_written && ls ./_written"]).output.decode().split() == ["/tmp", "./_written"]
    assert engine.client.containers.list(all=True, filters={"label": selector(sandbox=sandbox_id)}) == []


def test_leftovers_of_a_dead_process_are_reaped_and_live_ones_kept(engine, images, scope):
    dead = _dead_owner()
    orphan = _labelled(engine, images, scope, dead, "orphan-sandbox")
    alive = _labelled(engine, images, scope, owner_id(), "live-sandbox")
    # Work directories as a killed Host leaves them (its pid in the name) and as this live process has one.
    orphan_dir = Path(tempfile.gettempdir()) / f"epg-sandbox-{dead.rpartition(':')[2]}-{secrets.token_hex(4)}"
    orphan_dir.mkdir(mode=0o700)
    (orphan_dir / "lane0").mkdir()
    live_dir = make_work_dir("sandbox")
    try:
        report = reap_orphans(engine)
        remaining = {c.id for c in engine.client.containers.list(all=True, filters={"label": selector(scope=scope)})}
        # Every Run starting on another worker reaps orphans too and may have taken this one first, so the count
        # proves nothing here; what must hold is that the orphan is gone, the live one kept and nothing failed.
        assert report.errors == []
        assert orphan.id not in remaining
        assert alive.id in remaining
        assert not orphan_dir.exists() and live_dir.is_dir()
    finally:
        engine.remove(alive)
        engine.remove(orphan)
        shutil.rmtree(orphan_dir, ignore_errors=True)
        shutil.rmtree(live_dir)


def test_gc_all_reaps_by_scope_label(engine, images, scope):
    container = _labelled(engine, images, scope, "elsewhere:1", "gc-sandbox")
    result = invoke_cli("gc", "--scope", scope)
    assert result.exit_code == 0, result.stderr
    assert "reaped 1 containers" in result.stdout
    assert engine.client.containers.list(all=True, filters={"id": container.id}) == []


def _labelled_image(engine, base: str, tag: str, labels: dict[str, str]) -> str:
    """A one-line image FROM base (no layer of its own) under tag with labels; returns its id."""
    image, _log = engine.client.images.build(fileobj=io.BytesIO(f"FROM {base}\n".encode()), tag=tag, labels=labels, rm=True)
    return image.id


def test_images_prune_removes_only_this_checkouts_outdated_images(engine, images, scope, tmp_path):
    ours, theirs = path_id(tmp_path / "ours"), path_id(tmp_path / "theirs")
    probe = next(p for p in discover([TEST_ENVIRONMENTS], installed=False) if p.image == "env-probe")
    managed = {MANAGED: "true", IMAGE: "prune-probe", SCOPE: scope}
    made = {
        "ours-outdated": {**managed, CHECKOUT: ours},
        "ours-env-outdated": {**managed, CHECKOUT: ours, PACKAGE: path_id(probe.root)},
        "ours-env-of-another-catalogue": {**managed, CHECKOUT: ours, PACKAGE: path_id(tmp_path / "elsewhere")},
        "theirs-outdated": {**managed, CHECKOUT: theirs},
        "unlabelled": {**managed, CHECKOUT: ""},  # built FROM one of ours, it can only blank the label it inherits
        "ours-outdated-but-current-elsewhere": {**managed, CHECKOUT: ours},
    }
    tags = {name: f"epg/prune-probe:{scope}-{name}" for name in made}
    (tmp_path / "living").mkdir()  # another checkout of this user, which last found one of them current
    ledgers = [Ledger(default_cache_dir() / "checkouts", tmp_path / name) for name in ("living", "ours")]
    try:
        ledgers[0].record({"prune-probe": tags["ours-outdated-but-current-elsewhere"]})
        for name, labels in made.items():  # INPUTS differs, so that each is an image of its own
            _labelled_image(engine, images["policy-runtime"], tags[name], {**labels, INPUTS: name})
        builder = ImageBuilder(engine.client, environments=[TEST_ENVIRONMENTS], checkout=tmp_path / "ours")
        result = builder.prune()
        assert set(result.removed) == {tags["ours-outdated"], tags["ours-env-outdated"]}
        kept = {kept.image: kept.reason for kept in result.kept if kept.image in tags.values()}
        assert kept[tags["theirs-outdated"]] == f"built by another checkout ({CHECKOUT}={theirs})"
        assert kept[tags["unlabelled"]].startswith("no checkout label")
        assert kept[tags["ours-env-of-another-catalogue"]].startswith("built from an environment package outside this catalogue")
        elsewhere = tags["ours-outdated-but-current-elsewhere"]
        assert kept[elsewhere] == f"{elsewhere} is current for the checkout at {tmp_path / 'living'}"
        present = {name for name, tag in tags.items() if engine.image_exists(tag)}
        assert present == {"theirs-outdated", "unlabelled", "ours-env-of-another-catalogue", "ours-outdated-but-current-elsewhere"}
        assert all(engine.image_exists(tag) for tag in images.values())  # current images of this run stay
    finally:
        for tag in tags.values():
            if engine.image_exists(tag):
                engine.client.images.remove(tag, noprune=True)
        for ledger in ledgers:
            ledger.path.unlink(missing_ok=True)
