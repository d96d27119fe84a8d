"""Declarations: data-plane and admin APIs (our own compact form).

Theory of operation
-------------------
One ``Api`` per Kafka API, covering exactly the version range this codec can
speak (the ranges recommended in kafka-wire.md §3.5; Produce goes down to v0
so that legacy MessageSets from pinned old clients can be read).  Field names
are the snake_case forms of Kafka's names so that the cross-check test
(tests/gateway/kafka/codec/test_crosscheck.py) can compare them with the
reference schemas; versions outside our range are simply not declared.

Editing rules: a field's versions must lie inside the API's range or be open
("N+"); nullable ranges only where the protocol allows null; tags only in
flexible versions.  Run the cross-check test after any edit.
"""

from __future__ import annotations

from rokka.gateway.kafka.codec.schema import (
    BOOL,
    BYTES,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    UUID,
    Api,
    arr,
    f,
    struct,
)

AUTH_OPS_NOT_REQUESTED = -2147483648

API_VERSIONS = Api(18, "ApiVersions", 0, 4, 3, request=struct(
    f("client_software_name", STRING, "3+"),
    f("client_software_version", STRING, "3+"),
), response=struct(
    f("error_code", INT16),
    f("api_keys", arr(
        f("api_key", INT16),
        f("min_version", INT16),
        f("max_version", INT16),
    )),
    f("throttle_time_ms", INT32, "1+"),
    f("supported_features", arr(
        f("name", STRING, "3+"),
        f("min_version", INT16, "3+"),
        f("max_version", INT16, "3+"),
    ), "3+", tag=0),
    f("finalized_features_epoch", INT64, "3+", tag=1, default=-1),
    f("finalized_features", arr(
        f("name", STRING, "3+"),
        f("max_version_level", INT16, "3+"),
        f("min_version_level", INT16, "3+"),
    ), "3+", tag=2),
    f("zk_migration_ready", BOOL, "3+", tag=3),
))

METADATA = Api(3, "Metadata", 0, 12, 9, request=struct(
    f("topics", arr(
        f("topic_id", UUID, "10+"),
        f("name", STRING, null="10+"),
    ), null="1+"),
    f("allow_auto_topic_creation", BOOL, "4+", default=True),
    f("include_cluster_authorized_operations", BOOL, "8-10"),
    f("include_topic_authorized_operations", BOOL, "8+"),
), response=struct(
    f("throttle_time_ms", INT32, "3+"),
    f("brokers", arr(
        f("node_id", INT32),
        f("host", STRING),
        f("port", INT32),
        f("rack", STRING, "1+", null="1+", default=None),
    )),
    f("cluster_id", STRING, "2+", null="2+", default=None),
    f("controller_id", INT32, "1+", default=-1),
    f("topics", arr(
        f("error_code", INT16),
        f("name", STRING, null="12+"),
        f("topic_id", UUID, "10+"),
        f("is_internal", BOOL, "1+"),
        f("partitions", arr(
            f("error_code", INT16),
            f("partition_index", INT32),
            f("leader_id", INT32),
            f("leader_epoch", INT32, "7+", default=-1),
            f("replica_nodes", arr(INT32)),
            f("isr_nodes", arr(INT32)),
            f("offline_replicas", arr(INT32), "5+"),
        )),
        f("topic_authorized_operations", INT32, "8+", default=AUTH_OPS_NOT_REQUESTED),
    )),
    f("cluster_authorized_operations", INT32, "8-10", default=AUTH_OPS_NOT_REQUESTED),
))

PRODUCE = Api(0, "Produce", 0, 9, 9, request=struct(
    f("transactional_id", STRING, "3+", null="3+", default=None),
    f("acks", INT16),
    f("timeout_ms", INT32),
    f("topic_data", arr(
        f("name", STRING),
        f("partition_data", arr(
            f("index", INT32),
            f("records", RECORDS, null="0+"),
        )),
    )),
), response=struct(
    f("responses", arr(
        f("name", STRING),
        f("partition_responses", arr(
            f("index", INT32),
            f("error_code", INT16),
            f("base_offset", INT64),
            f("log_append_time_ms", INT64, "2+", default=-1),
            f("log_start_offset", INT64, "5+", default=-1),
            f("record_errors", arr(
                f("batch_index", INT32, "8+"),
                f("batch_index_error_message", STRING, "8+", null="8+", default=None),
            ), "8+"),
            f("error_message", STRING, "8+", null="8+", default=None),
        )),
    )),
    f("throttle_time_ms", INT32, "1+"),
))

