"""Idempotent-producer state: ids, epochs, sequence checks, duplicates, fencing, persistence."""

from __future__ import annotations

from pathlib import Path

import pytest
from rokka.core.storage.metafile import MetadataCorrupt
from rokka.gateway.kafka.producers.state import (
    EPOCH_EXHAUSTED,
    FILE_NAME,
    MAX_SEQUENCE,
    InitOutcome,
    ProducerStateManager,
    SequenceOutcome,
    last_sequence,
)

A = SequenceOutcome.APPEND


def produce(mgr: ProducerStateManager, pid: int, epoch: int, first: int, count: int, offset: int,
            topic: str = "t", part: int = 0) -> SequenceOutcome:
    """check + (append) + record, the way the produce handler must do it."""
    last = last_sequence(first, count - 1)
    verdict = mgr.check_batch(pid, epoch, topic, part, first, last)
    if verdict.outcome is A:
        mgr.record_batch(pid, epoch, topic, part, first, last, offset, offset + count - 1)
    return verdict.outcome


async def test_idempotent_ids_are_new_each_time(tmp_path: Path) -> None:
    mgr = ProducerStateManager(tmp_path, id_block=3)
    ids = [(await mgr.init_producer_id(None, 60_000)) for _ in range(7)]
    assert [r.outcome for r in ids] == [InitOutcome.OK] * 7
    assert [r.producer_id for r in ids] == list(range(7)) and {r.epoch for r in ids} == {0}
    # provided pid/epoch are ignored without a transactional id
    r = await mgr.init_producer_id(None, 60_000, producer_id=3, producer_epoch=0)
    assert (r.producer_id, r.epoch) == (7, 0)


async def test_ids_never_reused_across_restarts_even_after_a_crash(tmp_path: Path) -> None:
    mgr = ProducerStateManager(tmp_path, id_block=10)
    first = [(await mgr.init_producer_id(None, 1)).producer_id for _ in range(4)]
    # no close(): a crash
    again = ProducerStateManager(tmp_path, id_block=10)
    later = [(await again.init_producer_id(None, 1)).producer_id for _ in range(12)]
    assert not set(first) & set(later)
    again.close()
    third = ProducerStateManager(tmp_path, id_block=10)
    assert (await third.init_producer_id(None, 1)).producer_id > max(later)


def test_sequences_in_order_gaps_and_wrap() -> None:
    mgr = ProducerStateManager(None)
    assert produce(mgr, 1, 0, 0, 5, offset=0) is A
    assert produce(mgr, 1, 0, 5, 5, offset=5) is A
    assert produce(mgr, 1, 0, 11, 1, offset=10) is SequenceOutcome.OUT_OF_ORDER      # gap
    assert produce(mgr, 1, 0, 10, 1, offset=10) is A
    # another partition of the same producer has its own sequence
    assert produce(mgr, 1, 0, 0, 2, offset=0, part=1) is A
    # wrap-around from 2**31 - 1 to 0
    assert produce(mgr, 2, 0, MAX_SEQUENCE - 1, 2, offset=100) is A
    assert produce(mgr, 2, 0, 0, 1, offset=102) is A
    assert last_sequence(MAX_SEQUENCE, 2) == 1


def test_duplicates_return_the_original_offsets() -> None:
    mgr = ProducerStateManager(None)
    for i in range(6):
        assert produce(mgr, 7, 0, i * 10, 10, offset=100 + i * 10) is A
    dup = mgr.check_batch(7, 0, "t", 0, 20, 29)
    assert (dup.outcome, dup.base_offset, dup.last_offset) == (SequenceOutcome.DUPLICATE, 120, 129)
    # only the last 5 batches are remembered: the first one is now out of order, not a duplicate
    assert mgr.check_batch(7, 0, "t", 0, 0, 9).outcome is SequenceOutcome.OUT_OF_ORDER
    # a partial overlap is not a duplicate
    assert mgr.check_batch(7, 0, "t", 0, 20, 25).outcome is SequenceOutcome.OUT_OF_ORDER


