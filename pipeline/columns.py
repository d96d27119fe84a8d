"""PULL bodies -> Arrow record batches, column-wise, without a Python object per message.

Theory of operation
-------------------
The reader's hot path.  ``PullBatchBuilder.add(body, stop)`` walks the records of one PULL body
with one precompiled ``struct`` unpack per record and appends only what the columns need (queue
id and offset, timestamps, and ``bytes`` slices of body, topic and properties) to flat lists;
ints and bytes are not tracked by the garbage collector, so the walk creates no GC work.
``build()`` then does the rest with Arrow compute kernels over the whole batch: the properties
blobs are split on 0x02 / 0x01 into a ``map<string,string>`` column, and ``msg_id`` (UNIQ_KEY),
``tags`` and ``keys`` are looked up per message with a hash join of (message index, key).

That vectorised path covers what RocketMQ producers write: IPv4 hosts, uncompressed bodies,
well-formed UTF-8 properties with a UNIQ_KEY and no ``KAFKA_*`` property, no empty or repeated
keys.  Anything else in a batch (Kafka-produced records, compressed bodies, IPv6 hosts, odd
properties, a malformed record) makes the whole batch take the reference path instead: the
bodies are decoded into ``StoredMessage`` objects and converted by ``rokka.pipeline.rows.BatchBuilder``,
which defines the row values.  Both paths give identical batches (a test checks), so which one
ran is never visible.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from rokka.core.model import (
    BORNHOST_V6_FLAG,
    COMPRESSED_FLAG,
    PROP_KEYS,
    PROP_TAGS,
    PROP_UNIQ_KEY,
    STOREHOST_V6_FLAG,
)
from rokka.core.record import PROPS_LEN, TAIL_SIZE, header_reader, header_size
from rokka.net.remoting.client import decode_messages
from rokka.pipeline.rows import ARROW_SCHEMA, BatchBuilder

#: the header fields the columns need, by name (IPv4 hosts: other host forms take the reference path)
_HEAD = header_reader("total_size", "queue_id", "queue_offset", "sysflag", "born_timestamp", "store_timestamp",
                      "body_length")
_HEAD_SIZE = header_size()
_PLEN = PROPS_LEN.unpack_from
_PLEN_SIZE = PROPS_LEN.size
_TAIL = TAIL_SIZE
_SLOW_FLAGS = BORNHOST_V6_FLAG | STOREHOST_V6_FLAG | COMPRESSED_FLAG
_MAP = ARROW_SCHEMA.field("properties").type
_TS = ARROW_SCHEMA.field("born_timestamp").type
_MS = pa.timestamp("ms", tz="UTC")
_HEADERS = ARROW_SCHEMA.field("headers").type


class PullBatchBuilder:
    """Accumulates PULL bodies of one broker's queue; ``build()`` returns one RecordBatch."""

    def __init__(self, broker_name: str) -> None:
        self.broker_name = broker_name
        self.last_vectorised = False  # which path the last build() took (for tests and debugging)
        self._reset()

    def _reset(self) -> None:
        self._bodies: list[tuple[bytes, int]] = []  # kept for a switch to the reference path
        self._slow: BatchBuilder | None = None  # the reference path, once a record needs it
        self._qid: list[int] = []
        self._qoff: list[int] = []
        self._born: list[int] = []
        self._store: list[int] = []
        self._body: list[bytes] = []
        self._topic: list[bytes] = []
        self._props: list[bytes] = []

    def __len__(self) -> int:
        return len(self._qoff) if self._slow is None else len(self._slow)

    def add(self, body: bytes, stop: int) -> None:
        """Add the records of ``body`` whose queue offset is below ``stop``."""
        if self._slow is None:
            self._bodies.append((body, stop))
            if self._walk(body, stop):
                return
            self._to_reference_path()
        else:
            self._slow_extend(body, stop)

    def _to_reference_path(self) -> None:
        self._slow = BatchBuilder(self.broker_name)
        for body, stop in self._bodies:
            self._slow_extend(body, stop)
        self._bodies = []

    def _slow_extend(self, body: bytes, stop: int) -> None:
        assert self._slow is not None
        self._slow.extend(m for m in decode_messages(body) if m.queue_offset < stop)

    def _walk(self, buf: bytes, stop: int) -> bool:
        """Append the columns of ``buf``'s records; False if a record needs the reference path."""
        qid, qoff, born, store = self._qid.append, self._qoff.append, self._born.append, self._store.append
        body, topic, props = self._body.append, self._topic.append, self._props.append
        pos, end = 0, len(buf)
        try:
            while pos < end:
                total, queue, offset, sysflag, born_ts, store_ts, body_len = _HEAD(buf, pos)
                b0 = pos + _HEAD_SIZE
                t0 = b0 + body_len
                p0 = t0 + _TAIL + buf[t0]   # topic length, topic, properties length, then properties
                nxt = pos + total
                if sysflag & _SLOW_FLAGS or _PLEN(buf, p0 - _PLEN_SIZE)[0] != nxt - p0 or nxt > end or body_len < 0:
                    return False
                if offset < stop:
                    qid(queue)
                    qoff(offset)
                    born(born_ts)
                    store(store_ts)
                    body(buf[b0:t0])
                    topic(buf[t0 + 1:p0 - _PLEN_SIZE])
                    props(buf[p0:nxt])
                pos = nxt
        except (IndexError, ValueError):  # struct.error is a ValueError; the reference path reports it
            return False
        return True

    def build(self) -> pa.RecordBatch:
        """The accumulated rows as one RecordBatch (then the builder is empty)."""
        try:
            batch = self._build_fast() if self._slow is None else None
            self.last_vectorised = batch is not None
            if batch is None:
                if self._slow is None:
                    self._to_reference_path()
                assert self._slow is not None
                batch = self._slow.build()
        finally:
            self._reset()
        return batch

    def _build_fast(self) -> pa.RecordBatch | None:
        n = len(self._qoff)
        topics = set(self._topic)
        if len(topics) > 1:
            return None
        try:
            props = _properties(pa.array(self._props, pa.binary()), n)
        except pa.ArrowInvalid:  # not UTF-8
            return None
        if props is None:
            return None
        prop_map, msg_id, tags, keys = props
        topic = topics.pop().decode("utf-8") if n else ""
        cols = [
            pa.array([topic] * n, pa.string()),
            pa.array(self._qid, pa.int32()),
            pa.array(self._qoff, pa.int64()),
            msg_id, tags, keys, prop_map,
            pa.array(self._body, pa.binary()),
            pa.array(self._born, pa.int64()).cast(_MS).cast(_TS),
            pa.array(self._store, pa.int64()).cast(_MS).cast(_TS),
            pa.array([self.broker_name] * n, pa.string()),
            pa.nulls(n, pa.binary()),
            pa.nulls(n, _HEADERS),
        ]
        return pa.RecordBatch.from_arrays(cols, schema=ARROW_SCHEMA)


