"""Declarations: the security APIs -- ACLs (DescribeAcls, CreateAcls, DeleteAcls) and SCRAM users
(DescribeUserScramCredentials, AlterUserScramCredentials).

Same conventions as ``messages_data``.  ACL APIs at versions 1-3 (Kafka 4 dropped v0; v1 added the
pattern type), read and built by ``handlers/acl_api.py``; the SCRAM user APIs (v0, flexible) by
``scram_admin.py``.
"""

from __future__ import annotations

from rokka.gateway.kafka.codec.schema import BYTES, INT8, INT16, INT32, STRING, Api, arr, f, struct

#: An ACL binding filter: DescribeAcls's request and each DeleteAcls filter.
_ACL_FILTER = (
    f("resource_type_filter", INT8),
    f("resource_name_filter", STRING, null="0+"),
    f("pattern_type_filter", INT8, "1+", default=3),
    f("principal_filter", STRING, null="0+"),
    f("host_filter", STRING, null="0+"),
    f("operation", INT8),
    f("permission_type", INT8),
)

DESCRIBE_ACLS = Api(29, "DescribeAcls", 1, 3, 2, request=struct(*_ACL_FILTER), response=struct(
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
    f("filters", arr(*_ACL_FILTER)),
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

DESCRIBE_USER_SCRAM_CREDENTIALS = Api(50, "DescribeUserScramCredentials", 0, 0, 0, request=struct(
    f("users", arr(f("name", STRING)), null="0+"),
), response=struct(
    f("throttle_time_ms", INT32),
    f("error_code", INT16),
    f("error_message", STRING, null="0+"),
    f("results", arr(
        f("user", STRING),
        f("error_code", INT16),
        f("error_message", STRING, null="0+"),
        f("credential_infos", arr(
            f("mechanism", INT8),
            f("iterations", INT32),
        )),
    )),
))

ALTER_USER_SCRAM_CREDENTIALS = Api(51, "AlterUserScramCredentials", 0, 0, 0, request=struct(
    f("deletions", arr(
        f("name", STRING),
        f("mechanism", INT8),
    )),
    f("upsertions", arr(
        f("name", STRING),
        f("mechanism", INT8),
        f("iterations", INT32),
        f("salt", BYTES),
        f("salted_password", BYTES),
    )),
), response=struct(
    f("throttle_time_ms", INT32),
    f("results", arr(
        f("user", STRING),
        f("error_code", INT16),
        f("error_message", STRING, null="0+"),
    )),
))

ACL_APIS = (DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS, DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS)
