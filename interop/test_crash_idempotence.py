"""Stops under load and idempotent retries across a crash, against the real ``rokka serve``.

Issue 19, items 5 and 6:

* SIGTERM while a Kafka idempotent producer and a RocketMQ producer are writing: every stop
  exits 0 (before: about 1 stop in 8 exited 2, two writers of ``producerState.msgpack`` sharing
  its ``.tmp`` name).
* kill -9 right after an acknowledged idempotent batch, then the producer resends that very
  batch (same producer id, epoch and sequence) after the restart: it is answered as Kafka answers
  a duplicate (no error, the original base offset) and not stored again (before: stored twice,
  the producer state was only saved at a clean stop).  The resend is the exact v2 batch bytes an
  idempotent producer retries with (built with rokka's codec: no client library lets a test
  choose when to retry); kafka-python's idempotent producer writes before and after.
"""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from interop import harness
from interop.kafka_common import topic_name

TIMEOUT_S = 30


def _conf(server_dir: Path) -> Path:
    server_dir.mkdir(parents=True, exist_ok=True)
    conf = server_dir / "broker.conf"
    conf.write_text("flushDiskType=SYNC_FLUSH\n")
    return conf


@contextmanager
def _served_topic(tmp_path: Path, prefix: str) -> Iterator[tuple[harness.ServerProcess, str]]:
    """``rokka serve`` with SYNC_FLUSH and a new one-partition topic; stopped cleanly (exit 0) afterwards,
    its stderr tail printed for a failing test."""
    server_dir = tmp_path / "server"
    srv = harness.start_serve(server_dir, conf=_conf(server_dir))
    try:
        topic = topic_name(prefix)
        _create_topic(srv, topic)
        yield srv, topic
    finally:
        print(srv.stderr_tail(40))
        srv.stop_clean()


class RawKafka:
    """One Kafka connection speaking rokka's codec (requests and responses by API version)."""

    def __init__(self, addr: str) -> None:
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=TIMEOUT_S)
        self.corr = 0

    def call(self, api_key: int, version: int, **body: Any) -> Any:
        from rokka.gateway.kafka.codec import APIS, decode_response_frame, encode_request_frame

        api = APIS[api_key]
        self.corr += 1
        self.sock.sendall(encode_request_frame(api, version, self.corr, api.request.make(**body), client_id="idem"))
        size = struct.unpack(">i", self._read(4))[0]
        corr, resp = decode_response_frame(api, version, self._read(size))
        assert corr == self.corr
        return resp

    def _read(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("server closed the connection")
            out += chunk
        return out

    def close(self) -> None:
        self.sock.close()


def _batch(pid: int, epoch: int, seq: int, values: list[bytes]) -> bytes:
    from rokka.gateway.kafka.codec import records as R

    return R.encode_batch([R.Record(i, i, None, v) for i, v in enumerate(values)],
                          base_timestamp=int(time.time() * 1000), producer_id=pid, producer_epoch=epoch,
                          base_sequence=seq)


def _produce(conn: RawKafka, topic: str, batch: bytes) -> tuple[int, int]:
    from rokka.gateway.kafka.codec import Struct

    resp = conn.call(0, 3, transactional_id=None, acks=-1, timeout_ms=10_000, topic_data=[
        Struct(name=topic, partition_data=[Struct(index=0, records=batch)])])
    part = resp.responses[0].partition_responses[0]
    return int(part.error_code), int(part.base_offset)


def _create_topic(srv: harness.ServerProcess, topic: str) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=srv.kafka, request_timeout_ms=TIMEOUT_S * 1000)
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        admin.close()


