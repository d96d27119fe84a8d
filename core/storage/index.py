"""IndexFile: hash index from "topic#key" to CommitLog offsets (RocketMQ layout).

Theory of operation
-------------------
One file = 40-byte header + ``slots`` int32 hash slots + ``max_entries``
20-byte entries (upstream: rocketmq ``IndexFile.java``, ``IndexHeader.java``)::

    header: beginTimestamp i64 @0, endTimestamp i64 @8, beginPhyOffset i64 @16,
            endPhyOffset i64 @24, hashSlotCount i32 @32 (slots in use),
            indexCount i32 @36 (next entry number; starts at 1, entry 0 unused)
    slot s:  i32 at 40 + s*4 = newest entry number for that hash (0 = empty)
    entry n: at 40 + slots*4 + n*20 = keyHash i32, phyOffset i64,
             timeDiff i32 (seconds since beginTimestamp), prevIndex i32

keyHash = abs(Java hashCode("topic#key")), 0 for Integer.MIN_VALUE;
slot = keyHash % slots.  Files are named ``yyyyMMddHHmmssSSS`` (creation
time, local); when ``indexCount >= max_entries`` a new file is started.

Garbage tolerance: ``IndexService.load`` validates every header (file size,
counts, offsets); a bad file is reported (structlog error with the path),
renamed to ``<name>.corrupt`` and its range re-indexed from the CommitLog.
Lookups bound-check every pointer, so a damaged chain ends the walk instead
of raising.  Index data is derived: losing it never loses a message.
"""

from __future__ import annotations

import functools
import os
import struct
import time
from collections.abc import Sequence
from operator import mul
from pathlib import Path

import structlog
from rokka.core.model import KeySpans, java_hash, java_hash_suffix
from rokka.core.storage.layout import _cstore, unit_offsets
from rokka.core.storage.segment import Segment

log = structlog.get_logger(__name__)

HEADER_SIZE = 40
HEADER = struct.Struct(">qqqqii")
SLOT = struct.Struct(">i")
ENTRY = struct.Struct(">iqii")
ENTRY_SIZE = 20


def key_hash(key: str) -> int:
    h = java_hash(key)
    return 0 if h == -(1 << 31) else abs(h)


@functools.lru_cache(maxsize=4096)
def _topic_prefix_hash(topic: str) -> int:
    return java_hash(topic + "#")


_TAIL = 4    # UNIQ_KEY = client prefix + time + a 4-hex-digit counter: the head repeats
_TAIL_POWERS = tuple(pow(31, _TAIL - 1 - i, 1 << 32) for i in range(_TAIL))
_TAIL_SHIFT = pow(31, _TAIL, 1 << 32)


@functools.lru_cache(maxsize=4096)
def _head_hash(topic: str, head: str) -> int:
    return java_hash_suffix(_topic_prefix_hash(topic), head) & 0xFFFFFFFF


def topic_key_hash(topic: str, key: str) -> int:
    """``key_hash(topic + "#" + key)`` without re-hashing the topic part.

    Long ASCII keys (UNIQ_KEY: client IP + pid + class loader + time + counter, in hex) also reuse
    the hash of all but their last 4 characters, which repeats from message to message.
    """
    if len(key) >= 16 and key.isascii():
        h = (_head_hash(topic, key[:-_TAIL]) * _TAIL_SHIFT
             + sum(map(mul, key[-_TAIL:].encode("ascii"), _TAIL_POWERS))) & 0xFFFFFFFF
        h = h - 0x100000000 if h & 0x80000000 else h
    else:
        h = java_hash_suffix(_topic_prefix_hash(topic), key)
    return 0 if h == -(1 << 31) else abs(h)


def file_size(slots: int, max_entries: int) -> int:
    return HEADER_SIZE + slots * 4 + max_entries * ENTRY_SIZE


