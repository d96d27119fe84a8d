"""BrokerCollector over a Broker on the in-memory store, and MetricsServer's HTTP answers (h11 both
ways: our server on a real socket, h11 as the client's parser)."""

from __future__ import annotations

from pathlib import Path

import h11
import trio
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from rokka.core.broker import Broker
from rokka.core.config import BrokerConfig
from rokka.core.model import Message
from rokka.core.storage.memory import MemoryStore
from rokka.gateway.metrics import BrokerCollector, MetricsServer, registry_for


def _broker(tmp_path: Path) -> Broker:
    cfg = BrokerConfig(store_path_root_dir=str(tmp_path))
    return Broker(cfg, store=MemoryStore(cfg.store_config()))


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k in ("topic", "consumer_group")))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_lag_counts_from_the_queue_minimum(tmp_path: Path) -> None:
    b = _broker(tmp_path)
    b.topics.ensure("T", 2)
    b.append([Message(topic="T", queue_id=q, body=b"x") for q in (0, 1) for _ in range(20)])
    b.offsets.commit("g", "T", 0, 2)        # older than the min offset set below: lag from the minimum
    b.offsets.commit("g", "T", 1, 15)
    b.offsets.commit("h", "T", 1, -1)       # a deleted (forwarded -1) commit is not lag
    b.store.set_min_offset("T", 0, 10)
    got = _samples(generate_latest(registry_for(BrokerCollector(b))).decode())
    assert got[("rocketmq_messages_in_total", (("topic", "T"),))] == 40
    assert got[("rocketmq_consumer_lag_messages", (("consumer_group", "g"), ("topic", "T")))] == 10 + 5
    assert got[("rocketmq_consumer_lag_messages", (("consumer_group", "h"), ("topic", "T")))] == 0
    assert got[("rocketmq_consumer_group_number", ())] == 2


async def test_http_answers(tmp_path: Path) -> None:
    server = MetricsServer(registry_for(BrokerCollector(_broker(tmp_path))))

    async def ask(host: str, port: int, raw: bytes) -> tuple[int, bytes]:
        stream = await trio.open_tcp_stream(host, port)
        await stream.send_all(raw)
        client = h11.Connection(h11.CLIENT)
        client.send(h11.Request(method="GET", target="/", headers=[("Host", "x")]))   # parser state only
        status, body = 0, b""
        while True:
            event = client.next_event()
            if event is h11.NEED_DATA:
                client.receive_data(await stream.receive_some(65536))
            elif isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                await stream.aclose()
                return status, body

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            host, port = await nursery.start(server.serve, "127.0.0.1", 0)
            status, body = await ask(host, port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            assert status == 200 and b"rocketmq_storage_size" in body
            assert (await ask(host, port, b"GET /other HTTP/1.1\r\nHost: x\r\n\r\n"))[0] == 404
            garbage = await trio.open_tcp_stream(host, port)      # not HTTP: closed without an answer
            await garbage.send_all(b"\x00\x01\x02 nonsense\r\n\r\n")
            assert await garbage.receive_some(100) == b""
            nursery.cancel_scope.cancel()
