"""Kafka ACL decisions and filters (gateway.kafka.acls), and the authorizer's fail-closed default."""

from __future__ import annotations

from pathlib import Path

import pytest
from rokka.gateway.kafka import KafkaError, KafkaRequestContext, KafkaServer, Route
from rokka.gateway.kafka.acls import CLUSTER_NAME, Acl, AclFilter, AclStore, Op, Pattern, Perm, Res, invalid_binding
from rokka.gateway.kafka.apis import authorize_routes
from rokka.gateway.kafka.authz import Authz
from rokka.gateway.kafka.codec import Struct

ANY = 1


def acl(name: str, op: int, perm: int = Perm.ALLOW, *, rtype: int = Res.TOPIC, pattern: int = Pattern.LITERAL,
        principal: str = "User:alice", host: str = "*") -> Acl:
    return Acl(rtype, name, pattern, principal, host, op, perm)


def test_decisions(tmp_path: Path) -> None:
    s = AclStore(tmp_path, super_users=["User:root"])
    s.add([acl("orders-", Op.WRITE, pattern=Pattern.PREFIXED), acl("orders-secret", Op.ALL, Perm.DENY),
           acl("*", Op.READ, principal="User:*"), acl("audit", Op.READ, host="10.0.0.1"),
           acl("g", Op.READ, rtype=Res.GROUP)])
    ok = s.allowed
    assert ok("User:alice", "1.2.3.4", Res.TOPIC, "orders-1", Op.WRITE)
    assert ok("User:alice", "1.2.3.4", Res.TOPIC, "orders-1", Op.DESCRIBE)          # implied by WRITE
    assert not ok("User:alice", "1.2.3.4", Res.TOPIC, "orders-1", Op.DELETE)
    assert not ok("User:alice", "1.2.3.4", Res.TOPIC, "orders-secret", Op.WRITE)    # DENY wins
    assert ok("User:bob", "1.2.3.4", Res.TOPIC, "anything", Op.READ)                # User:* on literal *
    assert not ok("User:bob", "1.2.3.4", Res.TOPIC, "anything", Op.WRITE)
    assert ok("User:alice", "10.0.0.1", Res.GROUP, "g", Op.DESCRIBE)
    assert not ok("User:alice", "1.2.3.4", Res.GROUP, "h", Op.READ)                 # no ACL on h: deny
    assert ok("User:root", "1.2.3.4", Res.CLUSTER, CLUSTER_NAME, Op.ALTER)          # super user
    assert s.allowed_anywhere("User:alice", "1.2.3.4", Res.TOPIC, Op.WRITE)
    assert not s.allowed_anywhere("User:bob", "1.2.3.4", Res.TOPIC, Op.WRITE)
    open_store = AclStore(None, allow_if_no_acl=True)
    assert open_store.allowed("User:x", "h", Res.TOPIC, "t", Op.WRITE)
    open_store.add([acl("t", Op.READ)])
    assert not open_store.allowed("User:x", "h", Res.TOPIC, "t", Op.WRITE)           # t now has ACLs
    assert len(AclStore(tmp_path).all()) == 5                                        # persisted


def test_filters_and_validation(tmp_path: Path) -> None:
    s = AclStore(tmp_path)
    lit, pre, star = acl("orders-1", Op.READ), acl("orders-", Op.WRITE, pattern=Pattern.PREFIXED), acl("*", Op.READ)
    s.add([lit, pre, star, acl("g", Op.READ, rtype=Res.GROUP)])
    f = AclFilter
    assert s.matching(f(Res.TOPIC, "orders-1", Pattern.MATCH, None, None, ANY, ANY)) == sorted([lit, pre, star])
    assert s.matching(f(Res.TOPIC, "orders-1", Pattern.LITERAL, None, None, ANY, ANY)) == [lit]
    assert s.matching(f(Res.TOPIC, "orders-", ANY, None, None, ANY, ANY)) == [pre]
    assert s.matching(f(ANY, None, ANY, "User:alice", None, Op.WRITE, Perm.ALLOW)) == [pre]
    assert len(s.matching(f(ANY, None, ANY, None, None, ANY, ANY))) == 4
    assert s.delete(f(Res.GROUP, None, ANY, None, None, ANY, ANY)) == [acl("g", Op.READ, rtype=Res.GROUP)]
    assert len(AclStore(tmp_path).all()) == 3
    assert invalid_binding(acl("t", Op.READ)) is None
    assert "LITERAL 'kafka-cluster'" in (invalid_binding(acl("x", Op.ALTER, rtype=Res.CLUSTER)) or "")
    assert "User:<name>" in (invalid_binding(acl("t", Op.READ, principal="alice")) or "")
    assert "does not apply" in (invalid_binding(acl("g", Op.WRITE, rtype=Res.GROUP)) or "")
    assert "LITERAL or PREFIXED" in (invalid_binding(acl("t", Op.READ, pattern=Pattern.MATCH)) or "")


async def test_apis_without_an_adapter_are_for_super_users_only() -> None:
    async def handler(ctx: KafkaRequestContext, body: Struct) -> Struct:
        return Struct(error_code=0)

    routes = authorize_routes({999: Route(handler, 0, 0)}, Authz(AclStore(None, super_users=["User:root"])))

    def ctx(principal: str | None) -> KafkaRequestContext:
        state = {"sasl": Struct(principal=principal)} if principal else {}
        return KafkaRequestContext(("127.0.0.1", 1), "c", 999, 0, 1, state, KafkaServer({}, max_frame_bytes=1024))

    assert (await routes[999].handler(ctx("User:root"), Struct())).error_code == 0
    for who in ("User:alice", None):
        with pytest.raises(KafkaError):
            await routes[999].handler(ctx(who), Struct())
