"""Kafka record <-> core Message mapping (the only place that knows both).

Theory of operation
-------------------
One Kafka record becomes one core ``Message`` (topic = Kafka topic, queue id
= partition; the ConsumeQueue offset the store assigns *is* the Kafka offset),
so RocketMQ consumers read Kafka-produced data and vice versa.

Mapping, chosen to be lossless for Kafka and natural for RocketMQ:

* value -> body.  A null value is stored as an empty body plus
  ``KAFKA_NULL_VALUE=1``.
* key -> ``KEYS`` when it is UTF-8 text without spaces or the property
  separators \\x01/\\x02 (RocketMQ consumers and the key index see it).  Any
  other key, including the empty key, goes to ``KAFKA_KEY`` as "b" + base64
  (never an empty property value), so null (no property) and b"" stay distinct.
* headers -> ``KAFKA_HEADERS``: the exact list (order, duplicates, null and
  binary values) as JSON ``[[key, base64-or-null], ...]``.  Headers whose
  name is a plain identifier that is not a RocketMQ system property and whose
  value is separator-free text are *also* copied to user properties, so
  RocketMQ consumers see them.  Decoding prefers ``KAFKA_HEADERS``; a message
  without it (written by a RocketMQ producer) exposes its user properties as
  headers.  So every Kafka record has ``KAFKA_HEADERS`` (``[]`` when there are
  none): it marks the Kafka origin, and survives a RocketMQ consumer re-sending
  the message with its properties (the re-send adds ``UNIQ_KEY`` and
  ``CLUSTER``, which must not come back as headers).  Kafka records get no
  ``CLUSTER`` stamp of their own (RocketMQ's send path adds it, Kafka's Produce
  does not): a plain record's properties are ``KAFKA_HEADERS=[]`` alone.
* key and headers too large for the properties (RocketMQ's properties block has a 2-byte length:
  ``ENVELOPE_BUDGET`` bytes are used at most, leaving room for what the broker adds) go into an
  *envelope* in the body instead: ``KAFKA_ENVELOPE=<key length>,<headers length>`` (decimal, key
  length -1 for a null key) and body = key bytes + headers JSON (the ``KAFKA_HEADERS`` format,
  UTF-8) + value.  A RocketMQ consumer finds the value at ``body[key length + headers length:]``
  (a null key counts 0).  The envelope keeps what fits of the header copies, ``rocketmq.*``
  features and the ``KEYS`` index entry; Kafka readers get key, headers and value back exactly.
* timestamp -> ``born_timestamp`` (CreateTime).  LogAppendTime batches set
  ``KAFKA_TS_TYPE=1`` and read back the store timestamp.
* RocketMQ features for Kafka producers, through headers with the documented
  prefix ``rocketmq.`` (kept in ``KAFKA_HEADERS`` too, so Kafka consumers get
  exactly what was sent): ``rocketmq.TAGS`` sets TAGS (tag filtering),
  ``rocketmq.KEYS`` adds index keys, ``rocketmq.DELAY`` a delay level and
  ``rocketmq.DELIVER_AT`` (epoch ms) the nearest delay level at or after it
  (``apply_delay``).  A binary or spaced key is also indexed: its base64 text
  is added to KEYS, so ``queryMsgByKey`` finds it.
* Reading a Kafka record's key back from ``KEYS`` drops what ``rocketmq.KEYS`` headers appended to
  it (``_own_key``), so the key round-trips exactly.  A ``KAFKA_HEADERS`` that is not a header list
  or a ``KAFKA_KEY`` that is not base64 (a RocketMQ producer may set any property) is read as a
  RocketMQ producer's property, with one log line, instead of failing every Fetch of the partition.
* Messages written by RocketMQ producers (no ``KAFKA_HEADERS``) expose their
  user properties as headers and every system property as
  ``rocketmq.<NAME>`` (``rocketmq.TAGS``, ``rocketmq.UNIQ_KEY`` ...); a body
  the producer compressed (sysflag COMPRESSED) is inflated for Kafka readers,
  at most ``inflate_limit`` bytes of it (maxMessageSize; ``rokka.core.inflate``):
  a stored body that inflates further (stored before sends were checked) or
  not at all is returned as stored, compressed, with one log line, so it never
  becomes a poison message.

Transactional/idempotent batch metadata (producer id, sequences) is not kept
per message here; the idempotence and transaction layers own that.
"""

