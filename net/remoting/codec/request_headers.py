"""The broker's RocketMQ request headers, one declaration each (Java's ``*RequestHeader`` classes).

Theory of operation
-------------------
Each class below declares one request's custom header with the Java field names
(camelCase of the attribute, or ``java(...)``) and types (``str``, ``I32`` = Java
``Integer``, ``I64`` = ``Long``, ``bool``); see ``header_decl`` for how a
declaration decodes (``decode`` strict, ``peek`` lenient) and encodes.  The
handlers decode their request once (``XRequestHeader.decode(req)``), the client
encodes from the same declaration (``XRequestHeader(...).encode()``), and the
ACL names a request's resources with ``peek``.  ``BY_CODE`` maps request codes
to their declaration.

Which fields are required follows RocketMQ 4.9's ``@CFNotNull`` (facts from
``common/protocol/header/*RequestHeader.java``) except where rokka has always
been more lenient with real clients; those fields carry a ``# rokka: optional``
comment and keep rokka's default (the C++ client omits some of them).  Fields
rokka neither reads nor sends are left out: a junk value in them is ignored, as
before.  Headers the name server reads are in ``namesrv_headers``.

SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE carry SendMessageRequestHeader with
one-letter names (``SendMessageRequestHeaderV2``): ``decode_send`` /
``peek_send`` / ``pick_send`` accept either spelling, ``encode_v2`` writes the short one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rokka.net.remoting.codec.codes import RequestCode as RC
from rokka.net.remoting.codec.header_decl import I32, I64, RequestHeader, declare, java
from rokka.net.remoting.codec.headers import V1_TO_V2_SEND, normalize_send_header
from rokka.net.remoting.codec.remoting import RemotingCommand

# -- sending, pulling, replies ------------------------------------------------------------------


@declare
class SendMessageRequestHeader(RequestHeader):
    producer_group: str
    topic: str
    default_topic: str | None = None                   # rokka: optional (C++ omits it)
    default_topic_queue_nums: I32 | None = None        # rokka: optional, 4 when absent
    queue_id: I32
    sys_flag: I32
    born_timestamp: I64
    flag: I32
    properties: str | None = None
    reconsume_times: I32 | None = None
    unit_mode: bool | None = None
    batch: bool | None = None
    max_reconsume_times: I32 | None = None
    broker_name: str | None = None                     # V2 only ("n")

    @classmethod
    def decode_send(cls, source: Any) -> SendMessageRequestHeader:
        """Strict decode of a V1 or V2 (one-letter) header.  A V2 header is read under its one-letter names
        directly (the send path: renaming it into a new dict first cost about a third of the decode)."""
        ext = _ext(source)
        if "b" in ext and (h := _DECODE_V2(ext)) is not None:
            return h
        return cls.decode(normalize_send_header(ext))

    @classmethod
    def peek_send(cls, source: Any) -> SendMessageRequestHeader:
        """Lenient decode of a V1 or V2 header (see ``peek``)."""
        return cls.peek(normalize_send_header(_ext(source)))

    @classmethod
    def pick_send(cls, source: Any, *attrs: str) -> tuple[Any, ...]:
        """``pick`` on a V1 or V2 header: the topic the send handler stores to, whatever the spelling."""
        return cls.pick(normalize_send_header(_ext(source)), *attrs)

    def encode_v2(self) -> dict[str, str]:
        """extFields of SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE (one-letter names)."""
        return {V1_TO_V2_SEND[k]: v for k, v in self.encode().items()}


_DECODE_V2 = SendMessageRequestHeader.aliased_decoder(V1_TO_V2_SEND)


@declare
class PullMessageRequestHeader(RequestHeader):
    consumer_group: str
    topic: str
    queue_id: I32
    queue_offset: I64
    max_msg_nums: I32
    sys_flag: I32
    commit_offset: I64 | None = None                    # rokka: optional, 0 when absent
    suspend_timeout_millis: I64 | None = None           # rokka: optional, 0 when absent
    subscription: str | None = None
    sub_version: I64 | None = None                      # rokka: optional, 0 when absent
    expression_type: str | None = None


@declare
class ConsumerSendMsgBackRequestHeader(RequestHeader):
    offset: I64
    group: str
    delay_level: I32
    origin_msg_id: str | None = None
    origin_topic: str | None = None
    unit_mode: bool | None = None
    max_reconsume_times: I32 | None = None


@declare
class ReplyMessageRequestHeader(RequestHeader):
    """PUSH_REPLY_MESSAGE_TO_CLIENT (broker -> requester)."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: I32
    queue_id: I32
    sys_flag: I32
    born_timestamp: I64
    flag: I32
    properties: str | None = None
    reconsume_times: I32 | None = None
    unit_mode: bool | None = None
    born_host: str
    store_host: str
    store_timestamp: I64


