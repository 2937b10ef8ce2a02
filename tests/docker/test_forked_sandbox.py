"""Forked Episode isolation: Episodes run in sandboxes a lane's zygote forks, and an attacker inside one cannot reach
the zygote, a sibling or the next Episode."""

from __future__ import annotations

from programs import STEADY

from epg_sdk.codes import EpisodeStatus
from orchestrator.backends.settings import SandboxTuning

FORKED = SandboxTuning(pool_size=2, isolation="forked", concurrency=1)


def _run(sandbox, program_dir, index=0):
    from orchestrator.kernel.program import capture_program

    episode = sandbox.plan("train", 0, index + 1)[index]
    return sandbox.run_episode(episode, capture_program(program_dir))


def test_cartpole_baseline_runs_in_a_forked_sandbox(open_sandbox, write_program):
    with open_sandbox(tuning=FORKED) as sandbox:
        first = _run(sandbox, write_program(STEADY))
        second = _run(sandbox, write_program(STEADY), index=1)
    assert first.status is EpisodeStatus.COMPLETED and first.steps == 500, first
    assert second.status is EpisodeStatus.COMPLETED and second.steps == 500, second
