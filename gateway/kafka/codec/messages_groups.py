"""Declarations: consumer-group coordination and transaction APIs.

Theory of operation
-------------------
Same conventions as ``messages_data``: one ``Api`` per Kafka API over the
range we speak, snake_case versions of Kafka's field names (including the odd
``v3_and_below_*`` names of AddPartitionsToTxn, kept so the cross-check test
stays mechanical).  The group coordinator in ``gateway/kafka/groups/`` reads
and builds these structs.
"""

from __future__ import annotations

from rokka.gateway.kafka.codec.schema import BOOL, BYTES, INT8, INT16, INT32, INT64, STRING, Api, arr, f, struct

AUTH_OPS_NOT_REQUESTED = -2147483648

FIND_COORDINATOR = Api(10, "FindCoordinator", 0, 4, 3, request=struct(
    f("key", STRING, "0-3"),
    f("key_type", INT8, "1+"),
    f("coordinator_keys", arr(STRING), "4+"),
), response=struct(
    f("throttle_time_ms", INT32, "1+"),
    f("error_code", INT16, "0-3"),
    f("error_message", STRING, "1-3", null="1-3"),
    f("node_id", INT32, "0-3"),
    f("host", STRING, "0-3"),
    f("port", INT32, "0-3"),
    f("coordinators", arr(
        f("key", STRING, "4+"),
        f("node_id", INT32, "4+"),
        f("host", STRING, "4+"),
        f("port", INT32, "4+"),
        f("error_code", INT16, "4+"),
        f("error_message", STRING, "4+", null="4+"),
    ), "4+"),
))

JOIN_GROUP = Api(11, "JoinGroup", 0, 7, 6, request=struct(
    f("group_id", STRING),
    f("session_timeout_ms", INT32),
    f("rebalance_timeout_ms", INT32, "1+", default=-1),
    f("member_id", STRING),
    f("group_instance_id", STRING, "5+", null="5+", default=None),
    f("protocol_type", STRING),
    f("protocols", arr(
        f("name", STRING),
        f("metadata", BYTES),
    )),
), response=struct(
    f("throttle_time_ms", INT32, "2+"),
    f("error_code", INT16),
    f("generation_id", INT32, default=-1),
    f("protocol_type", STRING, "7+", null="7+", default=None),
    f("protocol_name", STRING, null="7+"),
    f("leader", STRING),
    f("member_id", STRING),
    f("members", arr(
        f("member_id", STRING),
        f("group_instance_id", STRING, "5+", null="5+", default=None),
        f("metadata", BYTES),
    )),
))

SYNC_GROUP = Api(14, "SyncGroup", 0, 5, 4, request=struct(
    f("group_id", STRING),
    f("generation_id", INT32),
    f("member_id", STRING),
    f("group_instance_id", STRING, "3+", null="3+", default=None),
    f("protocol_type", STRING, "5+", null="5+", default=None),
    f("protocol_name", STRING, "5+", null="5+", default=None),
    f("assignments", arr(
        f("member_id", STRING),
        f("assignment", BYTES),
    )),
), response=struct(
    f("throttle_time_ms", INT32, "1+"),
    f("error_code", INT16),
    f("protocol_type", STRING, "5+", null="5+", default=None),
    f("protocol_name", STRING, "5+", null="5+", default=None),
    f("assignment", BYTES),
))

HEARTBEAT = Api(12, "Heartbeat", 0, 4, 4, request=struct(
    f("group_id", STRING),
    f("generation_id", INT32),
    f("member_id", STRING),
    f("group_instance_id", STRING, "3+", null="3+", default=None),
), response=struct(
    f("throttle_time_ms", INT32, "1+"),
    f("error_code", INT16),
))

LEAVE_GROUP = Api(13, "LeaveGroup", 0, 5, 4, request=struct(
    f("group_id", STRING),
    f("member_id", STRING, "0-2"),
    f("members", arr(
        f("member_id", STRING, "3+"),
        f("group_instance_id", STRING, "3+", null="3+", default=None),
        f("reason", STRING, "5+", null="5+", default=None),
    ), "3+"),
), response=struct(
    f("throttle_time_ms", INT32, "1+"),
    f("error_code", INT16),
    f("members", arr(
        f("member_id", STRING, "3+"),
        f("group_instance_id", STRING, "3+", null="3+"),
        f("error_code", INT16, "3+"),
    ), "3+"),
))

