"""What the two Box2D Benchmarks share: the end causes of an Episode, its trace and their Feedback."""

from __future__ import annotations

from epg_sdk.benchmark import (
    EpisodeRecord,
    Feedback,
    count_ends,
    mean_steps,
    shorten_summaries,
)
from epg_sdk.gym_adapter import GymnasiumBenchmark
from epg_sdk.trace import BoundedTrace

# Why an Episode ended: a closed set, the value of every Episode summary's `end`.
FELL = "fell"  # Bipedal: the hull touched the ground, or the walker left the terrain backwards (-100)
FINISHED = "finished"  # Bipedal: the walker reached the end of the terrain; CarRacing: the lap is complete
LEFT_PLAYFIELD = "left_playfield"  # CarRacing: the car left the playfield (-100)
TIME_LIMIT = "time_limit"  # the Episode ran its horizon to the end
POLICY_FAILURE = "policy_failure"  # the Program failed (crash, timeout, invalid action); set by feedback()
NOT_ENDED = "not_ended"  # what an Environment says when asked before its Episode ended
END_CAUSES = (FELL, FINISHED, LEFT_PLAYFIELD, TIME_LIMIT, POLICY_FAILURE)
FAILURE_SUMMARY = {"end": POLICY_FAILURE}  # what Feedback says in a failed Episode's summary

# Feedback keeps the whole summary, trace included, of this many Episodes (in plan order); the
# summaries of later Episodes keep only SHORT_SUMMARY_KEYS, so that Feedback stays bounded.
MAX_DETAILED_EPISODES = 128
SHORT_SUMMARY_KEYS = ("end", "steps")


class PeriodicTrace:
    """An Episode's BoundedTrace: the token of every `every`-th step, and the last step's token when it is not one of them."""

    def __init__(self, every: int) -> None:
        self._trace = BoundedTrace()
        self._every = every
        self._pending = ""

    def step(self, step: int, token: str) -> None:
        """Record the token of step (counted from 1): kept now on every `every`-th step, else until the next step."""
        if step % self._every == 0:
            self._trace.add(token)
            self._pending = ""
        else:
            self._pending = token

    def render(self) -> tuple[str, bool]:
        """Add the last step's pending token; return BoundedTrace.render() (the text, whether it was cut)."""
        if self._pending:
            self._trace.add(self._pending)
            self._pending = ""
        return self._trace.render()


class Box2DBenchmark(GymnasiumBenchmark):
    """A GymnasiumBenchmark (gymnasium's default keyword arguments) whose Feedback adds the Episodes'
    end causes and summaries.

    Made with failure_summary=FAILURE_SUMMARY and summary_columns ("end", ...), the summary
    values that `episodes.csv` carries for each Episode.
    """

    def feedback(self, records: list[EpisodeRecord]) -> Feedback:
        """The SDK's default Feedback, plus `ends` (count per end cause), `mean_steps` and `shortened_summaries`.

        A failed Episode's summary says `end: policy_failure`. Episodes after the first
        MAX_DETAILED_EPISODES keep only SHORT_SUMMARY_KEYS in their summary
        (`shortened_summaries` counts them); `episodes.csv` has every Episode's summary
        values but the trace.
        """
        base = super().feedback(records)
        episodes = base.values["episodes"]
        values = {
            **base.values,
            "episodes": shorten_summaries(episodes, detailed=MAX_DETAILED_EPISODES, keys=SHORT_SUMMARY_KEYS),
            "ends": count_ends(episodes, END_CAUSES),
            "mean_steps": mean_steps(episodes),
            "shortened_summaries": max(0, len(episodes) - MAX_DETAILED_EPISODES),
        }
        return Feedback(score=base.score, values=values, artifacts=base.artifacts)