def _read_all(srv: harness.ServerProcess, topic: str, at_least: int) -> list[bytes]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=srv.kafka, enable_auto_commit=False, auto_offset_reset="earliest",
                      consumer_timeout_ms=3000)
    try:
        c.assign([TopicPartition(topic, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            batch = [m.value for ms in c.poll(timeout_ms=1000).values() for m in ms]
            got += batch
            if len(got) >= at_least and not batch:
                break
        return got
    finally:
        c.close()


@pytest.mark.timeout(180)
def test_retry_after_kill9_is_not_stored_twice(tmp_path: Path) -> None:
    from kafka import KafkaProducer

    with _served_topic(tmp_path, "idem-crash") as (srv, topic):
        p = KafkaProducer(bootstrap_servers=srv.kafka, enable_idempotence=True, acks="all")
        p.send(topic, b"client-0", partition=0).get(timeout=TIMEOUT_S)
        p.close(timeout=10)
        conn = RawKafka(srv.kafka)
        init = conn.call(22, 1, transactional_id=None, transaction_timeout_ms=60_000)
        assert init.error_code == 0
        pid, epoch = int(init.producer_id), int(init.producer_epoch)
        assert _produce(conn, topic, _batch(pid, epoch, 0, [b"a0", b"a1", b"a2"])) == (0, 1)
        retried = _batch(pid, epoch, 3, [b"b3", b"b4"])
        assert _produce(conn, topic, retried) == (0, 4)       # acknowledged (fsynced: SYNC_FLUSH) ...
        conn.close()
        srv.kill9()                                           # ... and the broker dies at once
        srv.start()
        conn = RawKafka(srv.kafka)
        assert _produce(conn, topic, retried) == (0, 4)       # the producer's retry: DUPLICATE, old offset
        assert _produce(conn, topic, _batch(pid, epoch, 5, [b"c5"])) == (0, 6)
        assert _produce(conn, topic, _batch(pid, epoch, 7, [b"gap"]))[0] == 45   # OUT_OF_ORDER_SEQUENCE_NUMBER
        conn.close()
        p = KafkaProducer(bootstrap_servers=srv.kafka, enable_idempotence=True, acks="all")
        p.send(topic, b"client-1", partition=0).get(timeout=TIMEOUT_S)
        p.close(timeout=10)
        got = _read_all(srv, topic, 7)
        assert got == [b"client-0", b"a0", b"a1", b"a2", b"b3", b"b4", b"c5", b"client-1"]


@pytest.mark.timeout(300)
def test_kafka_python_idempotent_through_kill9_rounds(tmp_path: Path) -> None:
    """kafka-python's own retries across kill -9 rounds (the issue's 977 duplicates): none now."""
    from kafka import KafkaProducer

    with _served_topic(tmp_path, "idem-rounds") as (srv, topic):
        p = KafkaProducer(bootstrap_servers=srv.kafka, enable_idempotence=True, acks="all", linger_ms=2,
                          batch_size=2048, max_in_flight_requests_per_connection=5, retries=1_000_000,
                          retry_backoff_ms=100, request_timeout_ms=5000, delivery_timeout_ms=120_000)
        futures = []
        n = 0
        for _ in range(3):
            deadline = time.monotonic() + 1.5
            while time.monotonic() < deadline:      # keep batches in flight while the broker dies
                futures.append(p.send(topic, b"v-%06d" % n, partition=0))
                n += 1
                if n % 100 == 0:
                    time.sleep(0.01)
            srv.kill9()
            srv.start()
        p.flush(timeout=120)
        acked = {f.get(timeout=1).offset for f in futures if f.succeeded()}
        p.close(timeout=10)
        got = _read_all(srv, topic, n)
        assert len(got) == len(set(got)), f"{len(got) - len(set(got))} duplicates"
        assert len(acked) == sum(f.succeeded() for f in futures)
        assert got == sorted(got)                  # produce order kept
        assert len(got) >= len(acked) > 0


_KAFKA_LOAD = """
import sys, time
from kafka import KafkaProducer
p = KafkaProducer(bootstrap_servers=sys.argv[1], enable_idempotence=True, acks="all", linger_ms=2,
                  request_timeout_ms=5000, max_block_ms=5000, delivery_timeout_ms=10000)
n = 0
while True:
    p.send(sys.argv[2], b"k-%d" % n)
    n += 1
    if n % 50 == 0:
        print(n, flush=True)
        time.sleep(0.001)
"""


class KafkaLoad:
    """kafka-python's idempotent producer in its own process (its shutdown quirks stay there)."""

    def __init__(self, addr: str, topic: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _KAFKA_LOAD, addr, topic], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        self.sent = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.sent = int(line)

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=TIMEOUT_S)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def _rocketmq_load(namesrv: str, topic: str, stop: threading.Event, sent: list[int]) -> None:
    from rokka.net.remoting.client import NamesrvClient, Producer, RemotingClient

    async def run() -> None:
        with trio.move_on_after(TIMEOUT_S):
            async with RemotingClient() as rc:
                producer = Producer(rc, NamesrvClient(rc, [namesrv]), "stop-pg")
                while not stop.is_set():
                    await producer.send(topic, b"r-%d" % len(sent))
                    sent.append(1)

    try:
        trio.run(run)
    except Exception:       # the server went away under us
        pass


@pytest.mark.timeout(300)
def test_sigterm_under_load_always_exits_0(tmp_path: Path) -> None:
    with _served_topic(tmp_path, "stop-load") as (srv, topic):
        for _ in range(8):                  # the issue saw about 1 stop in 8 exit 2
            stop = threading.Event()
            rmq_sent: list[int] = []
            kafka = KafkaLoad(srv.kafka, topic)
            rmq = threading.Thread(target=_rocketmq_load, args=(srv.namesrv, topic, stop, rmq_sent))
            rmq.start()
            try:
                deadline = time.monotonic() + TIMEOUT_S
                while (kafka.sent < 200 or len(rmq_sent) < 50) and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert kafka.sent >= 200 and len(rmq_sent) >= 50, (kafka.sent, len(rmq_sent))
                code = srv.stop()                   # SIGTERM under load
            finally:
                stop.set()
                kafka.stop()
                rmq.join(timeout=TIMEOUT_S)
            assert code == 0, srv.stderr_tail(60)
            assert (srv.data_dir / "config" / "producerState.msgpack").exists()
            srv.start()
