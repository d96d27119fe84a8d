"""The authorizer's adapters: for each API, a request naming an allowed and a refused resource goes
through the adapter in front of a stub handler (which answers an empty response and records what it
was given); the answer is encoded and decoded with the codec at the lowest and highest version we
speak, and must carry the refusal in the refused resource's place, while the handler saw only the
allowed one.  Principal User:alice over SASL; the refused resources have no ACL."""

from __future__ import annotations

from typing import Any

import pytest
from rokka.gateway.kafka import KafkaError, KafkaRequestContext, KafkaServer
from rokka.gateway.kafka.acls import Acl, AclStore, Op, Pattern, Perm, Res
from rokka.gateway.kafka.apis import ADAPTERS
from rokka.gateway.kafka.authz import Authz
from rokka.gateway.kafka.codec import APIS, Struct, decode_response_frame, encode_response_frame

TAF, GAF, CAF, TXAF = 29, 30, 31, 53

STORE = AclStore(None)
STORE.add([Acl(Res.TOPIC, "ok", Pattern.LITERAL, "User:alice", "*", Op.ALL, Perm.ALLOW),
           Acl(Res.GROUP, "g", Pattern.LITERAL, "User:alice", "*", Op.ALL, Perm.ALLOW),
           Acl(Res.TRANSACTIONAL_ID, "tx", Pattern.LITERAL, "User:alice", "*", Op.ALL, Perm.ALLOW)])


def parts(name_field: str, name: str, part_field: str, **extra: Any) -> Struct:
    return Struct(**{name_field: name, part_field: [Struct(**extra)]})


# api key -> (request fields, path to the refused entries' codes in the decoded response, codes wanted,
#             what the handler must have been given: (request field, names))
CASES: dict[int, tuple[dict[str, Any], Any, list[int], tuple[str, list[str]] | None]] = {
    0: ({"acks": 1, "timeout_ms": 1, "transactional_id": None,
         "topic_data": [parts("name", n, "partition_data", index=0, records=None) for n in ("ok", "no")]},
        lambda r: [p.error_code for t in r.responses for p in t.partition_responses], [TAF], ("topic_data", ["ok"])),
    1: ({"topics": [parts("topic", n, "partitions", partition=0, fetch_offset=0) for n in ("ok", "no")]},
        lambda r: [p.error_code for t in r.responses for p in t.partitions], [TAF], ("topics", ["ok"])),
    2: ({"topics": [parts("name", n, "partitions", partition_index=0, timestamp=-1) for n in ("ok", "no")]},
        lambda r: [p.error_code for t in r.topics for p in t.partitions], [TAF], ("topics", ["ok"])),
    23: ({"topics": [parts("topic", n, "partitions", partition=0, leader_epoch=0) for n in ("ok", "no")]},
         lambda r: [p.error_code for t in r.topics for p in t.partitions], [TAF], ("topics", ["ok"])),
    8: ({"group_id": "g", "topics": [parts("name", n, "partitions", partition_index=0, committed_offset=1)
                                     for n in ("ok", "no")]},
        lambda r: [p.error_code for t in r.topics for p in t.partitions], [TAF], ("topics", ["ok"])),
    19: ({"topics": [Struct(name=n, num_partitions=1, replication_factor=1, assignments=[], configs=[])
                     for n in ("ok", "no")]},
         lambda r: [t.error_code for t in r.topics], [TAF], ("topics", ["ok"])),
    20: ({"topic_names": ["ok", "no"]}, lambda r: [t.error_code for t in r.responses], [TAF], None),
    21: ({"topics": [parts("name", n, "partitions", partition_index=0, offset=0) for n in ("ok", "no")]},
         lambda r: [p.error_code for t in r.topics for p in t.partitions], [TAF], ("topics", ["ok"])),
    37: ({"topics": [Struct(name=n, count=2, assignments=None) for n in ("ok", "no")]},
         lambda r: [t.error_code for t in r.results], [TAF], ("topics", ["ok"])),
    15: ({"groups": ["g", "h"]}, lambda r: [g.error_code for g in r.groups], [GAF], None),
    42: ({"groups_names": ["g", "h"]}, lambda r: [g.error_code for g in r.results], [GAF], None),
    32: ({"resources": [Struct(resource_type=2, resource_name=n, configuration_keys=None) for n in ("ok", "no")]
          + [Struct(resource_type=4, resource_name="0", configuration_keys=None)]},
         lambda r: [x.error_code for x in r.results], [TAF, CAF], None),
    44: ({"resources": [Struct(resource_type=2, resource_name=n, configs=[]) for n in ("ok", "no")]},
         lambda r: [x.error_code for x in r.responses], [TAF], None),
    61: ({"topics": [Struct(name=n, partition_indexes=[0]) for n in ("ok", "no")]},
         lambda r: [p.error_code for t in r.topics for p in t.partitions], [TAF], ("topics", ["ok"])),
    65: ({"transactional_ids": ["tx", "ty"]}, lambda r: [s.error_code for s in r.transaction_states], [TXAF], None),
    28: ({"transactional_id": "tx", "group_id": "g", "producer_id": 1, "producer_epoch": 0,
          "topics": [parts("name", n, "partitions", partition_index=0, committed_offset=1) for n in ("ok", "no")]},
         lambda r: [p.error_code for t in r.topics for p in t.partitions], [TAF], ("topics", ["ok"])),
    51: ({"deletions": [Struct(name="bob", mechanism=1)], "upsertions": []},
         lambda r: [x.error_code for x in r.results], [CAF], None),
    24: ({"v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": 1, "v3_and_below_producer_epoch": 0,
          "v3_and_below_topics": [Struct(name=n, partitions=[0]) for n in ("ok", "no")]},
         lambda r: sorted(p.partition_error_code for t in r.results_by_topic_v3_and_below
                          for p in t.results_by_partition), [TAF, 55], None),
}