# -- clients and offsets --------------------------------------------------------------------------


@declare
class UnregisterClientRequestHeader(RequestHeader):
    client_id: str = java("clientID", required=True)
    producer_group: str | None = java(empty_is_none=True)     # C++ sends "" for the unused one
    consumer_group: str | None = java(empty_is_none=True)


@declare
class GetConsumerListByGroupRequestHeader(RequestHeader):
    consumer_group: str


@declare
class QueryConsumerOffsetRequestHeader(RequestHeader):
    consumer_group: str
    topic: str
    queue_id: I32
    set_zero_if_not_found: bool | None = None           # RocketMQ 5; absent = true


@declare
class UpdateConsumerOffsetRequestHeader(RequestHeader):
    consumer_group: str
    topic: str
    queue_id: I32
    commit_offset: I64
    kafka_metadata: str | None = None                   # rokka: a routed Kafka OffsetCommit's extras
    kafka_leader_epoch: I32 | None = None


@declare
class GetMaxOffsetRequestHeader(RequestHeader):
    topic: str
    queue_id: I32


@declare
class GetMinOffsetRequestHeader(RequestHeader):
    topic: str
    queue_id: I32


@declare
class SearchOffsetRequestHeader(RequestHeader):
    topic: str
    queue_id: I32
    timestamp: I64


@declare
class GetEarliestMsgStoretimeRequestHeader(RequestHeader):
    topic: str
    queue_id: I32


@declare
class ResetOffsetRequestHeader(RequestHeader):
    """INVOKE_BROKER_TO_RESET_OFFSET (broker-side) and RESET_CONSUMER_CLIENT_OFFSET (to the clients)."""

    topic: str
    group: str
    timestamp: I64
    is_force: bool | None = None                        # rokka: optional, true when absent


# -- topics, groups, messages (admin) ----------------------------------------------------------


@declare
class CreateTopicRequestHeader(RequestHeader):
    topic: str
    default_topic: str | None = None                    # rokka: optional
    read_queue_nums: I32
    write_queue_nums: I32
    perm: I32 = 6                                       # rokka: optional
    topic_filter_type: str = "SINGLE_TAG"               # rokka: optional
    topic_sys_flag: I32 | None = None
    order: bool = False                                 # rokka: optional


@declare
class TopicRequestHeader(RequestHeader):
    """The one-field header of DELETE_TOPIC_IN_BROKER, GET_TOPIC_STATS_INFO, GET_TOPIC_CONFIG and
    QUERY_TOPIC_CONSUME_BY_WHO (Java declares one class per code, all ``@CFNotNull String topic``)."""

    topic: str


@declare
class GetConsumeStatsRequestHeader(RequestHeader):
    consumer_group: str
    topic: str | None = java(empty_is_none=True)


@declare
class DeleteSubscriptionGroupRequestHeader(RequestHeader):
    group_name: str
    clean_offset: bool = False


@declare
class GetConsumerConnectionListRequestHeader(RequestHeader):
    consumer_group: str


