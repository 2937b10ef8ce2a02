"""Pre-started, single-use policy containers: filled in the background, handed out once, reaped after use.

A pooled container is started with an empty Program directory; its runtime
imports NumPy and protobuf, connects to its slot's socket and blocks there.
When its Episode starts the Host writes the Program into the directory
(mounted read-only in the container) and the runner sends Start. After the
Episode the container is destroyed; no container ever serves two Episodes.

The lock and condition protect the ready queues and counters. The filler
keeps `size` containers ready while no batch runs (start cost is paid while
the agent thinks), and during a batch starts only as many as the batch still
needs, so a warm batch is not slowed by refills. Used containers are removed
between batches.

One batch at a time: begin_batch waits until the batch before has ended, so
Episodes of two batches (a Submission's and a Validation's) never share the
lanes. cancel_batch makes the running batch's further take() calls fail, so
it starts no further Episode and ends once the Episodes it runs have.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

from orchestrator.backends.settings import SandboxTuning
from orchestrator.kernel.infrastructure import InfraErrorCode, InfrastructureError

log = logging.getLogger(__name__)

TAKE_TIMEOUT_S = 300.0
# Removers at close, the reaper included: no Episode needs the CPU any more, and one removal at a time leaves
# the engine waiting on its own round trips.
CLOSE_REMOVERS = 4
CLOSE_WAIT_S = 120.0


@dataclass(slots=True, kw_only=True)
class Slot:
    """One single-use policy runtime: its lane, slot name, directories and container."""

    lane: int
    name: str
    io_dir: Any
    program_dir: Any
    container: Any = None
    started_at: float = field(default_factory=time.monotonic)


class ContainerPool:
    """Per-lane queues of ready Slots, a filler thread and a reaper thread.

    start_slot(lane) must return a started Slot (or raise InfrastructureError);
    destroy(slot) must remove its container and directories.
    """

    def __init__(
        self,
        *,
        lanes: int,
        size: int,
        starters: int,
        start_slot: Callable[[int], Slot],
        destroy: Callable[[Slot], None],
        episodes: int = 0,
        keep_used: int = 64,
    ) -> None:
        self._lanes = lanes
        self._size = size
        # The most Episodes that will still take a container (0: not known). A container
        # started beyond them would only be removed unused at close: start-up and removal
        # cost the engine as much CPU as a short Episode, and delay the command's end.
        self._remaining: int | None = episodes or None
        # Used containers a batch keeps until it ends (removal costs the engine CPU its Episodes need); beyond
        # that many a long cold batch removes them as it goes, so its memory stays bounded whatever its size.
        self._keep_used = max(0, keep_used)
        self._start_slot = start_slot
        self._destroy = destroy
        self._condition = threading.Condition()
        self._ready: list[deque[Slot]] = [deque() for _ in range(lanes)]
        self._starting = [0] * lanes
        self._pending = 0  # containers the running batch still needs
        self._batch = False
        self._cancelled = False  # the running batch takes no further container
        self._closed = False
        self._error: InfrastructureError | None = None
        self._starters = ThreadPoolExecutor(max_workers=max(1, starters), thread_name_prefix="epg-pool-start")
        self._reap_queue: queue.Queue[Slot | None] = queue.Queue()
        self._filler = threading.Thread(target=self._fill_loop, name="epg-pool-fill", daemon=True)
        self._reaper = threading.Thread(target=self._reap_loop, name="epg-pool-reap", daemon=True)
        self._filler.start()
        self._reaper.start()

    @classmethod
    def for_tuning(cls, tuning: SandboxTuning, *, lanes: int, start_slot: Callable[[int], Slot],
                   destroy: Callable[[Slot], None]) -> ContainerPool:
        """Return the started container pool of a sandbox of any backend, with every bound of tuning: its size,
        starters, the Episodes it will serve at most and the used containers a batch keeps."""
        return cls(lanes=lanes, size=tuning.pool_size, starters=tuning.starters, start_slot=start_slot, destroy=destroy,
                   episodes=tuning.episodes, keep_used=tuning.keep_used)

    # batches -------------------------------------------------------------------
    def begin_batch(self, episodes: int) -> None:
        """Start a batch of `episodes` Episodes, first waiting for the running batch (if any) to end.

        Every begin_batch must be followed by one end_batch. Raises
        InfrastructureError(CONTAINER_FAILED) when the pool closes meanwhile.
        """
        with self._condition:
            while self._batch:
                if self._closed:
                    raise InfrastructureError(InfraErrorCode.CONTAINER_FAILED, "the container pool is closed")
                self._condition.wait()
            self._batch = True
            self._cancelled = False
            self._pending = episodes
            self._condition.notify_all()

    def end_batch(self) -> None:
        with self._condition:
            self._batch = False
            self._cancelled = False
            self._pending = 0
            self._condition.notify_all()

    def cancel_batch(self) -> bool:
        """Make every later take() of the running batch raise; return whether a batch was running.

        The Episodes already under way run to their end; none starts after.
        The next batch is not affected.
        """
        with self._condition:
            if self._batch:
                self._cancelled = True
                self._pending = 0
                self._condition.notify_all()
            return self._batch

    def take(self, lane: int) -> Slot:
        """Return a ready Slot of lane, waiting for one being started if needed.

        Raises InfrastructureError: CONTAINER_FAILED when the batch is
        cancelled, the pool closed, or no container became ready in time; a
        container start's own error.
        """
        deadline = time.monotonic() + TAKE_TIMEOUT_S
        with self._condition:
            if self._cancelled:
                raise InfrastructureError(InfraErrorCode.CONTAINER_FAILED, "the batch was cancelled")
            self._pending = max(0, self._pending - 1)
            if self._remaining is not None:
                self._remaining = max(0, self._remaining - 1)
            self._condition.notify_all()
            while not self._ready[lane]:
                if self._cancelled:
                    raise InfrastructureError(InfraErrorCode.CONTAINER_FAILED, "the batch was cancelled")
                if self._error is not None:
                    raise self._error
                if self._closed:
                    raise InfrastructureError(InfraErrorCode.CONTAINER_FAILED, "the container pool is closed")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise InfrastructureError(InfraErrorCode.CONTAINER_FAILED, "no policy container became ready in time")
                if self._starting[lane] == 0:
                    self._launch_locked(lane)  # nothing on its way for this lane: start one now
                self._condition.wait(min(remaining, 1.0))
            return self._ready[lane].popleft()

    def resize(self, size: int) -> None:
        """Keep size containers ready between batches from now on: more pre-starts them for Episodes that will
        follow; fewer starts no new one (those ready stay until used or closed). Each is still used once."""
        with self._condition:
            self._size = max(0, size)
            self._condition.notify_all()

    def expect(self, episodes: int) -> None:
        """From now on at most `episodes` more containers will be taken: never start more than those, whatever
        the size (a Run's held-out phases: when its last batch ends, no refill starts only to be removed)."""
        with self._condition:
            self._remaining = max(0, episodes)
            self._condition.notify_all()

    @property
    def size(self) -> int:
        with self._condition:
            return self._size

    def discard(self, slot: Slot) -> None:
        """Destroy a used Slot in the background."""
        self._reap_queue.put(slot)
        with self._condition:
            self._condition.notify_all()

    def ready_count(self) -> int:
        with self._condition:
            return sum(len(r) for r in self._ready)

    def wait_until_settled(self, timeout_s: float) -> bool:
        """Block until `size` containers are ready and every used one is removed (benchmarks, tests)."""
        deadline = time.monotonic() + timeout_s
        if not self.wait_until_full(timeout_s):
            return False
        while self._reap_queue.unfinished_tasks:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def wait_until_full(self, timeout_s: float) -> bool:
        """Block until `size` containers are ready, or as many as the Episodes still to come (benchmarks, tests)."""
        deadline = time.monotonic() + timeout_s
        with self._condition:
            while sum(len(r) for r in self._ready) < min(self._size, self._remaining if self._remaining is not None else self._size):
                if self._error is not None:
                    raise self._error
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._condition.wait(remaining)
            return True

    # filling -------------------------------------------------------------------
    def _target_locked(self) -> int:
        if self._batch:
            # During a batch: only what the batch still lacks (never refill a warm batch).
            target = min(self._pending, max(self._size, self._lanes))
        else:
            target = self._size
        return target if self._remaining is None else min(target, self._remaining)

    def _fill_loop(self) -> None:
        with self._condition:
            while not self._closed:
                have = sum(len(r) for r in self._ready) + sum(self._starting)
                if have < self._target_locked() and self._error is None:
                    lane = min(range(self._lanes), key=lambda i: len(self._ready[i]) + self._starting[i])
                    self._launch_locked(lane)
                    continue
                self._condition.wait(1.0)

    def _launch_locked(self, lane: int) -> None:
        self._starting[lane] += 1
        self._starters.submit(self._start_one, lane)

    def _start_one(self, lane: int) -> None:
        slot = None
        try:
            slot = self._start_slot(lane)
        except InfrastructureError as exc:
            log.error("could not start a policy container: %s", exc)
            with self._condition:
                self._error = exc
        except Exception as exc:  # a bug or an engine fault: keep it for the next take()
            log.exception("could not start a policy container")
            with self._condition:
                self._error = InfrastructureError(InfraErrorCode.CONTAINER_FAILED, f"starting a policy container failed: {exc}")
        with self._condition:
            self._starting[lane] -= 1
            if slot is not None:
                if self._closed:
                    self._reap_queue.put(slot)
                else:
                    self._ready[lane].append(slot)
            self._condition.notify_all()

    # reaping -------------------------------------------------------------------
    def _reap_loop(self) -> None:
        while True:
            slot = self._reap_queue.get()
            if slot is None:
                self._reap_queue.task_done()
                return
            with self._condition:
                # Removal costs the engine CPU that the Episodes of a running batch
                # need; a used container (exited, or killed on failure) waits for the
                # batch to end. It can never be handed out again either way.
                while self._batch and not self._closed and self._reap_queue.qsize() < self._keep_used:
                    self._condition.wait()
            self._destroy_used(slot)

    def _destroy_used(self, slot: Slot) -> None:
        try:
            self._destroy(slot)
        except Exception:  # a leak is a bug: say so; the session's label reap catches it at close
            log.exception("could not destroy policy slot %s", slot.name)
        finally:
            self._reap_queue.task_done()

    def _help_reap(self) -> None:
        """At close, beside the reaper: destroy queued Slots until the queue holds only the reaper's stop sign."""
        while True:
            try:
                slot = self._reap_queue.get_nowait()
            except queue.Empty:
                return
            if slot is None:  # the reaper's stop sign: leave it for the reaper
                self._reap_queue.put(None)
                self._reap_queue.task_done()
                return
            self._destroy_used(slot)

    def close(self) -> None:
        """Stop filling, destroy every ready Slot, and wait for the reaper to finish."""
        with self._condition:
            self._closed = True  # a begin_batch waiting for the running batch gives up
            leftovers = [slot for ready in self._ready for slot in ready]
            for ready in self._ready:
                ready.clear()
            self._condition.notify_all()
        self._filler.join(timeout=10)
        self._starters.shutdown(wait=True)
        with self._condition:
            leftovers += [slot for ready in self._ready for slot in ready]
            for ready in self._ready:
                ready.clear()
        for slot in leftovers:
            self._reap_queue.put(slot)
        self._reap_queue.put(None)
        helpers = [threading.Thread(target=self._help_reap, name="epg-pool-reap-close", daemon=True)
                   for _ in range(CLOSE_REMOVERS - 1)]
        for helper in helpers:
            helper.start()
        deadline = time.monotonic() + CLOSE_WAIT_S
        for thread in (self._reaper, *helpers):
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
