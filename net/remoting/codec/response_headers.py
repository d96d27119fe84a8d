"""The response headers of the RocketMQ requests whose answers carry fields (Java's ``*ResponseHeader``).

Theory of operation
-------------------
Declared as request headers are (``header_decl``): the broker's handlers ``encode`` one into a
response's extFields, the client library ``decode``s it.  Required fields are Java's ``@CFNotNull``
ones of answers that always carry them; the fields of a send's and a pull's answer are optional,
as an error answer leaves them out (a client reads what there is and falls back itself).  Names are Java's
(camelCase of the attribute unless ``java(...)`` says otherwise).
"""

from __future__ import annotations

from rokka.net.remoting.codec.header_decl import I32, I64, ResponseHeader, declare, java


@declare
class SendMessageResponseHeader(ResponseHeader):
    """SEND_MESSAGE / _V2 / SEND_BATCH_MESSAGE: offsetMsgId(s), where it went; region and trace switch."""

    msg_id: str | None = None               # offsetMsgId; comma-joined for a batch
    queue_id: I32 | None = None
    queue_offset: I64 | None = None
    transaction_id: str | None = None
    msg_region: str | None = java("MSG_REGION")
    trace_on: bool | None = java("TRACE_ON")


@declare
class PullMessageResponseHeader(ResponseHeader):
    suggest_which_broker_id: I64 | None = None
    next_begin_offset: I64 | None = None
    min_offset: I64 | None = None
    max_offset: I64 | None = None


@declare
class QueryConsumerOffsetResponseHeader(ResponseHeader):
    """rokka adds a Kafka commit's metadata and leader epoch when the offset has them (a routed Kafka
    OffsetFetch in a cluster reads them; Java clients ignore fields they do not declare)."""

    offset: I64
    kafka_metadata: str | None = None
    kafka_leader_epoch: I32 | None = None


@declare
class GetMaxOffsetResponseHeader(ResponseHeader):
    offset: I64


@declare
class GetMinOffsetResponseHeader(ResponseHeader):
    offset: I64


@declare
class SearchOffsetResponseHeader(ResponseHeader):
    offset: I64


@declare
class GetEarliestMsgStoretimeResponseHeader(ResponseHeader):
    timestamp: I64
