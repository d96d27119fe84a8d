"""RocketMQ C++ client: orderly consumption across a rebalance.

One orderly push consumer (listener registered with ``RegisterMessageCallbackOrderly``, 40 ms per
message so a backlog is in flight) consumes a topic fed by an orderly producer (queue = arg % 4); a
second consumer of the group joins mid-stream, then the first leaves.  Per queue:

* each consumer sees the queue's sequence numbers strictly increasing;
* the two consumers never hold the queue at the same time: every delivery by one consumer ends before
  the other consumer's next delivery on that queue starts (the broker's LOCK_BATCH_MQ lock is what
  keeps the new owner waiting until the old one released it);
* across the hand-overs the merged order (by delivery time) never skips a sequence number; a new
  owner may re-deliver what the old owner consumed after its last offset commit (at-least-once), but
  only as a contiguous replay, so the order the application sees per queue is never violated.

C++ 1.2.x client bug worked around here: ``Rebalance::unlockAll`` (run at shutdown) builds its
per-broker queue list but forgets the *first* queue of each broker, so a leaving orderly consumer
never unlocks that queue; the broker (like Java's) then keeps it locked until the lock expires (60 s),
the new owner spins on LOCK_BATCH_MQ meanwhile, and in our runs it did not resume that queue even
after getting the lock ("get timed_mutex timeout").  The first queue in the client's table is the
smallest (topic, broker, queue id); ``%RETRY%<group>`` sorts before the topic, so the group's retry
topic is created before the consumers start (a heartbeat of rokka's own client) and c1 is made the
smaller client id, which gives it the retry queue: the queue its shutdown forgets is that one.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import harness
import pytest
from rmq_cpp import real, send, uniq, wait_consuming

pytestmark = pytest.mark.usefixtures("need_cpp")

QUEUES = 4
_BODY = re.compile(r"^q(\d+)-s(\d+)$")


def prepare_retry_topic(srv: harness.ServerProcess, group: str, topic: str) -> None:
    """A consumer heartbeat of rokka's own client creates %RETRY%<group>; then that client leaves."""
    import trio
    from rokka.net.remoting.client import NamesrvClient, PullConsumer, RemotingClient

    async def run() -> None:
        with trio.fail_after(30):
            async with RemotingClient() as rc:
                ns = NamesrvClient(rc, [srv.namesrv])
                pc = PullConsumer(rc, ns, group, client_id="rokka-setup@prepare")
                await pc.heartbeat({topic: "*"}, consume_type="CONSUME_PASSIVELY")
                await pc.unregister()
                while await ns.get_route(f"%RETRY%{group}") is None:  # noqa: ASYNC110 - polling
                    await trio.sleep(0.1)

    trio.run(run)


def start_orderly(ns: str, workdir: Path, name: str, group: str, topic: str) -> harness.JsonLinesProcess:
    params = {"namesrv": ns, "group": group, "topic": topic, "orderly": True, "sleep_ms": 40,
              "instance": name}
    p = harness.start_cpp("ffi_consumer", params, name=name, workdir=workdir / name)
    p.wait_event("started", timeout=30)
    return p


def send_orderly(ns: str, workdir: Path, topic: str, seqs: range) -> None:
    msgs = [{"topic": topic, "body": f"q{q}-s{s}", "keys": f"q{q}", "arg": q}
            for s in seqs for q in range(QUEUES)]
    sent = send(ns, workdir, "orderly", msgs)
    assert len(sent) == len(msgs) and all(e["status"] == 0 for e in sent)


def seen(consumers: list[harness.JsonLinesProcess]) -> set[str]:
    return {m["body"] for c in consumers for m in real(c.of("msg"))}


def wait_all(consumers: list[harness.JsonLinesProcess], seqs: range, timeout: float, what: str) -> None:
    want = {f"q{q}-s{s}" for q in range(QUEUES) for s in seqs}
    try:
        harness.wait_until(lambda: want <= seen(consumers), timeout, what, interval=0.3)
    except harness.HarnessError as exc:
        missing = sorted(want - seen(consumers), key=lambda b: tuple(map(int, b[1:].split("-s"))))
        per_q = {q: [b for b in missing if b.startswith(f"q{q}-")] for q in range(QUEUES)}
        detail = {q: (len(v), v[:2]) for q, v in per_q.items()}
        raise harness.HarnessError(f"{exc}: missing per queue {detail}") from None