class IndexFile:
    def __init__(self, path: Path, slots: int, max_entries: int) -> None:
        self.path = path
        self.slots = slots
        self.max_entries = max_entries
        self.seg = Segment(path, 0, file_size(slots, max_entries), existing=path.exists(), random_access=True)
        self.mm = self.seg.mm
        (self.begin_ts, self.end_ts, self.begin_phy, self.end_phy, self.used_slots,
         self.count) = HEADER.unpack_from(self.mm, 0)
        if self.count == 0 and self.begin_ts == 0:
            self.count = 1
        self.dirty = False

    def validate(self) -> str | None:
        """Why this file's header is not trustworthy, or None."""
        if self.seg.short_by:
            return f"file is {self.seg.short_by} bytes short"
        if not 1 <= self.count <= self.max_entries:
            return f"indexCount {self.count} out of range"
        if not 0 <= self.used_slots <= self.slots:
            return f"hashSlotCount {self.used_slots} out of range"
        if self.count > 1 and not (0 <= self.begin_phy <= self.end_phy and 0 <= self.begin_ts <= self.end_ts):
            return "header offsets/timestamps inconsistent"
        return None

    @property
    def full(self) -> bool:
        return self.count >= self.max_entries

    def put(self, h: int, phy_offset: int, store_ts: int) -> bool:
        """Add an entry for key hash ``h`` (see ``topic_key_hash``); False if the file is full."""
        if self.count >= self.max_entries:
            return False
        slot_pos = HEADER_SIZE + (h % self.slots) * 4
        prev = SLOT.unpack_from(self.mm, slot_pos)[0]
        if prev <= 0 or prev > self.count:
            prev = 0
            self.used_slots += 1
        if self.count <= 1:
            self.begin_ts, self.begin_phy = store_ts, phy_offset
        diff = (store_ts - self.begin_ts) // 1000
        diff = 0 if diff < 0 else min(diff, 0x7FFFFFFF)
        n = self.count
        ENTRY.pack_into(self.mm, HEADER_SIZE + self.slots * 4 + n * ENTRY_SIZE, h, phy_offset, diff, prev)
        SLOT.pack_into(self.mm, slot_pos, n)
        self.count = n + 1
        self.end_ts, self.end_phy = store_ts, phy_offset
        HEADER.pack_into(self.mm, 0, self.begin_ts, self.end_ts, self.begin_phy, self.end_phy,
                         self.used_slots, self.count)
        self.dirty = True
        return True

    def put_many(self, items: list[tuple[int, int, int]], start: int) -> int:
        """``put`` for ``items[start:]`` (hash, phy offset, store ts), one header write.

        Returns how many fitted (the rest go to a new file)."""
        mm, slots, count, limit = self.mm, self.slots, self.count, self.max_entries
        entries = HEADER_SIZE + slots * 4
        unpack_slot, pack_slot, pack_entry = SLOT.unpack_from, SLOT.pack_into, ENTRY.pack_into
        i = start
        for h, phy, ts in items[start:]:
            if count >= limit:
                break
            slot_pos = HEADER_SIZE + (h % slots) * 4
            prev = unpack_slot(mm, slot_pos)[0]
            if prev <= 0 or prev > count:
                prev = 0
                self.used_slots += 1
            if count <= 1:
                self.begin_ts, self.begin_phy = ts, phy
            diff = (ts - self.begin_ts) // 1000
            diff = 0 if diff < 0 else min(diff, 0x7FFFFFFF)
            pack_entry(mm, entries + count * ENTRY_SIZE, h, phy, diff, prev)
            pack_slot(mm, slot_pos, count)
            count += 1
            self.end_ts, self.end_phy = ts, phy
            i += 1
        if i > start:
            self.count = count
            HEADER.pack_into(mm, 0, self.begin_ts, self.end_ts, self.begin_phy, self.end_phy,
                             self.used_slots, count)
            self.dirty = True
        return i - start

    def insert_native(self, prefix_hash: int, keys: Sequence[str], phys: Sequence[int] | bytes, store_ts: int,
                      start: int) -> int:
        """``put_many`` for keys[start:] hashed from ``prefix_hash`` in C (``_cstore.index_insert``; a
        ``KeySpans`` goes as its buffer and spans, hashed from the UTF-8)."""
        assert _cstore is not None
        state = (self.count, self.used_slots, self.begin_ts, self.begin_phy, self.end_ts, self.end_phy)
        if isinstance(keys, KeySpans):
            n, state = _cstore.index_insert(self.mm, self.slots, self.max_entries, state, prefix_hash,
                                            keys.raw.spans, phys, store_ts, start, keys.raw.buffer)
        else:
            n, state = _cstore.index_insert(self.mm, self.slots, self.max_entries, state, prefix_hash, keys, phys,
                                            store_ts, start)
        if n:
            self.count, self.used_slots, self.begin_ts, self.begin_phy, self.end_ts, self.end_phy = state
            self.dirty = True
        return int(n)

    def lookup(self, h: int, begin_ms: int, end_ms: int, limit: int) -> list[int]:
        out: list[int] = []
        n = SLOT.unpack_from(self.mm, HEADER_SIZE + (h % self.slots) * 4)[0]
        entries = HEADER_SIZE + self.slots * 4
        seen = 0
        while 0 < n < self.count and len(out) < limit and seen < self.count:
            eh, phy, diff, prev = ENTRY.unpack_from(self.mm, entries + n * ENTRY_SIZE)
            ts = self.begin_ts + diff * 1000
            if eh == h and begin_ms <= ts <= end_ms:
                out.append(phy)
            if prev <= 0 or prev >= n or ts < begin_ms:
                break
            n = prev
            seen += 1
        return out

    def sync(self) -> None:
        if self.dirty:
            self.dirty = False
            self.seg.sync()

    def close(self) -> None:
        self.seg.close()


def _stamp(now_ms: int) -> str:
    return time.strftime("%Y%m%d%H%M%S", time.localtime(now_ms / 1000)) + f"{now_ms % 1000:03d}"


