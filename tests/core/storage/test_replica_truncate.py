"""The truncation an old master does before it follows the new one (core/storage/replica.py ``truncate``)."""

from __future__ import annotations

from pathlib import Path

from rokka.core.storage import ReplicaAppender
from rokka.core.storage.engine import DiskStore
from storage_helpers import msg, small_config


def test_truncate_cuts_the_commitlog_and_queues_and_the_store_restarts_there(tmp_path: Path) -> None:
    store = DiskStore(small_config(tmp_path / "s")).open()
    try:
        for i in range(10):
            assert store.put_messages([msg(i, queue_id=0, body=b"x" * 200)]).status.name == "PUT_OK"
        offsets = [store.clog.write_offset]
        six = store.cqs[("T", 0)].unit(6)
        assert six is not None
        removed = ReplicaAppender(store).truncate(six[0])
        assert removed == offsets[0] - six[0]
        assert store.clog.write_offset == six[0] and store.max_offset("T", 0) == 6
        assert store.put_messages([msg(99, queue_id=0, body=b"y" * 200)]).status.name == "PUT_OK"
        assert store.max_offset("T", 0) == 7
    finally:
        store.close()
    again = DiskStore(small_config(tmp_path / "s")).open()
    try:
        assert again.max_offset("T", 0) == 7
        assert list(again.get_messages("T", 0, 6, 1, 1 << 20).records)
    finally:
        again.close()
