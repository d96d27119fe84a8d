"""Helpers for the connector tests: produce with the project's trio client, read a topic back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import trio
from rokka.net.remoting.client import Admin, NamesrvClient, OutMessage, Producer, PullConsumer, RemotingClient


def produce(namesrv: str, topic: str, messages: Sequence[OutMessage], *, batch: int = 128,
            queue: int | None = None) -> None:
    async def go() -> None:
        with trio.fail_after(60):
            async with RemotingClient() as rc:
                p = Producer(rc, NamesrvClient(rc, namesrv), "test_pg")
                for i in range(0, len(messages), batch):
                    await p.send_batch(topic, list(messages[i:i + batch]), queue=queue)
    trio.run(go)


def create_topic(namesrv: str, broker_addrs: Sequence[str], topic: str, queues: int = 4) -> None:
    async def go() -> None:
        with trio.fail_after(30):
            async with RemotingClient() as rc:
                ns = NamesrvClient(rc, namesrv)
                admin = Admin(rc, ns)
                for addr in broker_addrs:
                    await admin.create_topic(addr, topic, read_queue_nums=queues, write_queue_nums=queues)
                while True:
                    route = await ns.get_route(topic)
                    if route is not None and len(route.queue_datas) == len(broker_addrs):
                        return
                    await trio.sleep(0.05)
    trio.run(go)


def group_offsets(namesrv: str, topic: str, group: str) -> dict[Any, int | None]:
    async def go() -> dict[Any, int | None]:
        with trio.fail_after(30):
            async with RemotingClient() as rc:
                c = PullConsumer(rc, NamesrvClient(rc, namesrv), group)
                return {mq: await c.query_offset(mq) for mq in await c.fetch_subscribe_queues(topic)}
    return trio.run(go)


def read_all(spark: Any, namesrv: str, topic: str, **options: str) -> list[Any]:
    reader = spark.read.format("rokka").option("namesrv", namesrv).option("topic", topic)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load().orderBy("broker_name", "queue_id", "queue_offset").collect()


def wait_route(namesrv: str, topic: str, timeout: float = 30.0) -> None:
    """Wait until the name server knows ``topic`` (brokers register new topics asynchronously)."""
    async def go() -> None:
        with trio.fail_after(timeout):
            async with RemotingClient() as rc:
                ns = NamesrvClient(rc, namesrv)
                while await ns.get_route(topic) is None:
                    await trio.sleep(0.05)
    trio.run(go)