class IndexService:
    def __init__(self, directory: Path, slots: int, max_entries: int) -> None:
        self.directory = directory
        self.slots = slots
        self.max_entries = max_entries
        self.files: list[IndexFile] = []

    def load(self) -> tuple[int, int | None]:
        """Open index files.  Returns ``(index_from, redo_start)``.

        ``index_from``: records at or beyond this CommitLog offset are not
        indexed yet.  ``redo_start``: a record boundary from which recovery
        must replay because a corrupt file was moved aside (None if none).
        """
        redo: int | None = None
        if self.directory.is_dir():
            for p in sorted(self.directory.iterdir()):
                if not (len(p.name) == 17 and p.name.isdigit()):
                    continue
                f = IndexFile(p, self.slots, self.max_entries)
                problem = f.validate()
                if problem is None:
                    self.files.append(f)
                    continue
                f.close()
                log.error("store.index_file_corrupt_reindexed",
                          path=str(p), problem=problem, offset=0)
                os.replace(p, p.with_name(p.name + ".corrupt"))
                prev = next((x for x in reversed(self.files) if x.count > 1), None)
                here = prev.end_phy if prev else 0
                redo = here if redo is None else min(redo, here)
        last = next((f for f in reversed(self.files) if f.count > 1), None)
        index_from = last.end_phy + 1 if last else 0
        if redo is not None:
            index_from = min(index_from, redo + 1 if redo else 0)
        return index_from, redo

    def put(self, topic: str, keys: list[str], phy_offset: int, store_ts: int) -> None:
        f = self.files[-1] if self.files else None
        for k in keys:
            if f is None or f.full:
                f = self._new_file(store_ts)
            f.put(topic_key_hash(topic, k), phy_offset, store_ts)

    def put_batch(self, entries: Sequence[tuple[str, Sequence[str], int, int]]) -> None:
        """``put`` for each (topic, keys, phy offset, store ts), in order."""
        if _cstore is not None:     # consecutive entries of one topic and time go to put_keys together
            i = 0
            while i < len(entries):
                topic, _, _, ts = entries[i]
                keys: list[str] = []
                phys: list[int] = []
                while i < len(entries) and entries[i][0] == topic and entries[i][3] == ts:
                    keys += entries[i][1]
                    phys += [entries[i][2]] * len(entries[i][1])
                    i += 1
                self.put_keys(topic, keys, phys, ts)
            return
        self._put_batch_py(entries)

    def _put_batch_py(self, entries: Sequence[tuple[str, Sequence[str], int, int]]) -> None:
        items = [(topic_key_hash(topic, k), phy, ts) for topic, keys, phy, ts in entries for k in keys]
        done = 0
        while done < len(items):
            f = self.files[-1] if self.files else None
            if f is None or f.full:
                f = self._new_file(items[done][2])
            n = f.put_many(items, done)
            if n == 0:      # a file that holds no entry at all (max_entries <= 1): drop them, as put does
                break
            done += n

    def put_keys(self, topic: str, keys: Sequence[str], phys: Sequence[int] | bytes, store_ts: int) -> None:
        """An entry for each key (``topic#key``) pointing at ``phys[i]``, all at ``store_ts``: the same
        as ``put_batch`` of those entries; hashed and written by ``_cstore.index_insert`` when built.
        ``phys`` may be the run's raw ConsumeQueue units (bytes, 20 a record): their commitlog offsets."""
        if not keys:
            return
        if _cstore is None:
            offsets = unit_offsets(phys) if isinstance(phys, bytes | bytearray | memoryview) else phys
            self._put_batch_py([(topic, (k,), p, store_ts) for k, p in zip(keys, offsets, strict=True)])
            return
        prefix = _topic_prefix_hash(topic) & 0xFFFFFFFF
        done = 0
        while done < len(keys):
            f = self.files[-1] if self.files else None
            if f is None or f.full:
                f = self._new_file(store_ts)
            n = f.insert_native(prefix, keys, phys, store_ts, done)
            if n == 0:      # a file that holds no entry at all (max_entries <= 1): drop them, as put does
                break
            done += n

    def _new_file(self, now_ms: int) -> IndexFile:
        self.directory.mkdir(parents=True, exist_ok=True)
        now_ms = max(now_ms, int(time.time() * 1000))
        while (self.directory / _stamp(now_ms)).exists():
            now_ms += 1
        f = IndexFile(self.directory / _stamp(now_ms), self.slots, self.max_entries)
        self.files.append(f)
        return f

    def lookup(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int) -> list[int]:
        out: list[int] = []
        h = topic_key_hash(topic, key)
        for f in reversed(self.files):
            if f.count <= 1 or f.end_ts < begin_ms or f.begin_ts > end_ms:
                continue
            out.extend(f.lookup(h, begin_ms, end_ms, max_num - len(out)))
            if len(out) >= max_num:
                break
        return out

    def delete_below(self, commitlog_min: int) -> int:
        """Delete index files (never the last) whose newest entry is below ``commitlog_min``."""
        removed = 0
        while len(self.files) > 1 and self.files[0].end_phy < commitlog_min:
            f = self.files.pop(0)
            f.close()
            f.path.unlink(missing_ok=True)
            removed += 1
        return removed

    def sync(self) -> None:
        for f in list(self.files):
            f.sync()

    def close(self) -> None:
        for f in self.files:
            f.close()
        self.files.clear()
