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
    """Told 7 Episodes follow, a pool of 4 starts the one still to come after a batch of 6, not a refill to 4, and none
    after the last. Its start after the batch is the sign that the filler has acted; close waits for every start."""
    recorder = Recorder(removal_s=0.0)
    pool = ContainerPool(lanes=1, size=4, starters=2, start_slot=recorder.start_slot, destroy=recorder.destroy)
    try:
        assert pool.wait_until_full(10)
        pool.expect(7)
        _one_batch(pool, 6)
        assert pool.wait_until_full(10)  # the 7th, started after the batch ended
        _one_batch(pool, 1)
        assert pool.wait_until_full(0)  # nothing more is to come: a pool with nothing ready is full
    finally:
        pool.close()
    assert recorder.started == 7
    assert sorted(recorder.destroyed) == sorted(f"slot-{i}" for i in range(1, 8))


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


def test_a_second_batch_waits_until_the_running_batch_has_ended() -> None:
    recorder = Recorder(removal_s=0.0)
    pool = ContainerPool(lanes=1, size=2, starters=1, start_slot=recorder.start_slot, destroy=recorder.destroy)
    order: list[str] = []
    try:
        pool.begin_batch(1)
        order.append("first began")
        second = threading.Thread(target=lambda: (pool.begin_batch(1), order.append("second began")))
        second.start()
        second.join(0.5)  # the second batch is held while the first runs
        assert second.is_alive() and order == ["first began"]
        pool.discard(pool.take(0))
        order.append("first ended")
        pool.end_batch()
        second.join(10)
        assert not second.is_alive()
        assert order == ["first began", "first ended", "second began"]
        pool.end_batch()
    finally:
        pool.close()


def test_a_batch_waiting_for_another_gives_up_when_the_pool_closes() -> None:
    recorder = Recorder(removal_s=0.0)
    pool = ContainerPool(lanes=1, size=0, starters=1, start_slot=recorder.start_slot, destroy=recorder.destroy)
    pool.begin_batch(1)
    errors: list[Exception] = []

    def second() -> None:
        try:
            pool.begin_batch(1)
        except pool_module.InfrastructureError as exc:
            errors.append(exc)

    waiter = threading.Thread(target=second)
    waiter.start()
    pool.close()
    waiter.join(10)
    assert not waiter.is_alive()
    assert [e.code.value for e in errors] == ["container_failed"] and "closed" in str(errors[0])


def test_a_cancelled_batch_takes_no_further_container_and_the_next_batch_is_not_cancelled() -> None:
    recorder = Recorder(removal_s=0.0)
    pool = ContainerPool(lanes=1, size=2, starters=1, start_slot=recorder.start_slot, destroy=recorder.destroy)
    try:
        assert pool.wait_until_full(10)
        assert not pool.cancel_batch()  # no batch runs: nothing to cancel, and nothing is remembered
        pool.begin_batch(3)
        pool.discard(pool.take(0))
        assert pool.cancel_batch()
        try:
            pool.take(0)
        except pool_module.InfrastructureError as exc:
            assert "cancelled" in exc.message
        else:
            raise AssertionError("a cancelled batch was handed a container")
        pool.end_batch()
        _one_batch(pool, 2)  # the next batch takes its containers as usual
    finally:
        pool.close()


def test_a_pool_built_for_a_tuning_keeps_its_bound_on_the_episodes_and_the_used_containers() -> None:
    from orchestrator.backends.settings import SandboxTuning

    recorder = Recorder(removal_s=0.0)
    pool = ContainerPool.for_tuning(SandboxTuning(concurrency=1, pool_size=6, starters=2, episodes=2, keep_used=3), lanes=1,
                                    start_slot=recorder.start_slot, destroy=recorder.destroy)
    try:
        assert pool.wait_until_full(10)
        time.sleep(0.3)  # a pool without the bound would go on to six
        assert recorder.started == 2 and pool.ready_count() == 2 and pool.size == 6
        assert pool._keep_used == 3
    finally:
        pool.close()