from __future__ import annotations

import base64
import functools
import json
import re
import struct
import zlib
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import structlog
from rokka.compat.kafka_control import CTRL_ABORTED, PROP_KAFKA_CTRL, parse_control
from rokka.core import record as layout
from rokka.core.inflate import inflate_zlib
from rokka.core.model import (
    BORNHOST_V6_FLAG,
    COMPRESSED_FLAG,
    STOREHOST_V6_FLAG,
    KeySpans,
    Message,
    PackedBodies,
    StoredMessage,
    UniformBatch,
)

__all__ = ["KafkaControl", "KafkaRecord", "KafkaRow", "apply_delay", "kafka_row", "kafka_rows", "message_from_record",
           "props_view", "messages_from_batch", "plain_run", "plain_span_run", "mapped_span_run",
           "record_from_message", "SYSTEM_PROPERTIES", "HEADER_PREFIX",
           "HEADER_TAGS", "HEADER_DELAY", "HEADER_DELIVER_AT", "FETCH_TABLE"]

PROP_KAFKA_KEY = "KAFKA_KEY"
PROP_KAFKA_HEADERS = "KAFKA_HEADERS"
PROP_KAFKA_NULL_VALUE = "KAFKA_NULL_VALUE"
PROP_KAFKA_TS_TYPE = "KAFKA_TS_TYPE"
PROP_KAFKA_ENVELOPE = "KAFKA_ENVELOPE"
PROP_KEYS = "KEYS"
#: Most property bytes a Kafka record's mapping may take (RocketMQ allows 32767; the rest is room
#: for what the delay, transaction and re-send paths add).  Beyond it: the envelope (module doc).
ENVELOPE_BUDGET = layout.MAX_PROPERTIES_BYTES - 1024
_PLAIN_KEY_MAX = ENVELOPE_BUDGET - 64      # a longer key takes the general path (and the envelope)
_CACHED_HEADERS_MAX = 4096     # header lists up to this many bytes are cached by _header_props
_ENVELOPE_KEYS_MAX = 1024       # an envelope's text key is still indexed (KEYS) up to this size

# RocketMQ MessageConst system property names (never used for copied headers or
# exposed as headers).
SYSTEM_PROPERTIES = frozenset({
    "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID", "TRAN_MSG", "PGROUP",
    "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID", "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG", "CORRECTION_FLAG",
    "MQ2_FLAG", "RECONSUME_TIME", "MSG_REGION", "TRACE_ON", "UNIQ_KEY", "MAX_RECONSUME_TIMES",
    "CONSUME_START_TIME", "TRAN_PREPARED_QUEUE_OFFSET", "TRANSACTION_CHECK_TIMES",
    "CHECK_IMMUNITY_TIME_IN_SECONDS", "INSTANCE_ID", "CORRELATION_ID", "REPLY_TO_CLIENT", "TTL",
    "ARRIVE_TIME", "PUSH_REPLY_TIME", "CLUSTER", "MESSAGE_TYPE", "INNER_MULTI_QUEUE_OFFSET",
    "SHARDING_KEY", "__STARTDELIVERTIME", "INNER_NUM", "INNER_MULTI_DISPATCH", "TIMER_DELIVER_MS",
    PROP_KAFKA_KEY, PROP_KAFKA_HEADERS, PROP_KAFKA_NULL_VALUE, PROP_KAFKA_TS_TYPE, PROP_KAFKA_ENVELOPE,
})
HEADER_PREFIX = "rocketmq."
HEADER_TAGS = HEADER_PREFIX + "TAGS"
HEADER_KEYS = HEADER_PREFIX + "KEYS"
HEADER_DELAY = HEADER_PREFIX + "DELAY"
HEADER_DELIVER_AT = HEADER_PREFIX + "DELIVER_AT"
_INTERNAL = frozenset({PROP_KAFKA_KEY, PROP_KAFKA_HEADERS, PROP_KAFKA_NULL_VALUE, PROP_KAFKA_TS_TYPE,
                       PROP_KAFKA_ENVELOPE})
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")
_SEPARATORS = ("\x01", "\x02")
log = structlog.get_logger(__name__)


