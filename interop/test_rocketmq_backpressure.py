"""Send back-pressure with real clients (issue 27): more concurrent senders than the send queue allows.

``rokka serve`` with SYNC_FLUSH (a send waits for its group commit, so concurrent sends pile up in the
queue) and ``sendThreadPoolQueueCapacity=2``.  Many senders send single messages at once: the broker
answers the surplus SYSTEM_BUSY (``[OVERLOAD]...``), the clients back off and send again, every
message ends up acknowledged exactly once and readable, nothing refused was written, and the
server's peak memory stays small.  Once with rokka's trio client (several connections, many tasks),
once with the RocketMQ C++ client (threads on one producer).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import harness
import pytest
import trio
from rmq_cpp import pull_all, uniq
from rokka.net.remoting.client import NamesrvClient, Producer, PullConsumer, RemotingClient
from rokka.net.remoting.client.remoting import ResponseError

BUSY_CONF = {"flushDiskType": "SYNC_FLUSH", "sendThreadPoolQueueCapacity": "2"}
#: the server's peak resident memory stays below this (a few hundred sends of 1 KiB at most in flight)
PEAK_RSS_LIMIT = 1 << 30


def peak_rss(srv: harness.ServerProcess) -> int:
    assert srv.proc is not None
    for line in Path(f"/proc/{srv.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def busy_lines(srv: harness.ServerProcess) -> int:
    path = srv.stderr_path
    text = path.read_text(errors="replace") if path is not None else ""
    return text.count("rocketmq.send_busy")


async def _flood_trio(namesrv: str, topic: str, connections: int, tasks: int, per_task: int) -> tuple[list[str], int]:
    """``connections`` clients with ``tasks`` senders each; a SYSTEM_BUSY send is sent again after a pause."""
    acked: list[str] = []
    busy = 0

    async def send(producer: Producer, body: str) -> None:
        nonlocal busy
        while True:
            try:
                await producer.send(topic, body.encode() + b"." * 1000)
                acked.append(body)
                return
            except ResponseError as exc:
                assert exc.code == 2, (exc.code, exc.remark)     # SYSTEM_BUSY, nothing else
                assert exc.remark == "[OVERLOAD]system busy, start flow control for a while", exc.remark
                busy += 1
                await trio.sleep(0.05)      # back off, then send the same message again

    async def sender(producer: Producer, name: str) -> None:
        for i in range(per_task):
            await send(producer, f"{name}-{i}")

    async def connection(c: int) -> None:
        async with RemotingClient(timeout_s=30) as rc:
            # retries=0: every SYSTEM_BUSY reaches the sender, which backs off itself
            producer = Producer(rc, NamesrvClient(rc, [namesrv]), f"PG_busy_{c}", send_timeout_s=30, retries=0)
            await send(producer, "warm")      # route and topic before this connection's flood
            async with trio.open_nursery() as nursery:
                for t in range(tasks):
                    nursery.start_soon(sender, producer, f"c{c}t{t}")

    async with trio.open_nursery() as nursery:
        for c in range(connections):
            nursery.start_soon(connection, c)
    return acked, busy


async def _read_all(namesrv: str, topic: str) -> list[str]:
    async with RemotingClient(timeout_s=30) as rc:
        consumer = PullConsumer(rc, NamesrvClient(rc, [namesrv]), "CG_busy_read")
        bodies: list[str] = []
        for mq in await consumer.fetch_subscribe_queues(topic):
            offset = 0
            while True:
                res = await consumer.pull(mq, offset, max_nums=32)
                if not res.messages:
                    break
                bodies += [m.body.rstrip(b".").decode() for m in res.messages]
                offset = res.next_begin_offset
        return bodies


def test_trio_senders_back_off_and_recover(
        configured_rokka: Callable[[dict[str, str], dict[str, str]], harness.ServerProcess]) -> None:
    srv = configured_rokka(BUSY_CONF, {})
    topic = uniq("Busy_trio")

    async def main() -> tuple[list[str], int, list[str]]:
        with trio.fail_after(120):
            acked, busy = await _flood_trio(srv.namesrv, topic, connections=4, tasks=12, per_task=8)
            return acked, busy, await _read_all(srv.namesrv, topic)

    acked, busy, stored = trio.run(main)
    assert busy > 0, "no SYSTEM_BUSY answer: the flood never filled the queue"
    real = [b for b in acked if b != "warm"]
    assert acked.count("warm") == 4 and len(real) == 4 * 12 * 8 and len(set(real)) == len(real)
    # exactly what was acknowledged is stored: a refused send wrote nothing, a retried one is there once
    assert Counter(stored) == Counter(acked)
    assert busy_lines(srv) > 0
    assert peak_rss(srv) < PEAK_RSS_LIMIT


@pytest.mark.usefixtures("need_cpp")
def test_cpp_senders_back_off_and_recover(
        configured_rokka: Callable[[dict[str, str], dict[str, str]], harness.ServerProcess], workdir: Path) -> None:
    srv = configured_rokka(BUSY_CONF, {})
    topic = uniq("Busy_cpp")
    events = harness.run_cpp("busy_producer", {"namesrv": srv.namesrv, "group": uniq("PG"), "topic": topic,
                                               "threads": 24, "per_thread": 10, "max_s": 90},
                             workdir=workdir / "busy-producer", timeout=150)
    res = next(e for e in events if e["event"] == "result")
    assert res["busy"] > 0, f"no SYSTEM_BUSY answer reached the C++ client: {res['other']}"
    assert res["gave_up"] == [] and res["other"] == [], res
    acked = res["acked"]
    assert len(acked) == 1 + 24 * 10 and len(set(acked)) == len(acked)
    got, _ = pull_all(srv.namesrv, workdir, topic)
    assert Counter(m["body"] for m in got) == Counter(acked)
    assert peak_rss(srv) < PEAK_RSS_LIMIT
