"""How a batch of Episodes is spread over a sandbox's lanes, and how long the Host waits for one Episode: the same
for every backend (the Docker and the Kubernetes sandbox differ only in where the runner and the policy run and
how the Host reaches them; the runner's messages are translated in `orchestrator.protocol.runner_messages`).
"""

from __future__ import annotations

import threading
from typing import Callable, Sequence

import grpc

from epg_sdk.runtime.episode_loop import EpisodeLimits
from orchestrator.backends.pool import ContainerPool
from orchestrator.kernel.infrastructure import InfraErrorCode, InfrastructureError
from orchestrator.kernel.outcomes import EpisodeOutcome
from orchestrator.kernel.ports import EpisodeJob
from orchestrator.protocol.runner_messages import CHANNEL_OPTIONS, MAX_BATCH_EVIDENCE_BYTES, without_evidence


def runner_channel(target: str) -> grpc.Channel:
    """A gRPC channel to an environment runner at target ("unix:PATH"), its message sizes raised to carry an Episode's
    evidence and a BuildFeedback request's (`protocol.runner_messages.MAX_RUNNER_MESSAGE_BYTES`)."""
    return grpc.insecure_channel(target, options=CHANNEL_OPTIONS)


def episode_budget_s(limits: EpisodeLimits) -> float:
    """How long the Host waits for a RunEpisode answer: the runner enforces the Episode's own deadlines."""
    return limits.startup_deadline_s * 2 + limits.episode_deadline_s + 60


def run_over_lanes(
    container_pool: ContainerPool,
    jobs: Sequence[EpisodeJob],
    lanes: int,
    run_one: Callable[[int, EpisodeJob], EpisodeOutcome],
    on_episode: Callable[[EpisodeOutcome], None] | None,
    thread_prefix: str,
) -> list[EpisodeOutcome]:
    """Run the jobs, one thread per lane pulling from one queue; return one outcome per job, in job order (so Feedback
    is the same whatever the concurrency).

    The outcomes keep at most MAX_BATCH_EVIDENCE_BYTES of evidence together in memory: an Episode ending past that
    keeps none (marked, so that its Feedback names it in evidence_dropped).

    Raises the first error a lane met, in run_one or in on_episode (the other lanes stop taking jobs), and
    InfrastructureError(RUNNER_FAILED) should a job end without an outcome anyway: a short list would pass for
    Feedback on fewer Episodes than were asked for.
    """
    results: list[EpisodeOutcome | None] = [None] * len(jobs)
    cursor = iter(range(len(jobs)))
    cursor_lock = threading.Lock()  # also guards held
    held = [0]  # bytes of evidence the batch's outcomes keep in memory, bounded by MAX_BATCH_EVIDENCE_BYTES
    failure: list[BaseException] = []

    def lane_worker(lane: int) -> None:
        while not failure:
            with cursor_lock:
                index = next(cursor, None)
            if index is None:
                return
            try:
                outcome = run_one(lane, jobs[index])
                if isinstance(outcome, EpisodeOutcome) and outcome.evidence:
                    with cursor_lock:
                        if held[0] + len(outcome.evidence) > MAX_BATCH_EVIDENCE_BYTES:
                            outcome = without_evidence(outcome)  # said in its Feedback's evidence_dropped
                        else:
                            held[0] += len(outcome.evidence)
                results[index] = outcome
                if on_episode is not None:
                    on_episode(outcome)
            except BaseException as exc:
                failure.append(exc)
                return

    container_pool.begin_batch(len(jobs))
    try:
        threads = [threading.Thread(target=lane_worker, args=(lane,), name=f"{thread_prefix}-{lane}")
                   for lane in range(max(1, min(lanes, len(jobs))))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        container_pool.end_batch()
    if failure:
        raise failure[0]
    outcomes = [outcome for outcome in results if isinstance(outcome, EpisodeOutcome)]
    if len(outcomes) != len(jobs):
        missing = [job.episode.index for job, outcome in zip(jobs, results, strict=True) if not isinstance(outcome, EpisodeOutcome)]
        raise InfrastructureError(InfraErrorCode.RUNNER_FAILED,
                                  f"{len(missing)} of {len(jobs)} Episodes ended without an outcome (indices {missing[:8]})")
    return outcomes
