"""Client-independent parts of the Kafka scenarios (``interop/test_kafka_*.py``).

Theory of operation
-------------------
Every Kafka client file runs the same scenarios with its own API; what "correct" means lives here so
that all clients are held to one standard:

* ``sample_records()``: records with and without keys and headers (empty header values, repeated
  header keys, non-ASCII) -- compared field by field with ``same_records()``.
* ``GroupLog``: what the members of a consumer group delivered and whether each delivery's commit
  succeeded.  ``check()`` asserts no loss (every produced value delivered) and no double delivery of
  a *committed* record (a value may be delivered again only if its earlier delivery was not committed).
* ``timestamps()``: explicit record timestamps, one second apart, for ListOffsets-by-time checks.
* ``aiokafka_round_trip()``: aiokafka produces ``n`` values and reads them back from the beginning
  (the security scenarios: SASL, TLS).
* ``confluent_poll()``: up to ``n`` records from a confluent-kafka consumer (end-of-partition events skipped);
  ``confluent_alter_topic()`` / ``confluent_log_start()``: IncrementalAlterConfigs on one topic and a
  partition's log start offset with confluent-kafka; ``kafkajs_runner()``: one kafkajs action per call.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Header = tuple[str, bytes]


@dataclass(frozen=True)
class Rec:
    key: bytes | None
    value: bytes
    headers: tuple[Header, ...] = ()


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def sample_records(n: int = 12) -> list[Rec]:
    out: list[Rec] = []
    for i in range(n):
        key = None if i % 3 == 0 else f"key-{i % 4}".encode()
        headers: tuple[Header, ...] = ()
        if i % 2:
            headers = (("h1", f"v{i}".encode()), ("empty", b""), ("h1", b"dup"), ("ünï", "ß→".encode()))
        out.append(Rec(key, f"value-{i}-{'x' * (i * 7)}".encode(), headers))
    return out


def same_records(got: list[Rec], want: list[Rec]) -> None:
    """Same multiset of records (order across partitions is not defined)."""
    def k(r: Rec) -> tuple:
        return (r.value, r.key or b"", r.headers)
    assert sorted(got, key=k) == sorted(want, key=k)


def keys_stick_to_partitions(pairs: list[tuple[bytes | None, int]]) -> None:
    """Records with one key went to one partition."""
    seen: dict[bytes, set[int]] = defaultdict(set)
    for key, part in pairs:
        if key is not None:
            seen[key].add(part)
    assert all(len(p) == 1 for p in seen.values()), dict(seen)


def compressible(i: int) -> bytes:
    return (f"record {i:05d} " + "lorem ipsum dolor sit amet " * 20).encode()


def timestamps(n: int, base: int | None = None) -> list[int]:
    base = base if base is not None else (int(time.time() * 1000) // 1000 - 3600) * 1000
    return [base + i * 1000 for i in range(n)]


@dataclass
class GroupLog:
    """Deliveries by consumer-group members, and whether the commit covering each one succeeded."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    deliveries: list[tuple[str, bytes, bool]] = field(default_factory=list)  # (member, value, committed)

    def add(self, member: str, values: list[bytes], committed: bool) -> None:
        with self.lock:
            self.deliveries += [(member, v, committed) for v in values]

    def values(self) -> set[bytes]:
        with self.lock:
            return {v for _, v, _ in self.deliveries}

    def members_that_consumed(self) -> set[str]:
        with self.lock:
            return {m for m, _, _ in self.deliveries}

    def check(self, produced: list[bytes]) -> None:
        with self.lock:
            per_value: dict[bytes, list[bool]] = defaultdict(list)
            for _, v, committed in self.deliveries:
                per_value[v].append(committed)
        missing = set(produced) - set(per_value)
        assert not missing, f"{len(missing)} records never delivered, e.g. {sorted(missing)[:5]}"
        unexpected = set(per_value) - set(produced)
        assert not unexpected, f"delivered records never produced: {sorted(unexpected)[:5]}"
        double = {v: c for v, c in per_value.items() if any(c[:-1])}
        assert not double, f"committed records delivered again: {list(double.items())[:5]}"


def wait_until(pred, timeout: float, what: str, interval: float = 0.2) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def feed_until(pred, produce, tag: str, timeout: float = 60) -> None:  # noqa: ANN001
    """Call ``produce(f"{tag}r{n}", 12)`` every half second until ``pred()``.

    Used after a member joins a group: it is known to be assigned once it delivered records, and the
    records fed meanwhile are ordinary produced records (the caller tracks them).
    """
    deadline = time.monotonic() + timeout
    rounds = 0
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s feeding records for {tag}")
        produce(f"{tag}r{rounds}", 12)
        rounds += 1
        time.sleep(0.5)


def aiokafka_round_trip(conf: dict[str, Any], topic: str, n: int = 5, timeout: float = 60) -> list[bytes]:
    """aiokafka (client options ``conf``) sends ``ai-0`` .. ``ai-<n-1>`` to ``topic`` and reads back
    what is there from the beginning, until it has ``n`` values or ``timeout`` seconds passed."""
    import aiokafka

    async def main() -> list[bytes]:
        p = aiokafka.AIOKafkaProducer(**conf)
        await p.start()
        try:
            for i in range(n):
                await p.send_and_wait(topic, f"ai-{i}".encode())
        finally:
            await p.stop()
        c = aiokafka.AIOKafkaConsumer(topic, auto_offset_reset="earliest", **conf)
        await c.start()
        got: list[bytes] = []
        try:
            while len(got) < n:
                for batch in (await c.getmany(timeout_ms=1000)).values():
                    got += [m.value for m in batch]
        finally:
            await c.stop()
        return got

    return asyncio.run(asyncio.wait_for(main(), timeout))


def confluent_alter_topic(admin: Any, topic: str, entries: list[Any]) -> None:
    """confluent-kafka IncrementalAlterConfigs of ``entries`` (``ConfigEntry``) on ``topic``; raises its error."""
    from confluent_kafka.admin import ConfigResource, ResourceType

    for f in admin.incremental_alter_configs(
            [ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)]).values():
        f.result(20)


def confluent_log_start(bootstrap: str, topic: str, partition: int = 0) -> int:
    """The log start offset of ``topic``/``partition`` as a confluent-kafka consumer sees it."""
    import confluent_kafka as ck

    probe = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": topic_name("g")})
    try:
        return int(probe.get_watermark_offsets(ck.TopicPartition(topic, partition), timeout=10)[0])
    finally:
        probe.close()


def kafkajs_runner(workdir: Path, bootstrap: str, topic: str) -> Callable[..., list[dict[str, Any]]]:
    """``run(action, **params)``: the kafkajs client script runs one ``action`` on ``topic`` (its events)."""
    import harness

    def run(action: str, **params: Any) -> list[dict[str, Any]]:
        return harness.run_node("kafkajs_client", {"action": action, "brokers": [bootstrap], "topic": topic,
                                                   **params},
                                workdir=workdir / f"{action}-{time.monotonic_ns()}", timeout=60)

    return run


def confluent_poll(c: Any, n: int, timeout: float = 30) -> list[Any]:
    """Up to ``n`` records polled from the confluent-kafka consumer ``c`` within ``timeout`` seconds;
    end-of-partition events are skipped, any other error is raised (``KafkaException``)."""
    import confluent_kafka as ck

    out: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() == ck.KafkaError._PARTITION_EOF:
                continue
            raise ck.KafkaException(m.error())
        out.append(m)
    return out
