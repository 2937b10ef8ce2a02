"""Everything is labelled and reaped by label: by the sandbox, on start-up and by `gc`."""

from __future__ import annotations

import socket
import subprocess
import sys

from orchestrator.backends.container_spec import ContainerSpec
from orchestrator.backends.labels import LabelSet, owner_id, selector
from orchestrator.compose import reap_orphans
from orchestrator.kernel.program import capture_program


def _labelled(engine, images, scope, owner, session):
    labels = LabelSet(session=session, owner=owner, scope=scope).for_role("policy")
    return engine.start(ContainerSpec(image=images["policy-runtime"], command=("sleep", "300"), labels=labels))


def _dead_owner() -> str:
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    return f"{socket.gethostname()}:{finished.stdout.strip()}"


def test_sandbox_leaves_no_container_even_when_policies_crash(open_sandbox, write_program, engine, scope):
    crashing = write_program("import os\nos._exit(3)\n")
    with open_sandbox() as sandbox:
        episode = sandbox.plan("train", 0, 1)[0]
        sandbox.run_episode(episode, capture_program(crashing))
        session = sandbox.labels.session
        assert engine.client.containers.list(all=True, filters={"label": selector(session=session, role="runner")})
    assert engine.client.containers.list(all=True, filters={"label": selector(session=session)}) == []


def test_leftovers_of_a_dead_process_are_reaped_and_live_ones_kept(engine, images, scope):
    orphan = _labelled(engine, images, scope, _dead_owner(), "orphan-session")
    alive = _labelled(engine, images, scope, owner_id(), "live-session")
    try:
        report = reap_orphans(engine)
        remaining = {c.id for c in engine.client.containers.list(all=True, filters={"label": selector(scope=scope)})}
        assert report.containers >= 1
        assert orphan.id not in remaining
        assert alive.id in remaining
    finally:
        engine.remove(alive)
        engine.remove(orphan)


def test_gc_all_reaps_by_scope_label(engine, images, scope):
    container = _labelled(engine, images, scope, "elsewhere:1", "gc-session")
    result = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli.app", "gc", "--scope", scope], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert "reaped 1 containers" in result.stdout
    assert engine.client.containers.list(all=True, filters={"id": container.id}) == []
