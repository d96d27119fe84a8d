"""The authorizer and views, OffsetFetch v1 refusals and KIP-430 authorized operations
(``rokka.gateway.kafka.authz``): alice may do everything on topics prefixed ``alice-`` and on group
``alice-g``; ``secret`` has an ACL for someone else only.  Each adapter runs in front of a stub handler
and its answer goes through the codec at the version a client would use."""

from __future__ import annotations

from typing import Any

import pytest
from rokka.compat.views import KafkaView, ViewRegistry
from rokka.gateway.kafka import KafkaRequestContext, KafkaServer
from rokka.gateway.kafka.acls import Acl, AclStore, Op, Pattern, Perm, Res
from rokka.gateway.kafka.apis import ADAPTERS
from rokka.gateway.kafka.authz import Authz
from rokka.gateway.kafka.codec import APIS, Struct, decode_response_frame, encode_response_frame

TAF, GAF = 29, 30
AUTH_OPS_NOT_REQUESTED = -2147483648
TOPIC_ALL, GROUP_ALL, CLUSTER_ALL = 3576, 328, 8096      # Kafka's bit fields (bit = AclOperation code)


def _store() -> AclStore:
    store = AclStore(None, super_users=["User:admin"])
    store.add([Acl(Res.TOPIC, "alice-", Pattern.PREFIXED, "User:alice", "*", Op.ALL, Perm.ALLOW),
               Acl(Res.GROUP, "alice-g", Pattern.LITERAL, "User:alice", "*", Op.READ, Perm.ALLOW),
               Acl(Res.TOPIC, "secret", Pattern.LITERAL, "User:bob", "*", Op.READ, Perm.ALLOW)])
    return store


def _authz() -> Authz:
    views = ViewRegistry(None)
    views.put(KafkaView("alice-view", "secret"))
    views.put(KafkaView("alice-mine", "alice-src"))
    return Authz(_store(), views)


def ctx(key: int, version: int, user: str = "alice") -> KafkaRequestContext:
    return KafkaRequestContext(("127.0.0.1", 1), "c", key, version, 1, {"sasl": Struct(principal=f"User:{user}")},
                               KafkaServer({}, max_frame_bytes=1024))


def _round_trip(key: int, version: int, out: Any) -> Struct:
    api = APIS[key]
    return decode_response_frame(api, version, encode_response_frame(api, version, 7, out)[4:])[1]


async def _never(c: KafkaRequestContext, body: Struct) -> Struct:
    raise AssertionError("the handler must not run")


async def test_delete_topics_of_a_view_needs_delete_on_the_view_only() -> None:
    seen: list[list[str]] = []

    async def deleted(c: KafkaRequestContext, body: Struct) -> Struct:
        seen.append(list(body.topic_names))
        return Struct(throttle_time_ms=0, responses=[Struct(name=n, error_code=0) for n in body.topic_names])

    body = APIS[20].request.make(topic_names=["alice-view"], timeout_ms=1000)
    out = _round_trip(20, 5, await ADAPTERS[20](_authz(), deleted, ctx(20, 5), body))
    assert seen == [["alice-view"]] and [r.error_code for r in out.responses] == [0]
    trim = [Struct(name="alice-view", partitions=[Struct(partition_index=0, offset=1)])]
    records = APIS[21].request.make(topics=trim, timeout_ms=1000)
    out = _round_trip(21, 2, await ADAPTERS[21](_authz(), _never, ctx(21, 2), records))
    assert [p.error_code for t in out.topics for p in t.partitions] == [29]   # DeleteRecords trims the source


def test_a_view_checks_its_source_too() -> None:
    az, c = _authz(), ctx(1, 12)
    for op in (Op.READ, Op.WRITE, Op.DESCRIBE):
        assert not az.ok(c, Res.TOPIC, "alice-view", op)            # rights on the view's name only
        assert az.ok(c, Res.TOPIC, "alice-mine", op)                # a view of her own topic
    # DeleteTopics drops the view, no data: its check does not go through to the source
    assert az.ok(ctx(20, 6), Res.TOPIC, "alice-view", Op.DELETE, through_view=False)
    assert not az.ok(ctx(21, 2), Res.TOPIC, "alice-view", Op.DELETE)  # DeleteRecords would trim the source
    assert az.ok(ctx(1, 12, "admin"), Res.TOPIC, "alice-view", Op.READ)


@pytest.mark.parametrize("version", [APIS[1].min_version, APIS[1].max_version])
async def test_fetch_and_produce_through_a_view_of_a_forbidden_source(version: int) -> None:
    az = _authz()
    fetch = APIS[1].request.make(topics=[Struct(topic="alice-view", partitions=[Struct(partition=0, fetch_offset=0)])])
    out = _round_trip(1, version, await ADAPTERS[1](az, _never, ctx(1, version), fetch))
    assert [p.error_code for t in out.responses for p in t.partitions] == [TAF]
    produce = APIS[0].request.make(acks=1, timeout_ms=1, transactional_id=None, topic_data=[
        Struct(name="alice-view", partition_data=[Struct(index=0, records=None)])])
    out = _round_trip(0, 9, await ADAPTERS[0](az, _never, ctx(0, 9), produce))
    assert [p.error_code for t in out.responses for p in t.partition_responses] == [TAF]


