"""ContainerPool: what close destroys and how, and what a pool told how many Episodes follow starts."""

from __future__ import annotations

import threading
import time

from orchestrator.backends import pool as pool_module
from orchestrator.backends.pool import ContainerPool, Slot


class Recorder:
    """start_slot and destroy for a pool without an engine: destroy takes removal_s and counts overlaps."""

    def __init__(self, removal_s: float) -> None:
        self.removal_s = removal_s
        self.lock = threading.Lock()
        self.started = 0
        self.destroyed: list[str] = []
        self.running = 0
        self.most_at_once = 0

    def start_slot(self, lane: int) -> Slot:
        with self.lock:
            self.started += 1
            name = f"slot-{self.started}"
        return Slot(lane=lane, name=name, io_dir=None, program_dir=None)

    def destroy(self, slot: Slot) -> None:
        with self.lock:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        time.sleep(self.removal_s)
        with self.lock:
            self.running -= 1
            self.destroyed.append(slot.name)


def test_close_destroys_every_slot_once_with_several_removers() -> None:
    recorder = Recorder(removal_s=0.05)
    pool = ContainerPool(lanes=2, size=16, starters=2, start_slot=recorder.start_slot, destroy=recorder.destroy)
    assert pool.wait_until_full(10)
    used = [pool.take(0), pool.take(1)]
    for slot in used:
        pool.discard(slot)
    began = time.monotonic()
    pool.close()
    took = time.monotonic() - began

    assert sorted(recorder.destroyed) == sorted(f"slot-{i}" for i in range(1, recorder.started + 1))
    assert len(set(recorder.destroyed)) == len(recorder.destroyed)
    assert 1 < recorder.most_at_once <= pool_module.CLOSE_REMOVERS
    # One at a time, the 16 or more removals would take 0.8 s or more.
    assert took < recorder.started * recorder.removal_s * 0.75, (took, recorder.started)


def test_close_with_one_remover_is_sequential(monkeypatch) -> None:
    monkeypatch.setattr(pool_module, "CLOSE_REMOVERS", 1)
    recorder = Recorder(removal_s=0.01)
    pool = ContainerPool(lanes=1, size=6, starters=1, start_slot=recorder.start_slot, destroy=recorder.destroy)
    assert pool.wait_until_full(10)
    pool.close()
    assert recorder.most_at_once == 1
    assert len(recorder.destroyed) == recorder.started == 6


def _one_batch(pool: ContainerPool, episodes: int) -> None:
    pool.begin_batch(episodes)
    for _ in range(episodes):
        pool.discard(pool.take(0))
    pool.end_batch()


def test_a_pool_told_how_many_episodes_follow_starts_nothing_after_the_last() -> None:
    recorder = Recorder(removal_s=0.0)
    pool = ContainerPool(lanes=1, size=4, starters=2, start_slot=recorder.start_slot, destroy=recorder.destroy)
    try:
        assert pool.wait_until_full(10)
        pool.expect(6)
        _one_batch(pool, 6)
        time.sleep(0.3)  # a refill would be under way by now
        assert recorder.started == 6
    finally:
        pool.close()
    assert sorted(recorder.destroyed) == sorted(f"slot-{i}" for i in range(1, 7))


def test_without_expect_the_pool_refills_after_a_batch() -> None:
    recorder = Recorder(removal_s=0.0)
    pool = ContainerPool(lanes=1, size=4, starters=2, start_slot=recorder.start_slot, destroy=recorder.destroy)
    try:
        assert pool.wait_until_full(10)
        _one_batch(pool, 6)
        assert pool.wait_until_full(10)
        assert recorder.started == 10
    finally:
        pool.close()