FETCH = Api(1, "Fetch", 4, 12, 12, request=struct(
    f("cluster_id", STRING, "12+", null="12+", tag=0, default=None),
    f("replica_id", INT32, default=-1),
    f("max_wait_ms", INT32),
    f("min_bytes", INT32),
    f("max_bytes", INT32, default=0x7FFFFFFF),
    f("isolation_level", INT8),
    f("session_id", INT32, "7+"),
    f("session_epoch", INT32, "7+", default=-1),
    f("topics", arr(
        f("topic", STRING),
        f("partitions", arr(
            f("partition", INT32),
            f("current_leader_epoch", INT32, "9+", default=-1),
            f("fetch_offset", INT64),
            f("last_fetched_epoch", INT32, "12+", default=-1),
            f("log_start_offset", INT64, "5+", default=-1),
            f("partition_max_bytes", INT32),
        )),
    )),
    f("forgotten_topics_data", arr(
        f("topic", STRING, "7+"),
        f("partitions", arr(INT32), "7+"),
    ), "7+"),
    f("rack_id", STRING, "11+"),
), response=struct(
    f("throttle_time_ms", INT32),
    f("error_code", INT16, "7+"),
    f("session_id", INT32, "7+"),
    f("responses", arr(
        f("topic", STRING),
        f("partitions", arr(
            f("partition_index", INT32),
            f("error_code", INT16),
            f("high_watermark", INT64),
            f("last_stable_offset", INT64, default=-1),
            f("log_start_offset", INT64, "5+", default=-1),
            f("diverging_epoch", struct(
                f("epoch", INT32, "12+", default=-1),
                f("end_offset", INT64, "12+", default=-1),
            ), "12+", tag=0),
            f("current_leader", struct(
                f("leader_id", INT32, "12+", default=-1),
                f("leader_epoch", INT32, "12+", default=-1),
            ), "12+", tag=1),
            f("snapshot_id", struct(
                f("end_offset", INT64, default=-1),
                f("epoch", INT32, default=-1),
            ), "12+", tag=2),
            f("aborted_transactions", arr(
                f("producer_id", INT64),
                f("first_offset", INT64),
            ), null="0+"),
            f("preferred_read_replica", INT32, "11+", default=-1),
            f("records", RECORDS, null="0+"),
        )),
    )),
))

LIST_OFFSETS = Api(2, "ListOffsets", 1, 7, 6, request=struct(
    f("replica_id", INT32),
    f("isolation_level", INT8, "2+"),
    f("topics", arr(
        f("name", STRING),
        f("partitions", arr(
            f("partition_index", INT32),
            f("current_leader_epoch", INT32, "4+", default=-1),
            f("timestamp", INT64),
        )),
    )),
), response=struct(
    f("throttle_time_ms", INT32, "2+"),
    f("topics", arr(
        f("name", STRING),
        f("partitions", arr(
            f("partition_index", INT32),
            f("error_code", INT16),
            f("timestamp", INT64, default=-1),
            f("offset", INT64, default=-1),
            f("leader_epoch", INT32, "4+", default=-1),
        )),
    )),
))

OFFSET_FOR_LEADER_EPOCH = Api(23, "OffsetForLeaderEpoch", 0, 4, 4, request=struct(
    f("replica_id", INT32, "3+", default=-2),
    f("topics", arr(
        f("topic", STRING),
        f("partitions", arr(
            f("partition", INT32),
            f("current_leader_epoch", INT32, "2+", default=-1),
            f("leader_epoch", INT32),
        )),
    )),
), response=struct(
    f("throttle_time_ms", INT32, "2+"),
    f("topics", arr(
        f("topic", STRING),
        f("partitions", arr(
            f("error_code", INT16),
            f("partition", INT32),
            f("leader_epoch", INT32, "1+", default=-1),
            f("end_offset", INT64, default=-1),
        )),
    )),
))

