"""Handlers end to end: KafkaServer + build_routes over a Broker on the in-memory store,
driven by the real kafka-python client (admin, producer, assign()-style consumer) in a
worker thread.  Bounded by trio.fail_after; 127.0.0.1 port 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
from rokka.core.broker import Broker
from rokka.core.config import BrokerConfig
from rokka.core.storage.memory import MemoryStore
from rokka.gateway.kafka import KafkaServer
from rokka.gateway.kafka.apis import KafkaServices, routes
from rokka.gateway.kafka.handlers import KafkaEnv


def _client_session(host: str, port: int) -> dict[str, Any]:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic

    boot = f"{host}:{port}"
    out: dict[str, Any] = {}
    admin = KafkaAdminClient(bootstrap_servers=boot, request_timeout_ms=5000)
    try:
        admin.create_topics([NewTopic("orders", 2, 1)])
        out["topics"] = sorted(admin.list_topics())
    finally:
        admin.close()
    prod = KafkaProducer(bootstrap_servers=boot, enable_idempotence=False, acks=1, linger_ms=0,
                         compression_type="gzip", request_timeout_ms=5000)
    try:
        metas = [prod.send("orders", key=b"k1" if i % 2 else None, value=b"v%d" % i, partition=0,
                           headers=[("h", b"x"), ("bin", b"\xff\x00")]) for i in range(5)]
        out["offsets"] = [m.get(timeout=10).offset for m in metas]
    finally:
        prod.close()
    cons = KafkaConsumer(bootstrap_servers=boot, enable_auto_commit=False, consumer_timeout_ms=3000,
                         request_timeout_ms=5000, fetch_max_wait_ms=200)
    try:
        tp = TopicPartition("orders", 0)
        cons.assign([tp])
        cons.seek_to_beginning(tp)
        got = []
        for msg in cons:
            got.append((msg.offset, msg.key, msg.value, list(msg.headers)))
            if len(got) == 5:
                break
        out["consumed"] = got
        out["end"] = cons.end_offsets([tp])[tp]
    finally:
        cons.close()
    return out


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
async def test_kafka_python_admin_produce_consume(tmp_path: Path) -> None:
    cfg = BrokerConfig(store_path_root_dir=str(tmp_path))
    broker = Broker(cfg, store=MemoryStore(cfg.store_config()))
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            env = KafkaEnv(broker, node_id=0, host="127.0.0.1", port=0)
            server = KafkaServer(routes(KafkaServices(env)), max_frame_bytes=1 << 20)
            host, port = await nursery.start(server.serve, "127.0.0.1", 0)
            env.port = port
            out = await trio.to_thread.run_sync(_client_session, host, port)
            nursery.cancel_scope.cancel()
    assert "orders" in out["topics"]
    assert out["offsets"] == [0, 1, 2, 3, 4]
    assert [c[:3] for c in out["consumed"]] == [
        (0, None, b"v0"), (1, b"k1", b"v1"), (2, None, b"v2"), (3, b"k1", b"v3"), (4, None, b"v4")]
    assert out["consumed"][0][3] == [("h", b"x"), ("bin", b"\xff\x00")]
    assert out["end"] == 5
    assert server.stats.protocol_errors == 0 and server.stats.handler_errors == 0
