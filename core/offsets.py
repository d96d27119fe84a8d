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

Kafka commit metadata and leader epochs
---------------------------------------
A Kafka commit also carries a metadata string and the leader epoch of the
committed position.  RocketMQ's table has no room for them, so they live in
a side table ``topic@group`` -> {queueId: [offset, metadata, leaderEpoch]}
kept in the same file under the extra top-level key
``kafkaOffsetMetadata`` (written only while it has entries; RocketMQ's
fastjson-based loader ignores keys it does not know, and a file without the
key loads as before).  An entry belongs to the offset it was committed with:
``commit_metadata`` answers it only while the queue's committed offset is
still that offset, so a later RocketMQ commit (which knows no metadata)
makes it "" / -1 again, as would a RocketMQ tool that rewrote the file
without the key.  A transactional commit's extras are staged
(``stage_metadata``) and take effect when the transaction applies that
same offset with a plain ``commit``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

import structlog
from rokka.core.storage.metafile import read_json, write_json_atomic

log = structlog.get_logger(__name__)

Snapshot = tuple[int, dict[str, Any]]
EXTRAS_KEY = "kafkaOffsetMetadata"
NO_METADATA: tuple[str, int] = ("", -1)
Extra = tuple[int, str, int]      # (offset it belongs to, metadata, leader epoch)


class OffsetStore(Protocol):
    """What the Kafka group coordinator and the cluster offset view use of the offset table
    (``ConsumerOffsetManager`` satisfies it)."""

    def commit(self, group: str, topic: str, queue_id: int, offset: int, *,
               durable: bool = False, metadata: str | None = None, leader_epoch: int = -1) -> None: ...
    def query(self, group: str, topic: str, queue_id: int) -> int | None: ...
    def commit_metadata(self, group: str, topic: str, queue_id: int) -> tuple[str, int]: ...
    def offsets(self, group: str, topic: str) -> dict[int, int]: ...
    def topics_of_group(self, group: str) -> set[str]: ...
    def delete_group(self, group: str, topic: str | None = None, *, durable: bool = False) -> None: ...
    def delete_queues(self, group: str, topic: str, queue_ids: Iterable[int], *,
                      durable: bool = False) -> None: ...


class ConsumerOffsetManager:
    def __init__(self, config_dir: Path) -> None:
        self._path = config_dir / "consumerOffset.json"
        self._table: dict[str, dict[int, int]] = {}
        self._extras: dict[str, dict[int, Extra]] = {}
        self._staged: dict[tuple[str, str, int], Extra] = {}
        self._dirty = False
        self._generation = 0
        self._written = 0
        self._write_lock = threading.Lock()
        data = read_json(self._path) or {}
        for key, queues in (data.get("offsetTable") or {}).items():
            self._table[key] = {int(q): int(o) for q, o in queues.items()}
        self._load_extras(data.get(EXTRAS_KEY))

    def _load_extras(self, raw: Any) -> None:
        """Read the side table; a malformed one is dropped (metadata is advisory), never the offsets."""
        if raw is None:
            return
        try:
            for key, queues in raw.items():
                self._extras[str(key)] = {int(q): (int(e[0]), str(e[1]), int(e[2])) for q, e in queues.items()}
        except (AttributeError, TypeError, ValueError, IndexError) as exc:
            self._extras = {}
            log.warning("offsets.metadata_unreadable", path=str(self._path), error=str(exc))

    @staticmethod
    def _key(group: str, topic: str) -> str:
        return f"{topic}@{group}"

    def commit(self, group: str, topic: str, queue_id: int, offset: int, *, durable: bool = False,
               metadata: str | None = None, leader_epoch: int = -1) -> None:
        """Store a committed offset.

        ``metadata`` None (RocketMQ, or a transaction applying its offsets) says nothing of
        metadata: a staged transactional entry for exactly this offset takes effect, and an
        entry of another offset is dropped.  A string (Kafka OffsetCommit) replaces the entry.
        """
        key = self._key(group, topic)
        self._table.setdefault(key, {})[queue_id] = offset
        if metadata is None:
            staged = self._staged.get((group, topic, queue_id)) if self._staged else None
            if staged is not None and staged[0] == offset:
                del self._staged[(group, topic, queue_id)]
                self._set_extra(key, queue_id, staged)
            elif self._extras:
                extra = self._extras.get(key, {}).get(queue_id)
                if extra is not None and extra[0] != offset:
                    self._set_extra(key, queue_id, (offset, *NO_METADATA))
        else:
            self._set_extra(key, queue_id, (offset, metadata, leader_epoch))
        self._dirty = True
        if durable:
            self.persist()

    def _set_extra(self, key: str, queue_id: int, extra: Extra) -> None:
        if extra[1] or extra[2] >= 0:
            self._extras.setdefault(key, {})[queue_id] = extra
            return
        queues = self._extras.get(key)
        if queues is not None:
            queues.pop(queue_id, None)
            if not queues:
                del self._extras[key]

    def stage_metadata(self, group: str, topic: str, queue_id: int, offset: int, metadata: str | None,
                       leader_epoch: int) -> None:
        """Extras of a transactional commit, applied when ``commit`` later stores this very offset."""
        self._staged[(group, topic, queue_id)] = (offset, metadata or "", leader_epoch)

    def commit_metadata(self, group: str, topic: str, queue_id: int) -> tuple[str, int]:
        """(metadata, leader epoch) committed with the queue's current offset; ("", -1) if none."""
        extra = self._extras.get(self._key(group, topic), {}).get(queue_id)
        if extra is None or extra[0] != self.query(group, topic, queue_id):
            return NO_METADATA
        return extra[1], extra[2]

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
            self._extras.pop(key, None)
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
                self._set_extra(key, q, (-1, *NO_METADATA))
            if not queues:
                del self._table[key]
        self._dirty = True
        if durable:
            self.persist()

    def delete_topic(self, topic: str) -> None:
        for key in [k for k in self._table if k.split("@", 1)[0] == topic]:
            del self._table[key]
            self._extras.pop(key, None)
        self._dirty = True

    def serialize(self) -> dict[str, Any]:
        """RocketMQ's layout, plus the Kafka side table while it has entries (module docstring)."""
        out: dict[str, Any] = {"offsetTable": {k: {str(q): o for q, o in v.items()}
                                               for k, v in self._table.items()}}
        if self._extras:
            out[EXTRAS_KEY] = {k: {str(q): list(e) for q, e in v.items()} for k, v in self._extras.items()}
        return out

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
