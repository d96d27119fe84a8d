"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31) over ``rokka.gateway.kafka.acls.AclStore``.

Without ``kafkaAclEnable`` there is no authorizer, and the three answer SECURITY_DISABLED as Kafka
does.  Who may call them is decided in front of them (``rokka.gateway.kafka.authz``: cluster DESCRIBE /
ALTER).  Bindings and filters that cannot be valid are answered INVALID_REQUEST with the reason;
every change is logged.
"""

from __future__ import annotations

from itertools import groupby

import structlog
from rokka.gateway.kafka.acls import Acl, AclFilter, AclStore, invalid_binding
from rokka.gateway.kafka.codec import Struct
from rokka.gateway.kafka.context import KafkaRequestContext
from rokka.gateway.kafka.errors import ErrorCode as E

__all__ = ["create_acls", "delete_acls", "describe_acls"]

log = structlog.get_logger(__name__)

DISABLED = "no authorizer is configured on this broker (kafkaAclEnable=false)"


def _filter(f: Struct) -> AclFilter:
    return AclFilter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter, f.principal_filter,
                     f.host_filter, f.operation, f.permission_type)


def _invalid_filter(f: AclFilter) -> str | None:
    if not 1 <= f.resource_type <= 5:
        return f"unknown resource type filter {f.resource_type}"
    if not 1 <= f.pattern <= 4:
        return f"unknown pattern type filter {f.pattern}"
    if not 1 <= f.operation <= 12 or not 1 <= f.permission <= 3:
        return "unknown operation or permission type filter"
    return None


async def describe_acls(store: AclStore | None, ctx: KafkaRequestContext, req: Struct) -> Struct:
    if store is None:
        return Struct(throttle_time_ms=0, error_code=E.SECURITY_DISABLED, error_message=DISABLED, resources=[])
    f = _filter(req)
    if (why := _invalid_filter(f)) is not None:
        return Struct(throttle_time_ms=0, error_code=E.INVALID_REQUEST, error_message=why, resources=[])
    resources = []
    for (rtype, name, pattern), acls in groupby(store.matching(f), key=lambda a: (a.resource_type, a.name, a.pattern)):
        resources.append(Struct(resource_type=rtype, resource_name=name, pattern_type=pattern, acls=[
            Struct(principal=a.principal, host=a.host, operation=a.operation, permission_type=a.permission)
            for a in acls]))
    return Struct(throttle_time_ms=0, error_code=0, error_message=None, resources=resources)


async def create_acls(store: AclStore | None, ctx: KafkaRequestContext, req: Struct) -> Struct:
    results, new = [], []
    for c in req.creations:
        acl = Acl(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host, c.operation,
                  c.permission_type)
        why = DISABLED if store is None else invalid_binding(acl)
        if why is None:
            new.append(acl)
            results.append(Struct(error_code=0, error_message=None))
        else:
            code = E.SECURITY_DISABLED if store is None else E.INVALID_REQUEST
            results.append(Struct(error_code=code, error_message=why))
    if store is not None and new:
        store.add(new)
        log.info("kafka.acls_created", acls=[str(a) for a in new], peer=ctx.peer[0])
    return Struct(throttle_time_ms=0, results=results)


async def delete_acls(store: AclStore | None, ctx: KafkaRequestContext, req: Struct) -> Struct:
    out = []
    for raw in req.filters:
        f = _filter(raw)
        why = DISABLED if store is None else _invalid_filter(f)
        if why is not None or store is None:
            code = E.SECURITY_DISABLED if store is None else E.INVALID_REQUEST
            out.append(Struct(error_code=code, error_message=why, matching_acls=[]))
            continue
        gone = store.delete(f)
        if gone:
            log.info("kafka.acls_deleted", acls=[str(a) for a in gone], peer=ctx.peer[0])
        out.append(Struct(error_code=0, error_message=None, matching_acls=[Struct(
            error_code=0, error_message=None, resource_type=a.resource_type, resource_name=a.name,
            pattern_type=a.pattern, principal=a.principal, host=a.host, operation=a.operation,
            permission_type=a.permission) for a in gone]))
    return Struct(throttle_time_ms=0, filter_results=out)
