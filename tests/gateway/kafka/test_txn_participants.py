"""The share requests between brokers (``rokka.gateway.kafka.txn.participants``).

A real ``KafkaTxnCoordinator`` on a tmp_path store answers OPEN_SHARE / END_SHARE through the
handlers the runtime registers; the ACL wrapper lets only the brokers' own account through.
"""

from __future__ import annotations

import json
from pathlib import Path

import trio
from rokka.core.broker import Broker
from rokka.core.config import BrokerConfig
from rokka.core.storage.engine import DiskStore
from rokka.gateway.kafka.cluster import ClusterView, KafkaNode
from rokka.gateway.kafka.producers.state import ProducerStateManager
from rokka.gateway.kafka.txn.coordinator import KafkaTxnCoordinator
from rokka.gateway.kafka.txn.participants import END_SHARE, OPEN_SHARE, QUERY_SHARE, brokers_only, share_handlers
from rokka.gateway.rocketmq.acl import ACCESS_KEY, SIGNATURE, PlainAcl, sign
from rokka.net.remoting.codec.codes import ResponseCode
from rokka.net.remoting.codec.remoting import RemotingCommand


class Peer:
    peer = ("10.1.2.3", 4000)


def request(code: int, body: dict[str, object], key: str | None = None, secret: str = "") -> RemotingCommand:
    raw = json.dumps(body).encode()
    ext: dict[str, str] = {}
    if key is not None:
        ext[ACCESS_KEY] = key
        ext[SIGNATURE] = sign(ext, raw, secret)
    return RemotingCommand(code, ext_fields=ext, body=raw)


def coordinator(root: Path) -> tuple[Broker, KafkaTxnCoordinator, ClusterView]:
    cfg = BrokerConfig(store_path_root_dir=str(root))
    broker = Broker(cfg, store=DiskStore(cfg.store_config()).open())
    broker.topics.ensure("T", 2)
    txns = KafkaTxnCoordinator(broker, ProducerStateManager(root / "config"), root / "config")
    view = ClusterView("broker-1", KafkaNode(7, "127.0.0.1", 9092), "127.0.0.1:10911",
                       lambda t: (tc.read_queue_nums or None) if (tc := broker.topics.get(t)) else None)
    return broker, txns, view


async def test_open_and_end_a_share_through_the_handlers(tmp_path: Path) -> None:
    broker, txns, view = coordinator(tmp_path)
    handlers = share_handlers(txns, view)
    with trio.fail_after(10):
        opened = await handlers[OPEN_SHARE](Peer(), request(OPEN_SHARE, {
            "tid": "t", "pid": 5, "epoch": 0, "timeout": 60000, "partitions": [["T", 1]], "groups": []}))
        assert opened.code == ResponseCode.SUCCESS
        assert txns.check_produce(5, 0, "T", 1).value == "OK"
        bad = await handlers[OPEN_SHARE](Peer(), RemotingCommand(OPEN_SHARE, ext_fields={}, body=b"{"))
        assert bad.code == ResponseCode.SYSTEM_ERROR
        ended = await handlers[END_SHARE](Peer(), request(END_SHARE, {"tid": "t", "pid": 5, "epoch": 0,
                                                                      "commit": True}))
        assert ended.code == ResponseCode.SUCCESS and txns.shares() == []
        again = await handlers[END_SHARE](Peer(), request(END_SHARE, {"tid": "t", "pid": 5, "epoch": 0,
                                                                      "commit": True}))
        assert again.code == ResponseCode.SUCCESS      # idempotent
        asked = await handlers[QUERY_SHARE](Peer(), request(QUERY_SHARE, {"tid": "t", "pid": 5, "epoch": 0}))
        assert asked.code == ResponseCode.SUCCESS and json.loads(asked.body) == {"open": False}
    broker.close()


async def test_only_the_brokers_account_may_open_a_share(tmp_path: Path) -> None:
    acl = PlainAcl.from_document({"accounts": [
        {"accessKey": "rocketmq2", "secretKey": "brokers-secret", "admin": True},
        {"accessKey": "alice", "secretKey": "alice-secret", "defaultTopicPerm": "PUB|SUB"}]}, tmp_path / "acl.yml")
    broker, txns, view = coordinator(tmp_path)
    handler = brokers_only(acl, share_handlers(txns, view)[OPEN_SHARE])
    body = {"tid": "t", "pid": 5, "epoch": 0, "timeout": 60000, "partitions": [["T", 0]], "groups": []}
    with trio.fail_after(10):
        alice = await handler(Peer(), request(OPEN_SHARE, body, "alice", "alice-secret"))
        assert alice is not None and alice.code == ResponseCode.SYSTEM_ERROR and txns.shares() == []
        nobody = await handler(Peer(), request(OPEN_SHARE, body))
        assert nobody is not None and nobody.code == ResponseCode.SYSTEM_ERROR
        forged = await handler(Peer(), request(OPEN_SHARE, body, "rocketmq2", "wrong"))
        assert forged is not None and forged.code == ResponseCode.SYSTEM_ERROR
        brokers = await handler(Peer(), request(OPEN_SHARE, body, "rocketmq2", "brokers-secret"))
        assert brokers is not None and brokers.code == ResponseCode.SUCCESS and len(txns.shares()) == 1
    broker.close()