async def test_creating_or_altering_into_a_view_needs_read_on_the_source() -> None:
    az, seen = _authz(), []

    async def created(c: KafkaRequestContext, body: Struct) -> Struct:
        seen.extend(t.name for t in body.topics)
        return APIS[19].response.make(topics=[Struct(name=t.name, error_code=0) for t in body.topics])

    def topic(name: str, source: str | None) -> Struct:
        configs = [] if source is None else [Struct(name="rokka.view.topic", value=source)]
        return Struct(name=name, num_partitions=1, replication_factor=1, assignments=[], configs=configs)

    body = APIS[19].request.make(topics=[topic("alice-v1", "secret"), topic("alice-v2", "alice-src"),
                                         topic("alice-t", None)])
    out = _round_trip(19, 7, await ADAPTERS[19](az, created, ctx(19, 7), body))
    assert seen == ["alice-v2", "alice-t"]
    assert {t.name: t.error_code for t in out.topics} == {"alice-v1": TAF, "alice-v2": 0, "alice-t": 0}
    assert "source topic secret" in next(t.error_message for t in out.topics if t.name == "alice-v1")
    alter = APIS[44].request.make(resources=[Struct(resource_type=2, resource_name="alice-t", configs=[
        Struct(name="rokka.view.topic", config_operation=0, value="secret")])])
    out = _round_trip(44, 1, await ADAPTERS[44](az, _never, ctx(44, 1), alter))
    assert [r.error_code for r in out.responses] == [TAF]


@pytest.mark.parametrize("version", [1, 7])
async def test_offset_fetch_refusal_fits_the_version(version: int) -> None:
    body = APIS[9].request.make(group_id="not-alices", topics=[Struct(name="alice-t", partition_indexes=[0, 1])])
    if version >= 2:
        with pytest.raises(Exception) as refused:
            await ADAPTERS[9](_authz(), _never, ctx(9, version), body)
        assert getattr(refused.value, "error_code", None) == GAF
        return
    out = _round_trip(9, version, await ADAPTERS[9](_authz(), _never, ctx(9, version), body))
    assert [(t.name, [(p.partition_index, p.error_code, p.committed_offset) for p in t.partitions])
            for t in out.topics] == [("alice-t", [(0, GAF, -1), (1, GAF, -1)])]


def test_kafka_bit_layout() -> None:
    from rokka.gateway.kafka.acls import authorized_operations

    assert authorized_operations(Res.TOPIC) == TOPIC_ALL
    assert authorized_operations(Res.GROUP) == GROUP_ALL
    assert authorized_operations(Res.CLUSTER) == CLUSTER_ALL
    assert authorized_operations(Res.GROUP, lambda op: op in (Op.READ, Op.DESCRIBE)) == (1 << 3) | (1 << 8)


async def test_authorized_operations_when_asked() -> None:
    az = _authz()

    async def metadata(c: KafkaRequestContext, body: Struct) -> Struct:
        return APIS[3].response.make(topics=[Struct(name=n, error_code=0, partitions=[])
                                             for n in ("alice-t", "alice-view")])

    asked = APIS[3].request.make(topics=None, include_topic_authorized_operations=True,
                                 include_cluster_authorized_operations=True)
    out = _round_trip(3, 10, await ADAPTERS[3](az, metadata, ctx(3, 10), asked))
    assert [(t.name, t.topic_authorized_operations) for t in out.topics] == [("alice-t", TOPIC_ALL)]
    assert out.cluster_authorized_operations == 0                  # no cluster DESCRIBE
    out = _round_trip(3, 10, await ADAPTERS[3](az, metadata, ctx(3, 10), APIS[3].request.make(topics=None)))
    assert [t.topic_authorized_operations for t in out.topics] == [AUTH_OPS_NOT_REQUESTED]

    async def groups(c: KafkaRequestContext, body: Struct) -> dict[str, Any]:
        return {"groups": [{"error_code": 0, "group_id": g, "group_state": "Empty", "protocol_type": "",
                            "protocol_data": "", "members": [], "authorized_operations": AUTH_OPS_NOT_REQUESTED}
                           for g in body.groups]}

    body = APIS[15].request.make(groups=["alice-g", "other"], include_authorized_operations=True)
    out = _round_trip(15, 5, await ADAPTERS[15](az, groups, ctx(15, 5), body))
    assert {g.group_id: (g.error_code, g.authorized_operations) for g in out.groups} == {
        "alice-g": (0, (1 << Op.READ) | (1 << Op.DESCRIBE)), "other": (GAF, AUTH_OPS_NOT_REQUESTED)}

    async def cluster(c: KafkaRequestContext, body: Struct) -> Struct:
        return APIS[60].response.make(error_code=0, cluster_id="x", controller_id=1, brokers=[])

    asked = APIS[60].request.make(include_cluster_authorized_operations=True)
    out = _round_trip(60, 0, await ADAPTERS[60](az, cluster, ctx(60, 0, "admin"), asked))
    assert out.cluster_authorized_operations == CLUSTER_ALL
