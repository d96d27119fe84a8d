"""A ``kill -9`` of the broker in the middle of each flow loses nothing that was acknowledged.

``rokka serve`` runs with ``flushDiskType=SYNC_FLUSH`` (so an acknowledged send is on disk), short
delay levels and a fast transaction check-back.  Each scenario does its flow with rokka's own client
(``rokka.net.remoting.client``; kafka-python for the Kafka offset commit), SIGKILLs the server in the
middle, restarts it on the same ports and data dir, and proves:

* plain sync sends (4 concurrent senders, killed mid-stream): every acknowledged message is there
  exactly once, every stored message is intact and was really sent, queue offsets are dense, and the
  store takes new writes after the crash;
* delayed messages: those already delivered before the crash are not delivered again, those still
  parked are delivered after the restart, each exactly once and never before born time + delay;
* send-back in progress (CONSUMER_SEND_MSG_BACK acknowledged, retry copies parked on their delay):
  each reaches ``%RETRY%<group>`` exactly once, reconsumeTimes 1, after the delay;
* transactions: halves acknowledged but not ended survive; after the restart one is committed by
  END_TRANSACTION, one rolled back, one committed through the broker's check-back; the topic then
  holds exactly the two committed ones;
* consumer offsets: RocketMQ offsets persisted by the broker's periodic flush (5 s, as the Java broker)
  and Kafka OffsetCommit (durable at once) are what the group resumes from.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import harness
import pytest
import trio

LEVELS_S = [1, 2, 4, 6]
CONF = ("flushDiskType=SYNC_FLUSH\n"
        f"messageDelayLevel={' '.join(f'{s}s' for s in LEVELS_S)}\n"
        "transactionTimeOut=1000\ntransactionCheckInterval=1000\n")


@pytest.fixture
def srv(tmp_path: Path) -> Iterator[harness.ServerProcess]:
    server_dir = tmp_path / "server"
    data = server_dir / "data"
    data.mkdir(parents=True)
    conf = server_dir / "broker.conf"
    conf.write_text(CONF)
    base = harness.serve_argv(data, "json")
    server = harness.ServerProcess("rokka-serve", lambda ports: [*base(ports), "-c", str(conf)], server_dir,
                                   data_dir=data).start()
    try:
        yield server
    finally:
        print(f"--- server stderr tail ---\n{server.stderr_tail(40)}")
        server.stop_clean()


def crash(server: harness.ServerProcess) -> None:
    """SIGKILL and start again on the same ports and data dir."""
    server.kill9()
    assert server.exit_codes[-1] == -9
    server.start()


def uniq(prefix: str) -> str:
    import uuid

    return f"{prefix}_{uuid.uuid4().hex[:8]}"


# --------------------------------------------------------------------------- rokka's own client


class Session:
    """One RemotingClient with a name server client, a producer, a pull consumer and admin."""

    def __init__(self, rc: Any, namesrv: str, broker: str, group: str = "crash-cg",
                 pgroup: str = "crash-pg") -> None:
        from rokka.net.remoting.client import Admin, NamesrvClient, Producer, PullConsumer

        self.rc = rc
        self.broker = broker
        self.ns = NamesrvClient(rc, [namesrv])
        self.producer = Producer(rc, self.ns, pgroup, retries=0)
        self.consumer = PullConsumer(rc, self.ns, group)
        self.admin = Admin(rc, self.ns)

    async def create_topic(self, topic: str, queues: int = 4) -> None:
        await self.admin.create_topic(self.broker, topic, read_queue_nums=queues, write_queue_nums=queues)
        await self.wait_route(topic)

    async def wait_route(self, topic: str) -> None:
        while await self.ns.get_route(topic) is None:  # noqa: ASYNC110 - polling the server
            await trio.sleep(0.1)

    async def read_all(self, topic: str) -> list[Any]:
        from rokka.net.remoting.client.tools import pull_range

        await self.wait_route(topic)
        out = []
        for mq in await self.consumer.fetch_subscribe_queues(topic):
            out += [m async for m in pull_range(self.consumer, mq, 0, await self.consumer.max_offset(mq))]
        return out

    async def wait_count(self, topic: str, n: int, within: float) -> list[Any]:
        with trio.fail_after(within):
            while True:
                msgs = await self.read_all(topic)
                if len(msgs) >= n:
                    return msgs
                await trio.sleep(0.2)


def run(server: harness.ServerProcess, flow: Callable[[Session], Awaitable[Any]], timeout: float = 60.0,
        handlers: dict[int, Any] | None = None) -> Any:
    """Run ``flow`` with a fresh client session (bounded)."""
    from rokka.net.remoting.client import RemotingClient

    async def main() -> Any:
        with trio.fail_after(timeout):
            async with RemotingClient(handlers=handlers) as rc:
                return await flow(Session(rc, server.namesrv, server.broker))

    return trio.run(main)


def body_of(m: Any) -> str:
    return m.body.decode("utf-8")


# --------------------------------------------------------------------------- flows


@pytest.mark.timeout(120)
def test_sync_sends_killed_mid_stream(srv: harness.ServerProcess) -> None:
    from rokka.net.remoting.channel import ChannelClosedError
    from rokka.net.remoting.client import ClientError, RequestTimeoutError

    topic = uniq("T_crash_send")
    acked: list[str] = []
    attempted: set[str] = set()

    async def flow(s: Session) -> None:
        await s.create_topic(topic)

        async def sender(k: int) -> None:
            for i in range(100_000):
                body = f"s{k}-{i}-" + "x" * (i % 200)  # varied sizes: a torn tail would show
                attempted.add(body)
                try:
                    r = await s.producer.send(topic, body.encode(), keys=f"k{k}-{i}")
                except (ClientError, RequestTimeoutError, ChannelClosedError, OSError):
                    return
                assert r.status == "SEND_OK"
                acked.append(body)

        async with trio.open_nursery() as nursery:
            for k in range(4):
                nursery.start_soon(sender, k)
            while len(acked) < 400:  # noqa: ASYNC110 - the senders append to a plain list
                await trio.sleep(0.01)
            await trio.to_thread.run_sync(srv.kill9)  # the senders are mid-request

    run(srv, flow)
    srv.start()

    async def check(s: Session) -> list[Any]:
        before = await s.read_all(topic)
        for i in range(8):  # the store appends cleanly after the crash tail
            await s.producer.send(topic, f"after-{i}".encode())
        return before + [m for m in await s.read_all(topic) if body_of(m).startswith("after-")]

    stored = run(srv, check)
    bodies = [body_of(m) for m in stored]
    counts = Counter(bodies)
    assert not [b for b, n in counts.items() if n > 1], "a message is stored twice"
    assert set(acked) <= set(bodies), f"{len(set(acked) - set(bodies))} acknowledged messages lost"
    unexpected = set(bodies) - attempted - {f"after-{i}" for i in range(8)}
    assert not unexpected, f"stored messages nobody sent (torn data?): {sorted(unexpected)[:3]}"
    for m in stored:
        if not body_of(m).startswith("after-"):
            k, i = body_of(m)[1:].split("-")[:2]
            assert m.keys == [f"k{k}-{i}"]
    for q in {m.queue_id for m in stored}:
        offs = sorted(m.queue_offset for m in stored if m.queue_id == q)
        assert offs == list(range(len(offs))), f"queue {q} offsets not dense"
    print(f"sync sends: {len(acked)} acknowledged before the kill, {len(bodies) - 8 - len(set(acked))} more "
          f"stored unacknowledged (in flight), none lost")


@pytest.mark.timeout(120)
def test_delayed_messages_parked_at_the_crash(srv: harness.ServerProcess) -> None:
    topic = uniq("T_crash_delay")
    n = 10

    async def flow(s: Session) -> None:
        await s.create_topic(topic)
        for i in range(n):
            for level in (1, 4):  # 1 s: delivered before the crash; 6 s: still parked at the crash
                r = await s.producer.send(topic, f"L{level}-{i}".encode(), delay_level=level)
                assert r.status == "SEND_OK"
        await s.wait_count(topic, n, within=10)  # the level-1 ones are out

    run(srv, flow)
    crash(srv)
    stored = run(srv, lambda s: s.wait_count(topic, 2 * n, within=30))
    time.sleep(1.5)  # any duplicate delivery would land now
    stored = run(srv, lambda s: s.read_all(topic))
    counts = Counter(body_of(m) for m in stored)
    assert counts == Counter({f"L{level}-{i}": 1 for i in range(n) for level in (1, 4)}), counts
    for m in stored:
        level = int(body_of(m)[1])
        assert m.store_timestamp >= m.born_timestamp + LEVELS_S[level - 1] * 1000, f"{body_of(m)} early"
        assert m.properties.get("DELAY") == str(level)   # kept on delivery, as RocketMQ 4.9.7 does


@pytest.mark.timeout(120)
def test_send_back_in_progress(srv: harness.ServerProcess) -> None:
    from rokka.core.storage.layout import encode_offset_msg_id

    topic, group = uniq("T_crash_retry"), uniq("CG_crash_retry")
    n = 10
    sent_back_at: dict[str, int] = {}
    origin: dict[str, str] = {}

    async def flow(s: Session) -> None:
        await s.create_topic(topic, queues=1)
        for i in range(n):
            await s.producer.send(topic, f"r{i}".encode())
        for m in await s.read_all(topic):  # "consume" and fail every message: send it back
            sent_back_at[body_of(m)] = int(time.time() * 1000)
            origin[body_of(m)] = encode_offset_msg_id(m.store_host, m.commitlog_offset)
            await s.admin.send_msg_back(s.broker, offset=m.commitlog_offset, group=group)

    run(srv, flow)
    crash(srv)  # retry copies are parked on level 3 (4 s), none due yet
    retry_topic = f"%RETRY%{group}"
    run(srv, lambda s: s.wait_count(retry_topic, n, within=30))
    time.sleep(1.5)
    stored = run(srv, lambda s: s.read_all(retry_topic))
    assert Counter(body_of(m) for m in stored) == Counter({f"r{i}": 1 for i in range(n)})
    for m in stored:
        b = body_of(m)
        assert m.reconsume_times == 1
        assert m.properties["RETRY_TOPIC"] == topic and m.properties["ORIGIN_MESSAGE_ID"] == origin[b]
        assert m.store_timestamp >= sent_back_at[b] + LEVELS_S[3 - 1] * 1000, f"{b} retried early"


@pytest.mark.timeout(120)
def test_transaction_halves_survive_then_end(srv: harness.ServerProcess) -> None:
    from rokka.core.model import PROP_TRAN_MSG, TRANSACTION_COMMIT_TYPE, TRANSACTION_MASK, TRANSACTION_ROLLBACK_TYPE
    from rokka.core.storage.layout import decode_offset_msg_id
    from rokka.net.remoting.codec.codes import RequestCode
    from rokka.net.remoting.codec.headers import to_ext
    from rokka.net.remoting.codec.remoting import RemotingCommand

    topic, pgroup = uniq("T_crash_txn"), uniq("PG_crash_txn")
    halves: dict[str, Any] = {}

    async def send_halves(s: Session) -> None:
        await s.create_topic(topic, queues=1)
        s.producer.group = pgroup
        for name in ("commit", "rollback", "check"):
            halves[name] = await s.producer.send(topic, name.encode(), queue=0, sys_flag=4,
                                                 properties={PROP_TRAN_MSG: "true", "PGROUP": pgroup})
        assert await s.read_all(topic) == []  # halves are invisible

    run(srv, send_halves)
    crash(srv)
    checks: list[str] = []

    async def on_check(channel: Any, req: RemotingCommand) -> None:
        msg_id = req.ext_fields["msgId"]
        checks.append(msg_id)
        if msg_id == halves["check"].msg_id:
            await channel.send_oneway(RemotingCommand(RequestCode.END_TRANSACTION, ext_fields=to_ext(
                producerGroup=pgroup, tranStateTableOffset=req.ext_fields["tranStateTableOffset"],
                commitLogOffset=req.ext_fields["commitLogOffset"], commitOrRollback=TRANSACTION_COMMIT_TYPE,
                msgId=msg_id, transactionId=req.ext_fields.get("transactionId"), fromTransactionCheck=True)))

    async def end_and_check(s: Session) -> list[Any]:
        for name, decision in (("commit", TRANSACTION_COMMIT_TYPE), ("rollback", TRANSACTION_ROLLBACK_TYPE)):
            res = halves[name]
            resp = await s.admin.end_transaction(
                s.broker, producer_group=pgroup, tran_state_table_offset=res.queue_offset,
                commit_log_offset=decode_offset_msg_id(res.offset_msg_id)[2], commit_or_rollback=decision,
                msg_id=res.msg_id, oneway=False)
            assert resp is not None and resp.code == 0, (name, resp)
        s.producer.group = pgroup
        await s.producer.route(topic)  # the heartbeat goes to the brokers of the cached routes
        await s.producer.heartbeat("crash-txn-producer")  # a live producer: the check-back can ask it
        got = await s.wait_count(topic, 2, within=20)
        await trio.sleep(2.5)  # two more check rounds: nothing else may appear
        return got + [m for m in await s.read_all(topic) if m not in got]

    stored = run(srv, end_and_check, handlers={RequestCode.CHECK_TRANSACTION_STATE: on_check})
    assert sorted(body_of(m) for m in stored) == ["check", "commit"]
    assert halves["check"].msg_id in checks
    for m in stored:
        assert m.sysflag & TRANSACTION_MASK == TRANSACTION_COMMIT_TYPE
        assert m.properties.get(PROP_TRAN_MSG) == "true"   # kept on the committed copy, as RocketMQ 4.9.7


@pytest.mark.timeout(120)
def test_committed_offsets_resume(srv: harness.ServerProcess) -> None:
    from rokka.net.remoting.client import MessageQueue

    topic, group = uniq("T_crash_off"), uniq("CG_crash_off")
    committed = {0: 3, 1: 5, 2: 7, 3: 11}

    async def commit(s: Session) -> None:
        await s.create_topic(topic)
        for i in range(40):
            await s.producer.send(topic, f"o{i}".encode(), queue=i % 4)
        s.consumer.group = group
        for q, off in committed.items():
            await s.consumer.update_offset(MessageQueue(topic, "broker-a", q), off)

    run(srv, commit)
    time.sleep(6.0)  # the broker persists RocketMQ offsets every 5 s (as Java does)
    kafka_group = uniq("KG_crash_off")
    kafka_committed = {0: 2, 1: 4, 2: 6, 3: 8}
    _kafka_commit(srv.kafka, topic, kafka_group, kafka_committed)  # durable at once: kill right after
    crash(srv)

    async def query(s: Session) -> dict[int, int | None]:
        s.consumer.group = group
        return {q: await s.consumer.query_offset(MessageQueue(topic, "broker-a", q)) for q in committed}

    assert run(srv, query) == committed
    assert _kafka_committed(srv.kafka, topic, kafka_group) == kafka_committed


def _kafka_commit(bootstrap: str, topic: str, group: str, offsets: dict[int, int]) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                      request_timeout_ms=20000)
    try:
        c.assign([TopicPartition(topic, p) for p in offsets])
        c.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})
    finally:
        c.close(autocommit=False)


def _kafka_committed(bootstrap: str, topic: str, group: str) -> dict[int, int | None]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                      request_timeout_ms=20000)
    try:
        return {p: c.committed(TopicPartition(topic, p)) for p in range(4)}
    finally:
        c.close(autocommit=False)