def test_epochs_unknown_producers_and_bumps() -> None:
    mgr = ProducerStateManager(None)
    # unknown producer: any sequence
    assert produce(mgr, 9, 3, 42, 1, offset=0) is A
    assert produce(mgr, 9, 2, 43, 1, offset=1) is SequenceOutcome.INVALID_EPOCH
    # an epoch bump must restart at sequence 0
    assert produce(mgr, 9, 4, 43, 1, offset=1) is SequenceOutcome.OUT_OF_ORDER
    assert produce(mgr, 9, 4, 0, 1, offset=1) is A
    assert produce(mgr, 9, 3, 44, 1, offset=2) is SequenceOutcome.INVALID_EPOCH


async def test_transactional_ids_keep_their_id_and_fence_by_epoch(tmp_path: Path) -> None:
    mgr = ProducerStateManager(tmp_path)
    r1 = await mgr.init_producer_id("tx", 60_000)
    assert (r1.outcome, r1.epoch) == (InitOutcome.OK, 0)
    assert produce(mgr, r1.producer_id, 0, 0, 1, offset=0) is A
    r2 = await mgr.init_producer_id("tx", 60_000)              # a new instance of the same app
    assert (r2.producer_id, r2.epoch) == (r1.producer_id, 1)
    # the zombie (epoch 0) is fenced even on a partition the new instance has not written yet
    assert produce(mgr, r1.producer_id, 0, 0, 1, offset=0, part=5) is SequenceOutcome.INVALID_EPOCH
    assert produce(mgr, r1.producer_id, 0, 1, 1, offset=1) is SequenceOutcome.INVALID_EPOCH
    assert produce(mgr, r2.producer_id, 1, 0, 1, offset=1) is A
    # KIP-360 style: the current (pid, epoch) may bump; a stale one is fenced; a retry is answered again
    stale = await mgr.init_producer_id("tx", 60_000, r1.producer_id, 0)
    assert stale.outcome is InitOutcome.PRODUCER_FENCED
    r3 = await mgr.init_producer_id("tx", 60_000, r2.producer_id, 1)
    assert r3.epoch == 2
    retry = await mgr.init_producer_id("tx", 60_000, r2.producer_id, 1)
    assert (retry.producer_id, retry.epoch) == (r3.producer_id, 2)
    assert (await mgr.init_producer_id("", 60_000)).outcome is InitOutcome.INVALID_REQUEST
    bad = await mgr.init_producer_id("tx", 900_001)
    assert bad.outcome is InitOutcome.INVALID_TRANSACTION_TIMEOUT
    # fencing survives a crash (no close)
    again = ProducerStateManager(tmp_path)
    r4 = await again.init_producer_id("tx", 60_000)
    assert (r4.producer_id, r4.epoch) == (r1.producer_id, 3)


async def test_exhausted_epoch_rotates_the_producer_id(tmp_path: Path) -> None:
    mgr = ProducerStateManager(None)
    r = await mgr.init_producer_id("tx", 1000)
    entry = mgr.transactional_entry("tx")
    assert entry is not None
    entry.epoch = EPOCH_EXHAUSTED
    rotated = await mgr.init_producer_id("tx", 1000)
    assert rotated.producer_id != r.producer_id and rotated.epoch == 0


async def test_clean_restart_keeps_every_sequence(tmp_path: Path) -> None:
    mgr = ProducerStateManager(tmp_path)
    assert produce(mgr, 1, 0, 0, 3, offset=0) is A
    assert produce(mgr, 1, 0, 3, 3, offset=3) is A
    mgr.close()
    again = ProducerStateManager(tmp_path)
    assert again.loaded_clean is True
    dup = again.check_batch(1, 0, "t", 0, 3, 5)
    assert (dup.outcome, dup.base_offset) == (SequenceOutcome.DUPLICATE, 3)
    assert again.check_batch(1, 0, "t", 0, 7, 7).outcome is SequenceOutcome.OUT_OF_ORDER
    assert again.check_batch(1, 0, "t", 0, 6, 6).outcome is A


