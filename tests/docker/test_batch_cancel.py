"""The real sandbox's pool runs one batch at a time, and a cancelled batch starts no further Episode.

This is what ends a Submission that outlives the agent phase: the Host cancels
its batch, the Episodes under way end, and only then can Validation's batch
start on the same lanes.
"""

from __future__ import annotations

import threading
import time

from orchestrator.backends.settings import SandboxTuning
from orchestrator.kernel.infrastructure import InfrastructureError
from orchestrator.kernel.ports import EpisodeJob
from orchestrator.kernel.program import capture_program

# About ten CartPole steps (action 0 topples the pole) of 0.3 s each: some three seconds an Episode.
SLOW = """
import time


class Policy:
    def act(self, observation):
        time.sleep(0.3)
        return 0


def make_policy(context):
    return Policy()
"""
QUICK = """
def make_policy(context):
    return type("Policy", (), {"act": lambda self, observation: 0})()
"""
EPISODES = 12


def test_a_cancelled_batch_starts_no_further_episode_and_the_next_batch_waits_for_its_end(open_sandbox, write_program):
    slow, quick = capture_program(write_program(SLOW)), capture_program(write_program(QUICK))
    with open_sandbox(tuning=SandboxTuning(concurrency=2, pool_size=2)) as sandbox:
        episodes = sandbox.plan("train", 3, EPISODES)
        ended: list[float] = []
        first: dict[str, object] = {}

        def run_first() -> None:
            try:
                first["outcomes"] = sandbox.run_episodes([EpisodeJob(episode=e, program=slow) for e in episodes],
                                                         lambda outcome: ended.append(time.monotonic()))
            except InfrastructureError as exc:
                first["error"] = exc
            first["ended_at"] = time.monotonic()

        runner = threading.Thread(target=run_first)
        runner.start()
        deadline = time.monotonic() + 120
        while not ended:  # let the batch get going: one Episode has ended, the next ones are under way
            assert time.monotonic() < deadline and runner.is_alive(), first
            time.sleep(0.05)

        second: dict[str, object] = {}
        follower = threading.Thread(target=lambda: second.update(
            outcomes=sandbox.run_episodes([EpisodeJob(episode=episodes[0], program=quick)],
                                          lambda outcome: second.setdefault("episode_ended_at", time.monotonic()))))
        follower.start()
        time.sleep(4.0)  # long enough for a quick Episode, short beside the slow batch's twenty seconds
        assert "episode_ended_at" not in second, "the second batch ran while the first was under way"

        cancelled_at = time.monotonic()
        assert sandbox.container_pool.cancel_batch()
        ended_at_cancel = len(ended)
        runner.join(60)
        follower.join(60)

    assert not runner.is_alive() and not follower.is_alive()
    assert "outcomes" not in first and "cancelled" in str(first["error"])
    # The Episodes under way at the cancel (one per lane) ended; none started after it.
    assert len(ended) <= ended_at_cancel + 2 < EPISODES
    assert first["ended_at"] - cancelled_at < 30, "the cancelled batch ran on"
    assert second["episode_ended_at"] > first["ended_at"], "the second batch began before the first had ended"
    assert [o.status.value for o in second["outcomes"]] == ["completed"]
