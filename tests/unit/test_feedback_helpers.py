"""The SDK's helpers for a Benchmark whose Feedback extends the default one, and the gymnasium probe."""

from __future__ import annotations

import gymnasium as gym
from gymnasium import spaces

from epg_sdk.benchmark import (
    EPISODE_COLUMNS,
    Benchmark,
    BenchmarkSpec,
    Environment,
    EpisodeRecord,
    count_ends,
    episodes_csv,
    mean_steps,
    shorten_summaries,
    success_rate,
    with_failure_summaries,
)
from epg_sdk.gym_adapter import GymnasiumBenchmark, make_unwrapped, probe_environment


def _row(index: int, status: str = "completed", steps: int = 10, summary: dict | None = None) -> dict:
    return {"index": index, "status": status, "failure": None if status == "completed" else "timeout", "steps": steps,
            "return": 1.0, "scored_return": 1.0, "terminated": True, "truncated": False, "summary": summary}


def test_failed_episodes_get_the_failure_summary_and_completed_ones_keep_theirs():
    rows = [_row(0, summary={"end": "crash", "success": True}), _row(1, "policy_failure", summary={"steps": 3, "end": "not_ended"}),
            _row(2, "policy_failure", summary=None)]
    marked = with_failure_summaries(rows, {"end": "policy_failure", "success": False})
    assert [row["summary"] for row in marked] == [
        {"end": "crash", "success": True},
        {"steps": 3, "end": "policy_failure", "success": False},
        {"end": "policy_failure", "success": False},
    ]
    assert list(marked[1]["summary"]) == ["steps", "end", "success"]  # an existing key keeps its place
    assert rows[1]["summary"] == {"steps": 3, "end": "not_ended"}  # the rows given are not changed
    assert marked[0]["summary"] is not rows[0]["summary"]


def test_ends_are_counted_for_every_known_cause_then_for_the_others():
    rows = [_row(i, summary=s) for i, s in enumerate([{"end": "crash"}, {"end": "crash"}, {"end": "odd"}, {}])]
    assert count_ends(rows, ("goal", "crash")) == {"goal": 0, "crash": 2, "odd": 1, "unknown": 1}
    assert list(count_ends(rows, ("goal", "crash"))) == ["goal", "crash", "odd", "unknown"]
    assert count_ends([], ("goal",)) == {"goal": 0}


def test_summaries_after_the_detailed_ones_keep_only_the_keys_they_have():
    rows = [_row(i, summary={"end": "crash", "steps": i, "trace": "x" * 10}) for i in range(4)]
    rows[3]["summary"] = {"trace": "y"}
    shortened = shorten_summaries(rows, detailed=2, keys=("end", "steps"))
    assert shortened[:2] == rows[:2]
    assert [row["summary"] for row in shortened[2:]] == [{"end": "crash", "steps": 2}, {}]
    assert shortened[2]["index"] == 2 and rows[2]["summary"]["trace"] == "x" * 10


def test_mean_steps_and_success_rate_count_every_row_and_are_zero_for_none():
    rows = [_row(0, steps=4, summary={"success": True}), _row(1, steps=8, summary={"success": 1}), _row(2, steps=0, summary={})]
    assert mean_steps(rows) == 4.0
    assert success_rate(rows) == 1 / 3  # only True counts, not a truthy value
    assert mean_steps([]) == 0.0 and success_rate([]) == 0.0


def test_episodes_csv_has_the_row_columns_then_the_summary_values():
    rows = [_row(0, summary={"end": "crash", "distance": 1.5, "trace": "t"}), _row(1, "policy_failure", summary={})]
    text = episodes_csv(rows, EPISODE_COLUMNS[:4], ("end", "distance")).decode()
    assert text == "index,status,failure,steps,end,distance\n0,completed,,10,crash,1.5\n1,policy_failure,timeout,10,,\n"


class _Constant(Benchmark):
    """A Benchmark that is only ever asked for its Feedback."""

    spec = BenchmarkSpec(id="c", description="c", observation_space={}, action_space={}, horizon=5, failure_return=-1.0)

    def make_environment(self, payload: bytes) -> Environment:
        raise NotImplementedError

    def validate_action(self, action: object) -> object:
        return action


