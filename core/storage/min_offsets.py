"""Per-queue logical start offsets, persisted as ``config/queueMinOffset.json``.

Theory of operation
-------------------
A queue's readable start can move past its physical start without deleting anything: Kafka
DeleteRecords and per-topic retention (``retention.ms`` / ``retention.bytes``) raise it, and readers
of both protocols start there.  The table only ever moves forward (a lower offset is ignored); each
change rewrites the file atomically (``metafile.write_json_atomic``).  Deleting a topic drops its
entries.
"""

from __future__ import annotations

from pathlib import Path

from rokka.core.storage.metafile import read_json, write_json_atomic

__all__ = ["QueueMinOffsets"]


class QueueMinOffsets:
    """The logical start offset of each (topic, queue id); 0 where none was set."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._table: dict[tuple[str, int], int] = {}

    def load(self) -> None:
        data = read_json(self.path) or {}
        for topic, per_queue in data.get("queueMinOffset", {}).items():
            for qid, off in per_queue.items():
                self._table[(topic, int(qid))] = int(off)

    def get(self, topic: str, queue_id: int) -> int:
        return self._table.get((topic, queue_id), 0)

    def raise_to(self, topic: str, queue_id: int, offset: int) -> None:
        """Move the start forward to ``offset`` (persisted); a lower or equal offset changes nothing."""
        if offset <= self.get(topic, queue_id):
            return
        self._table[(topic, queue_id)] = offset
        self._save()

    def drop_topic(self, topic: str) -> None:
        if any(t == topic for t, _ in self._table):
            self._table = {k: v for k, v in self._table.items() if k[0] != topic}
            self._save()

    def _save(self) -> None:
        table: dict[str, dict[str, int]] = {}
        for (topic, qid), off in self._table.items():
            table.setdefault(topic, {})[str(qid)] = off
        write_json_atomic(self.path, {"queueMinOffset": table})
