"""Well-behaved clients that keep working while the fuzzer attacks the server (they must be unaffected).

Theory of operation
-------------------
Each steady client is a thread with the same small life cycle: ``start()``, ``wait_started()`` (its first
record acknowledged), ``finish()`` (stop producing, then wait -- bounded -- until every acknowledged record
has been read back), ``stop()`` and ``report()`` (acked, read back, errors, missing, the slowest ack).

* ``SteadyKafka``: kafka-python, ``acks=all``, one record at a time to partition 0 of ``steady-k-<n>``;
  a KafkaConsumer on the same partition reads them back from the beginning.
* ``SteadyRocketMQ``: rokka's own RocketMQ client (trio, in its own thread): a sync send to queue 0 of
  ``steady-r-<n>`` and a pull of that very offset, one after the other.

Any exception of either client is an error: "unaffected" means none at all.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

PRODUCE_PAUSE_S = 0.02
OP_TIMEOUT_S = 30.0


class _Steady:
    name = "steady"

    def __init__(self, topic_prefix: str, workers: dict[str, Callable[[], None]]) -> None:
        """A fresh topic ``<topic_prefix>-<8 hex>``; one daemon thread per ``workers`` entry (name: target)."""
        self.topic = f"{topic_prefix}-{uuid.uuid4().hex[:8]}"
        self.acked: list[bytes] = []
        self.read: set[bytes] = set()
        self.errors: list[str] = []
        self.max_ack_s = 0.0
        self.producing = threading.Event()
        self.producing.set()
        self.stopping = threading.Event()
        self.started = threading.Event()
        self.threads = [threading.Thread(target=target, daemon=True, name=name) for name, target in workers.items()]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def wait_started(self, timeout: float) -> None:
        if not self.started.wait(timeout):
            self.errors.append(f"no first acknowledgement within {timeout:.0f}s")
            self.started.set()

    def finish(self, timeout: float) -> None:
        self.producing.clear()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not set(self.acked) <= self.read:
            time.sleep(0.1)
        self.stop()

    def stop(self) -> None:
        self.producing.clear()
        self.stopping.set()
        for t in self.threads:
            t.join(OP_TIMEOUT_S + 5)

    def report(self) -> dict[str, Any]:
        return {"acked": len(self.acked), "read": len(self.read), "errors": self.errors[:20],
                "missing": len(set(self.acked) - self.read), "max_ack_s": round(self.max_ack_s, 3),
                "reread_missing": self.reread_missing}

    reread_missing: int | None = None

    def verify(self, timeout: float = 60.0) -> None:
        """After the fuzz: read the topic again from offset 0; every acknowledged record must be there
        (``reread_missing``; a fuzz frame that deleted or truncated the store shows here)."""
        try:
            got = self.read_all(timeout)
        except Exception as exc:  # noqa: BLE001
            self.errors.append(f"re-read: {exc!r}")
            got = set()
        self.reread_missing = len(set(self.acked) - got)

    def read_all(self, timeout: float) -> set[bytes]:
        raise NotImplementedError


class SteadyKafka(_Steady):
    name = "kafka-python"

    def __init__(self, bootstrap: str) -> None:
        super().__init__("steady-k", {"steady-kafka-p": self._produce, "steady-kafka-c": self._consume})
        self.bootstrap = bootstrap

    def _produce(self) -> None:
        from kafka import KafkaProducer

        try:
            p = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", request_timeout_ms=int(OP_TIMEOUT_S * 1000),
                              max_block_ms=int(OP_TIMEOUT_S * 1000))
        except Exception as exc:  # noqa: BLE001 - every failure is a finding
            self.errors.append(f"producer: {exc!r}")
            self.started.set()
            return
        try:
            i = 0
            while self.producing.is_set():
                value = f"{self.topic}-{i}".encode()
                t0 = time.monotonic()
                try:
                    p.send(self.topic, value=value, partition=0).get(timeout=OP_TIMEOUT_S)
                except Exception as exc:  # noqa: BLE001
                    self.errors.append(f"send {i}: {exc!r}")
                else:
                    self.acked.append(value)
                    self.max_ack_s = max(self.max_ack_s, time.monotonic() - t0)
                self.started.set()
                i += 1
                time.sleep(PRODUCE_PAUSE_S)
        finally:
            try:
                p.close(timeout=10)
            except Exception as exc:  # noqa: BLE001
                self.errors.append(f"producer close: {exc!r}")

    def _consume(self) -> None:
        from kafka import KafkaConsumer, TopicPartition

        self.started.wait(OP_TIMEOUT_S * 2)
        try:
            c = KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False,
                              request_timeout_ms=int(OP_TIMEOUT_S * 1000))
        except Exception as exc:  # noqa: BLE001
            self.errors.append(f"consumer: {exc!r}")
            return
        try:
            tp = TopicPartition(self.topic, 0)
            c.assign([tp])
            c.seek(tp, 0)
            while not self.stopping.is_set():
                try:
                    for recs in c.poll(timeout_ms=200).values():
                        self.read.update(r.value for r in recs)
                except Exception as exc:  # noqa: BLE001
                    self.errors.append(f"poll: {exc!r}")
                    time.sleep(0.5)
        finally:
            try:
                c.close(autocommit=False)
            except Exception as exc:  # noqa: BLE001
                self.errors.append(f"consumer close: {exc!r}")


    def read_all(self, timeout: float) -> set[bytes]:
        from kafka import KafkaConsumer, TopicPartition

        want = set(self.acked)
        got: set[bytes] = set()
        c = KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False,
                          request_timeout_ms=int(OP_TIMEOUT_S * 1000))
        try:
            tp = TopicPartition(self.topic, 0)
            c.assign([tp])
            c.seek(tp, 0)
            deadline = time.monotonic() + timeout
            while not want <= got and time.monotonic() < deadline:
                for recs in c.poll(timeout_ms=500).values():
                    got.update(r.value for r in recs)
        finally:
            c.close(autocommit=False)
        return got


class SteadyRocketMQ(_Steady):
    name = "rokka-rocketmq"

    def __init__(self, namesrv: str) -> None:
        super().__init__("steady-r", {"steady-rocketmq": self._run})
        self.namesrv = namesrv

    def _run(self) -> None:
        import trio

        try:
            trio.run(self._main)
        except Exception as exc:  # noqa: BLE001
            self.errors.append(f"client: {exc!r}")
        finally:
            self.started.set()

    async def _main(self) -> None:
        import trio
        from rokka.net.remoting.client import NamesrvClient, Producer, PullConsumer, RemotingClient

        async with RemotingClient() as rc:
            ns = NamesrvClient(rc, [self.namesrv])
            producer = Producer(rc, ns, "steady-pg")
            consumer = PullConsumer(rc, ns, "steady-cg")
            i = 0
            while self.producing.is_set():
                value = f"{self.topic}-{i}".encode()
                t0 = time.monotonic()
                try:
                    with trio.fail_after(OP_TIMEOUT_S):
                        sent = await producer.send(self.topic, value, queue=0)
                        self.acked.append(value)
                        self.max_ack_s = max(self.max_ack_s, time.monotonic() - t0)
                        self.started.set()
                        while await ns.get_route(self.topic) is None:  # noqa: ASYNC110 - polling the server
                            await trio.sleep(0.05)
                        pulled = await consumer.pull(sent.queue, sent.queue_offset)
                        self.read.update(m.body for m in pulled.messages)
                except Exception as exc:  # noqa: BLE001
                    self.errors.append(f"op {i}: {exc!r}")
                i += 1
                await trio.sleep(PRODUCE_PAUSE_S)

    def read_all(self, timeout: float) -> set[bytes]:
        import trio
        from rokka.net.remoting.client import NamesrvClient, PullConsumer, RemotingClient

        got: set[bytes] = set()

        async def main() -> None:
            with trio.fail_after(timeout):
                async with RemotingClient() as rc:
                    consumer = PullConsumer(rc, NamesrvClient(rc, [self.namesrv]), "steady-verify")
                    mq = next(q for q in await consumer.fetch_subscribe_queues(self.topic) if q.queue_id == 0)
                    offset, end = 0, await consumer.max_offset(mq)
                    while offset < end:
                        pulled = await consumer.pull(mq, offset)
                        if not pulled.messages:
                            break
                        got.update(m.body for m in pulled.messages)
                        offset = pulled.messages[-1].queue_offset + 1

        trio.run(main)
        return got