CREATE_TOPICS = Api(19, "CreateTopics", 0, 7, 5, request=struct(
    f("topics", arr(
        f("name", STRING),
        f("num_partitions", INT32),
        f("replication_factor", INT16),
        f("assignments", arr(
            f("partition_index", INT32),
            f("broker_ids", arr(INT32)),
        )),
        f("configs", arr(
            f("name", STRING),
            f("value", STRING, null="0+"),
        )),
    )),
    f("timeout_ms", INT32, default=60000),
    f("validate_only", BOOL, "1+"),
), response=struct(
    f("throttle_time_ms", INT32, "2+"),
    f("topics", arr(
        f("name", STRING),
        f("topic_id", UUID, "7+"),
        f("error_code", INT16),
        f("error_message", STRING, "1+", null="1+"),
        f("topic_config_error_code", INT16, "5+", tag=0),
        f("num_partitions", INT32, "5+", default=-1),
        f("replication_factor", INT16, "5+", default=-1),
        f("configs", arr(
            f("name", STRING, "5+"),
            f("value", STRING, "5+", null="5+"),
            f("read_only", BOOL, "5+"),
            f("config_source", INT8, "5+", default=-1),
            f("is_sensitive", BOOL, "5+"),
        ), "5+", null="5+"),
    )),
))

DELETE_TOPICS = Api(20, "DeleteTopics", 0, 5, 4, request=struct(
    f("topic_names", arr(STRING)),
    f("timeout_ms", INT32),
), response=struct(
    f("throttle_time_ms", INT32, "1+"),
    f("responses", arr(
        f("name", STRING),
        f("error_code", INT16),
        f("error_message", STRING, "5+", null="5+", default=None),
    )),
))

CREATE_PARTITIONS = Api(37, "CreatePartitions", 0, 3, 2, request=struct(
    f("topics", arr(
        f("name", STRING),
        f("count", INT32),
        f("assignments", arr(
            f("broker_ids", arr(INT32)),
        ), null="0+"),
    )),
    f("timeout_ms", INT32),
    f("validate_only", BOOL),
), response=struct(
    f("throttle_time_ms", INT32),
    f("results", arr(
        f("name", STRING),
        f("error_code", INT16),
        f("error_message", STRING, null="0+", default=None),
    )),
))

DESCRIBE_CONFIGS = Api(32, "DescribeConfigs", 0, 4, 4, request=struct(
    f("resources", arr(
        f("resource_type", INT8),
        f("resource_name", STRING),
        f("configuration_keys", arr(STRING), null="0+"),
    )),
    f("include_synonyms", BOOL, "1+"),
    f("include_documentation", BOOL, "3+"),
), response=struct(
    f("throttle_time_ms", INT32),
    f("results", arr(
        f("error_code", INT16),
        f("error_message", STRING, null="0+"),
        f("resource_type", INT8),
        f("resource_name", STRING),
        f("configs", arr(
            f("name", STRING),
            f("value", STRING, null="0+"),
            f("read_only", BOOL),
            f("is_default", BOOL, "0"),
            f("config_source", INT8, "1+", default=-1),
            f("is_sensitive", BOOL),
            f("synonyms", arr(
                f("name", STRING, "1+"),
                f("value", STRING, "1+", null="1+"),
                f("source", INT8, "1+"),
            ), "1+"),
            f("config_type", INT8, "3+"),
            f("documentation", STRING, "3+", null="3+"),
        )),
    )),
))

