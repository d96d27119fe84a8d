"""A full disk under the real ``rokka serve`` (issue 19, item 7).

The store lives on a small tmpfs mounted for the test (skipped where mounting is not allowed); a
ballast file fills it as another process would.  While it is full a Kafka producer gets
KAFKA_STORAGE_ERROR and a RocketMQ producer SERVICE_NOT_AVAILABLE (14) with RocketMQ's remark;
once the ballast is deleted both write again without a restart, the server stops with exit
code 0 and every acknowledged record is there after a restart.  Before: the first ENOSPC left the
store read-only until a restart.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from interop import harness, tmpfs
from interop.kafka_common import topic_name

TIMEOUT_S = 30


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    with tmpfs.mounted_tmpfs(tmp_path / "fs", "64m") as mnt:
        yield mnt


def _rocketmq_send(namesrv: str, topic: str, body: bytes) -> tuple[int, str]:
    """(0, "") when stored, else (response code, remark)."""
    from rokka.net.remoting.client import NamesrvClient, Producer, RemotingClient
    from rokka.net.remoting.client.remoting import ResponseError

    async def run() -> tuple[int, str]:
        with trio.fail_after(TIMEOUT_S):
            async with RemotingClient() as rc:
                producer = Producer(rc, NamesrvClient(rc, [namesrv]), "full-pg")
                try:
                    await producer.send(topic, body, queue=0)
                except ResponseError as exc:
                    return exc.code, exc.remark or ""
                return 0, ""

    return trio.run(run)


def _kafka_send(addr: str, topic: str, value: bytes) -> Exception | None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=addr, acks="all", retries=0, request_timeout_ms=10_000)
    try:
        p.send(topic, value, partition=0).get(timeout=TIMEOUT_S)
        return None
    except Exception as exc:        # the error the client reports is what is checked
        return exc
    finally:
        p.close(timeout=10)


@pytest.mark.timeout(240)
def test_full_disk_refuses_then_resumes_without_restart(tmp_path: Path, small_fs: Path) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    workdir = tmp_path / "server"          # logs stay off the full disk
    workdir.mkdir()
    data = small_fs / "data"
    data.mkdir()
    srv = harness.ServerProcess("rokka-serve", harness.serve_argv(data, "json"), workdir, data_dir=data).start()
    try:
        topic = topic_name("full")
        admin = KafkaAdminClient(bootstrap_servers=srv.kafka, request_timeout_ms=TIMEOUT_S * 1000)
        admin.create_topics([NewTopic(topic, 1, 1)])
        admin.close()
        assert _kafka_send(srv.kafka, topic, b"before") is None
        assert _rocketmq_send(srv.namesrv, topic, b"rmq-before") == (0, "")
        ballast = small_fs / "ballast"
        tmpfs.fill(ballast, chunk_size=256 * 1024)
        err = _kafka_send(srv.kafka, topic, b"x" * 300_000)
        assert err is not None and "KafkaStorageError" in type(err).__name__ + repr(err), repr(err)
        code, remark = _rocketmq_send(srv.namesrv, topic, b"y" * 300_000)
        assert code == 14 and "the broker's disk is full [CL:" in remark, (code, remark)
        ballast.unlink()
        deadline = time.monotonic() + TIMEOUT_S
        while _rocketmq_send(srv.namesrv, topic, b"rmq-after") != (0, ""):   # re-checked each second
            assert time.monotonic() < deadline, srv.stderr_tail()
            time.sleep(0.5)
        assert _kafka_send(srv.kafka, topic, b"after") is None
        srv.stop_clean()                                   # exit 0 after a full disk
        srv.start()
        c = KafkaConsumer(bootstrap_servers=srv.kafka, auto_offset_reset="earliest", enable_auto_commit=False)
        try:
            c.assign([TopicPartition(topic, 0)])
            got: list[bytes] = []
            deadline = time.monotonic() + TIMEOUT_S
            while len(got) < 4 and time.monotonic() < deadline:
                got += [m.value for ms in c.poll(timeout_ms=1000).values() for m in ms]
        finally:
            c.close()
        assert got == [b"before", b"rmq-before", b"rmq-after", b"after"]
    finally:
        print(srv.stderr_tail(60))
        srv.stop_clean()
