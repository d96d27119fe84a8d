"""The idempotent-producer journal: every recorded batch, durable with the records it describes.

Theory of operation
-------------------
Kafka rebuilds its producer state from the batch headers in the log after a crash.  rokka stores
Kafka records as RocketMQ records, which have no producer id or sequence, so the state the
snapshot (``producerState.msgpack``) does not hold yet is kept here instead: one entry per batch
the store appended for an idempotent producer, written by ``ProducerStateManager.record_batch``
right after the append and before any ``await`` (so before the produce is acknowledged).

Files: ``config/producerState.journal.<generation>``.  A snapshot names the generation that
follows it; at start the snapshot is loaded and every journal of that generation or later is
replayed in order, so the table is exactly what it was when the process died.  Taking a snapshot
starts the next generation; the older files are deleted once the snapshot is durable.

Durability follows the CommitLog's:

* ``append`` is a plain ``write`` to the page cache, so a killed process (kill -9) loses nothing:
  the kernel still writes it.
* ``sync`` (registered with the store as a flush hook, ``MessageStore.add_flush_hook``) fdatasyncs
  every open journal file.  The store runs its hooks before it fdatasyncs the CommitLog up to an
  offset captured on the appending thread, so an entry is durable before the batch it describes
  is reported durable: under SYNC_FLUSH a power loss after an acknowledgement keeps both.

Entry: ``u32 length, u32 crc32(payload), payload`` with payload = msgpack ``[producer id, epoch,
topic, partition, first sequence, last sequence, first offset, last offset, timestamp ms]``.
Replay stops at the first torn or damaged entry of a file (a crash in the middle of a write).
"""

from __future__ import annotations

import os
import struct
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import structlog

log = structlog.get_logger(__name__)

PREFIX = "producerState.journal."
_HEAD = struct.Struct(">II")
_MAX_ENTRY = 1 << 20

Entry = tuple[int, int, str, int, int, int, int, int, int]


def journal_files(directory: Path) -> list[tuple[int, Path]]:
    """(generation, path) of every journal file in ``directory``, oldest first."""
    out = []
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    for name in names:
        gen = name[len(PREFIX):]
        if name.startswith(PREFIX) and gen.isdigit():
            out.append((int(gen), directory / name))
    return sorted(out)


def read_entries(path: Path) -> Iterator[Entry]:
    """The entries of one journal file, up to the first torn or damaged one (logged)."""
    data = path.read_bytes()
    pos = 0
    while pos < len(data):
        if pos + _HEAD.size > len(data):
            break
        length, crc = _HEAD.unpack_from(data, pos)
        payload = data[pos + _HEAD.size:pos + _HEAD.size + length]
        if length > _MAX_ENTRY or len(payload) != length or zlib.crc32(payload) != crc:
            break
        try:
            row: Any = msgpack.unpackb(payload, raw=False)
            pid, epoch, topic, part, first_seq, last_seq, first_off, last_off, ts = row
        except (ValueError, TypeError, msgpack.UnpackException):
            break
        yield (int(pid), int(epoch), str(topic), int(part), int(first_seq), int(last_seq), int(first_off),
               int(last_off), int(ts))
        pos += _HEAD.size + length
    if pos < len(data):
        log.warning("producer_state.journal_torn_tail", path=str(path), offset=pos, dropped_bytes=len(data) - pos)


def encode_entry(entry: Entry) -> bytes:
    payload: bytes = msgpack.packb(list(entry), use_bin_type=True)
    return _HEAD.pack(len(payload), zlib.crc32(payload)) + payload


class ProducerJournal:
    """The open journal of one ``config`` directory (see the module docstring).

    ``append`` runs on the event-loop thread; ``sync`` on the store's flush thread; ``rotate``
    and ``drop_before`` from the snapshot writer.  A lock guards the set of open files."""

    def __init__(self, directory: Path, generation: int) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._fds: dict[int, int] = {}            # generation -> fd (the current one and retired ones)
        self._dirty = False
        self._failed = False
        self.generation = generation
        self._open(generation)

    def _open(self, generation: int) -> None:
        fd = os.open(self.directory / f"{PREFIX}{generation}", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        with self._lock:
            self._fds[generation] = fd
            self.generation = generation

    def append(self, entry: Entry) -> bool:
        """Write one entry (page cache); False if the write failed (logged once per failure run)."""
        data = encode_entry(entry)
        fd = self._fds.get(self.generation)
        if fd is None:          # closed (shutdown): the final snapshot has the table
            return False
        try:
            n = os.write(fd, data)
            if n != len(data):
                raise OSError(f"short write to the producer journal ({n} of {len(data)} bytes)")
        except OSError as exc:
            if not self._failed:
                log.error("producer_state.journal_write_failed", error=str(exc),
                          path=str(self.directory / f"{PREFIX}{self.generation}"))
            self._failed = True
            return False
        self._failed = False
        self._dirty = True
        return True

    def sync(self) -> None:
        """fdatasync every open journal file (a store flush hook; any thread)."""
        if not self._dirty:
            return
        with self._lock:
            self._dirty = False
            for fd in self._fds.values():
                os.fdatasync(fd)

    def rotate(self) -> int:
        """Start the next generation (entries from now on go there); returns it."""
        self._open(self.generation + 1)
        return self.generation

    def drop_before(self, generation: int) -> None:
        """Close and delete the files older than ``generation`` (a durable snapshot holds them)."""
        with self._lock:
            old = [g for g in self._fds if g < generation]
            for g in old:
                os.close(self._fds.pop(g))
        for g, path in journal_files(self.directory):
            if g < generation:
                path.unlink(missing_ok=True)

    def close(self, *, delete: bool) -> None:
        with self._lock:
            for fd in self._fds.values():
                os.close(fd)
            self._fds.clear()
        if delete:
            for _, path in journal_files(self.directory):
                path.unlink(missing_ok=True)
