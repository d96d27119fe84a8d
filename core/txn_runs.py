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
index entries as ``put_messages`` of the messages (``UniformBatch.messages`` gives them back).  The
halves are read as ``record.RecordView``s of their records (no ``StoredMessage``: decoding one cost more
than the rest of its copy), and each copy follows ``commit_message``'s rule (``commit_destination``).

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
    HostPort,
    PackedBodies,
    UniformBatch,
)
from rokka.core.record import RecordView, decode_properties, encode_properties
from rokka.core.txn import OP_TAG, commit_destination

__all__ = ["commit_runs", "op_run"]


def _run(first: tuple[str, int, int, int, HostPort, int], bodies: list[bytes], stamps: list[int],
         props: list[bytes], prepared: list[int], keys: list[str] | None) -> UniformBatch:
    topic, queue_id, flag, sysflag, born_host, store_ts = first
    spans = array("i")
    at = 0
    for p in props:
        spans.extend((at, len(p)))
        at += len(p)
    own = PackedBodies(b"".join(props), spans.tobytes(), max(map(len, props)))
    return UniformBatch(topic, queue_id, bodies, stamps, {}, flag, sysflag, born_host, keys=keys, record_props=own,
                        store_timestamp=store_ts, prepared_offsets=prepared)


def commit_runs(halves: Sequence[RecordView], strip: Iterable[str] = ()) -> list[UniformBatch] | None:
    """The commit copies of ``halves`` (in order; ``rokka.core.record.record_view`` of each half's record) as runs
    (module doc), or None for the message path.  Each copy is ``commit_message`` of its half: the same
    rule (``commit_destination``) on the same decoded properties."""
    strip = tuple(strip)
    runs: list[UniformBatch] = []
    group: tuple[str, int, int, int, HostPort, int] | None = None
    keyed = False
    bodies: list[bytes] = []
    stamps: list[int] = []
    props: list[bytes] = []
    prepared: list[int] = []
    keys: list[str] = []
    for half in halves:
        p = decode_properties(half.properties)
        try:
            topic, queue_id, sysflag = commit_destination(p, half.sysflag, strip)
        except (KeyError, ValueError):
            return None
        key = p.get(PROP_KEYS)
        if (PROP_DELAY in p or PROP_TAGS in p or PROP_UNIQ_KEY in p or half.reconsume_times
                or (key is not None and (not key or " " in key))):
            return None
        this = (topic, queue_id, half.flag, sysflag, half.born_host, half.store_timestamp)
        if this != group or (key is not None) != keyed:
            if group is not None:
                runs.append(_run(group, bodies, stamps, props, prepared, keys if keyed else None))
            group, keyed = this, key is not None
            bodies, stamps, props, prepared, keys = [], [], [], [], []
        bodies.append(half.body)
        stamps.append(half.born_timestamp)
        props.append(encode_properties(p))
        prepared.append(half.commitlog_offset)
        if key is not None:
            keys.append(key)
    if group is not None:
        runs.append(_run(group, bodies, stamps, props, prepared, keys if keyed else None))
    return runs


def op_run(halves: Sequence[RecordView], born_ms: int, born_host: HostPort) -> UniformBatch | None:
    """``op_message`` of each half as one run (their half queue: one for all), or None when they are not
    all of one half queue."""
    if not halves or len({h.queue_id for h in halves}) != 1:
        return None
    return UniformBatch(TOPIC_TRANS_OP_HALF, halves[0].queue_id, [str(h.queue_offset).encode("ascii") for h in halves],
                        born_ms, {PROP_TAGS: OP_TAG}, born_host=born_host)
