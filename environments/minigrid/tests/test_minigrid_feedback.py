"""What a MiniGrid Episode tells its Program's author: success, termination cause, events and a bounded trace."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import gymnasium as gym
import pytest
from minigrid.core.world_object import Box, Door, Key

from epg_env_minigrid import TRACED_EPISODES, make_doorkey, make_fourrooms
from epg_env_minigrid.episode import EVENT_LIMIT, TRACE_HEAD, TRACE_TAIL, MiniGridEpisode
from epg_sdk.benchmark import EpisodeRecord
from epg_sdk.checks import FEEDBACK_LIMIT_BYTES
from epg_sdk.protocol import values
from epg_sdk.runtime.episode_loop import SUMMARY_LIMIT_BYTES

ENTRY = re.compile(r"^(\d+) (left|right|forward|pickup|drop|toggle|done) (\d+),(\d+) (east|south|west|north)$")
PUBLISHED_SUBMISSION_MAX = 128
ASSESSMENT_EPISODES = 256


def raw_episode(env_id: str = "MiniGrid-DoorKey-16x16-v0", seed: int = 5, horizon: int = 1000) -> tuple[MiniGridEpisode, object]:
    """A recorded Episode around a simulator this test can also reach into, to stage events."""
    env = gym.make(env_id, disable_env_checker=True).unwrapped
    episode = MiniGridEpisode(env, seed, horizon=horizon)
    episode.reset()
    return episode, env


def long_episode_summary() -> dict:
    """The summary of a DoorKey Episode that uses its whole horizon of 1000 steps, every kind of action taken."""
    benchmark = make_doorkey()
    environment = benchmark.make_environment(benchmark.plan("train", 1, 1)[0])
    environment.reset()
    for step in range(benchmark.spec.horizon):
        environment.step(benchmark.validate_action([2, 2, 1, 2, 0, 3, 5, 4, 6][step % 9]))
    summary = environment.summary()
    environment.close()
    return summary


def test_a_long_episode_keeps_the_first_and_last_steps_with_a_marker_between() -> None:
    summary = long_episode_summary()
    trace = summary["trace"]
    assert len(trace) == TRACE_HEAD + 1 + TRACE_TAIL
    assert trace[TRACE_HEAD] == f"... {1000 - TRACE_HEAD - TRACE_TAIL} steps omitted ..."
    steps = [int(ENTRY.match(entry).group(1)) for entry in trace[:TRACE_HEAD] + trace[TRACE_HEAD + 1:]]
    assert steps == list(range(1, TRACE_HEAD + 1)) + list(range(1000 - TRACE_TAIL + 1, 1001))
    assert trace[0].split()[1] == "forward" and trace[-1].split()[1] == ["forward", "forward", "right", "forward", "left",
                                                                        "pickup", "toggle", "drop", "done"][999 % 9]
    assert (summary["steps"], summary["termination"], summary["success"]) == (1000, "time_limit", False)
    assert summary["mission"] == "use the key to open the door and then get to the goal"


def test_a_short_episode_keeps_every_step_without_a_marker() -> None:
    benchmark = make_fourrooms()
    environment = benchmark.make_environment(benchmark.plan("train", 0, 1)[0])
    environment.reset()
    start = environment.summary()["start"]
    for action in (1, 2, 2, 0, 2):
        environment.step(action)
    summary = environment.summary()
    environment.close()
    assert len(summary["trace"]) == 5 and all(ENTRY.match(entry) for entry in summary["trace"])
    assert [entry.split()[1] for entry in summary["trace"]] == ["right", "forward", "forward", "left", "forward"]
    last = ENTRY.match(summary["trace"][-1])
    assert summary["end"] == {"x": int(last.group(3)), "y": int(last.group(4)), "direction": last.group(5)}
    assert set(start) == {"x", "y", "direction"}
    # Five steps, then the Episode ended before the horizon: what a policy failure leaves.
    assert (summary["steps"], summary["termination"], summary["success"]) == (5, "stopped", False)


def test_the_trace_follows_the_agent() -> None:
    episode, env = raw_episode("MiniGrid-FourRooms-v0", seed=11, horizon=100)
    before = (int(env.agent_pos[0]), int(env.agent_pos[1]), int(env.agent_dir))
    episode.step(1)  # turn right: same cell, next direction
    after_turn = (int(env.agent_pos[0]), int(env.agent_pos[1]), int(env.agent_dir))
    assert after_turn[:2] == before[:2] and after_turn[2] == (before[2] + 1) % 4
    names = ("east", "south", "west", "north")
    assert episode.trace() == [f"1 right {before[0]},{before[1]} {names[after_turn[2]]}"]


def test_pickups_drops_doors_and_boxes_are_events() -> None:
    episode, env = raw_episode()
    env.grid.set(*env.front_pos, Key("red"))
    episode.step(3)  # pick up the red key
    episode.step(4)  # drop it again
    episode.step(3)
    env.grid.set(*env.front_pos, Door("red", is_locked=True))
    episode.step(5)  # unlock with the key held
    episode.step(5)  # close
    episode.step(5)  # open
    env.grid.set(*env.front_pos, Box("green", contains=Key("blue")))
    episode.step(5)  # open the box: its key is left in its place
    summary = episode.summary()
    assert summary["events"] == [
        "1: picked up red key", "2: dropped red key", "3: picked up red key",
        "4: unlocked red door", "5: closed red door", "6: opened red door", "7: opened green box",
    ]
    assert summary["carrying"] == "red key"


def test_events_are_bounded_with_a_count_of_the_rest() -> None:
    episode, env = raw_episode()
    env.grid.set(*env.front_pos, Key("yellow"))
    for _ in range(40):
        episode.step(3)
        episode.step(4)
    events = episode.summary()["events"]
    assert len(events) == EVENT_LIMIT + 1
    assert events[-1] == f"... {80 - EVENT_LIMIT} more events"
    assert events[:2] == ["1: picked up yellow key", "2: dropped yellow key"]


def test_a_summary_fits_the_runner_bound_and_holds_no_seed() -> None:
    summary = long_episode_summary()
    size = values.encode(summary).ByteSize()
    assert size < SUMMARY_LIMIT_BYTES // 8
    assert "seed" not in json.dumps(summary)
    assert set(summary) == {"mission", "success", "termination", "steps", "start", "end", "carrying", "events", "trace"}


def _records(count: int, summary: dict) -> list[EpisodeRecord]:
    return [
        EpisodeRecord(index=i, status="completed" if i % 4 else "policy_failure", failure=None if i % 4 else "timeout",
                      steps=summary["steps"], total_reward=0.0, terminated=False, truncated=True, summary=summary)
        for i in range(count)
    ]


def test_feedback_counts_successes_and_terminations() -> None:
    benchmark = make_fourrooms()
    won = {"success": True, "termination": "goal_reached", "steps": 12, "trace": []}
    lost = {"success": False, "termination": "time_limit", "steps": 100, "trace": []}
    records = [
        EpisodeRecord(index=0, status="completed", failure=None, steps=12, total_reward=0.892, terminated=True, truncated=False, summary=won),
        EpisodeRecord(index=1, status="completed", failure=None, steps=100, total_reward=0.0, terminated=False, truncated=True, summary=lost),
        EpisodeRecord(index=2, status="policy_failure", failure="timeout", steps=3, total_reward=0.0, terminated=False, truncated=False,
                      summary={"success": False, "termination": "stopped", "steps": 3, "trace": []}),
    ]
    feedback = benchmark.feedback(records)
    assert feedback.score == pytest.approx(0.892 / 3)
    assert feedback.values["success_rate"] == pytest.approx(1 / 3)
    assert feedback.values["terminations"] == {"goal_reached": 1, "time_limit": 1, "stopped": 1}
    assert [e["summary"]["termination"] for e in feedback.values["episodes"]] == ["goal_reached", "time_limit", "stopped"]
    assert feedback.values["policy_failures"] == 1


def test_feedback_of_an_assessment_of_long_episodes_stays_within_the_feedback_bound() -> None:
    summary = long_episode_summary()
    feedback = make_doorkey().feedback(_records(ASSESSMENT_EPISODES, summary))
    episodes = feedback.values["episodes"]
    assert [("trace" in e["summary"]) for e in episodes] == [True] * TRACED_EPISODES + [False] * (ASSESSMENT_EPISODES - TRACED_EPISODES)
    assert all(e["summary"]["trace_omitted"] is True for e in episodes[TRACED_EPISODES:])
    assert episodes[-1]["summary"]["events"] == summary["events"]
    assert values.encode(feedback.values).ByteSize() < FEEDBACK_LIMIT_BYTES
    assert TRACED_EPISODES >= PUBLISHED_SUBMISSION_MAX


def test_a_failed_episode_counts_no_success_even_if_its_summary_says_so() -> None:
    summary = {"success": True, "termination": "goal_reached", "steps": 4, "trace": []}
    record = EpisodeRecord(index=0, status="policy_failure", failure="crashed", steps=4, total_reward=0.9, terminated=True,
                           truncated=False, summary=summary)
    feedback = make_fourrooms().feedback([record, replace(record, index=1, status="completed", failure=None)])
    assert feedback.values["success_rate"] == 0.5
    assert feedback.score == pytest.approx(0.45)