# (offset, timestamp, log_append_time, key, value, headers): what Fetch encodes.
KafkaRow = tuple[int, int, "bool | KafkaControl", bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]


class KafkaRecord:
    """A Kafka record with absolute offset/timestamp (what Fetch needs)."""

    __slots__ = ("offset", "timestamp", "log_append_time", "key", "value", "headers")

    def __init__(self, offset: int, timestamp: int, log_append_time: bool, key: bytes | None,
                 value: bytes | None, headers: tuple[tuple[str, bytes | None], ...]) -> None:
        self.offset = offset
        self.timestamp = timestamp
        self.log_append_time = log_append_time
        self.key = key
        self.value = value
        self.headers = headers


def _text(b: bytes) -> str | None:
    try:
        s = b.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if any(c in s for c in _SEPARATORS) else s


@functools.lru_cache(maxsize=1024)
def _header_props(headers: tuple[tuple[str, bytes | None], ...]) -> tuple[str, tuple[tuple[str, str], ...]]:
    """(KAFKA_HEADERS json, headers to copy in order) for a header list; cached, as producers
    tend to repeat the same headers.  Copies are rocketmq.* headers and plain-named non-system
    ones, with non-empty separator-free text values."""
    exact = [[k, None if v is None else base64.b64encode(v).decode("ascii")] for k, v in headers]
    copies = []
    for k, v in headers:
        text = _text(v) if v is not None else None
        if text and (k.startswith(HEADER_PREFIX) or (_SAFE_NAME.match(k) and k not in SYSTEM_PROPERTIES)):
            copies.append((k, text))
    return json.dumps(exact, separators=(",", ":"), ensure_ascii=True), tuple(copies)


def message_from_record(
    topic: str, partition: int, *, key: bytes | None, value: bytes | None,
    headers: tuple[tuple[str, bytes | None], ...], timestamp: int, log_append_time: bool,
) -> Message:
    """Build the core Message for one Kafka record (see module doc for the rules)."""
    props: dict[str, str] = {}
    if key is not None:
        text = _text(key) if key else None
        if text and " " not in text:
            props[PROP_KEYS] = text
        else:
            b64 = base64.b64encode(key).decode("ascii")
            props[PROP_KAFKA_KEY] = "b" + b64  # never empty
            if b64:
                props[PROP_KEYS] = b64  # indexed, so the key can still be queried
    if value is None:
        props[PROP_KAFKA_NULL_VALUE] = "1"
    if log_append_time:
        props[PROP_KAFKA_TS_TYPE] = "1"
    # Always present on Kafka-produced messages ("[]" when there are none): it marks the Kafka origin,
    # so a Kafka reader gets exactly the headers that were sent and no rocketmq.* extras.
    if headers:
        # the cache is for the usual small, repeated header lists; big ones would pin their bytes in it
        big = sum(len(k) + len(v or b"") for k, v in headers) > _CACHED_HEADERS_MAX
        exact_json, copies = (_header_props.__wrapped__ if big else _header_props)(headers)
        props[PROP_KAFKA_HEADERS] = exact_json
        for k, text in copies:
            if k.startswith(HEADER_PREFIX):
                _apply_rocketmq_header(props, k, text)
            else:
                props.setdefault(k, text)
    else:
        props[PROP_KAFKA_HEADERS] = "[]"
    if _props_size(props) > ENVELOPE_BUDGET:
        return _enveloped(topic, partition, key, value, headers, timestamp, props)
    return Message(topic=topic, queue_id=partition, body=value or b"", properties=props,
                   born_timestamp=timestamp)


