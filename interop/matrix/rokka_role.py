"""rokka's own RocketMQ client (``rokka.net.remoting.client``) roles of the interop matrix (see ``_role``).

argv: ``rokka_role.py <producer|consumer>``.
Producer params: namesrv, group.  One ``RemotingClient`` lives for the whole process (so a broker
restart between commands exercises reconnection).  ``txn`` jobs send half messages
(TRAN_MSG + PGROUP, sysFlag PREPARED) and then END_TRANSACTION commit (8) or rollback (12) through
``Admin.end_transaction``.
Consumer params: namesrv, group, jobs, timeout_s, linger_s, commit: a ``PullConsumer`` that
heartbeats its subscriptions (so the group is live on the RocketMQ protocol while it reads), starts
every queue at the group's committed offset (0 when none), long-polls until the counts are reached,
commits (UPDATE_CONSUMER_OFFSET) and unregisters.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import trio
from _role import Counts, emit, finish, read_params
from rokka.core.model import PROP_PGROUP, PROP_TRAN_MSG, TRANSACTION_PREPARED_TYPE
from rokka.core.storage.layout import decode_offset_msg_id
from rokka.net.remoting.client import (
    TRANSACTION_COMMIT,
    TRANSACTION_ROLLBACK,
    Admin,
    MessageQueue,
    NamesrvClient,
    OutMessage,
    Producer,
    PullConsumer,
    RemotingClient,
)


async def produce_job(prod: Producer, admin: Admin, job: dict[str, Any]) -> dict[str, Any]:
    txn = job.get("txn")
    acked, err = 0, None
    for spec in job["messages"]:
        props = {k: v for k, v in spec["headers"]}
        if txn:
            props.update({PROP_TRAN_MSG: "true", PROP_PGROUP: prod.group})
        msg = OutMessage(spec["value"].encode(), spec.get("tag"), spec.get("key"), props,
                         delay_level=int(spec.get("delay") or 0))
        try:
            with trio.fail_after(30):
                res = await prod.send(job["topic"], msg, sys_flag=TRANSACTION_PREPARED_TYPE if txn else 0)
                if txn:
                    route, _ = await prod.route(job["topic"])
                    addr = route.master_addr(res.queue.broker_name)
                    assert addr is not None
                    resp = await admin.end_transaction(
                        addr, producer_group=prod.group, tran_state_table_offset=res.queue_offset,
                        commit_log_offset=decode_offset_msg_id(res.offset_msg_id)[2],
                        commit_or_rollback=TRANSACTION_COMMIT if txn == "commit" else TRANSACTION_ROLLBACK,
                        msg_id=res.msg_id, oneway=False)
                    if resp is not None and resp.code != 0:
                        raise RuntimeError(f"END_TRANSACTION answered {resp.code} {resp.remark}")
            if res.status == "SEND_OK":
                acked += 1
            else:
                err = err or res.status
        except Exception as exc:  # noqa: BLE001
            err = err or repr(exc)
    return {"acked": acked, "error": err}


async def producer(p: dict[str, Any]) -> None:
    async with RemotingClient() as rc:
        ns = NamesrvClient(rc, [p["namesrv"]])
        prod = Producer(rc, ns, p["group"], retries=4)
        admin = Admin(rc, ns)
        emit("started")
        while True:
            line = await trio.to_thread.run_sync(sys.stdin.readline)
            if not line:
                break
            if not line.strip():
                continue
            cmd = json.loads(line)
            results = [await produce_job(prod, admin, job) for job in cmd["jobs"]]
            emit("produced", seq=cmd.get("seq"), results=results)


async def consumer(p: dict[str, Any]) -> None:
    async with RemotingClient() as rc:
        ns = NamesrvClient(rc, [p["namesrv"]])
        c = PullConsumer(rc, ns, p["group"], client_id=f"matrix@{p['group']}")
        subs = {j["read"]: j.get("expression") or "*" for j in p["jobs"]}
        await c.heartbeat(subs, consume_type="CONSUME_ACTIVELY",
                          consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        counts = Counts(p["jobs"], p["timeout_s"], p["linger_s"])
        props = sorted({k for j in p["jobs"] for k in j.get("props") or []})
        positions: dict[MessageQueue, int] = {}
        for topic in subs:
            for mq in await c.fetch_subscribe_queues(topic):
                positions[mq] = (await c.query_offset(mq)) or 0
        while not counts.done():
            for mq in sorted(positions):
                res = await c.pull(mq, positions[mq], expression=subs[mq.topic], suspend_ms=200)
                positions[mq] = res.next_begin_offset
                for m in res.messages:
                    counts.add(mq.topic)
                    emit("msg", read=mq.topic, value=m.body.decode(), key=m.properties.get("KEYS"),
                         tags=m.tags, props={k: m.properties.get(k) for k in props}, born_ts=m.born_timestamp,
                         store_ts=m.store_timestamp, queue_id=mq.queue_id, offset=m.queue_offset)
        if p.get("commit"):
            for mq, off in positions.items():
                await c.update_offset(mq, off)
        await c.unregister()


def main() -> None:
    role = sys.argv[1]
    params = read_params()
    try:
        trio.run({"producer": producer, "consumer": consumer}[role], params)
    except Exception as exc:  # noqa: BLE001
        emit("error", error=repr(exc))
        finish(1)
    emit("done", at=time.time())
    finish(0)


if __name__ == "__main__":
    main()
