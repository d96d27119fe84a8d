"""Domain values shared by every layer: messages as the core sees them.

Theory of operation
-------------------
A ``Message`` is what a protocol gateway (through ``compat``) hands to the
core to store.  A ``StoredMessage`` is what comes back out of the CommitLog:
the same fields plus everything the broker assigned (offsets, store time,
store host, CRC).  Both are protocol-neutral: RocketMQ property names are
the core's vocabulary (TAGS, KEYS, UNIQ_KEY, DELAY, ...) because the store
is RocketMQ's format; Kafka concepts are mapped onto them in ``compat``.

Properties are kept as an insertion-ordered ``dict[str, str]``; the byte
form (name 0x01 value 0x02 ...) lives in ``rokka.core.storage.layout``.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import mul
from typing import overload

# Message sysflag bits (RocketMQ MessageSysFlag).
COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
TRANSACTION_MASK = 0xC
BORNHOST_V6_FLAG = 0x10
STOREHOST_V6_FLAG = 0x20

# Well-known property keys (RocketMQ MessageConst).
PROP_KEYS = "KEYS"
PROP_TAGS = "TAGS"
PROP_WAIT = "WAIT"
PROP_DELAY = "DELAY"
PROP_RETRY_TOPIC = "RETRY_TOPIC"
PROP_REAL_TOPIC = "REAL_TOPIC"
PROP_REAL_QID = "REAL_QID"
PROP_TRAN_MSG = "TRAN_MSG"
PROP_PGROUP = "PGROUP"
PROP_UNIQ_KEY = "UNIQ_KEY"
PROP_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
PROP_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
PROP_RECONSUME_TIME = "RECONSUME_TIME"
PROP_CLUSTER = "CLUSTER"
PROP_TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
PROP_TRAN_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
PROP_CHECK_IMMUNITY_TIME = "CHECK_IMMUNITY_TIME_IN_SECONDS"

# System topics.
TOPIC_DEFAULT = "TBW102"
TOPIC_SCHEDULE = "SCHEDULE_TOPIC_XXXX"
TOPIC_TRANS_HALF = "RMQ_SYS_TRANS_HALF_TOPIC"
TOPIC_TRANS_OP_HALF = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"

HostPort = tuple[str, int]


class _Properties:
    """``tags`` and ``keys`` read from a message's ``properties`` (Message and StoredMessage)."""

    __slots__ = ()
    properties: dict[str, str]

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROP_TAGS)

    @property
    def keys(self) -> list[str]:
        raw = self.properties.get(PROP_KEYS, "")
        return [k for k in raw.split(" ") if k]


@dataclass(frozen=True, slots=True)
class Message(_Properties):
    """A message to be appended to the CommitLog.

    ``queue_id`` must already be chosen.  ``store_timestamp`` is normally
    ``None`` (the store stamps "now"); re-deliveries that must keep an older
    store time (transaction commit) pass it explicitly.
    """

    topic: str
    queue_id: int
    body: bytes
    properties: dict[str, str] = field(default_factory=dict)
    flag: int = 0
    sysflag: int = 0
    born_timestamp: int = 0
    born_host: HostPort = ("127.0.0.1", 0)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    store_timestamp: int | None = None


class PackedBodies(Sequence[bytes]):
    """Message bodies as (offset, length) spans of one buffer, e.g. the values of a Kafka batch
    in its payload: a run of thousands of records with no bytes object per record on the append
    path (``layout.encode_uniform`` hands buffer and spans to the native encoder as they are).
    ``spans`` holds native int32 pairs; ``longest`` is the longest body's length.  Indexing copies
    a body out, so the rest of the core can treat it as any ``Sequence[bytes]``."""

    __slots__ = ("buffer", "spans", "longest")

    def __init__(self, buffer: bytes | memoryview, spans: bytes, longest: int) -> None:
        pairs = memoryview(spans).cast("i")
        if len(pairs) % 2:
            raise ValueError("spans must be (offset, length) pairs")
        self.buffer = buffer
        self.spans = pairs
        self.longest = longest

    def __len__(self) -> int:
        return len(self.spans) // 2

    @overload
    def __getitem__(self, i: int) -> bytes: ...
    @overload
    def __getitem__(self, i: slice) -> list[bytes]: ...

    def __getitem__(self, i: int | slice) -> bytes | list[bytes]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        n = len(self)
        if not -n <= i < n:
            raise IndexError("body index out of range")
        i %= n
        off, size = self.spans[2 * i], self.spans[2 * i + 1]
        return bytes(self.buffer[off:off + size])


class KeySpans(Sequence[str]):
    """Index keys as UTF-8 (offset, length) spans of one buffer (``PackedBodies`` of their bytes), as the
    native Kafka mapper finds them in the records' properties: no str per key on the append path
    (``IndexService.put_keys`` hands buffer and spans to the native index writer, which hashes the
    UTF-8 as Java hashes the str).  Indexing decodes a key (strict UTF-8), so the rest of the core can
    treat it as any ``Sequence[str]``."""

    __slots__ = ("raw",)

    def __init__(self, buffer: bytes | memoryview, spans: bytes) -> None:
        self.raw = PackedBodies(buffer, spans, 0)

    def __len__(self) -> int:
        return len(self.raw)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...

    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        return self.raw[i].decode("utf-8")


