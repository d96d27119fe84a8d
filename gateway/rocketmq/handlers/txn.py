"""END_TRANSACTION (37) and CHECK_TRANSACTION_STATE (39): the wire side of ``rokka.core.txn``.

Theory of operation
-------------------
``handle_end_transaction`` decodes EndTransactionRequestHeader and hands the
decision to ``Broker.transactions`` (all storage rules live in core.txn).
Clients normally send it oneway, so the answer is usually dropped by the
channel; when it is two-way the reply is SUCCESS, or SYSTEM_ERROR with the
Java broker's remark.  UNKNOWN (0) and invalid values get no reply at all,
as in Java.  A slave refuses with SLAVE_NOT_AVAILABLE.

``send_check`` is the ``rokka.core.txn.Checker`` the check loop calls for every
half that needs a check: it picks the live producer channels of the half's
PGROUP (heartbeats register them in ``Broker.producers``) in random order
and sends CHECK_TRANSACTION_STATE oneway to the first one that accepts the
write.  Header values are strings (the C++ client only decodes JSON
strings); the body is the half re-encoded as a CommitLog record with topic
REAL_TOPIC and queue REAL_QID, keeping the half's offsets.  A producer that
died is skipped: its channel is closed, or the write fails and the next
member is tried.

``run_transaction_checks`` runs the core check loop with this checker; the
runtime starts it next to the handlers.
"""

from __future__ import annotations

import functools
import random
from typing import Any

import structlog
import trio
from rokka.core.model import PROP_REAL_QID, PROP_REAL_TOPIC, PROP_UNIQ_KEY, Message, StoredMessage
from rokka.core.record import encode_offset_msg_id, encode_record
from rokka.core.txn import EndOutcome
from rokka.gateway.rocketmq.handlers.context import BrokerEnv
from rokka.net.remoting.codec.codes import RequestCode, ResponseCode
from rokka.net.remoting.codec.remoting import RemotingCommand
from rokka.net.remoting.codec.request_headers import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
)

log = structlog.get_logger(__name__)

CHECK_SEND_TIMEOUT_S = 3.0


async def handle_end_transaction(env: BrokerEnv, channel: Any,
                                 req: RemotingCommand) -> RemotingCommand | None:
    if env.cfg.broker_id != 0:
        return req.make_response(ResponseCode.SLAVE_NOT_AVAILABLE,
                                 "Can't commit or rollback a transaction on a slave")
    h = EndTransactionRequestHeader.decode(req)
    group, queue_offset, commitlog_offset = h.producer_group, h.tran_state_table_offset, h.commit_log_offset
    decision, from_check = h.commit_or_rollback, h.from_transaction_check
    result = await env.broker.transactions.end_transaction(
        producer_group=group, tran_state_table_offset=queue_offset, commitlog_offset=commitlog_offset,
        commit_or_rollback=decision, from_check=from_check)
    if result.outcome is EndOutcome.IGNORED:
        return None
    if not result.ok:
        log.warning("rocketmq.end_transaction_rejected", group=group, remark=result.remark, queue_offset=queue_offset,
                    commitlog_offset=commitlog_offset, peer=getattr(channel, "id", ""))
        return req.make_response(ResponseCode.SYSTEM_ERROR, result.remark)
    return req.make_response(ResponseCode.SUCCESS)


def check_request(half: StoredMessage) -> RemotingCommand:
    """CHECK_TRANSACTION_STATE for one half copy (header + re-encoded record body)."""
    props = half.properties
    msg = Message(props.get(PROP_REAL_TOPIC, half.topic), int(props.get(PROP_REAL_QID, half.queue_id)),
                  half.body, dict(props), half.flag, half.sysflag, half.born_timestamp, half.born_host,
                  half.reconsume_times, half.prepared_transaction_offset)
    body = encode_record(msg, queue_offset=half.queue_offset, commitlog_offset=half.commitlog_offset,
                         store_timestamp=half.store_timestamp, store_host=half.store_host)
    uniq = props.get(PROP_UNIQ_KEY, "")
    ext = CheckTransactionStateRequestHeader(
        tran_state_table_offset=half.queue_offset, commit_log_offset=half.commitlog_offset, msg_id=uniq,
        transaction_id=uniq, offset_msg_id=encode_offset_msg_id(half.store_host, half.commitlog_offset)).encode()
    return RemotingCommand(code=RequestCode.CHECK_TRANSACTION_STATE, ext_fields=ext, body=body)


async def send_check(env: BrokerEnv, group: str, half: StoredMessage) -> bool:
    """Ask one live producer of ``group`` about ``half``; False if none could be reached."""
    members = [c for c in env.broker.producers.members(group) if not getattr(c.handle, "closed", True)]
    random.shuffle(members)
    cmd = check_request(half)
    for client in members:
        try:
            with trio.fail_after(CHECK_SEND_TIMEOUT_S):
                await client.handle.send_oneway(cmd)
        except Exception as exc:  # noqa: BLE001 - a dead producer: try the next one
            log.info("rocketmq.transaction_check_not_delivered", group=group,
                     client=client.client_id, error=repr(exc))
            continue
        log.info("rocketmq.transaction_check_sent", group=group, client=client.client_id,
                 half_offset=half.queue_offset, uniq_key=half.properties.get(PROP_UNIQ_KEY))
        return True
    return False


async def run_transaction_checks(env: BrokerEnv, *,
                                 task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """The broker's check-back loop (core.txn) with the remoting checker; runs until cancelled."""
    await env.broker.transactions.run(functools.partial(send_check, env), task_status=task_status)
