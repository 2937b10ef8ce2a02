"""What the two highway-env Benchmarks share: the end causes of an Episode, their Feedback, their timing and lane names."""

from __future__ import annotations

from typing import Any, Callable

import gymnasium as gym

from epg_sdk.benchmark import (
    EPISODE_COLUMNS,
    Environment,
    EpisodeRecord,
    Feedback,
    count_ends,
    episodes_csv,
    mean_steps,
    shorten_summaries,
    success_rate,
    with_failure_summaries,
)
from epg_sdk.gym_adapter import GymnasiumBenchmark

# Why an Episode ended: a closed set, the value of every Episode summary's `end`.
GOAL_REACHED = "goal_reached"  # Parking: the car stands in its spot (highway-env's is_success)
CRASH = "crash"  # the ego vehicle hit a vehicle, an obstacle or a wall
OFF_ROAD = "off_road"  # Roundabout: the time limit came while the ego vehicle was off the road
TIME_LIMIT = "time_limit"  # the Episode ran its horizon (or highway-env's duration) to the end
POLICY_FAILURE = "policy_failure"  # the Program failed (crash, timeout, invalid action); set by feedback()
NOT_ENDED = "not_ended"  # what an Environment says when asked before its Episode ended
END_CAUSES = (GOAL_REACHED, CRASH, OFF_ROAD, TIME_LIMIT, POLICY_FAILURE)

# Feedback keeps the whole summary, trace included, of this many Episodes (in plan order); the
# summaries of later Episodes keep only success and end, so that Feedback stays bounded.
MAX_DETAILED_EPISODES = 128
SHORT_SUMMARY_KEYS = ("success", "end")


class HighwayBenchmark(GymnasiumBenchmark):
    """A GymnasiumBenchmark (made with highway-env's default configuration) whose Feedback adds the
    Episodes' end causes, success rate and summaries.

    environment_factory(env, seed) wraps each fresh environment; csv_columns names the
    summary values (besides success and end) that `episodes.csv` carries for each Episode.
    """

    def __init__(
        self,
        *,
        env_id: str,
        description: str,
        horizon: int,
        failure_return: float,
        parameters: dict[str, Any],
        readme: str,
        environment_factory: Callable[[gym.Env, int], Environment],
        csv_columns: tuple[str, ...],
    ) -> None:
        super().__init__(env_id=env_id, description=description, horizon=horizon, failure_return=failure_return,
                         parameters=parameters, readme=readme, environment_factory=environment_factory)
        self._csv_columns = csv_columns

    def feedback(self, records: list[EpisodeRecord]) -> Feedback:
        """The SDK's default Feedback, plus `success_rate`, `ends` (count per end cause), `mean_steps`
        and `shortened_summaries`.

        A failed Episode's summary says `end: policy_failure` and `success: false`.
        Episodes after the first MAX_DETAILED_EPISODES keep only SHORT_SUMMARY_KEYS in
        their summary (`shortened_summaries` counts them); `episodes.csv` has every
        Episode's summary values but the trace.
        """
        base = super().feedback(records)
        episodes = with_failure_summaries(base.values["episodes"], {"end": POLICY_FAILURE, "success": False})
        values = {
            **base.values,
            "episodes": shorten_summaries(episodes, detailed=MAX_DETAILED_EPISODES, keys=SHORT_SUMMARY_KEYS),
            "success_rate": success_rate(episodes),
            "ends": count_ends(episodes, END_CAUSES),
            "mean_steps": mean_steps(episodes),
            "shortened_summaries": max(0, len(episodes) - MAX_DETAILED_EPISODES),
        }
        table = episodes_csv(episodes, EPISODE_COLUMNS, ("success", "end", *self._csv_columns))
        return Feedback(score=base.score, values=values, artifacts={"episodes.csv": table})


def timing_parameters(config: dict[str, Any]) -> dict[str, Any]:
    """The public timing of a highway-env configuration: decisions and simulated steps per second, and its duration."""
    return {
        "policy_frequency": int(config["policy_frequency"]),
        "simulation_frequency": int(config["simulation_frequency"]),
        "duration_s": float(config["duration"]),
    }


def lane_name(lane_index: Any) -> str:
    """A road lane's index as text, e.g. `b-c-5` (`none` for no lane)."""
    return "-".join(str(part) for part in lane_index) if lane_index else "none"