def _props_size(props: dict[str, str]) -> int:
    """Encoded size of ``props`` (exact when it may matter: characters first, bytes near the budget)."""
    chars = sum(len(k) + len(v) + 2 for k, v in props.items())
    if chars * 4 <= ENVELOPE_BUDGET:        # UTF-8 takes at most 4 bytes a character
        return chars
    return len(layout.encode_properties(props)) + 1


def _enveloped(topic: str, partition: int, key: bytes | None, value: bytes | None,
               headers: tuple[tuple[str, bytes | None], ...], timestamp: int, mapped: dict[str, str]) -> Message:
    """The envelope form (module doc) of a record whose ``mapped`` properties do not fit."""
    hjson = _header_props.__wrapped__(headers)[0].encode("ascii") if headers else b""
    props = {PROP_KAFKA_ENVELOPE: f"{-1 if key is None else len(key)},{len(hjson)}"}
    for name in (PROP_KAFKA_NULL_VALUE, PROP_KAFKA_TS_TYPE):
        if name in mapped:
            props[name] = mapped[name]
    keys = mapped.get(PROP_KEYS, "")
    # KEYS = the key's index text (the key, or its base64 when binary), then rocketmq.KEYS ones
    own_key = "" if key is None else (mapped[PROP_KAFKA_KEY][1:] if PROP_KAFKA_KEY in mapped else key.decode("utf-8"))
    if own_key and len(own_key) <= _ENVELOPE_KEYS_MAX:
        props[PROP_KEYS] = own_key
    size = _props_size(props)
    for name, text in mapped.items():     # what fits of the header copies and rocketmq.* features, in order
        if name in props or name in (PROP_KAFKA_KEY, PROP_KAFKA_HEADERS, PROP_KEYS):
            continue
        if size + len(name) + 4 * len(text) + 2 <= ENVELOPE_BUDGET:
            props[name] = text
            size = _props_size(props)
    extra = keys[len(own_key):].strip() if keys.startswith(own_key) else ""
    if extra and size + 4 * len(extra) + 8 <= ENVELOPE_BUDGET:       # rocketmq.KEYS index keys
        props[PROP_KEYS] = f"{props[PROP_KEYS]} {extra}" if PROP_KEYS in props else extra
    body = b"".join((key or b"", hjson, value or b""))
    return Message(topic=topic, queue_id=partition, body=body, properties=props, born_timestamp=timestamp)


def messages_from_batch(
    topic: str, partition: int, rows: Iterable[tuple[int, int, int, bytes | None, bytes | None,
                                                     tuple[tuple[str, bytes | None], ...]]],
    *, base_timestamp: int, log_append_time: bool, now: int,
) -> list[Message]:
    """``message_from_record`` for every record of a batch, given as the codec's field tuples
    ``(attributes, timestamp_delta, offset_delta, key, value, headers)``.

    The common record (no key, no headers, a value, CreateTime) is built inline: same Message
    as ``message_from_record`` gives, without the call and the property rules.
    """
    out: list[Message] = []
    append = out.append
    for _, ts_delta, _, key, value, headers in rows:
        if key is None and not headers and value is not None and not log_append_time:
            append(Message(topic, partition, value, {PROP_KAFKA_HEADERS: "[]"}, 0, 0,
                           base_timestamp + ts_delta))
        else:
            append(message_from_record(
                topic, partition, key=key, value=value, headers=headers,
                timestamp=now if log_append_time else base_timestamp + ts_delta,
                log_append_time=log_append_time))
    return out