OFFSET_COMMIT = Api(8, "OffsetCommit", 2, 8, 8, request=struct(
    f("group_id", STRING),
    f("generation_id_or_member_epoch", INT32, default=-1),
    f("member_id", STRING),
    f("group_instance_id", STRING, "7+", null="7+", default=None),
    f("retention_time_ms", INT64, "2-4", default=-1),
    f("topics", arr(
        f("name", STRING),
        f("partitions", arr(
            f("partition_index", INT32),
            f("committed_offset", INT64),
            f("committed_leader_epoch", INT32, "6+", default=-1),
            f("committed_metadata", STRING, null="0+"),
        )),
    )),
), response=struct(
    f("throttle_time_ms", INT32, "3+"),
    f("topics", arr(
        f("name", STRING),
        f("partitions", arr(
            f("partition_index", INT32),
            f("error_code", INT16),
        )),
    )),
))

OFFSET_FETCH = Api(9, "OffsetFetch", 1, 8, 6, request=struct(
    f("group_id", STRING, "0-7"),
    f("topics", arr(
        f("name", STRING, "0-7"),
        f("partition_indexes", arr(INT32), "0-7"),
    ), "0-7", null="2-7"),
    f("groups", arr(
        f("group_id", STRING, "8+"),
        f("topics", arr(
            f("name", STRING, "8+"),
            f("partition_indexes", arr(INT32), "8+"),
        ), "8+", null="8+"),
    ), "8+"),
    f("require_stable", BOOL, "7+"),
), response=struct(
    f("throttle_time_ms", INT32, "3+"),
    f("topics", arr(
        f("name", STRING, "0-7"),
        f("partitions", arr(
            f("partition_index", INT32, "0-7"),
            f("committed_offset", INT64, "0-7"),
            f("committed_leader_epoch", INT32, "5-7", default=-1),
            f("metadata", STRING, "0-7", null="0-7"),
            f("error_code", INT16, "0-7"),
        ), "0-7"),
    ), "0-7"),
    f("error_code", INT16, "2-7"),
    f("groups", arr(
        f("group_id", STRING, "8+"),
        f("topics", arr(
            f("name", STRING, "8+"),
            f("partitions", arr(
                f("partition_index", INT32, "8+"),
                f("committed_offset", INT64, "8+"),
                f("committed_leader_epoch", INT32, "8+", default=-1),
                f("metadata", STRING, "8+", null="8+"),
                f("error_code", INT16, "8+"),
            ), "8+"),
        ), "8+"),
        f("error_code", INT16, "8+"),
    ), "8+"),
))

DESCRIBE_GROUPS = Api(15, "DescribeGroups", 0, 5, 5, request=struct(
    f("groups", arr(STRING)),
    f("include_authorized_operations", BOOL, "3+"),
), response=struct(
    f("throttle_time_ms", INT32, "1+"),
    f("groups", arr(
        f("error_code", INT16),
        f("group_id", STRING),
        f("group_state", STRING),
        f("protocol_type", STRING),
        f("protocol_data", STRING),
        f("members", arr(
            f("member_id", STRING),
            f("group_instance_id", STRING, "4+", null="4+", default=None),
            f("client_id", STRING),
            f("client_host", STRING),
            f("member_metadata", BYTES),
            f("member_assignment", BYTES),
        )),
        f("authorized_operations", INT32, "3+", default=AUTH_OPS_NOT_REQUESTED),
    )),
))

LIST_GROUPS = Api(16, "ListGroups", 0, 4, 3, request=struct(
    f("states_filter", arr(STRING), "4+"),
), response=struct(
    f("throttle_time_ms", INT32, "1+"),
    f("error_code", INT16),
    f("groups", arr(
        f("group_id", STRING),
        f("protocol_type", STRING),
        f("group_state", STRING, "4+"),
    )),
))

INIT_PRODUCER_ID = Api(22, "InitProducerId", 0, 4, 2, request=struct(
    f("transactional_id", STRING, null="0+"),
    f("transaction_timeout_ms", INT32),
    f("producer_id", INT64, "3+", default=-1),
    f("producer_epoch", INT16, "3+", default=-1),
), response=struct(
    f("throttle_time_ms", INT32),
    f("error_code", INT16),
    f("producer_id", INT64, default=-1),
    f("producer_epoch", INT16),
))

ADD_PARTITIONS_TO_TXN = Api(24, "AddPartitionsToTxn", 0, 3, 3, request=struct(
    f("v3_and_below_transactional_id", STRING),
    f("v3_and_below_producer_id", INT64),
    f("v3_and_below_producer_epoch", INT16),
    f("v3_and_below_topics", arr(
        f("name", STRING),
        f("partitions", arr(INT32)),
    )),
), response=struct(
    f("throttle_time_ms", INT32),
    f("results_by_topic_v3_and_below", arr(
        f("name", STRING),
        f("results_by_partition", arr(
            f("partition_index", INT32),
            f("partition_error_code", INT16),
        )),
    )),
))