@declare
class GetProducerConnectionListRequestHeader(RequestHeader):
    producer_group: str


@declare
class ViewMessageRequestHeader(RequestHeader):
    offset: I64


@declare
class QueryMessageRequestHeader(RequestHeader):
    topic: str
    key: str
    max_num: I32
    begin_timestamp: I64
    end_timestamp: I64
    unique_key_query: str | None = java("_UNIQUE_KEY_QUERY")   # "true": key is an UNIQ_KEY (not signed)


@declare
class QueryConsumeTimeSpanRequestHeader(RequestHeader):
    topic: str
    group: str


@declare
class CloneGroupOffsetRequestHeader(RequestHeader):
    src_group: str
    dest_group: str
    topic: str | None = java(empty_is_none=True)
    offline: bool = False


@declare
class ViewBrokerStatsDataRequestHeader(RequestHeader):
    stats_name: str
    stats_key: str


@declare
class GetConsumeStatsInBrokerHeader(RequestHeader):
    is_order: bool = False


@declare
class QueryConsumeQueueRequestHeader(RequestHeader):
    topic: str
    queue_id: I32
    index: I64
    count: I32
    consumer_group: str | None = java(empty_is_none=True)


@declare
class ResumeCheckHalfMessageRequestHeader(RequestHeader):
    msg_id: str = ""


@declare
class GetConsumerRunningInfoRequestHeader(RequestHeader):
    consumer_group: str
    client_id: str
    jstack_enable: bool | None = None


@declare
class ConsumeMessageDirectlyResultRequestHeader(RequestHeader):
    consumer_group: str
    client_id: str                                      # rokka: required (the client to ask)
    msg_id: str                                         # rokka: required (the message to consume)
    broker_name: str | None = None


@declare
class GetConsumerStatusRequestHeader(RequestHeader):
    topic: str
    group: str
    client_addr: str | None = java(empty_is_none=True)


# -- transactions ---------------------------------------------------------------------------------


@declare
class EndTransactionRequestHeader(RequestHeader):
    producer_group: str
    tran_state_table_offset: I64
    commit_log_offset: I64
    commit_or_rollback: I32
    from_transaction_check: bool = False
    msg_id: str | None = None                           # rokka: optional
    transaction_id: str | None = None


@declare
class CheckTransactionStateRequestHeader(RequestHeader):
    """CHECK_TRANSACTION_STATE (broker -> producer)."""

    tran_state_table_offset: I64
    commit_log_offset: I64
    msg_id: str | None = None
    transaction_id: str | None = None
    offset_msg_id: str | None = None


# -- ACL (mqadmin updateAclConfig, deleteAccessConfig, updateGlobalWhiteAddr) -------------------


@declare
class CreateAccessConfigRequestHeader(RequestHeader):
    access_key: str = ""
    secret_key: str = ""
    white_remote_address: str | None = None
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: str | None = None                      # comma-separated topic=PERM
    group_perms: str | None = None
    admin: bool = False


@declare
class DeleteAccessConfigRequestHeader(RequestHeader):
    access_key: str = ""


@declare
class UpdateGlobalWhiteAddrsConfigRequestHeader(RequestHeader):
    global_white_addrs: str | None = None
    acl_file_full_path: str | None = java(empty_is_none=True)


@declare
class QueryCorrectionOffsetHeader(RequestHeader):
    topic: str
    compare_group: str = ""
    filter_groups: str | None = None


def _ext(source: Any) -> Mapping[str, str]:
    return (source.ext_fields or {}) if isinstance(source, RemotingCommand) else source