def plain_run(topic: str, partition: int, values: Sequence[bytes], timestamps: Sequence[int],
              keys: Sequence[bytes] | None = None) -> UniformBatch | None:
    """``messages_from_batch`` for a batch of plain records (no headers, a value, CreateTime; no
    key, or every key text that maps to ``KEYS``) as one ``UniformBatch``: the same stored bytes,
    shared properties encoded once.  None when a key needs the general mapping (``KAFKA_KEY``)."""
    texts: list[str] | None = None
    if keys is not None:
        texts = []
        for key in keys:
            if not key or b" " in key or b"\x01" in key or b"\x02" in key or len(key) > _PLAIN_KEY_MAX:
                return None
            try:
                texts.append(key.decode("utf-8"))
            except UnicodeDecodeError:
                return None
    return UniformBatch(topic, partition, values, timestamps, {PROP_KAFKA_HEADERS: "[]"}, keys=texts)


def plain_span_run(topic: str, partition: int, payload: bytes | memoryview, spans: bytes, timestamps: bytes,
                   keys: Sequence[bytes] | None, longest: int) -> UniformBatch | None:
    """``plain_run`` for a batch walked by ``records.plain_spans``: the values stay in ``payload``
    (``PackedBodies``) and the CreateTimes in their int64 array, so the store encodes the run with
    no Python object per record."""
    texts = None
    if keys is not None:
        run = plain_run(topic, partition, (), (), keys)
        if run is None:
            return None
        texts = run.keys
    return UniformBatch(topic, partition, PackedBodies(payload, spans, longest), memoryview(timestamps).cast("q"),
                        {PROP_KAFKA_HEADERS: "[]"}, keys=texts)


#: What the native mapper (``_crecords.mapped_spans``) needs of the rules above: the system property
#: names (never copied from headers) and the properties budget (the envelope starts past it).
MAPPING_SYSTEM_NAMES = tuple(sorted(n.encode("ascii") for n in SYSTEM_PROPERTIES))
MAPPING_BUDGET = ENVELOPE_BUDGET
#: What the Kafka codec's Fetch walker (``stored_records.walk``, via ``kafka_pieces``) needs of the
#: read rules (``_kafka_props``): the header prefix, the system names that get it, the internal names never
#: exposed, and the names it reads (key, headers, null value, timestamp type, envelope, control, KEYS).
FETCH_TABLE = (HEADER_PREFIX.encode("ascii"), MAPPING_SYSTEM_NAMES, tuple(sorted(n.encode("ascii") for n in _INTERNAL)),
               tuple(n.encode("ascii") for n in (PROP_KAFKA_KEY, PROP_KAFKA_HEADERS, PROP_KAFKA_NULL_VALUE,
                                                 PROP_KAFKA_TS_TYPE, PROP_KAFKA_ENVELOPE, PROP_KAFKA_CTRL, PROP_KEYS)))


def mapped_span_run(topic: str, partition: int, payload: bytes | memoryview,
                    mapped: tuple[bytes, bytes, bytes, bytes, bytes | None, int, int]) -> UniformBatch:
    """``messages_from_batch`` (CreateTime) as one ``UniformBatch`` for a batch the native mapper
    walked (``_crecords.mapped_spans``: any keys, null values, headers): values left in ``payload``,
    each record's properties -- the same bytes ``message_from_record`` gives -- as spans of one blob
    (``record_props``), ``keys`` the records' index keys (their KEYS) as spans of the same blob."""
    spans, stamps, blob, prop_spans, key_spans, longest, longest_props = mapped
    own = PackedBodies(blob, prop_spans, longest_props)
    keys = KeySpans(blob, key_spans) if key_spans is not None else None
    return UniformBatch(topic, partition, PackedBodies(payload, spans, longest), memoryview(stamps).cast("q"),
                        {}, keys=keys, record_props=own)