def test_the_default_feedback_csv_is_episodes_csv_of_its_table():
    records = [EpisodeRecord(index=0, status="completed", failure=None, steps=5, total_reward=2.5, terminated=True, truncated=False,
                             summary={"end": "goal"}),
               EpisodeRecord(index=1, status="policy_failure", failure="crash", steps=1, total_reward=0.5, terminated=False,
                             truncated=False)]
    feedback = _Constant().feedback(records)
    assert feedback.artifacts["episodes.csv"] == episodes_csv(feedback.values["episodes"])
    assert feedback.artifacts["episodes.csv"].decode().splitlines() == [
        ",".join(EPISODE_COLUMNS), "0,completed,,5,2.5,2.5,True,False", "1,policy_failure,crash,1,0.5,-1.0,False,False"]


class _Closable(gym.Env):
    """An environment that says whether it was closed."""

    observation_space = spaces.Discrete(2)
    action_space = spaces.Discrete(2)
    closed: list[int] = []

    def __init__(self, size: int = 1) -> None:
        self.size = size

    def close(self) -> None:
        _Closable.closed.append(self.size)


gym.register(id="EpgClosableProbe-v0", entry_point=_Closable, max_episode_steps=3)


def test_probe_environment_yields_the_unwrapped_environment_and_closes_it():
    _Closable.closed.clear()
    with probe_environment("EpgClosableProbe-v0", {"size": 4}) as env:
        assert type(env) is _Closable  # no TimeLimit, OrderEnforcing or checker wrapper
        assert env.size == 4 and _Closable.closed == []
    assert _Closable.closed == [4]
    assert type(make_unwrapped("CartPole-v1")).__name__ == "CartPoleEnv"


def test_probe_environment_closes_the_environment_when_reading_it_fails():
    _Closable.closed.clear()
    try:
        with probe_environment("EpgClosableProbe-v0") as env:
            raise KeyError(env.size)
    except KeyError as exc:
        assert exc.args == (1,)
    assert _Closable.closed == [1]


def test_a_gymnasium_benchmark_builds_its_environments_with_make_unwrapped():
    benchmark = GymnasiumBenchmark(env_id="EpgClosableProbe-v0", description="d", horizon=3, failure_return=0.0, make_kwargs={"size": 7})
    environment = benchmark.make_environment(b'{"seed": 1}')
    assert type(environment._env) is _Closable and environment._env.size == 7


def test_a_gymnasium_benchmark_marks_failed_summaries_and_adds_summary_columns_only_when_asked():
    records = [EpisodeRecord(index=0, status="completed", failure=None, steps=3, total_reward=3.0, terminated=False, truncated=True,
                             summary={"end": "time_limit", "size": 3}),
               EpisodeRecord(index=1, status="policy_failure", failure="timeout", steps=1, total_reward=0.0, terminated=False,
                             truncated=False, summary={"size": 1})]
    plain = GymnasiumBenchmark(env_id="EpgClosableProbe-v0", description="d", horizon=3, failure_return=-2.0)
    extended = GymnasiumBenchmark(env_id="EpgClosableProbe-v0", description="d", horizon=3, failure_return=-2.0,
                                  failure_summary={"end": "policy_failure"}, summary_columns=("end", "size"))
    default = Benchmark.feedback(plain, records)
    assert plain.feedback(records) == default
    feedback = extended.feedback(records)
    assert feedback.score == default.score == 0.5
    assert [row["summary"] for row in feedback.values["episodes"]] == [{"end": "time_limit", "size": 3}, {"size": 1, "end": "policy_failure"}]
    assert {k: v for k, v in feedback.values.items() if k != "episodes"} == {k: v for k, v in default.values.items() if k != "episodes"}
    assert list(feedback.values) == list(default.values)
    assert feedback.artifacts["episodes.csv"].decode().splitlines() == [
        ",".join((*EPISODE_COLUMNS, "end", "size")),
        "0,completed,,3,3.0,3.0,False,True,time_limit,3",
        "1,policy_failure,timeout,1,0.0,-2.0,False,False,policy_failure,1",
    ]
    assert records[1].summary == {"size": 1}
