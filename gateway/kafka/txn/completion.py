"""What completing a Kafka transaction stores on this broker: ``completion_writes``.

Theory of operation
-------------------
A transaction (or a participant's share of one) ends by storing, in order: the real records of a commit
(each half copied to its partition, ``rokka.core.txn.commit_message``'s rule) or an abort's placeholders
(one empty ``X`` control entry per half); then one marker per partition of the transaction
(``rokka.compat.kafka_control``); then one op record per half in the half topic's op queue.  A commit
whose copies ``commit_runs`` can carry (``rokka.core.txn_runs``) stores them as runs and the op records
as one run; anything else goes as messages for ``append(prepared=True)``, as before runs existed.  The
halves are read as record views (``rokka.core.record.record_view``), decoded into ``StoredMessage``s only
for the message path.  What a retry finds already stored (``already``: halves whose copy or placeholder
is in their queue; ``marked``: queues holding this end's marker) is not stored again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import structlog
from rokka.compat.kafka_control import CTRL_ABORTED, control_message
from rokka.core.model import (
    PROP_REAL_QID,
    PROP_REAL_TOPIC,
    PROP_TRAN_MSG,
    PROP_WAIT,
    TOPIC_TRANS_HALF,
    Message,
    UniformBatch,
)
from rokka.core.record import RecordView, decode_record, record_view
from rokka.core.txn import PROP_OWNED_HALF as PROP_KAFKA_TXN
from rokka.core.txn import commit_message, op_message
from rokka.core.txn_runs import commit_runs, op_run
from rokka.gateway.kafka.txn.states import Txn

if TYPE_CHECKING:
    from rokka.core.broker import Broker

__all__ = ["KAFKA_HALF_ONLY", "Completion", "completion_writes"]

log = structlog.get_logger(__name__)

#: A Kafka half's properties its committed record drops: the record keeps only its mapping's properties.
KAFKA_HALF_ONLY = (PROP_REAL_TOPIC, PROP_REAL_QID, PROP_TRAN_MSG, PROP_KAFKA_TXN, PROP_WAIT)


class Completion(NamedTuple):
    """A completion's writes, in order (``runs``, then ``messages``, then ``ops``), the halves found and
    how many real records a commit stores."""

    runs: list[UniformBatch]
    messages: list[Message]
    ops: UniformBatch | None
    found: list[int]
    records: int


def completion_writes(broker: Broker, txn: Txn, commit: bool, kind: str, already: set[int],
                      marked: set[tuple[str, int]], now: int) -> Completion:
    """What completing ``txn`` stores (module doc); ``kind`` is this end's marker value."""
    store, host = broker.store, broker.store_config.store_host
    records: list[bytes] = []
    views: list[RecordView] = []
    for clo in sorted(txn.halves):
        raw = store.read_record(clo)
        view = record_view(raw) if raw is not None else None
        if raw is None or view is None or view.topic != TOPIC_TRANS_HALF:
            log.warning("kafka_txn.half_missing", transactional_id=txn.tid, commitlog_offset=clo)
            continue
        records.append(raw)
        views.append(view)
    found = [v.commitlog_offset for v in views]
    markers = [control_message(t, q, kind[0], txn.producer_id, txn.epoch, now, host)
               for t, q in sorted(txn.marks) if (t, q) not in marked and t in broker.topics]
    runs = commit_runs([v for v in views if v.commitlog_offset not in already], KAFKA_HALF_ONLY) if commit else None
    if runs is not None:
        ops = op_run(views, now, host)
        tail = [] if ops is not None else [op_message(decode_record(r), now, host) for r in records]
        return Completion(runs, markers + tail, ops, found, sum(map(len, runs)))
    halves = [decode_record(r) for r in records]
    real: list[Message] = []
    for half in halves:
        if half.commitlog_offset in already:
            continue
        msg = commit_message(half, KAFKA_HALF_ONLY)
        real.append(broker.prepare(msg, stamp_cluster=False) if commit else control_message(
            msg.topic, msg.queue_id, CTRL_ABORTED, txn.producer_id, txn.epoch, now, host, half=half))
    return Completion([], real + markers + [op_message(h, now, host) for h in halves], None, found,
                      len(real) if commit else 0)
