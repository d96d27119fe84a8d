"""Kafka Streams (4.x, exactly_once_v2) against rokka: a word count with a repartition topic and a
persistent state store whose changelog is a compacted topic.

``interop/java/streams`` (Maven, built by ``interop/java/install.sh``) is the application; it runs
unmodified (``java -jar target/streams-interop.jar <bootstrap> <app id> <input> <output> <state dir>
<instance id>``) and prints its state changes as JSON lines.  Its cache is off, so every input word
gives one output record (word -> running count): read with read_committed, each word's counts must
be exactly 1, 2, ..., N -- a record processed twice (a count repeated or skipped) or lost (a final
count short) fails the test.  The application is killed (SIGKILL) in the middle of a batch and
restarted, and rokka is killed and restarted under it; the results stay exact.  Along the way Streams
creates its internal topics with their configs (the changelog ``cleanup.policy=compact``), uses
transactions, the classic group protocol with its own assignor, and DeleteRecords on the repartition
topic; ``cleanResourceInterval=300`` compacts the changelog every 300 ms, so restoring reads it with
holes.
"""

from __future__ import annotations

import random
import re
import shutil
import struct
import time
from collections import Counter
from pathlib import Path
from typing import Any

import harness
import pytest
from kafka_common import topic_name

JAR = Path(__file__).resolve().parent / "java" / "streams" / "target" / "streams-interop.jar"
JVM_FLAGS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx256m", "-Xss1m"]
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo",
         "lima", "mike", "november", "oscar", "papa"]
PARTITIONS = 3
T = 20


class App:
    """One run of the Streams application."""

    def __init__(self, bs: str, app_id: str, topics: tuple[str, str], workdir: Path, run: int) -> None:
        self.proc = harness.JsonLinesProcess(
            ["java", *JVM_FLAGS, "-jar", str(JAR), bs, app_id, topics[0], topics[1], str(workdir / "state"),
             f"{app_id}-1"], name=f"streams-{run}", workdir=workdir)
        self.proc.wait_event("ready", 60)

    def wait_running(self, timeout: float = 90) -> None:
        self.proc.wait_for(lambda evs: bool(evs) and any(e.get("state") == "RUNNING" for e in evs), timeout,
                           "the application RUNNING")

    def stop(self) -> None:
        try:
            self.proc.close(timeout=60)
        finally:
            self.proc.kill()


def _lines(rng: random.Random, n: int) -> list[str]:
    return [" ".join(rng.choice(WORDS).upper() if rng.random() < 0.1 else rng.choice(WORDS)
                     for _ in range(rng.randint(1, 6))) + rng.choice(["", ".", "!"]) for _ in range(n)]


def _produce(bs: str, topic: str, lines: list[str]) -> None:
    import confluent_kafka as ck

    p = ck.Producer({"bootstrap.servers": bs, "linger.ms": 5, "enable.idempotence": True})
    for i, line in enumerate(lines):
        p.produce(topic, key=str(i).encode(), value=line.encode())
    assert p.flush(T) == 0


def _output(bs: str, topic: str) -> dict[str, list[int]]:
    """Each word's counts in the output topic, in order (read_committed, from the start to the end)."""
    out: dict[str, list[int]] = {}
    for key, value in _records(bs, topic):
        out.setdefault(key.decode(), []).append(struct.unpack(">q", value)[0])
    return out


def _records(bs: str, topic: str) -> list[tuple[bytes, bytes]]:
    """(key, value) of every record of the topic's partitions (read_committed, from start to end)."""
    import confluent_kafka as ck

    c = ck.Consumer({"bootstrap.servers": bs, "group.id": topic_name("check"), "enable.auto.commit": False,
                     "isolation.level": "read_committed", "enable.partition.eof": True})
    out: list[tuple[bytes, bytes]] = []
    try:
        c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)])
        done: set[int] = set()
        deadline = time.monotonic() + T
        while len(done) < PARTITIONS:
            assert time.monotonic() < deadline, f"output not read to its end within {T}s"
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                assert m.error().code() == ck.KafkaError._PARTITION_EOF, m.error()
                done.add(m.partition())
                continue
            out.append((m.key(), m.value()))
    finally:
        c.close()
    return out