def _apply_rocketmq_header(props: dict[str, str], name: str, text: str) -> None:
    if name == HEADER_TAGS:
        props["TAGS"] = text
    elif name == HEADER_KEYS:
        props[PROP_KEYS] = " ".join(k for k in (props.get(PROP_KEYS, ""), text) if k)
    elif name == HEADER_DELAY and text.isdigit():
        props["DELAY"] = text
    elif name == HEADER_DELIVER_AT and text.isdigit():
        props[HEADER_DELIVER_AT] = text  # resolved to a level by apply_delay (needs the level table)


def apply_delay(msg: Message, delay_levels_ms: list[int], now_ms: int) -> Message:
    """Resolve ``rocketmq.DELIVER_AT`` to the nearest delay level at or after it."""
    at = msg.properties.get(HEADER_DELIVER_AT)
    if at is None:
        return msg
    props = dict(msg.properties)
    del props[HEADER_DELIVER_AT]
    wait = int(at) - now_ms
    if wait > 0 and "DELAY" not in props:
        level = next((i + 1 for i, d in enumerate(delay_levels_ms) if d >= wait), len(delay_levels_ms))
        props["DELAY"] = str(level)
    return Message(msg.topic, msg.queue_id, msg.body, props, msg.flag, msg.sysflag, msg.born_timestamp,
                   msg.born_host, msg.reconsume_times, msg.prepared_transaction_offset, msg.store_timestamp)


#: Default bound of a stored compressed body's inflation (rokka's default maxMessageSize).
DEFAULT_INFLATE_LIMIT = 4 * 1024 * 1024


def _inflated(body: bytes, offset: int, limit: int) -> bytes:
    """A COMPRESSED body inflated for Kafka readers, or as stored (with a log line) when it inflates
    past ``limit`` or is not zlib at all."""
    try:
        value = inflate_zlib(body, limit)
    except zlib.error:
        value = None
        reason = "corrupt"
    else:
        reason = "inflate_limit"
    if value is None:
        log.warning("kafka.fetch_body_as_stored", queue_offset=offset, reason=reason, compressed=len(body),
                    limit=limit)
        return body
    return value


def _body(msg: StoredMessage, limit: int = DEFAULT_INFLATE_LIMIT) -> bytes:
    if msg.sysflag & COMPRESSED_FLAG:
        return _inflated(msg.body, msg.queue_offset, limit)
    return msg.body


# (key, null value, headers, LogAppendTime, envelope (key length, headers length) or None)
class KafkaControl(NamedTuple):
    """A Kafka control entry (``rokka.core.txn``: ``KAFKA_CTRL``) in the place of a row's
    log_append_time: kind "C"/"A" (a transaction's COMMIT/ABORT marker) or "X" (the placeholder of
    an aborted record); Fetch encodes such a row as a control batch, which consumers skip."""

    kind: str
    producer_id: int
    epoch: int


# (key, null value, headers, LogAppendTime or a control entry, envelope)
KafkaProps = tuple[bytes | None, bool, tuple[tuple[str, bytes | None], ...], "bool | KafkaControl",
                   tuple[int, int] | None]


def _envelope(props: dict[str, str]) -> tuple[int, int] | None:
    raw = props.get(PROP_KAFKA_ENVELOPE)
    if raw is None:
        return None
    try:
        klen, hlen = (int(x) for x in raw.split(","))
    except ValueError:
        return None
    return (klen, hlen) if klen >= -1 and hlen >= 0 else None


def _open_envelope(body: bytes, envelope: tuple[int, int],
                   null_value: bool) -> tuple[bytes | None, tuple[tuple[str, bytes | None], ...], bytes | None]:
    """(key, headers, value) of an envelope body (module doc); a body that does not hold the
    lengths it announces is given as the value, with no key or headers."""
    klen, hlen = envelope
    start = max(klen, 0)
    if start + hlen > len(body):
        return None, (), None if null_value else body
    try:
        raw = body[start:start + hlen]
        headers = tuple((str(k), None if v is None else base64.b64decode(v))
                        for k, v in json.loads(raw)) if hlen else ()
    except (ValueError, TypeError):
        return None, (), None if null_value else body
    key = None if klen < 0 else body[:klen]
    return key, headers, None if null_value else body[start + hlen:]


