"""RocketMQ message trace records: decoding the trace topic's message bodies.

Theory of operation
-------------------
A client with message trace on (Java ``enableMsgTrace``) sends, besides each message, trace
records to the trace topic (``RMQ_SYS_TRACE_TOPIC`` or the client's ``customizedTraceTopic``).  One
trace message carries several records; each record ends with FIELD_SPLITOR ``\\x02`` and its fields
are separated by CONTENT_SPLITOR ``\\x01`` (the client's ``TraceDataEncoder``).  The trace message's
KEYS are the traced messages' ids (and keys), so the broker's index finds the trace of one message
by QUERY_MESSAGE on the trace topic with key = msgId, as mqadmin's ``queryMsgTraceById`` does.

Record layouts (first field = type), as the Java client 4.9 writes and reads them:

* ``Pub``: timestamp, regionId, group, topic, msgId, tags, keys, storeHost, bodyLength, costTime,
  msgType, [offsetMsgId,] success[, clientHost]
* ``SubBefore``: timestamp, regionId, group, requestId, msgId, retryTimes, keys
* ``SubAfter``: requestId, msgId, costTime, success, keys[, contextCode[, timestamp, group]]
* ``EndTransaction``: timestamp, regionId, group, topic, msgId, tags, keys, storeHost, msgType,
  transactionId, transactionState, fromTransactionCheck

``decode`` returns one ``TraceRecord`` per record it can read; a malformed record is skipped (the
trace topic is written by clients, so nothing in it is trusted), never an error for the rest.
``views(msg_id, body, client_host)`` is Java's ``TraceView.decodeFromTraceTransData``: the records
of one message id, with the trace message's born host as client host.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CONTENT_SPLITOR", "FIELD_SPLITOR", "TRACE_TOPIC", "TraceRecord", "decode", "views"]

TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
CONTENT_SPLITOR = "\x01"
FIELD_SPLITOR = "\x02"


@dataclass(frozen=True)
class TraceRecord:
    type: str                   # Pub | SubBefore | SubAfter | EndTransaction
    msg_id: str
    timestamp: int = 0
    group: str = ""
    topic: str = ""
    tags: str = ""
    keys: str = ""
    store_host: str = ""
    cost_time: int = 0
    success: bool = True
    offset_msg_id: str = ""
    request_id: str = ""
    retry_times: int = 0
    client_host: str = ""

    @property
    def status(self) -> str:
        return "success" if self.success else "failed"


def _bool(text: str) -> bool:
    return text.strip().lower() == "true"     # Java's Boolean.parseBoolean


def _record(f: list[str]) -> TraceRecord | None:
    kind = f[0]
    if kind == "Pub" and len(f) >= 13:
        offset_id, ok = (f[12], f[13]) if len(f) >= 14 else ("", f[12])
        return TraceRecord("Pub", f[5], int(f[1]), f[3], f[4], f[6], f[7], f[8], int(f[10]), _bool(ok), offset_id,
                           client_host=f[14] if len(f) >= 15 else "")
    if kind == "SubBefore" and len(f) >= 8:
        return TraceRecord("SubBefore", f[5], int(f[1]), f[3], keys=f[7], request_id=f[4], retry_times=int(f[6]))
    if kind == "SubAfter" and len(f) >= 6:
        return TraceRecord("SubAfter", f[2], int(f[7]) if len(f) >= 9 else 0, f[8] if len(f) >= 9 else "",
                           keys=f[5], cost_time=int(f[3]), success=_bool(f[4]), request_id=f[1])
    if kind == "EndTransaction" and len(f) >= 13:
        return TraceRecord("EndTransaction", f[5], int(f[1]), f[3], f[4], f[6], f[7], f[8])
    return None


def decode(body: bytes | str) -> list[TraceRecord]:
    """The records of one trace message body (malformed ones skipped)."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes | bytearray) else body
    out = []
    for chunk in text.split(FIELD_SPLITOR):
        if not chunk:
            continue
        try:
            rec = _record(chunk.split(CONTENT_SPLITOR))
        except (ValueError, IndexError):
            rec = None
        if rec is not None:
            out.append(rec)
    return out


def views(msg_id: str, body: bytes | str, client_host: str) -> list[TraceRecord]:
    """The records of ``msg_id`` in one trace message; client host = the trace message's born host."""
    return [TraceRecord(**{**r.__dict__, "client_host": client_host}) for r in decode(body) if r.msg_id == msg_id]