def _expected(lines: list[str]) -> Counter[str]:
    return Counter(w for line in lines for w in re.split(r"\W+", line.lower()) if w)


def _wait_counts(bs: str, topic: str, want: Counter[str], app: App, timeout: float = 90) -> dict[str, list[int]]:
    deadline = time.monotonic() + timeout
    while True:
        got = _output(bs, topic)
        if {w: c[-1] for w, c in got.items()} == dict(want):
            return got
        if app.proc.proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"counts not reached: got {({w: c[-1] for w, c in got.items()})}, "
                                 f"want {dict(want)}\n{app.proc.describe()}")
        time.sleep(0.5)


def _exact(got: dict[str, list[int]], want: Counter[str]) -> None:
    for word, n in want.items():
        assert got.get(word) == list(range(1, n + 1)), f"{word}: {got.get(word)}"
    assert set(got) == set(want)


@pytest.mark.timeout(300)
def test_word_count_exactly_once_across_restarts(configured_rokka: Any, workdir: Path) -> None:
    ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is installed by make test (pyproject test extra)")
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    if shutil.which("java") is None:
        pytest.skip("java is not installed (the polyglot machine has OpenJDK 17)")
    assert JAR.is_file(), f"{JAR} is missing: run interop/java/install.sh (make install-test)"
    srv = configured_rokka({"cleanResourceInterval": "300", "kafkaGroupInitialRebalanceDelayMs": "0"}, {})
    bs, app_id = srv.kafka, topic_name("wc")
    topics = (f"{app_id}-in", f"{app_id}-out")
    admin = AdminClient({"bootstrap.servers": bs})
    futs = admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in topics], operation_timeout=T, request_timeout=T)
    for f in futs.values():
        f.result(T)
    rng = random.Random(21)
    lines = _lines(rng, 300)
    _produce(bs, topics[0], lines)

    app = App(bs, app_id, topics, workdir / "app", 1)
    try:
        app.wait_running()
        _exact(_wait_counts(bs, topics[1], _expected(lines), app), _expected(lines))
        # the application dies (SIGKILL) in the middle of a batch and comes back on its state dir
        more = _lines(rng, 400)
        _produce(bs, topics[0], more)
        lines += more
        time.sleep(1.0)
        app.proc.kill()
    finally:
        app.proc.kill()
    app = App(bs, app_id, topics, workdir / "app", 2)
    try:
        app.wait_running()
        _exact(_wait_counts(bs, topics[1], _expected(lines), app), _expected(lines))
        # rokka dies (SIGKILL) and comes back under the running application
        srv.restart(hard=True)
        more = _lines(rng, 300)
        _produce(bs, topics[0], more)
        lines += more
        _exact(_wait_counts(bs, topics[1], _expected(lines), app, timeout=120), _expected(lines))
        changelog, repartition = f"{app_id}-counts-changelog", f"{app_id}-words-repartition"
        (cfg,) = [f.result(T) for f in admin.describe_configs([ConfigResource("TOPIC", changelog)]).values()]
        assert cfg["cleanup.policy"].value == "compact"
        c = ck.Consumer({"bootstrap.servers": bs, "group.id": topic_name("wm")})
        try:
            starts = [c.get_watermark_offsets(ck.TopicPartition(repartition, p), timeout=T)[0]
                      for p in range(PARTITIONS)]
            ends = [c.get_watermark_offsets(ck.TopicPartition(changelog, p), timeout=T)[1] for p in range(PARTITIONS)]
        finally:
            c.close()
        assert sum(starts) > 0, "Streams purges its repartition topic with DeleteRecords"
        # the changelog is compacted: far fewer records than offsets, the latest count of every word kept
        deadline = time.monotonic() + 30
        while len(kept := _records(bs, changelog)) > sum(ends) // 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert len(kept) <= sum(ends) // 2, (len(kept), ends)
        assert {k.decode(): struct.unpack(">q", v[-8:])[0] for k, v in kept} == dict(_expected(lines))
    finally:
        app.stop()
    assert app.proc.of("closed") and app.proc.of("closed")[0]["clean"] is True