DESCRIBE_CLUSTER = Api(60, "DescribeCluster", 0, 1, 0, request=struct(
    f("include_cluster_authorized_operations", BOOL),
    f("endpoint_type", INT8, "1+", default=1),
), response=struct(
    f("throttle_time_ms", INT32),
    f("error_code", INT16),
    f("error_message", STRING, null="0+", default=None),
    f("endpoint_type", INT8, "1+", default=1),
    f("cluster_id", STRING),
    f("controller_id", INT32, default=-1),
    f("brokers", arr(
        f("broker_id", INT32),
        f("host", STRING),
        f("port", INT32),
        f("rack", STRING, null="0+", default=None),
    )),
    f("cluster_authorized_operations", INT32, default=AUTH_OPS_NOT_REQUESTED),
))

DELETE_RECORDS = Api(21, "DeleteRecords", 0, 2, 2, request=struct(
    f("topics", arr(
        f("name", STRING),
        f("partitions", arr(
            f("partition_index", INT32),
            f("offset", INT64),
        )),
    )),
    f("timeout_ms", INT32),
), response=struct(
    f("throttle_time_ms", INT32),
    f("topics", arr(
        f("name", STRING),
        f("partitions", arr(
            f("partition_index", INT32),
            f("low_watermark", INT64),
            f("error_code", INT16),
        )),
    )),
))

SASL_HANDSHAKE = Api(17, "SaslHandshake", 0, 1, None, request=struct(
    f("mechanism", STRING),
), response=struct(
    f("error_code", INT16),
    f("mechanisms", arr(STRING)),
))

SASL_AUTHENTICATE = Api(36, "SaslAuthenticate", 0, 2, 2, request=struct(
    f("auth_bytes", BYTES),
), response=struct(
    f("error_code", INT16),
    f("error_message", STRING, null="0+"),
    f("auth_bytes", BYTES),
    f("session_lifetime_ms", INT64, "1+"),
))

_ALTER_RESPONSE = struct(
    f("throttle_time_ms", INT32),
    f("responses", arr(
        f("error_code", INT16),
        f("error_message", STRING, null="0+"),
        f("resource_type", INT8),
        f("resource_name", STRING),
    )),
)

ALTER_CONFIGS = Api(33, "AlterConfigs", 0, 2, 2, request=struct(
    f("resources", arr(
        f("resource_type", INT8),
        f("resource_name", STRING),
        f("configs", arr(
            f("name", STRING),
            f("value", STRING, null="0+"),
        )),
    )),
    f("validate_only", BOOL),
), response=_ALTER_RESPONSE)

INCREMENTAL_ALTER_CONFIGS = Api(44, "IncrementalAlterConfigs", 0, 1, 1, request=struct(
    f("resources", arr(
        f("resource_type", INT8),
        f("resource_name", STRING),
        f("configs", arr(
            f("name", STRING),
            f("config_operation", INT8),
            f("value", STRING, null="0+"),
        )),
    )),
    f("validate_only", BOOL),
), response=_ALTER_RESPONSE)

DESCRIBE_LOG_DIRS = Api(35, "DescribeLogDirs", 1, 5, 2, request=struct(
    f("topics", arr(
        f("topic", STRING),
        f("partitions", arr(INT32)),
    ), null="0+"),
), response=struct(
    f("throttle_time_ms", INT32),
    f("error_code", INT16, "3+"),
    f("results", arr(
        f("error_code", INT16),
        f("log_dir", STRING),
        f("topics", arr(
            f("name", STRING),
            f("partitions", arr(
                f("partition_index", INT32),
                f("partition_size", INT64),
                f("offset_lag", INT64),
                f("is_future_key", BOOL),
            )),
        )),
        f("total_bytes", INT64, "4+", default=-1),
        f("usable_bytes", INT64, "4+", default=-1),
        f("is_cordoned", BOOL, "5+", default=False),
    )),
))

DATA_APIS = (
    API_VERSIONS, METADATA, PRODUCE, FETCH, LIST_OFFSETS, OFFSET_FOR_LEADER_EPOCH, CREATE_TOPICS,
    DELETE_TOPICS, CREATE_PARTITIONS, DESCRIBE_CONFIGS, DESCRIBE_CLUSTER, DELETE_RECORDS,
    SASL_HANDSHAKE, SASL_AUTHENTICATE, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS, DESCRIBE_LOG_DIRS,
)
