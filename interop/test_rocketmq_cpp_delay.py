"""RocketMQ C++ client: delay levels.  A producer sends messages with ``set_delay_time_level(n)`` to a
broker configured with ``messageDelayLevel=1s 2s 3s``; a push consumer receives each one exactly once,
never before its born time + the level's delay (checked on the consumer's clock and on the delivered
message's store timestamp), with the DELAY property cleared.  The lateness is printed (``-s`` shows it).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import harness
import pytest
from rmq_cpp import duplicates, real, send, uniq, wait_consuming

pytestmark = pytest.mark.usefixtures("need_cpp")

LEVELS_MS = [1000, 2000, 3000]
PER_LEVEL = 4


@pytest.fixture
def rokka_delay(tmp_path: Path) -> Iterator[harness.ServerProcess]:
    server_dir = tmp_path / "server"
    data = server_dir / "data"
    data.mkdir(parents=True)
    conf = server_dir / "broker.conf"
    conf.write_text("messageDelayLevel=1s 2s 3s\n")
    base = harness.serve_argv(data, "json")
    srv = harness.ServerProcess("rokka-serve", lambda ports: [*base(ports), "-c", str(conf)], server_dir,
                                data_dir=data).start()
    try:
        yield srv
    finally:
        print(f"--- server stderr tail ---\n{srv.stderr_tail(40)}")
        srv.stop_clean()


@pytest.mark.timeout(120)
def test_delay_levels_exactly_once_never_early(rokka_delay: harness.ServerProcess, workdir: Path) -> None:
    ns = rokka_delay.namesrv
    topic = uniq("T_delay")
    send(ns, workdir, "sync", [{"topic": topic, "body": "probe-create"}])
    params = {"namesrv": ns, "group": uniq("CG_delay"), "topic": topic,
              "props": ["DELAY", "REAL_TOPIC", "REAL_QID"]}
    consumer = harness.start_cpp("ffi_consumer", params, name="delay-consumer", workdir=workdir / "consumer")
    try:
        consumer.wait_event("started", timeout=30)
        wait_consuming(ns, workdir, topic, [consumer])
        # longest delay first: the send order is not the delivery order
        specs = [{"topic": topic, "body": f"d{level}-{i}", "tags": f"L{level}", "delay_level": level}
                 for i in range(PER_LEVEL) for level in (3, 2, 1)]
        events = harness.run_cpp("delay_producer",
                                 {"namesrv": ns, "group": uniq("PG_delay"), "messages": specs},
                                 workdir=workdir / "producer", timeout=60)
        sent = [e for e in events if e["event"] == "sent"]
        assert len(sent) == len(specs) and all(e["status"] == 0 for e in sent), sent
        want = {s["body"] for s in specs}
        consumer.wait_for(lambda evs: want <= {e.get("body") for e in evs}, 30, "every delayed message")
        time.sleep(1.5)  # anything delivered twice would show up now
    finally:
        consumer.close()
    got = [m for m in real(consumer.of("msg")) if m["body"] in want]
    assert not duplicates([m["body"] for m in got]), "a delayed message was delivered twice"
    assert {m["body"] for m in got} == want
    lateness = []
    for m in got:
        level = int(m["body"][1])
        due = m["born_ts"] + LEVELS_MS[level - 1]
        assert m["start_ms"] >= due, f"{m['body']} delivered {due - m['start_ms']} ms early"
        assert m["store_ts"] >= due, f"{m['body']} re-stored {due - m['store_ts']} ms before due"
        assert m["topic"] == topic and m["tags"] == f"L{level}"
        # DELAY, REAL_TOPIC and REAL_QID stay on delivery, as the Java broker (4.9.7) stores them.
        assert m["props"] == {"DELAY": str(level), "REAL_TOPIC": topic, "REAL_QID": str(m["queue_id"])}, m["props"]
        lateness.append(m["start_ms"] - due)
    print(f"delay lateness over {len(lateness)} messages (consumer receive - (born + delay)): "
          f"min {min(lateness)} ms, median {statistics.median(lateness):.0f} ms, max {max(lateness)} ms")
