"""Idempotent-producer state survives a crash through the journal (issue 19, item 6).

Before: the state was only written by the periodic snapshot and at a clean stop, so a batch
acknowledged after the last snapshot was appended again when the producer retried it after a
crash (kill -9).  A "crash" here is a manager that is dropped without ``close()``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from rokka.core.storage.engine import DiskStore
from rokka.gateway.kafka.producers.journal import PREFIX, journal_files
from rokka.gateway.kafka.producers.state import ProducerStateManager, SequenceOutcome

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "core" / "storage"))
from storage_helpers import msg, small_config  # noqa: E402

A = SequenceOutcome.APPEND
D = SequenceOutcome.DUPLICATE


def test_batch_after_the_snapshot_is_a_duplicate_after_a_crash(tmp_path: Path) -> None:
    mgr = ProducerStateManager(tmp_path)
    mgr.record_batch(7, 0, "t", 0, 0, 2, 0, 2)
    mgr.record_batch(7, 0, "t", 0, 3, 5, 3, 5)       # acknowledged; no snapshot since: then kill -9
    again = ProducerStateManager(tmp_path)
    dup = again.check_batch(7, 0, "t", 0, 3, 5)
    assert (dup.outcome, dup.base_offset, dup.last_offset) == (D, 3, 5)
    assert again.check_batch(7, 0, "t", 0, 7, 7).outcome is SequenceOutcome.OUT_OF_ORDER   # exact, not relaxed
    assert again.check_batch(7, 0, "t", 0, 6, 6).outcome is A


async def test_snapshot_rotates_and_drops_old_journals(tmp_path: Path) -> None:
    mgr = ProducerStateManager(tmp_path)
    mgr.record_batch(1, 0, "t", 0, 0, 0, 0, 0)
    await mgr.persist()
    mgr.record_batch(1, 0, "t", 0, 1, 1, 1, 1)       # in the new generation only
    assert len(journal_files(tmp_path)) == 1
    crashed = ProducerStateManager(tmp_path)          # snapshot + the journal written after it
    assert crashed.check_batch(1, 0, "t", 0, 0, 0).outcome is D
    assert crashed.check_batch(1, 0, "t", 0, 1, 1).outcome is D
    crashed.close()
    assert journal_files(tmp_path) == []              # a clean stop leaves the snapshot alone
    clean = ProducerStateManager(tmp_path)
    assert clean.loaded_clean is True and clean.check_batch(1, 0, "t", 0, 1, 1).outcome is D


def test_torn_journal_tail_is_ignored(tmp_path: Path) -> None:
    mgr = ProducerStateManager(tmp_path)
    mgr.record_batch(1, 0, "t", 0, 0, 0, 0, 0)
    mgr.record_batch(1, 0, "t", 0, 1, 1, 1, 1)
    (_, path), = journal_files(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[:-3])                       # the second entry torn by the crash
    again = ProducerStateManager(tmp_path)
    assert again.check_batch(1, 0, "t", 0, 0, 0).outcome is D
    assert again.check_batch(1, 0, "t", 0, 1, 1).outcome is A
    assert all(p.name.startswith(PREFIX) for _, p in journal_files(tmp_path))


def test_store_flush_runs_the_journal_hook_first(tmp_path: Path) -> None:
    store = DiskStore(small_config(tmp_path / "store")).open()
    mgr = ProducerStateManager(tmp_path / "store" / "config")
    calls: list[int] = []
    store.add_flush_hook(lambda: calls.append(store.flushed_offset))
    store.add_flush_hook(mgr.sync_journal)
    res = store.put_messages([msg(0, topic="t")])
    mgr.record_batch(1, 0, "t", 0, 0, 0, 0, 0)
    end = res.appended[-1].commitlog_offset + res.appended[-1].size
    assert store.flush(end) >= end
    assert calls and calls[0] < end                   # the hook ran before the offset was reported durable
    store.close()
    mgr.close()


def test_a_batch_killed_between_append_and_record_is_known_after_restart(tmp_path: Path) -> None:
    """The produce path journals its intent before the append: a kill -9 after the CommitLog write
    but before ``record_batch`` (the soak found 1 duplicate per 100 kills from that window) leaves
    an intent that the restarted broker keeps when the log holds the batch..."""
    mgr = ProducerStateManager(tmp_path)
    mgr.record_batch(7, 0, "t", 0, 0, 2, 0, 2)
    mgr.journal_intent(7, 0, "t", 0, 3, 5, 3, 5)       # then the append, then kill -9
    again = ProducerStateManager(tmp_path)
    again.recover(lambda topic, partition: 6)          # the recovered log holds offsets 0..5
    dup = again.check_batch(7, 0, "t", 0, 3, 5)
    assert (dup.outcome, dup.base_offset, dup.last_offset) == (D, 3, 5)


def test_an_intent_the_log_does_not_hold_is_dropped(tmp_path: Path) -> None:
    """... and drops when the kill came before the append (the retry must be stored)."""
    mgr = ProducerStateManager(tmp_path)
    mgr.record_batch(7, 0, "t", 0, 0, 2, 0, 2)
    mgr.journal_intent(7, 0, "t", 0, 3, 5, 3, 5)       # kill -9 before the append
    again = ProducerStateManager(tmp_path)
    again.recover(lambda topic, partition: 3)
    assert again.check_batch(7, 0, "t", 0, 3, 5).outcome is A


def test_a_retracted_intent_is_not_a_duplicate_after_restart(tmp_path: Path) -> None:
    """An append that failed (full disk) takes its intent back, even if later batches of other
    producers took those offsets before the crash."""
    mgr = ProducerStateManager(tmp_path)
    mgr.record_batch(7, 0, "t", 0, 0, 2, 0, 2)
    mgr.journal_intent(7, 0, "t", 0, 3, 5, 3, 5)
    mgr.retract_intent(7, 0, "t", 0, 3, 5)
    mgr.record_batch(8, 0, "t", 0, 0, 2, 3, 5)         # another producer's batch at those offsets
    again = ProducerStateManager(tmp_path)
    again.recover(lambda topic, partition: 6)
    assert again.check_batch(7, 0, "t", 0, 3, 5).outcome is A
    assert again.check_batch(8, 0, "t", 0, 0, 2).outcome is D