def ctx(key: int, version: int, user: str = "alice") -> KafkaRequestContext:
    return KafkaRequestContext(("127.0.0.1", 1), "c", key, version, 1, {"sasl": Struct(principal=f"User:{user}")},
                               KafkaServer({}, max_frame_bytes=1024))


@pytest.mark.parametrize("key", sorted(CASES))
@pytest.mark.parametrize("edge", ["min", "max"])
async def test_refusals_take_the_refused_resources_place(key: int, edge: str) -> None:
    api = APIS[key]
    version = api.min_version if edge == "min" else api.max_version
    fields, codes_of, want, seen_want = CASES[key]
    seen: list[Struct] = []

    async def stub(c: KafkaRequestContext, body: Struct) -> Struct:
        seen.append(body)
        return api.response.make()

    body = api.request.make(**fields)
    out = await ADAPTERS[key](Authz(STORE), stub, ctx(key, version), body)
    _, decoded = decode_response_frame(api, version, encode_response_frame(api, version, 7, out)[4:])
    assert sorted(codes_of(decoded)) == sorted(want)
    if seen_want is not None:
        field, names = seen_want
        got = seen[0] if seen else None
        assert got is not None and [getattr(x, "name", None) or getattr(x, "topic", None)
                                    for x in getattr(got, field)] == names


@pytest.mark.parametrize("key,fields,code", [
    (11, {"group_id": "h"}, GAF), (12, {"group_id": "h"}, GAF), (13, {"group_id": "h"}, GAF),
    (14, {"group_id": "h"}, GAF), (22, {"transactional_id": "ty"}, TXAF), (26, {"transactional_id": "ty"}, TXAF),
    (25, {"transactional_id": "tx", "group_id": "h"}, GAF), (29, {}, CAF), (50, {"users": None}, CAF),
])
async def test_top_level_refusals(key: int, fields: dict[str, Any], code: int) -> None:
    async def stub(c: KafkaRequestContext, body: Struct) -> Struct:
        raise AssertionError("the handler must not run")

    with pytest.raises(KafkaError) as info:
        await ADAPTERS[key](Authz(STORE), stub, ctx(key, APIS[key].max_version), APIS[key].request.make(**fields))
    assert info.value.error_code == code


async def test_listings_are_filtered() -> None:
    async def groups(c: KafkaRequestContext, body: Struct) -> dict[str, Any]:
        return {"error_code": 0, "groups": [{"group_id": "g", "protocol_type": "consumer"},
                                            {"group_id": "h", "protocol_type": "consumer"}]}

    out = await ADAPTERS[16](Authz(STORE), groups, ctx(16, 4), APIS[16].request.make())
    assert [g["group_id"] for g in out.groups] == ["g"]

    async def metadata(c: KafkaRequestContext, body: Struct) -> Struct:
        return APIS[3].response.make(topics=[Struct(name=n, error_code=0, partitions=[]) for n in ("ok", "no")])

    out = await ADAPTERS[3](Authz(STORE), metadata, ctx(3, 12), APIS[3].request.make(topics=None))
    assert [t.name for t in out.topics] == ["ok"]
    named = APIS[3].request.make(topics=[Struct(name=n, topic_id=None) for n in ("ok", "no")],
                                 allow_auto_topic_creation=True)
    out = await ADAPTERS[3](Authz(STORE), metadata, ctx(3, 12), named)
    assert [(t.name, t.error_code) for t in out.topics] == [("ok", 0), ("no", TAF)]
    assert named.allow_auto_topic_creation is True          # alice has ALL (so CREATE) on every kept topic
