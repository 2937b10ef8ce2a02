"""What the two highway-env Benchmarks share: the end causes of an Episode, their Feedback, their timing and lane names."""

from __future__ import annotations

from typing import Any

from epg_sdk.benchmark import (
    EpisodeRecord,
    Feedback,
    count_ends,
    mean_steps,
    shorten_summaries,
    success_rate,
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
FAILURE_SUMMARY = {"end": POLICY_FAILURE, "success": False}  # what Feedback says in a failed Episode's summary

# Feedback keeps the whole summary, trace included, of this many Episodes (in plan order); the
# summaries of later Episodes keep only success and end, so that Feedback stays bounded.
MAX_DETAILED_EPISODES = 128
SHORT_SUMMARY_KEYS = ("success", "end")


class HighwayBenchmark(GymnasiumBenchmark):
    """A GymnasiumBenchmark (made with highway-env's default configuration) whose Feedback adds the
    Episodes' end causes, success rate and summaries.

    Made with failure_summary=FAILURE_SUMMARY and summary_columns ("success", "end", ...), the
    summary values that `episodes.csv` carries for each Episode.
    """

    def feedback(self, records: list[EpisodeRecord]) -> Feedback:
        """The SDK's default Feedback, plus `success_rate`, `ends` (count per end cause), `mean_steps`
        and `shortened_summaries`.

        A failed Episode's summary says `end: policy_failure` and `success: false`.
        Episodes after the first MAX_DETAILED_EPISODES keep only SHORT_SUMMARY_KEYS in
        their summary (`shortened_summaries` counts them); `episodes.csv` has every
        Episode's summary values but the trace.
        """
        base = super().feedback(records)
        episodes = base.values["episodes"]
        values = {
            **base.values,
            "episodes": shorten_summaries(episodes, detailed=MAX_DETAILED_EPISODES, keys=SHORT_SUMMARY_KEYS),
            "success_rate": success_rate(episodes),
            "ends": count_ends(episodes, END_CAUSES),
            "mean_steps": mean_steps(episodes),
            "shortened_summaries": max(0, len(episodes) - MAX_DETAILED_EPISODES),
        }
        return Feedback(score=base.score, values=values, artifacts=base.artifacts)


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