def _kafka_props(props: dict[str, str]) -> KafkaProps:
    """(key, null value, headers, LogAppendTime, envelope) of a stored message's properties."""
    ctrl = props.get(PROP_KAFKA_CTRL)
    if ctrl is not None:        # no data: consumers see a control batch (KafkaControl above)
        parsed = parse_control(ctrl)
        return None, False, (), KafkaControl(*parsed) if parsed else KafkaControl(CTRL_ABORTED, -1, -1), None
    envelope = _envelope(props)
    if envelope is not None:    # key and headers are in the body
        return None, props.get(PROP_KAFKA_NULL_VALUE) == "1", (), props.get(PROP_KAFKA_TS_TYPE) == "1", envelope
    null_value = props.get(PROP_KAFKA_NULL_VALUE) == "1"
    raw_headers = props.get(PROP_KAFKA_HEADERS)
    headers: tuple[tuple[str, bytes | None], ...] | None
    headers = () if raw_headers == "[]" else None if raw_headers is None else _headers_json(raw_headers)
    if headers is None:     # a RocketMQ producer's record (or its KAFKA_HEADERS is not ours)
        raw_headers = None
        headers = tuple((k if k not in SYSTEM_PROPERTIES else HEADER_PREFIX + k, v.encode("utf-8"))
                        for k, v in props.items() if k not in _INTERNAL)
    key = _b64_or_none(props[PROP_KAFKA_KEY][1:]) if PROP_KAFKA_KEY in props else None
    if key is None and props.get(PROP_KEYS):
        key = _own_key(props[PROP_KEYS], headers if raw_headers is not None else ())
    return key, null_value, headers, props.get(PROP_KAFKA_TS_TYPE) == "1", None


def _headers_json(raw: str) -> tuple[tuple[str, bytes | None], ...] | None:
    """The KAFKA_HEADERS list, or None (with a log line) when it is not one (a RocketMQ producer may
    set any property: such a record must not fail every Fetch of its partition)."""
    try:
        return tuple((str(k), None if v is None else base64.b64decode(v)) for k, v in json.loads(raw))
    except (ValueError, TypeError) as exc:      # binascii.Error is a ValueError
        log.warning("kafka.fetch_bad_headers_property", error=str(exc)[:200])
        return None


def _b64_or_none(text: str) -> bytes | None:
    try:
        return base64.b64decode(text)
    except ValueError:
        log.warning("kafka.fetch_bad_key_property", value=text[:64])
        return None


def _own_key(keys: str, headers: tuple[tuple[str, bytes | None], ...]) -> bytes | None:
    """A Kafka record's text key from its KEYS, without what ``rocketmq.KEYS`` headers appended
    (``_apply_rocketmq_header``): None when KEYS holds only those."""
    extras = [text for name, v in headers if name == HEADER_KEYS and v is not None and (text := _text(v))]
    if extras:
        suffix = " ".join(extras)
        if keys == suffix:
            return None
        if keys.endswith(" " + suffix):
            keys = keys[:-len(suffix) - 1]
    return keys.encode("utf-8")


def record_from_message(msg: StoredMessage) -> KafkaRecord:
    """The Kafka view of a stored message (Kafka offset = queue offset)."""
    key, null_value, headers, log_append, envelope = _kafka_props(msg.properties)
    value = None if null_value else _body(msg)
    if envelope is not None:
        key, headers, value = _open_envelope(_body(msg), envelope, null_value)
    ts = msg.store_timestamp if log_append else msg.born_timestamp
    return KafkaRecord(msg.queue_offset, ts, log_append, key, value, headers)


# Kafka view straight from CommitLog record bytes (the Fetch hot path).  The properties blob is
# the same for every record of a key-less, header-less producer, so its Kafka meaning is cached
# by the raw bytes; the header fields are picked from layout's own struct by name.
@functools.lru_cache(maxsize=4096)
def props_view(raw_props: bytes) -> KafkaProps:
    return _kafka_props(layout.decode_properties(raw_props))