def _properties(raw: pa.Array, n: int) -> tuple[pa.Array, pa.Array, pa.Array, pa.Array] | None:
    """(properties map, msg_id, tags, keys) of ``n`` properties blobs, or None if the fast path
    does not apply (see module doc).  Raises ArrowInvalid on a blob that is not UTF-8."""
    items = pc.split_pattern(raw.cast(pa.string()), "\x02")
    kv = pc.split_pattern(items.flatten(), "\x01", max_splits=1)
    if len(kv) and pc.min(pc.list_value_length(kv)).as_py() != 2:  # an item without 0x01 (or no items)
        return None
    keys = pc.list_element(kv, 0)
    values = pc.list_element(kv, 1)
    if len(kv) and min(pc.min(pc.binary_length(keys)).as_py(), pc.min(pc.binary_length(values)).as_py()) == 0:
        return None  # an empty key or value (dropped by the reference decoder)
    coded = pc.dictionary_encode(keys)
    names = coded.dictionary
    if len(names) and pc.any(pc.starts_with(names, "KAFKA_")).as_py():
        return None
    parents = pc.list_parent_indices(items)
    key_ids = coded.indices.cast(pa.int64())
    combined = pc.add(pc.multiply(parents.cast(pa.int64()), max(1, len(names))), key_ids)
    if pc.count_distinct(combined).as_py() != len(combined):  # a key repeated within one message
        return None
    rows = pa.array(range(n), pa.int64())
    name_ids = {name: i for i, name in enumerate(names.to_pylist())}

    def lookup(name: str) -> pa.Array:
        if name not in name_ids:
            return pa.nulls(n, pa.string())
        hit = pc.equal(key_ids, name_ids[name])
        return pc.take(values.filter(hit), pc.index_in(rows, value_set=parents.filter(hit)))

    msg_id = lookup(PROP_UNIQ_KEY)
    if msg_id.null_count:  # no UNIQ_KEY: Kafka-produced, or offsetMsgId needed
        return None
    prop_map = pa.MapArray.from_arrays(items.offsets, keys, values, type=_MAP)
    return prop_map, msg_id, lookup(PROP_TAGS), lookup(PROP_KEYS)
