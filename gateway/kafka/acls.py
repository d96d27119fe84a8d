"""Kafka ACLs: the bindings, their filters and the allow/deny decision (Kafka's AclAuthorizer rules).

Theory of operation
-------------------
An ACL binding is (resource type, resource name, pattern type, principal, host, operation,
permission).  Resources are TOPIC, GROUP, CLUSTER (name ``kafka-cluster``) and TRANSACTIONAL_ID;
patterns LITERAL (the name ``*`` matches every name) and PREFIXED; principals ``User:<name>``
(``User:*`` matches everyone); hosts an IP address or ``*``.

``allowed(principal, host, resource type, name, operation)`` decides as Kafka does:

1. a super user (``kafkaSuperUsers``) is always allowed;
2. the ACLs on the resource are those whose pattern matches its name; with none at all, the
   answer is ``kafkaAllowEveryoneIfNoAclFound`` (default false, as Kafka);
3. a matching DENY for the operation (or ALL) refuses;
4. a matching ALLOW for the operation (or ALL) allows; DESCRIBE is implied by READ, WRITE, DELETE
   or ALTER, and DESCRIBE_CONFIGS by ALTER_CONFIGS;
5. otherwise refused.

Filters (DescribeAcls, DeleteAcls) follow Kafka's ``AclBindingFilter``: ANY matches every value,
a null name, principal or host matches all, and the MATCH pattern type selects every binding that
would apply to the named resource (literal, wildcard and prefixes of it).

``authorized_operations`` lays out what a principal may do with one resource as Kafka's
``*_authorized_operations`` fields do (KIP-430): bit ``1 << op`` for each operation the resource
type supports (ALL excluded); ``AUTH_OPS_NOT_REQUESTED`` (-2^31) when the client did not ask.
Without an authorizer every supported operation is set (Kafka's ``AuthHelper`` without one).

The bindings are rokka's own state: ``config/kafkaAcls.msgpack``, rewritten atomically on change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import Any

from rokka.core.storage.packfile import read_msgpack, write_msgpack_atomic

__all__ = ["AUTH_OPS_NOT_REQUESTED", "Acl", "AclFilter", "AclStore", "CLUSTER_NAME", "Op", "Pattern", "Perm", "Res",
           "authorized_operations", "invalid_binding"]

FILE_NAME = "kafkaAcls.msgpack"
CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
ANY = 1


class Res:
    TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = 2, 3, 4, 5
    ALL = (2, 3, 4, 5)


class Pattern:
    MATCH, LITERAL, PREFIXED = 2, 3, 4


class Op:
    ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 2, 3, 4, 5, 6, 7, 8
    CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12


class Perm:
    DENY, ALLOW = 2, 3


#: Operations that may be granted on each resource type (Kafka's ``AclEntry.supportedOperations``).
SUPPORTED_OPS = {
    Res.TOPIC: {Op.ALL, Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.ALTER, Op.DESCRIBE, Op.DESCRIBE_CONFIGS,
                Op.ALTER_CONFIGS},
    Res.GROUP: {Op.ALL, Op.READ, Op.DESCRIBE, Op.DELETE},
    Res.CLUSTER: {Op.ALL, Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE,
                  Op.ALTER, Op.DESCRIBE},
    Res.TRANSACTIONAL_ID: {Op.ALL, Op.DESCRIBE, Op.WRITE},
}
AUTH_OPS_NOT_REQUESTED = -2147483648
IMPLIES = {Op.DESCRIBE: {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER}, Op.DESCRIBE_CONFIGS: {Op.ALTER_CONFIGS}}


def authorized_operations(resource_type: int, allowed: Callable[[int], bool] | None = None) -> int:
    """Kafka's bit field of the operations ``allowed`` (None: no authorizer, all) on a resource of
    the type: bit ``op`` set for each supported operation but ALL."""
    bits = 0
    for op in SUPPORTED_OPS[resource_type] - {Op.ALL}:
        if allowed is None or allowed(op):
            bits |= 1 << op
    return bits


@dataclass(frozen=True, order=True)
class Acl:
    resource_type: int
    name: str
    pattern: int
    principal: str
    host: str
    operation: int
    permission: int

    @classmethod
    def from_row(cls, r: Sequence[Any]) -> Acl:
        """A binding from its stored row (``astuple`` order)."""
        return cls(int(r[0]), str(r[1]), int(r[2]), str(r[3]), str(r[4]), int(r[5]), int(r[6]))

    def covers(self, resource_type: int, name: str) -> bool:
        """Does this binding apply to resource (type, name)?"""
        if self.resource_type != resource_type:
            return False
        if self.pattern == Pattern.LITERAL:
            return self.name in (name, WILDCARD)
        return name.startswith(self.name)


@dataclass(frozen=True)
class AclFilter:
    resource_type: int
    name: str | None
    pattern: int
    principal: str | None
    host: str | None
    operation: int
    permission: int

    def matches(self, a: Acl) -> bool:
        if self.resource_type != ANY and a.resource_type != self.resource_type:
            return False
        if self.pattern == Pattern.MATCH:
            if self.name is not None and not a.covers(a.resource_type, self.name):
                return False
        elif self.pattern != ANY and a.pattern != self.pattern:
            return False
        elif self.name is not None and a.name != self.name:
            return False
        return ((self.principal is None or a.principal == self.principal)
                and (self.host is None or a.host == self.host)
                and self.operation in (ANY, a.operation) and self.permission in (ANY, a.permission))


def invalid_binding(a: Acl) -> str | None:
    """Why a binding cannot be created (None: it can)."""
    if a.resource_type not in Res.ALL:
        return f"resource type {a.resource_type} is not supported (TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID)"
    if a.pattern not in (Pattern.LITERAL, Pattern.PREFIXED):
        return "the pattern type must be LITERAL or PREFIXED"
    if not a.name:
        return "the resource name must not be empty"
    if a.resource_type == Res.CLUSTER and (a.name != CLUSTER_NAME or a.pattern != Pattern.LITERAL):
        return f"the cluster resource is LITERAL '{CLUSTER_NAME}'"
    if not a.principal.startswith("User:") or len(a.principal) == len("User:"):
        return f"principal {a.principal!r} is not of the form User:<name>"
    if not a.host:
        return "the host must be an address or '*'"
    if a.operation not in SUPPORTED_OPS[a.resource_type]:
        return f"operation {a.operation} does not apply to resource type {a.resource_type}"
    if a.permission not in (Perm.ALLOW, Perm.DENY):
        return "the permission type must be ALLOW or DENY"
    return None


class AclStore:
    def __init__(self, config_dir: Path | None, *, super_users: Iterable[str] = (),
                 allow_if_no_acl: bool = False) -> None:
        self._path = config_dir / FILE_NAME if config_dir is not None else None
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        rows = (read_msgpack(self._path) or {}).get("acls", []) if self._path is not None else []
        self._acls: set[Acl] = {Acl.from_row(r) for r in rows}

    def all(self) -> list[Acl]:
        return sorted(self._acls)

    def add(self, acls: Iterable[Acl]) -> None:
        before = len(self._acls)
        self._acls.update(acls)
        if len(self._acls) != before:
            self._save()

    def matching(self, f: AclFilter) -> list[Acl]:
        return sorted(a for a in self._acls if f.matches(a))

    def replace(self, acls: Iterable[Acl]) -> bool:
        """Make the table exactly ``acls`` (a slave copying its master's); True when it changed."""
        fresh = set(acls)
        if fresh == self._acls:
            return False
        self._acls = fresh
        self._save()
        return True

    def delete(self, f: AclFilter) -> list[Acl]:
        gone = self.matching(f)
        if gone:
            self._acls.difference_update(gone)
            self._save()
        return gone

    def allowed(self, principal: str, host: str, resource_type: int, name: str, op: int) -> bool:
        if principal in self.super_users:
            return True
        acls = [a for a in self._acls if a.covers(resource_type, name)]
        if not acls:
            return self.allow_if_no_acl
        return self._decide(acls, principal, host, op)

    def allowed_anywhere(self, principal: str, host: str, resource_type: int, op: int) -> bool:
        """Is ``op`` allowed on at least one resource of the type (e.g. WRITE on some topic, which
        lets a producer be idempotent)?  Deny bindings on other names do not count against it."""
        if principal in self.super_users or (self.allow_if_no_acl and not any(
                a.resource_type == resource_type for a in self._acls)):
            return True
        return any(a.resource_type == resource_type and a.permission == Perm.ALLOW and a.operation in (op, Op.ALL)
                   and a.principal in (principal, "User:*") and a.host in (host, WILDCARD)
                   and self.allowed(principal, host, resource_type, a.name if a.name != WILDCARD else "", op)
                   for a in self._acls)

    @staticmethod
    def _decide(acls: list[Acl], principal: str, host: str, op: int) -> bool:
        def applies(a: Acl, ops: set[int]) -> bool:
            return a.principal in (principal, "User:*") and a.host in (host, WILDCARD) and a.operation in ops

        if any(a.permission == Perm.DENY and applies(a, {op, Op.ALL}) for a in acls):
            return False
        return any(a.permission == Perm.ALLOW and applies(a, {op, Op.ALL} | IMPLIES.get(op, set())) for a in acls)

    def _save(self) -> None:
        if self._path is not None:
            write_msgpack_atomic(self._path, {"version": 1, "acls": [list(astuple(a)) for a in sorted(self._acls)]})