_VIEW_FIELDS = ("total_size", "queue_offset", "sysflag", "born_timestamp", "store_timestamp")


def _view_struct(v6_bits: int) -> struct.Struct:
    """layout's header struct for one host variant with every field but ``_VIEW_FIELDS`` and the
    body length turned into padding (no host bytes objects built per record)."""
    fmt = ">"
    for fl in layout.FIELDS:
        if fl.fmt == "blob":
            return struct.Struct(fmt + fl.len_fmt)
        code = fl.fmt if fl.fmt != "host" else ("16s" if v6_bits & fl.v6_flag else "4s") + "i"
        fmt += code if fl.name in _VIEW_FIELDS else f"{struct.calcsize('>' + code)}x"
    raise AssertionError("layout has no blob field")


_V6_BITS = BORNHOST_V6_FLAG | STOREHOST_V6_FLAG
_VIEW = {bits: _view_struct(bits) for bits in layout.HEADERS}
assert all(_VIEW[b].size == h.size for b, h in layout.HEADERS.items())
assert [n for n in (fl.name for fl in layout.FIELDS) if n in _VIEW_FIELDS] == list(_VIEW_FIELDS)


def kafka_row(raw: bytes, inflate_limit: int = DEFAULT_INFLATE_LIMIT) -> KafkaRow:
    """``record_from_message(decode_record(raw))`` as a tuple ``(offset, timestamp,
    log_append_time, key, value, headers)``, without building the StoredMessage.

    Raises:
        RecordError: the bytes are not a well-formed CommitLog record.
    """
    return kafka_rows((raw,), inflate_limit)[0]


def kafka_rows(raws: Iterable[bytes], inflate_limit: int = DEFAULT_INFLATE_LIMIT,
               max_bytes: int | None = None) -> list[KafkaRow]:
    """``kafka_row`` of each record (one loop: the Fetch hot path); a compressed body inflates to at
    most ``inflate_limit`` bytes (see the module doc).  ``max_bytes``: stop after the record whose
    value takes the values past it (stored bodies may inflate far beyond their stored size, so a
    Fetch never holds much more than it may send)."""
    out: list[KafkaRow] = []
    append = out.append
    left = -1 if max_bytes is None else max(max_bytes, 1)
    views, props_of, props_len = _VIEW, props_view, layout.PROPS_LEN
    v4 = views[0]
    for raw in raws:
        try:
            view = v4  # IPv4 hosts, almost always; else unpack again with the right struct
            total, qoff, sysflag, born_ts, store_ts, body_len = view.unpack_from(raw)
            if sysflag & _V6_BITS:
                view = views[sysflag & _V6_BITS]
                total, qoff, sysflag, born_ts, store_ts, body_len = view.unpack_from(raw)
            pos = view.size
            end = pos + body_len
            body = raw[pos:end]
            pos = end + 1 + raw[end]
            plen = props_len.unpack_from(raw, pos)[0]
            pos += 2
            raw_props = raw[pos:pos + plen]
        except (struct.error, IndexError) as exc:
            raise layout.RecordError(f"malformed record: {exc}") from exc
        if pos + plen != total or len(raw_props) != plen or len(body) != body_len:
            raise layout.RecordError("malformed record: sizes do not add up")
        key, null_value, headers, log_append, envelope = props_of(raw_props)
        if null_value and envelope is None:
            value = None
        elif sysflag & COMPRESSED_FLAG:
            value = _inflated(body, qoff, inflate_limit)
        else:
            value = body
        if envelope is not None:
            key, headers, value = _open_envelope(value or b"", envelope, null_value)
        append((qoff, store_ts if log_append else born_ts, log_append, key, value, headers))
        if left > 0:
            left -= len(value) if value is not None else 1
            if left <= 0:
                break
    return out
