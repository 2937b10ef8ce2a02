"""What the two Box2D Benchmarks share: the end causes of an Episode and their Feedback."""

from __future__ import annotations

import csv
import io
from typing import Any, Callable

import gymnasium as gym

from epg_sdk.benchmark import Environment, EpisodeRecord, Feedback
from epg_sdk.gym_adapter import GymnasiumBenchmark

# Why an Episode ended: a closed set, the value of every Episode summary's `end`.
FELL = "fell"  # Bipedal: the hull touched the ground, or the walker left the terrain backwards (-100)
FINISHED = "finished"  # Bipedal: the walker reached the end of the terrain; CarRacing: the lap is complete
LEFT_PLAYFIELD = "left_playfield"  # CarRacing: the car left the playfield (-100)
TIME_LIMIT = "time_limit"  # the Episode ran its horizon to the end
POLICY_FAILURE = "policy_failure"  # the Program failed (crash, timeout, invalid action); set by feedback()
NOT_ENDED = "not_ended"  # what an Environment says when asked before its Episode ended
END_CAUSES = (FELL, FINISHED, LEFT_PLAYFIELD, TIME_LIMIT, POLICY_FAILURE)

# Feedback keeps the whole summary, trace included, of this many Episodes (in plan order); the
# summaries of later Episodes keep only SHORT_SUMMARY_KEYS, so that Feedback stays bounded.
MAX_DETAILED_EPISODES = 128
SHORT_SUMMARY_KEYS = ("end", "steps")

_CSV_COLUMNS = ("index", "status", "failure", "steps", "return", "scored_return", "terminated", "truncated", "end")


class Box2DBenchmark(GymnasiumBenchmark):
    """A GymnasiumBenchmark (gymnasium's default keyword arguments) whose Feedback adds the Episodes'
    end causes and summaries.

    environment_factory(env, seed) wraps each fresh environment; csv_columns names the
    summary values (besides end) that `episodes.csv` carries for each Episode.
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
        """The SDK's default Feedback, plus `ends` (count per end cause), `mean_steps` and `shortened_summaries`.

        A failed Episode's summary says `end: policy_failure`. Episodes after the first
        MAX_DETAILED_EPISODES keep only SHORT_SUMMARY_KEYS in their summary
        (`shortened_summaries` counts them); `episodes.csv` has every Episode's summary
        values but the trace.
        """
        base = super().feedback(records)
        episodes = [_completed(row) for row in base.values["episodes"]]
        ends = dict.fromkeys(END_CAUSES, 0)
        for row in episodes:
            end = str(row["summary"].get("end", "unknown"))
            ends[end] = ends.get(end, 0) + 1
        count = len(episodes)
        published = [_shortened(row) if position >= MAX_DETAILED_EPISODES else row for position, row in enumerate(episodes)]
        values = {
            **base.values,
            "episodes": published,
            "ends": ends,
            "mean_steps": sum(row["steps"] for row in episodes) / count if count else 0.0,
            "shortened_summaries": max(0, count - MAX_DETAILED_EPISODES),
        }
        return Feedback(score=base.score, values=values, artifacts={"episodes.csv": self._episodes_csv(episodes)})

    def _episodes_csv(self, episodes: list[dict[str, Any]]) -> bytes:
        columns = [*_CSV_COLUMNS, *self._csv_columns]
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        for row in episodes:
            summary = row["summary"]
            writer.writerow({**row, **{name: summary.get(name, "") for name in ("end", *self._csv_columns)}})
        return out.getvalue().encode()


def _completed(row: dict[str, Any]) -> dict[str, Any]:
    """One Episode's row with its summary completed: a failed Episode ended in a policy failure."""
    summary = dict(row.get("summary") or {})
    if row["status"] != "completed":
        summary["end"] = POLICY_FAILURE
    return {**row, "summary": summary}


def _shortened(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "summary": {key: row["summary"][key] for key in SHORT_SUMMARY_KEYS if key in row["summary"]}}