@dataclass(slots=True)
class UniformBatch:
    """Messages to one queue that share everything but body and born timestamp.

    Not frozen (made per produced batch: a frozen dataclass's ``__init__`` costs three times as
    much), but treated as immutable: the broker makes a changed copy (``dataclasses.replace``).

    The shape of a Kafka batch of plain records (no key, no headers): the store encodes its
    properties, ConsumeQueue tags code and index keys once for the whole run
    (``MessageStore.put_uniform``).  ``born_timestamps`` is one int for all or one per body;
    ``bodies`` a list of bytes or ``PackedBodies`` (then ``born_timestamps`` may be a memoryview
    of native int64s, as the Kafka produce path makes them).
    """

    topic: str
    queue_id: int
    bodies: Sequence[bytes]
    born_timestamps: Sequence[int] | int
    properties: dict[str, str] = field(default_factory=dict)
    flag: int = 0
    sysflag: int = 0
    born_host: HostPort = ("127.0.0.1", 0)
    keys: Sequence[str] | None = None   # per record: its KEYS (one key, no spaces), before the shared properties
    #: per record: its own encoded properties (``k 0x01 v 0x02 ...``), before the shared ones; ``keys`` are
    #: then only the records' index keys (already in these properties)
    record_props: PackedBodies | None = None
    #: a re-delivery that keeps an older store time (a transaction's commit): the store stamps this, not "now"
    store_timestamp: int | None = None
    #: per record: the CommitLog offset of the half it commits (``Message.prepared_transaction_offset``)
    prepared_offsets: Sequence[int] | None = None

    def __len__(self) -> int:
        return len(self.bodies)

    def longest(self) -> int:
        """Length of the longest body (0 for none)."""
        bodies = self.bodies
        return bodies.longest if isinstance(bodies, PackedBodies) else max(map(len, bodies), default=0)

    def messages(self) -> list[Message]:
        """The same run as ordinary Messages (each with its own copy of the properties)."""
        stamps = self.born_timestamps
        if isinstance(stamps, int):
            stamps = [stamps] * len(self.bodies)
        prepared = [0] * len(self.bodies) if self.prepared_offsets is None else self.prepared_offsets
        if self.record_props is not None:
            own = [dict(item.split("\x01", 1) for item in blob.decode("utf-8").split("\x02")) if blob else {}
                   for blob in self.record_props]
            return [Message(self.topic, self.queue_id, body, {**props, **self.properties}, self.flag, self.sysflag,
                            ts, self.born_host, 0, po, self.store_timestamp)
                    for body, ts, props, po in zip(self.bodies, stamps, own, prepared, strict=True)]
        keys: Sequence[str | None] = [None] * len(self.bodies) if self.keys is None else self.keys
        return [Message(self.topic, self.queue_id, body,
                        dict(self.properties) if key is None else {PROP_KEYS: key, **self.properties},
                        self.flag, self.sysflag, ts, self.born_host, 0, po, self.store_timestamp)
                for body, ts, key, po in zip(self.bodies, stamps, keys, prepared, strict=True)]


@dataclass(frozen=True, slots=True)
class BatchBody:
    """A RocketMQ batch (SEND_BATCH_MESSAGE) still in its wire form, for the store to encode directly.

    ``body`` holds the elements back to back (TOTALSIZE MAGIC BODYCRC FLAG BODYLEN BODY PROPLEN PROPS);
    ``properties`` are the batch-level ones, appended to every element's own (as the Java broker's
    ``MessageExtBatchEncoder`` does).  See ``MessageStore.put_batch_body``.
    """

    topic: str
    queue_id: int
    body: bytes
    properties: dict[str, str]
    sysflag: int = 0
    born_timestamp: int = 0
    born_host: HostPort = ("127.0.0.1", 0)
    reconsume_times: int = 0


@dataclass(frozen=True, slots=True)
class StoredMessage(_Properties):
    """A message decoded from its CommitLog record (RocketMQ MessageExt)."""

    topic: str
    queue_id: int
    body: bytes
    properties: dict[str, str]
    flag: int
    sysflag: int
    born_timestamp: int
    born_host: HostPort
    store_timestamp: int
    store_host: HostPort
    reconsume_times: int
    prepared_transaction_offset: int
    queue_offset: int
    commitlog_offset: int
    body_crc: int
    size: int


# -- Java String.hashCode ---------------------------------------------------

_POWERS: dict[int, tuple[int, ...]] = {}
_LITTLE = sys.byteorder == "little"


def _powers(n: int) -> tuple[int, ...]:
    p = _POWERS.get(n)
    if p is None:
        acc, seq = 1, []
        for _ in range(n):
            seq.append(acc)
            acc = (acc * 31) & 0xFFFFFFFF
        p = _POWERS[n] = tuple(reversed(seq))
    return p


def java_hash(s: str) -> int:
    """Java ``String.hashCode``: 31*h + c over UTF-16 code units, signed int32 (a dot product with
    the powers of 31, cached per length)."""
    if s.isascii():
        units: bytes | array[int] = s.encode("ascii")
    else:
        units = array("H", s.encode("utf-16-le" if _LITTLE else "utf-16-be"))
    h = sum(map(mul, units, _powers(len(units)))) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def java_hash_suffix(prefix_hash: int, s: str) -> int:
    """Java hashCode of ``prefix + s`` given ``java_hash(prefix)`` (saves re-hashing the prefix)."""
    if s.isascii():
        units: bytes | array[int] = s.encode("ascii")
    else:
        units = array("H", s.encode("utf-16-le" if _LITTLE else "utf-16-be"))
    n = len(units)
    h = (prefix_hash * _powers(n + 1)[0] + sum(map(mul, units, _powers(n)))) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


java_string_hash = java_hash    # the older name


def tags_code(tags: str | None) -> int:
    """ConsumeQueue tag hash: Java hashCode of the TAGS value, 0 when absent."""
    return java_hash(tags) if tags else 0
