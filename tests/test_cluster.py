"""Two-broker cluster: one ``rokka namesrv`` and two ``rokka broker`` processes (issue 3).

What it shows, with real processes on 127.0.0.1 and ports 0:

1. ``rokka admin updateTopic -c DefaultCluster`` creates the topic on both masters and the name
   server's route spans broker-a and broker-b.
2. The project client produces to queues on both brokers and a PullConsumer reads them back from
   both.
3. After ``kill -9`` of broker-b the name server drops it (its connection closes), so the topic's
   route lists only broker-a, and a producer that refreshes its route keeps sending - to broker-a.

Rules: every wait is a bounded poll under ``trio.fail_after`` with a generous timeout; there are
no timing assertions.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from rokka.net.remoting.client import (
    ChannelClosedError,
    ClientError,
    MessageQueue,
    NamesrvClient,
    Producer,
    PullConsumer,
    RemotingClient,
    RequestTimeoutError,
)

from interop import harness

TOPIC = "ClusterTopic"
QUEUES = 2


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[harness.Cluster]:
    c = harness.start_cluster(tmp_path, log_format="plain")
    try:
        yield c
    finally:
        for proc in c.processes():
            print(f"--- {proc.name} stderr tail ---\n{proc.stderr_tail(30)}")
            proc.stop(timeout=15)


async def rokka_admin(namesrv: str, *args: str) -> Any:
    """Run the real ``rokka admin ... --json`` and return its document."""
    res = await trio.run_process([harness.rokka_executable(), "admin", "-n", namesrv, "--json", *args],
                                 capture_stdout=True, capture_stderr=True, check=False)
    assert res.returncode == 0, res.stderr.decode()
    return json.loads(res.stdout)


async def route_brokers(ns: NamesrvClient) -> list[str]:
    route = await ns.get_route(TOPIC)
    if route is None:
        return []
    return sorted(q.broker_name for q in route.queue_datas if route.master_addr(q.broker_name))


async def wait_route(ns: NamesrvClient, want: list[str]) -> None:
    """Poll the name server (it has no change notification) until the route's brokers are ``want``."""
    while True:
        if await route_brokers(ns) == want:
            return
        await trio.sleep(0.1)


async def test_two_brokers_route_produce_consume_and_failover(cluster: harness.Cluster) -> None:
    ns_addr = cluster.namesrv_addr
    with trio.fail_after(120):
        created = await rokka_admin(ns_addr, "updateTopic", "-t", TOPIC, "-c", "DefaultCluster",
                                    "-r", str(QUEUES), "-w", str(QUEUES))
        assert sorted(created["brokers"]) == sorted(b.broker for b in cluster.brokers.values())
        listed = await rokka_admin(ns_addr, "clusterList")
        assert sorted(b["brokerName"] for b in listed["brokers"]) == ["broker-a", "broker-b"]

        async with RemotingClient(timeout_s=5.0) as rc:
            ns = NamesrvClient(rc, ns_addr)
            with trio.fail_after(30):
                await wait_route(ns, ["broker-a", "broker-b"])

            # Produce to every queue of both brokers, then consume them back from both.
            producer = Producer(rc, ns, "cluster-pg", route_ttl_s=0.5)
            sent: dict[MessageQueue, list[bytes]] = {}
            for broker in ("broker-a", "broker-b"):
                for qid in range(QUEUES):
                    mq = MessageQueue(TOPIC, broker, qid)
                    for i in range(3):
                        body = f"{broker}/{qid}/{i}".encode()
                        r = await producer.send(TOPIC, body, queue=mq)
                        assert r.status == "SEND_OK" and r.queue == mq
                        sent.setdefault(mq, []).append(body)
            consumer = PullConsumer(rc, ns, "cluster-cg")
            queues = await consumer.fetch_subscribe_queues(TOPIC)
            assert {q.broker_name for q in queues} == {"broker-a", "broker-b"}
            for mq in queues:
                res = await consumer.pull(mq, 0)
                assert [m.body for m in res.messages] == sent[mq]
            # Round-robin sends spread over both brokers.
            spread = {(await producer.send(TOPIC, b"rr")).queue.broker_name for _ in range(2 * 2 * QUEUES)}
            assert spread == {"broker-a", "broker-b"}

            # kill -9 broker-b: the name server drops it and the route shrinks to broker-a.
            cluster.brokers["broker-b"].kill9()
            with trio.fail_after(60):
                await wait_route(ns, ["broker-a"])
            status = await rokka_admin(ns_addr, "topicRoute", "-t", TOPIC)
            assert [b["brokerName"] for b in status["route"]["brokerDatas"]] == ["broker-a"]

            # Producing keeps working: once the producer's route is refreshed, every send goes
            # to broker-a (sends racing the refresh may fail and are retried here).
            delivered = 0
            with trio.fail_after(60):
                while delivered < 10:
                    try:
                        r = await producer.send(TOPIC, f"after-{delivered}".encode())
                    except (ClientError, RequestTimeoutError, ChannelClosedError):
                        await trio.sleep(0.2)
                        continue
                    assert r.status == "SEND_OK" and r.queue.broker_name == "broker-a"
                    delivered += 1
            _, publish = await producer.route(TOPIC, refresh=True)
            assert {q.broker_name for q in publish} == {"broker-a"}
            found = await rokka_admin(ns_addr, "printMsg", "-t", TOPIC)
            bodies = [m["body"] for m in found["messages"]]
            assert all(f"after-{i}" in bodies for i in range(10))