BY_CODE: dict[int, type[RequestHeader]] = {
    RC.SEND_MESSAGE: SendMessageRequestHeader, RC.SEND_MESSAGE_V2: SendMessageRequestHeader,
    RC.SEND_BATCH_MESSAGE: SendMessageRequestHeader, RC.SEND_REPLY_MESSAGE: SendMessageRequestHeader,
    RC.SEND_REPLY_MESSAGE_V2: SendMessageRequestHeader,
    RC.PULL_MESSAGE: PullMessageRequestHeader, RC.LITE_PULL_MESSAGE: PullMessageRequestHeader,
    RC.CONSUMER_SEND_MSG_BACK: ConsumerSendMsgBackRequestHeader,
    RC.PUSH_REPLY_MESSAGE_TO_CLIENT: ReplyMessageRequestHeader,
    RC.UNREGISTER_CLIENT: UnregisterClientRequestHeader,
    RC.GET_CONSUMER_LIST_BY_GROUP: GetConsumerListByGroupRequestHeader,
    RC.QUERY_CONSUMER_OFFSET: QueryConsumerOffsetRequestHeader,
    RC.UPDATE_CONSUMER_OFFSET: UpdateConsumerOffsetRequestHeader,
    RC.GET_MAX_OFFSET: GetMaxOffsetRequestHeader, RC.GET_MIN_OFFSET: GetMinOffsetRequestHeader,
    RC.SEARCH_OFFSET_BY_TIMESTAMP: SearchOffsetRequestHeader,
    RC.GET_EARLIEST_MSG_STORETIME: GetEarliestMsgStoretimeRequestHeader,
    RC.INVOKE_BROKER_TO_RESET_OFFSET: ResetOffsetRequestHeader,
    RC.RESET_CONSUMER_CLIENT_OFFSET: ResetOffsetRequestHeader,
    RC.UPDATE_AND_CREATE_TOPIC: CreateTopicRequestHeader,
    RC.DELETE_TOPIC_IN_BROKER: TopicRequestHeader, RC.GET_TOPIC_STATS_INFO: TopicRequestHeader,
    RC.GET_TOPIC_CONFIG: TopicRequestHeader, RC.QUERY_TOPIC_CONSUME_BY_WHO: TopicRequestHeader,
    RC.GET_CONSUME_STATS: GetConsumeStatsRequestHeader,
    RC.DELETE_SUBSCRIPTIONGROUP: DeleteSubscriptionGroupRequestHeader,
    RC.GET_CONSUMER_CONNECTION_LIST: GetConsumerConnectionListRequestHeader,
    RC.GET_PRODUCER_CONNECTION_LIST: GetProducerConnectionListRequestHeader,
    RC.VIEW_MESSAGE_BY_ID: ViewMessageRequestHeader,
    RC.QUERY_MESSAGE: QueryMessageRequestHeader,
    RC.QUERY_CONSUME_TIME_SPAN: QueryConsumeTimeSpanRequestHeader,
    RC.CLONE_GROUP_OFFSET: CloneGroupOffsetRequestHeader,
    RC.VIEW_BROKER_STATS_DATA: ViewBrokerStatsDataRequestHeader,
    RC.GET_BROKER_CONSUME_STATS: GetConsumeStatsInBrokerHeader,
    RC.QUERY_CONSUME_QUEUE: QueryConsumeQueueRequestHeader,
    RC.RESUME_CHECK_HALF_MESSAGE: ResumeCheckHalfMessageRequestHeader,
    RC.GET_CONSUMER_RUNNING_INFO: GetConsumerRunningInfoRequestHeader,
    RC.CONSUME_MESSAGE_DIRECTLY: ConsumeMessageDirectlyResultRequestHeader,
    RC.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: GetConsumerStatusRequestHeader,
    RC.END_TRANSACTION: EndTransactionRequestHeader,
    RC.CHECK_TRANSACTION_STATE: CheckTransactionStateRequestHeader,
    RC.UPDATE_AND_CREATE_ACL_CONFIG: CreateAccessConfigRequestHeader,
    RC.DELETE_ACL_CONFIG: DeleteAccessConfigRequestHeader,
    RC.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: UpdateGlobalWhiteAddrsConfigRequestHeader,
    RC.QUERY_CORRECTION_OFFSET: QueryCorrectionOffsetHeader,
}