ADD_OFFSETS_TO_TXN = Api(25, "AddOffsetsToTxn", 0, 3, 3, request=struct(
    f("transactional_id", STRING),
    f("producer_id", INT64),
    f("producer_epoch", INT16),
    f("group_id", STRING),
), response=struct(
    f("throttle_time_ms", INT32),
    f("error_code", INT16),
))

END_TXN = Api(26, "EndTxn", 0, 3, 3, request=struct(
    f("transactional_id", STRING),
    f("producer_id", INT64),
    f("producer_epoch", INT16),
    f("committed", BOOL),
), response=struct(
    f("throttle_time_ms", INT32),
    f("error_code", INT16),
))

TXN_OFFSET_COMMIT = Api(28, "TxnOffsetCommit", 0, 3, 3, request=struct(
    f("transactional_id", STRING),
    f("group_id", STRING),
    f("producer_id", INT64),
    f("producer_epoch", INT16),
    f("generation_id", INT32, "3+", default=-1),
    f("member_id", STRING, "3+"),
    f("group_instance_id", STRING, "3+", null="3+", default=None),
    f("topics", arr(
        f("name", STRING),
        f("partitions", arr(
            f("partition_index", INT32),
            f("committed_offset", INT64),
            f("committed_leader_epoch", INT32, "2+", default=-1),
            f("committed_metadata", STRING, null="0+"),
        )),
    )),
), response=struct(
    f("throttle_time_ms", INT32),
    f("topics", arr(
        f("name", STRING),
        f("partitions", arr(
            f("partition_index", INT32),
            f("error_code", INT16),
        )),
    )),
))

DELETE_GROUPS = Api(42, "DeleteGroups", 0, 2, 2, request=struct(
    f("groups_names", arr(STRING)),
), response=struct(
    f("throttle_time_ms", INT32),
    f("results", arr(
        f("group_id", STRING),
        f("error_code", INT16),
    )),
))

OFFSET_DELETE = Api(47, "OffsetDelete", 0, 0, None, request=struct(
    f("group_id", STRING),
    f("topics", arr(
        f("name", STRING),
        f("partitions", arr(
            f("partition_index", INT32),
        )),
    )),
), response=struct(
    f("error_code", INT16),
    f("throttle_time_ms", INT32),
    f("topics", arr(
        f("name", STRING),
        f("partitions", arr(
            f("partition_index", INT32),
            f("error_code", INT16),
        )),
    )),
))

DESCRIBE_PRODUCERS = Api(61, "DescribeProducers", 0, 0, 0, request=struct(
    f("topics", arr(
        f("name", STRING),
        f("partition_indexes", arr(INT32)),
    )),
), response=struct(
    f("throttle_time_ms", INT32),
    f("topics", arr(
        f("name", STRING),
        f("partitions", arr(
            f("partition_index", INT32),
            f("error_code", INT16),
            f("error_message", STRING, null="0+", default=None),
            f("active_producers", arr(
                f("producer_id", INT64),
                f("producer_epoch", INT32),
                f("last_sequence", INT32, default=-1),
                f("last_timestamp", INT64, default=-1),
                f("coordinator_epoch", INT32),
                f("current_txn_start_offset", INT64, default=-1),
            )),
        )),
    )),
))

DESCRIBE_TRANSACTIONS = Api(65, "DescribeTransactions", 0, 0, 0, request=struct(
    f("transactional_ids", arr(STRING)),
), response=struct(
    f("throttle_time_ms", INT32),
    f("transaction_states", arr(
        f("error_code", INT16),
        f("transactional_id", STRING),
        f("transaction_state", STRING),
        f("transaction_timeout_ms", INT32),
        f("transaction_start_time_ms", INT64),
        f("producer_id", INT64),
        f("producer_epoch", INT16),
        f("topics", arr(
            f("topic", STRING),
            f("partitions", arr(INT32)),
        )),
    )),
))

LIST_TRANSACTIONS = Api(66, "ListTransactions", 0, 1, 0, request=struct(
    f("state_filters", arr(STRING)),
    f("producer_id_filters", arr(INT64)),
    f("duration_filter", INT64, "1+", default=-1),
), response=struct(
    f("throttle_time_ms", INT32),
    f("error_code", INT16),
    f("unknown_state_filters", arr(STRING)),
    f("transaction_states", arr(
        f("transactional_id", STRING),
        f("producer_id", INT64),
        f("transaction_state", STRING),
    )),
))

GROUP_APIS = (
    FIND_COORDINATOR, JOIN_GROUP, SYNC_GROUP, HEARTBEAT, LEAVE_GROUP, OFFSET_COMMIT, OFFSET_FETCH,
    DESCRIBE_GROUPS, LIST_GROUPS, INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN,
    TXN_OFFSET_COMMIT, DELETE_GROUPS, OFFSET_DELETE, DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS,
    LIST_TRANSACTIONS,
)
