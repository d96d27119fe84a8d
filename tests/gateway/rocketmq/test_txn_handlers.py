"""Delay, transactions and SQL92 over the remoting protocol: NamesrvServer + BrokerRole on loopback.

Rules: ports 0 on 127.0.0.1, a tmp_path store, the project's own client
library as the peer (no mocks), every test bounded by ``trio.fail_after``.
Small delay levels ("1s 2s") and a fast check loop keep the tests short;
the only time assertion is the correctness rule "never delivered early".
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import rokka.gateway.runtime as runtime  # noqa: E402
import trio
from rokka.core.config import BrokerConfig
from rokka.core.model import PROP_REAL_TOPIC, PROP_TRAN_MSG, TRANSACTION_COMMIT_TYPE, TRANSACTION_MASK
from rokka.core.storage.layout import decode_offset_msg_id
from rokka.gateway.namesrv.server import NamesrvServer
from rokka.net.remoting.channel import Channel
from rokka.net.remoting.client import Admin, MessageQueue, NamesrvClient, Producer, PullConsumer, RemotingClient
from rokka.net.remoting.client.consumer import decode_messages
from rokka.net.remoting.codec.codes import RequestCode, ResponseCode
from rokka.net.remoting.codec.headers import to_ext
from rokka.net.remoting.codec.remoting import RemotingCommand

GROUP = "txn-pg"


async def start_stack(nursery: trio.Nursery, root: Path, ns_addr: str | None = None) -> tuple[str, Any]:
    if ns_addr is None:
        ns = NamesrvServer()
        host, port = await nursery.start(ns.serve, "127.0.0.1", 0)
        ns_addr = f"{host}:{port}"
    cfg = BrokerConfig(listen_port=0, kafka_listen_port=0, store_path_root_dir=str(root),
                       namesrv_addr=ns_addr, message_delay_level="1s 2s", enable_property_filter=True,
                       transaction_timeout=300, transaction_check_interval=200)
    role = runtime.BrokerRole(cfg)
    await nursery.start(role.run)
    return ns_addr, role


def addr_of(role: Any) -> str:
    return f"{role.broker_addr[0]}:{role.broker_addr[1]}"


async def wait_route(ns: NamesrvClient, admin: Admin, broker_addr: str, topic: str) -> None:
    await admin.create_topic(broker_addr, topic, read_queue_nums=1, write_queue_nums=1)
    while await ns.get_route(topic) is None:  # noqa: ASYNC110 - polling the name server
        await trio.sleep(0.05)


@asynccontextmanager
async def routed_stack(root: Path, topic: str) -> AsyncIterator[tuple[str, str, Any, RemotingClient, NamesrvClient]]:
    """A name server and broker (``start_stack``) with ``topic`` created and routed, all bounded by 30 s:
    (name server address, broker address, BrokerRole, client, name server client)."""
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            ns_addr, role = await start_stack(nursery, root)
            broker = addr_of(role)
            async with RemotingClient() as rc:
                ns = NamesrvClient(rc, [ns_addr])
                await wait_route(ns, Admin(rc, ns), broker, topic)
                yield ns_addr, broker, role, rc, ns
            nursery.cancel_scope.cancel()


async def pull_all(consumer: PullConsumer, mq: MessageQueue, *, want: int,
                   suspend_ms: int = 3000) -> list[Any]:
    out: list[Any] = []
    offset = 0
    while len(out) < want:
        res = await consumer.pull(mq, offset, suspend_ms=suspend_ms)
        out.extend(res.messages)
        offset = res.next_begin_offset
    return out


async def test_delayed_message_never_early_and_survives_restart(tmp_path: Path) -> None:
    with trio.fail_after(40):
        async with trio.open_nursery() as nursery:
            ns_addr, role = await start_stack(nursery, tmp_path)
            async with RemotingClient() as rc:
                ns = NamesrvClient(rc, [ns_addr])
                admin = Admin(rc, ns)
                await wait_route(ns, admin, addr_of(role), "DT")
                producer = Producer(rc, ns, "dpg")
                r1 = await producer.send("DT", b"d1", tags="A", delay_level=1, queue=0)
                r2 = await producer.send("DT", b"d2", tags="A", delay_level=2, queue=0)
                parked1 = await admin.view_message(r1.offset_msg_id)
                parked2 = await admin.view_message(r2.offset_msg_id)
                assert parked1.topic == "SCHEDULE_TOPIC_XXXX" and parked2.queue_id == 1
                consumer = PullConsumer(rc, ns, "dcg")
                mq = MessageQueue("DT", r1.queue.broker_name, 0)
                [m1] = await pull_all(consumer, mq, want=1)
                assert m1.body == b"d1" and m1.store_timestamp >= parked1.store_timestamp + 1000
                assert m1.properties["DELAY"] == "1" and m1.tags == "A"   # kept, as RocketMQ 4.9.7
                await role.shutdown()  # d2 is still parked
            nursery.cancel_scope.cancel()
        async with trio.open_nursery() as nursery:
            _, role = await start_stack(nursery, tmp_path, ns_addr=None)
            async with RemotingClient() as rc:
                ch_addr = addr_of(role)
                ext = to_ext(consumerGroup="dcg", topic="DT", queueId=0, queueOffset=1, maxMsgNums=32,
                             sysFlag=0x4 | 0x2, commitOffset=0, suspendTimeoutMillis=5000, subscription="*",
                             subVersion=0, expressionType="TAG")
                msgs: list[Any] = []
                while not msgs:
                    req = RemotingCommand(RequestCode.PULL_MESSAGE, ext_fields=ext)
                    resp = await rc.invoke(ch_addr, req, 10)
                    if resp.code == ResponseCode.SUCCESS:
                        msgs = list(decode_messages(resp.body))
                assert [m.body for m in msgs] == [b"d2"]
                assert msgs[0].store_timestamp >= parked2.store_timestamp + 2000
                await trio.sleep(0.3)
                assert role.broker.store.max_offset("DT", 0) == 2  # delivered once
                await role.shutdown()
            nursery.cancel_scope.cancel()


class TxnProducer:
    """A transactional producer: its own connection, answers CHECK_TRANSACTION_STATE from ``decisions``."""

    def __init__(self, name: str, decisions: dict[str, int]) -> None:
        self.name = name
        self.decisions = decisions
        self.checks: list[RemotingCommand] = []
        self.checked = trio.Event()

    async def on_check(self, channel: Channel, req: RemotingCommand) -> None:
        self.checks.append(req)
        msg_id = req.ext_fields["msgId"]
        decision = self.decisions.get(msg_id)
        if decision is not None:
            await channel.send_oneway(RemotingCommand(RequestCode.END_TRANSACTION, ext_fields=to_ext(
                producerGroup=GROUP, tranStateTableOffset=req.ext_fields["tranStateTableOffset"],
                commitLogOffset=req.ext_fields["commitLogOffset"], commitOrRollback=decision, msgId=msg_id,
                transactionId=req.ext_fields.get("transactionId"), fromTransactionCheck=True)))
        self.checked.set()
        return None


async def send_half(producer: Producer, body: bytes, *, sys_flag: int = 4) -> Any:
    return await producer.send("TT", body, properties={PROP_TRAN_MSG: "true", "PGROUP": GROUP},
                               queue=0, sys_flag=sys_flag)


async def end_tx(admin: Admin, addr: str, res: Any, decision: int) -> None:
    _, _, clog = decode_offset_msg_id(res.offset_msg_id)
    await admin.end_transaction(addr, producer_group=GROUP, tran_state_table_offset=res.queue_offset,
                                commit_log_offset=clog, commit_or_rollback=decision, msg_id=res.msg_id)


async def test_transactions_commit_rollback_check_and_failover(tmp_path: Path) -> None:
    decisions: dict[str, int] = {}
    first = TxnProducer("A", {})  # is asked, never answers, then dies
    second = TxnProducer("B", decisions)
    with trio.fail_after(40):
        async with trio.open_nursery() as nursery:
            ns_addr, role = await start_stack(nursery, tmp_path)
            addr = addr_of(role)
            check_code = RequestCode.CHECK_TRANSACTION_STATE
            async with RemotingClient(handlers={check_code: second.on_check}) as rc_b:
                ns_b = NamesrvClient(rc_b, [ns_addr])
                admin = Admin(rc_b, ns_b)
                await wait_route(ns_b, admin, addr, "TT")
                prod_b = Producer(rc_b, ns_b, GROUP)
                await prod_b.route("TT")
                async with RemotingClient(handlers={check_code: first.on_check}) as rc_a:
                    prod_a = Producer(rc_a, NamesrvClient(rc_a, [ns_addr]), GROUP)
                    committed = await send_half(prod_a, b"commit-me")
                    rolled = await send_half(prod_a, b"roll-me", sys_flag=0)  # C++ style: TRAN_MSG only
                    unknown = await send_half(prod_a, b"ask-me")
                    orphan = await send_half(prod_a, b"orphan")
                    assert role.broker.store.max_offset("TT", 0) == 0
                    await end_tx(admin, addr, committed, TRANSACTION_COMMIT_TYPE)
                    await end_tx(admin, addr, rolled, 12)
                    await end_tx(admin, addr, unknown, 0)
                    decisions[unknown.msg_id] = TRANSACTION_COMMIT_TYPE
                    decisions[orphan.msg_id] = TRANSACTION_COMMIT_TYPE
                    await prod_a.heartbeat("client-A")
                    await first.checked.wait()  # A is asked about at least one half ...
                # ... and then A is gone (connection closed); B joins the group and answers.
                assert first.checks and not second.checks
                await prod_b.heartbeat("client-B")
                consumer = PullConsumer(rc_b, ns_b, "tcg")
                got = await pull_all(consumer, MessageQueue("TT", committed.queue.broker_name, 0), want=3)
                assert sorted(m.body for m in got) == [b"ask-me", b"commit-me", b"orphan"]
                for m in got:
                    assert m.sysflag & TRANSACTION_MASK == TRANSACTION_COMMIT_TYPE
                    # kept on the committed copy, as RocketMQ 4.9.7's EndTransactionProcessor
                    assert m.properties[PROP_TRAN_MSG] == "true" and m.properties[PROP_REAL_TOPIC] == "TT"
                check = second.checks[0]
                [in_body] = decode_messages(check.body)
                assert in_body.topic == "TT" and in_body.queue_id == 0
                assert check.ext_fields["tranStateTableOffset"] == str(in_body.queue_offset)
                await trio.sleep(0.5)
                assert role.broker.store.max_offset("TT", 0) == 3  # rolled back one never appears
                stats = role.broker.transactions.statistics()
                assert stats.committed == 3 and stats.rolled_back == 1
                await role.shutdown()
            nursery.cancel_scope.cancel()


async def pull_sql(rc: RemotingClient, addr: str, expr: str, offset: int) -> RemotingCommand:
    ext = to_ext(consumerGroup="sqlcg", topic="ST", queueId=0, queueOffset=offset, maxMsgNums=32,
                 sysFlag=0x4, commitOffset=0, suspendTimeoutMillis=0, subscription=expr, subVersion=0,
                 expressionType="SQL92")
    return await rc.invoke(addr, RemotingCommand(RequestCode.PULL_MESSAGE, ext_fields=ext), 5)


async def test_sql92_pull_filters_and_rejects_bad_expressions(tmp_path: Path) -> None:
    async with routed_stack(tmp_path, "ST") as (ns_addr, addr, role, rc, ns):
        producer = Producer(rc, ns, "spg")
        for i in range(6):
            await producer.send("ST", f"m{i}".encode(), tags="even" if i % 2 == 0 else "odd",
                                properties={"a": str(i)} if i != 5 else {}, queue=0)
        bodies: list[bytes] = []
        offset = 0
        while offset < 6:
            resp = await pull_sql(rc, addr, "a >= 2 AND TAGS = 'even'", offset)
            assert resp.code in (ResponseCode.SUCCESS, ResponseCode.PULL_RETRY_IMMEDIATELY)
            bodies += [m.body for m in decode_messages(resp.body)] if resp.code == 0 else []
            offset = int(resp.ext_fields["nextBeginOffset"])
        assert bodies == [b"m2", b"m4"]
        bad = await pull_sql(rc, addr, "a >", 0)
        assert bad.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        assert "Invalid MessageSelector" in (bad.remark or "")
        await role.shutdown()