def per_queue(consumers: list[harness.JsonLinesProcess]) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for c in consumers:
        for m in real(c.of("msg")):
            match = _BODY.match(m["body"])
            assert match, m["body"]
            q, s = int(match.group(1)), int(match.group(2))
            out[m["queue_id"]].append({**m, "q": q, "seq": s, "who": c.name})
    return out


@pytest.mark.timeout(180)
def test_orderly_handover_keeps_queue_order(rokka: harness.ServerProcess, workdir: Path) -> None:
    ns = rokka.namesrv
    topic, group = uniq("T_ordrb"), uniq("CG_ordrb")
    send(ns, workdir, "sync", [{"topic": topic, "body": "probe-create"}])
    prepare_retry_topic(rokka, group, topic)
    c1 = start_orderly(ns, workdir, "c1", group, topic)
    c2: harness.JsonLinesProcess | None = None
    try:
        wait_consuming(ns, workdir, topic, [c1])
        send_orderly(ns, workdir, topic, range(0, 40))       # a backlog of ~1.6 s per queue
        # c2 joins while c1 is in the middle of every queue
        harness.wait_until(lambda: all(sum(m["body"].startswith(f"q{q}-") for m in real(c1.of("msg"))) >= 3
                                       for q in range(QUEUES)), 30, "c1 consuming every queue")
        for attempt in range(5):  # c2's client id ("<pid>-...") must sort after c1's
            c2 = start_orderly(ns, workdir, f"c2-{attempt}" if attempt else "c2", group, topic)
            if str(c2.proc.pid) > str(c1.proc.pid):
                break
            c2.close()
        assert c2 is not None and str(c2.proc.pid) > str(c1.proc.pid)
        send_orderly(ns, workdir, topic, range(40, 80))
        wait_all([c1, c2], range(0, 80), 90, "batches 1-2 over c1 + c2")
        assert c1.close() == 0                               # leaves: unlocks its queues, UNREGISTER_CLIENT
        send_orderly(ns, workdir, topic, range(80, 120))
        wait_all([c2], range(80, 120), 40, "batch 3 on c2 alone")
    finally:
        c1.close()
        if c2 is not None:
            c2.close()
    assert c2 is not None
    took_over = False
    for qid, ds in per_queue([c1, c2]).items():
        assert all(d["q"] % QUEUES == qid for d in ds), f"queue {qid} holds another order's messages"
        assert any(d["who"] == "c1" for d in ds) and any(d["who"] == c2.name for d in ds)
        for who in ("c1", c2.name):  # strictly increasing per consumer
            seqs = [d["seq"] for d in sorted(ds, key=lambda d: d["start_ms"]) if d["who"] == who]
            assert seqs == sorted(set(seqs)), f"queue {qid} on {who} out of order: {seqs}"
        timeline = sorted(ds, key=lambda d: (d["start_ms"], d["end_ms"]))
        for a, b in zip(timeline, timeline[1:], strict=False):
            if a["who"] != b["who"]:
                took_over = True
                # one owner at a time: the next owner starts only after the previous one's last delivery
                others = [d for d in ds if d["who"] == a["who"] and d["start_ms"] >= b["start_ms"]]
                assert not others, f"queue {qid} consumed by {a['who']} and {b['who']} at once"
                assert b["seq"] <= a["seq"] + 1, f"queue {qid}: hand-over {a['who']}->{b['who']} skipped " \
                                                 f"from {a['seq']} to {b['seq']}"
            else:
                assert b["seq"] == a["seq"] + 1, f"queue {qid} on {a['who']}: {a['seq']} then {b['seq']}"
        assert {d["seq"] for d in ds} == set(range(120))
        replays = len(ds) - 120
        owners = [timeline[0]["who"]] + [b["who"] for a, b in zip(timeline, timeline[1:], strict=False)
                                         if a["who"] != b["who"]]
        print(f"queue {qid}: owners {owners}, {replays} re-delivered at hand-over")
    assert took_over, "no queue changed hands"
