"""Committed consumer offsets, one table for both protocols (``config/consumerOffset.json``).

Theory of operation
-------------------
The table maps ``topic@group`` -> {queueId: next offset to consume}, exactly
RocketMQ's ConsumerOffsetManager layout.  A Kafka consumer group commits a
Kafka offset, which *is* the ConsumeQueue offset, into the same table; so one
group name keeps one offset per queue whichever protocol commits it.

Writes are cheap (a dict update plus a dirty flag); ``persist_if_dirty`` is
called by the broker every few seconds and at shutdown, as RocketMQ persists
every 5 s.  ``commit(..., durable=True)`` persists at once (Kafka OffsetCommit
uses it so that a committed offset survives a crash).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path

import structlog
from rokka.core.storage.metafile import read_json, write_json_atomic

log = structlog.get_logger(__name__)

Snapshot = tuple[int, dict[str, dict[str, dict[str, int]]]]


class ConsumerOffsetManager:
    def __init__(self, config_dir: Path) -> None:
        self._path = config_dir / "consumerOffset.json"
        self._table: dict[str, dict[int, int]] = {}
        self._dirty = False
        self._generation = 0
        self._written = 0
        self._write_lock = threading.Lock()
        data = read_json(self._path) or {}
        for key, queues in (data.get("offsetTable") or {}).items():
            self._table[key] = {int(q): int(o) for q, o in queues.items()}

    @staticmethod
    def _key(group: str, topic: str) -> str:
        return f"{topic}@{group}"

    def commit(self, group: str, topic: str, queue_id: int, offset: int, *, durable: bool = False) -> None:
        self._table.setdefault(self._key(group, topic), {})[queue_id] = offset
        self._dirty = True
        if durable:
            self.persist()

    def query(self, group: str, topic: str, queue_id: int) -> int | None:
        return self._table.get(self._key(group, topic), {}).get(queue_id)

    def offsets(self, group: str, topic: str) -> dict[int, int]:
        return dict(self._table.get(self._key(group, topic), {}))

    def groups(self) -> set[str]:
        return {k.split("@", 1)[1] for k in self._table}

    def entries(self) -> list[tuple[str, str, dict[int, int]]]:
        """Every (group, topic, {queue id: offset}) with committed offsets (a copy)."""
        return [(k.split("@", 1)[1], k.split("@", 1)[0], dict(q)) for k, q in self._table.items()]

    def topics_of_group(self, group: str) -> set[str]:
        return {k.split("@", 1)[0] for k in self._table if k.split("@", 1)[1] == group}

    def groups_of_topic(self, topic: str) -> set[str]:
        return {k.split("@", 1)[1] for k in self._table if k.split("@", 1)[0] == topic}

    def delete_group(self, group: str, topic: str | None = None, *, durable: bool = False) -> None:
        """Forget every offset of ``group`` (of one ``topic`` only when given)."""
        for key in [k for k in self._table if k.split("@", 1)[1] == group
                    and (topic is None or k.split("@", 1)[0] == topic)]:
            del self._table[key]
        self._dirty = True
        if durable:
            self.persist()

    def delete_queues(self, group: str, topic: str, queue_ids: Iterable[int], *, durable: bool = False) -> None:
        """Forget ``group``'s offsets of some queues of ``topic`` (Kafka OffsetDelete)."""
        key = self._key(group, topic)
        queues = self._table.get(key)
        if queues is not None:
            for q in queue_ids:
                queues.pop(q, None)
            if not queues:
                del self._table[key]
        self._dirty = True
        if durable:
            self.persist()

    def delete_topic(self, topic: str) -> None:
        for key in [k for k in self._table if k.split("@", 1)[0] == topic]:
            del self._table[key]
        self._dirty = True

    def serialize(self) -> dict[str, dict[str, dict[str, int]]]:
        return {"offsetTable": {k: {str(q): o for q, o in v.items()} for k, v in self._table.items()}}

    def persist(self) -> None:
        self.write_snapshot(self._snapshot())

    def persist_if_dirty(self) -> None:
        if self._dirty:
            self.persist()

    def _snapshot(self) -> Snapshot:
        self._dirty = False
        self._generation += 1
        return (self._generation, self.serialize())

    def take_snapshot(self) -> Snapshot | None:
        """The table to write if it changed since the last snapshot (taken on the owning thread)."""
        return self._snapshot() if self._dirty else None

    def write_snapshot(self, snapshot: Snapshot) -> None:
        """Write a snapshot durably; safe from a worker thread.  Writers are serialized and a snapshot
        older than one already written is skipped, so a slow background write can never replace a
        newer durable commit."""
        generation, table = snapshot
        with self._write_lock:
            if generation > self._written:
                write_json_atomic(self._path, table)
                self._written = generation
