"""The Kafka API registry: one record per API, and what derives from it (routes, ApiVersions, authz)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import trio
from rokka.core.broker import Broker
from rokka.core.config import BrokerConfig
from rokka.core.storage.memory import MemoryStore
from rokka.gateway.kafka import KafkaServer
from rokka.gateway.kafka import authz as az
from rokka.gateway.kafka.acls import AclStore
from rokka.gateway.kafka.apis import (
    ADAPTERS,
    PRE_AUTH_APIS,
    QUICK_APIS,
    REGISTRY,
    SPECS,
    ApiKey,
    ApiSpec,
    KafkaServices,
    routes,
)
from rokka.gateway.kafka.codec import APIS
from rokka.gateway.kafka.codec.framing import decode_api_versions_any, encode_request_frame
from rokka.gateway.kafka.groups.coordinator import GroupCoordinator
from rokka.gateway.kafka.groups.types import GroupConfig
from rokka.gateway.kafka.handlers import KafkaEnv
from rokka.gateway.kafka.producers.state import ProducerStateManager
from rokka.gateway.kafka.txn.coordinator import KafkaTxnCoordinator

ROOT = Path(__file__).resolve().parents[3]


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper()


def _services(tmp: Path, **kw: object) -> KafkaServices:
    cfg = BrokerConfig(store_path_root_dir=str(tmp))
    broker = Broker(cfg, store=MemoryStore(cfg.store_config()))
    producers = ProducerStateManager(None)
    env = KafkaEnv(broker, node_id=0, host="127.0.0.1", port=9092, producers=producers,
                   transactions=KafkaTxnCoordinator(broker, producers, None))
    return KafkaServices(env, groups=GroupCoordinator(GroupConfig(), broker.offsets), **kw)  # type: ignore[arg-type]


def test_each_api_has_one_record_matching_its_wire_declaration() -> None:
    keys = [spec.key for spec in REGISTRY]
    assert len(keys) == len(set(keys)) == len(ApiKey)            # InitProducerId (22) included, once
    assert set(keys) == set(APIS)                                 # every declared API is registered, and back
    for spec in REGISTRY:
        api = APIS[spec.key]
        assert spec.key.name == _snake(api.name), api.name
        lo, hi = spec.versions
        assert api.min_version <= lo <= hi <= api.max_version, api.name


def test_every_api_says_who_may_call_it() -> None:
    for spec in REGISTRY:
        assert callable(spec.authz), spec.key.name
    assert ADAPTERS[ApiKey.PRODUCE] is az.produce
    assert {k for k, a in ADAPTERS.items() if a is az.anyone} == PRE_AUTH_APIS
    with pytest.raises(TypeError):      # the rule is a required field: no record without it
        ApiSpec(ApiKey.PRODUCE, None, (0, 9))  # type: ignore[call-arg]


def test_flags_derive_from_the_registry() -> None:
    assert QUICK_APIS == {ApiKey.API_VERSIONS, ApiKey.METADATA, ApiKey.LIST_OFFSETS, ApiKey.OFFSET_FOR_LEADER_EPOCH,
                          ApiKey.FIND_COORDINATOR, ApiKey.OFFSET_FETCH, ApiKey.DESCRIBE_CONFIGS,
                          ApiKey.DESCRIBE_CLUSTER}
    assert PRE_AUTH_APIS == {ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE}
    assert SPECS[ApiKey.API_VERSIONS].bind is None               # answered by the server itself


def test_routes_bind_what_the_services_offer(tmp_path: Path) -> None:
    full = routes(_services(tmp_path, acls=None, sasl=True))
    offered = {spec.key for spec in REGISTRY if spec.bind is not None}
    scram = {ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, ApiKey.ALTER_USER_SCRAM_CREDENTIALS}
    assert set(full) == offered - scram                           # no SCRAM admin given
    for key, route in full.items():
        assert (route.min_version, route.max_version) == SPECS[key].versions
        assert (route.quick, route.pre_auth) == (SPECS[key].quick, SPECS[key].pre_auth)
    plain = routes(_services(tmp_path))
    assert not {ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE} & set(plain)
    data_only = routes(KafkaServices(_services(tmp_path).env))
    assert ApiKey.JOIN_GROUP not in data_only and ApiKey.PRODUCE in data_only


async def test_authorized_routes_check_each_api_by_its_record(tmp_path: Path) -> None:
    table = routes(_services(tmp_path), authorizer=az.Authz(AclStore(None, super_users=["User:root"])))
    assert table[ApiKey.PRODUCE].handler.func is az.produce       # type: ignore[attr-defined]
    assert table[ApiKey.PRODUCE].quick is False and table[ApiKey.METADATA].quick is True


async def test_api_versions_advertises_exactly_the_bound_routes(tmp_path: Path) -> None:
    server = KafkaServer(routes(_services(tmp_path)), max_frame_bytes=1 << 20)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            host, port = await nursery.start(server.serve, "127.0.0.1", 0)
            async with await trio.open_tcp_stream(host, port) as s:
                await s.send_all(encode_request_frame(APIS[ApiKey.API_VERSIONS], 3, 1, {
                    "client_software_name": "t", "client_software_version": "1"}))
                buf = b""
                while len(buf) < 4 or len(buf) < 4 + int.from_bytes(buf[:4], "big"):
                    buf += await s.receive_some(65536)
                _, advertised = decode_api_versions_any(buf[4:], 3)
            nursery.cancel_scope.cancel()
    keys = {k.api_key for k in advertised.api_keys}
    assert keys == {spec.key for spec in REGISTRY} - PRE_AUTH_APIS - {
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, ApiKey.ALTER_USER_SCRAM_CREDENTIALS} | {ApiKey.API_VERSIONS}