async def test_crash_relaxes_sequences_but_keeps_duplicates(tmp_path: Path) -> None:
    mgr = ProducerStateManager(tmp_path)
    assert produce(mgr, 1, 0, 0, 3, offset=0) is A
    await mgr.persist()                               # the periodic snapshot
    assert produce(mgr, 1, 0, 3, 3, offset=3) is A    # acknowledged, then the broker crashes
    again = ProducerStateManager(tmp_path)
    assert again.loaded_clean is False
    # the producer's next batch (6..) is accepted although the snapshot ends at 2
    assert again.check_batch(1, 0, "t", 0, 6, 8).outcome is A
    # a retry of a batch the snapshot knows is still suppressed
    assert again.check_batch(1, 0, "t", 0, 0, 2).outcome is SequenceOutcome.DUPLICATE
    again.record_batch(1, 0, "t", 0, 6, 8, 6, 8)
    assert again.check_batch(1, 0, "t", 0, 10, 10).outcome is SequenceOutcome.OUT_OF_ORDER


async def test_recover_drops_batches_beyond_the_recovered_log(tmp_path: Path) -> None:
    mgr = ProducerStateManager(tmp_path)
    assert produce(mgr, 1, 0, 0, 3, offset=0) is A
    assert produce(mgr, 1, 0, 3, 3, offset=3) is A
    mgr.close()
    again = ProducerStateManager(tmp_path)
    again.recover(lambda topic, part: 3)              # the store lost offsets 3..5
    assert again.check_batch(1, 0, "t", 0, 3, 5).outcome is A      # rewritten, not "duplicate"
    assert again.check_batch(1, 0, "t", 0, 0, 2).outcome is SequenceOutcome.DUPLICATE


async def test_periodic_flush_and_expiry(tmp_path: Path, autojump_clock: object) -> None:
    import trio

    now = [1_000]
    mgr = ProducerStateManager(tmp_path, clock_ms=lambda: now[0], expiration_ms=10_000)
    async with trio.open_nursery() as nursery:
        await nursery.start(mgr.run, 1.0)
        produce(mgr, 1, 0, 0, 1, offset=0)
        await trio.sleep(2)
        nursery.cancel_scope.cancel()
    # the periodic write (not close()) has the batch
    reopened = ProducerStateManager(tmp_path)
    assert reopened.check_batch(1, 0, "t", 0, 0, 0).outcome is SequenceOutcome.DUPLICATE
    now[0] += 20_000
    assert mgr.expire() == 1
    assert mgr.statistics().partition_entries == 0


def test_corrupt_state_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / FILE_NAME).write_bytes(b"\xc1garbage")
    with pytest.raises(MetadataCorrupt):
        ProducerStateManager(tmp_path)


def test_producers_of_a_partition() -> None:
    now = [5_000]
    mgr = ProducerStateManager(None, clock_ms=lambda: now[0])
    assert produce(mgr, 7, 2, 0, 3, offset=0) is A
    now[0] = 6_000
    assert produce(mgr, 3, 0, 0, 1, offset=3) is A
    assert produce(mgr, 3, 0, 1, 4, offset=4) is A
    assert produce(mgr, 3, 0, 0, 1, offset=0, part=1) is A
    assert mgr.producers_of("t", 0) == [(3, 0, 4, 6_000), (7, 2, 2, 5_000)]
    assert mgr.producers_of("t", 1) == [(3, 0, 0, 6_000)]
    assert mgr.producers_of("u", 0) == []


async def test_forget_transactional_id(tmp_path: Path) -> None:
    mgr = ProducerStateManager(tmp_path)
    r = await mgr.init_producer_id("tx", 60_000)
    mgr.forget_transactional_id("tx")
    mgr.forget_transactional_id("never")
    assert mgr.transactional_entry("tx") is None
    mgr.close()
    again = ProducerStateManager(tmp_path)
    assert again.transactional_entry("tx") is None
    assert (await again.init_producer_id("tx", 60_000)).producer_id != r.producer_id
