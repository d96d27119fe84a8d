"""Declarations: the ACL APIs (DescribeAcls, CreateAcls, DeleteAcls).

Same conventions as ``messages_data``.  Versions 1-3 (Kafka 4 dropped v0; v1 added the pattern
type); the authorizer in ``gateway/kafka/authz.py`` reads and builds these structs.
"""

from __future__ import annotations

from gateway.kafka.codec.schema import INT8, INT16, INT32, STRING, Api, arr, f, struct

DESCRIBE_ACLS = Api(29, "DescribeAcls", 1, 3, 2, request=struct(
    f("resource_type_filter", INT8),
    f("resource_name_filter", STRING, null="0+"),
    f("pattern_type_filter", INT8, "1+", default=3),
    f("principal_filter", STRING, null="0+"),
    f("host_filter", STRING, null="0+"),
    f("operation", INT8),
    f("permission_type", INT8),
), response=struct(
    f("throttle_time_ms", INT32),
    f("error_code", INT16),
    f("error_message", STRING, null="0+"),
    f("resources", arr(
        f("resource_type", INT8),
        f("resource_name", STRING),
        f("pattern_type", INT8, "1+", default=3),
        f("acls", arr(
            f("principal", STRING),
            f("host", STRING),
            f("operation", INT8),
            f("permission_type", INT8),
        )),
    )),
))

CREATE_ACLS = Api(30, "CreateAcls", 1, 3, 2, request=struct(
    f("creations", arr(
        f("resource_type", INT8),
        f("resource_name", STRING),
        f("resource_pattern_type", INT8, "1+", default=3),
        f("principal", STRING),
        f("host", STRING),
        f("operation", INT8),
        f("permission_type", INT8),
    )),
), response=struct(
    f("throttle_time_ms", INT32),
    f("results", arr(
        f("error_code", INT16),
        f("error_message", STRING, null="0+"),
    )),
))

DELETE_ACLS = Api(31, "DeleteAcls", 1, 3, 2, request=struct(
    f("filters", arr(
        f("resource_type_filter", INT8),
        f("resource_name_filter", STRING, null="0+"),
        f("pattern_type_filter", INT8, "1+", default=3),
        f("principal_filter", STRING, null="0+"),
        f("host_filter", STRING, null="0+"),
        f("operation", INT8),
        f("permission_type", INT8),
    )),
), response=struct(
    f("throttle_time_ms", INT32),
    f("filter_results", arr(
        f("error_code", INT16),
        f("error_message", STRING, null="0+"),
        f("matching_acls", arr(
            f("error_code", INT16),
            f("error_message", STRING, null="0+"),
            f("resource_type", INT8),
            f("resource_name", STRING),
            f("pattern_type", INT8, "1+", default=3),
            f("principal", STRING),
            f("host", STRING),
            f("operation", INT8),
            f("permission_type", INT8),
        )),
    )),
))

ACL_APIS = (DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS)
