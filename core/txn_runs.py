"""A transaction's commit as runs: ``commit_message`` of many halves, grouped for ``put_uniform``.

Theory of operation
-------------------
Committing a transaction copies each half to its real queue (``rokka.core.txn.commit_message``: the
half's properties, less those its owner strips, sysflag COMMIT, the half's CommitLog offset as
PREPARED_TRANSACTION_OFFSET, its store time kept) and then writes one op record per half.  A Kafka
transaction's halves were written a produced batch at a time, so the copies come in long stretches that
share everything but body, born time, properties and prepared offset: ``commit_runs`` groups consecutive
copies bound for one queue with the same flag, sysflag, born host and store time into a
``UniformBatch`` (each record's properties as its own part, nothing shared), and ``op_run`` makes the
op records one run.  The store encodes and dispatches each run in one pass, the same bytes, units and
index entries as ``put_messages`` of the messages (``UniformBatch.messages`` gives them back).

A copy the run path cannot carry makes ``commit_runs`` return None, and the caller stores the
messages one by one as before: a copy that ``Broker.prepare`` would move (a delay level), one with tags
or a reconsume count of its own, or index keys other than one single-word KEYS per record (or none for
every record of the run).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence

from rokka.core.model import (
    PROP_DELAY,
    PROP_KEYS,
    PROP_TAGS,
    PROP_UNIQ_KEY,
    TOPIC_TRANS_OP_HALF,
    Message,
    PackedBodies,
    StoredMessage,
    UniformBatch,
)
from rokka.core.storage.layout import encode_properties
from rokka.core.txn import OP_TAG, commit_message

__all__ = ["commit_runs", "op_run"]


def _run(first: Message, bodies: list[bytes], stamps: list[int], props: list[bytes], prepared: list[int],
         keys: list[str] | None) -> UniformBatch:
    spans = array("i")
    at = 0
    for p in props:
        spans.extend((at, len(p)))
        at += len(p)
    own = PackedBodies(b"".join(props), spans.tobytes(), max(map(len, props)))
    return UniformBatch(first.topic, first.queue_id, bodies, stamps, {}, first.flag, first.sysflag, first.born_host,
                        keys=keys, record_props=own, store_timestamp=first.store_timestamp, prepared_offsets=prepared)


def commit_runs(halves: Sequence[StoredMessage], strip: Iterable[str] = ()) -> list[UniformBatch] | None:
    """The commit copies of ``halves`` (in order) as runs (module doc), or None for the message path."""
    strip = tuple(strip)
    runs: list[UniformBatch] = []
    group: tuple[object, ...] | None = None
    first: Message | None = None
    bodies: list[bytes] = []
    stamps: list[int] = []
    props: list[bytes] = []
    prepared: list[int] = []
    keys: list[str] = []
    for half in halves:
        msg = commit_message(half, strip)
        p = msg.properties
        key = p.get(PROP_KEYS)
        if (PROP_DELAY in p or PROP_TAGS in p or PROP_UNIQ_KEY in p or msg.reconsume_times
                or (key is not None and (not key or " " in key))):
            return None
        this = (msg.topic, msg.queue_id, msg.flag, msg.sysflag, msg.born_host, msg.store_timestamp, key is None)
        if this != group:
            if first is not None:
                runs.append(_run(first, bodies, stamps, props, prepared, None if group[-1] else keys))  # type: ignore[index]
            group, first = this, msg
            bodies, stamps, props, prepared, keys = [], [], [], [], []
        bodies.append(msg.body)
        stamps.append(msg.born_timestamp)
        props.append(encode_properties(p))
        prepared.append(msg.prepared_transaction_offset)
        if key is not None:
            keys.append(key)
    if first is not None:
        runs.append(_run(first, bodies, stamps, props, prepared, None if group[-1] else keys))  # type: ignore[index]
    return runs


def op_run(halves: Sequence[StoredMessage], born_ms: int, born_host: tuple[str, int]) -> UniformBatch | None:
    """``op_message`` of each half as one run (their half queue: one for all), or None when they are not
    all of one half queue."""
    if not halves or len({h.queue_id for h in halves}) != 1:
        return None
    return UniformBatch(TOPIC_TRANS_OP_HALF, halves[0].queue_id, [str(h.queue_offset).encode("ascii") for h in halves],
                        born_ms, {PROP_TAGS: OP_TAG}, born_host=born_host)
