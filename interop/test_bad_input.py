"""Bad input against the live server: garbage, truncated and oversized frames on every port.

Each bad connection is answered or closed by the server, which logs it and keeps serving: real clients
(kafka-python, rokka's RocketMQ client) keep producing and consuming between the attacks, and the
stored data is intact afterwards.
"""

from __future__ import annotations

import json
import random
import socket
import struct
import time

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from interop import harness


def _split(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host, int(port)


def _blast(addr: str, payload: bytes, read: bool = True) -> bytes:
    """Send ``payload`` on a fresh connection; return what the server answered before closing (bounded)."""
    with socket.create_connection(_split(addr), timeout=5) as s:
        try:
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
        except OSError:
            return b""  # the server already closed: fine
        out = b""
        if read:
            s.settimeout(3)
            try:
                while chunk := s.recv(65536):
                    out += chunk
                    if len(out) > 1 << 20:
                        break
            except (TimeoutError, OSError):
                pass
        return out


def _remoting_frame(header: bytes, body: bytes = b"", header_len: int | None = None) -> bytes:
    hl = len(header) if header_len is None else header_len
    return struct.pack(">ii", 4 + len(header) + len(body), hl) + header + body


GARBAGE_REMOTING = [
    b"\x00",                                              # truncated length
    struct.pack(">i", 0x7FFFFFFF) + b"x" * 100,           # oversized length prefix
    struct.pack(">i", -5),                                # negative length
    _remoting_frame(b"{not json", b""),                   # bad JSON header
    _remoting_frame(b'{"code":10}', b"", header_len=9999),  # header longer than the frame
    _remoting_frame(b"\x00" * 7, header_len=7 | (1 << 24)),  # truncated binary (ROCKETMQ) header
    bytes(random.Random(7).randrange(256) for _ in range(4096)),
]
GARBAGE_KAFKA = [
    b"\x00\x00",
    struct.pack(">i", 0x7FFFFFFF) + b"x" * 100,
    struct.pack(">i", 8) + struct.pack(">hhi", 999, 0, 1),          # unknown api key
    struct.pack(">i", 12) + struct.pack(">hhi", 3, 12, 1) + b"\xff\xff\xff\xff",  # Metadata, bad body
    struct.pack(">i", 30) + struct.pack(">hhi", 0, 9, 1) + b"\x01" * 10,  # Produce v9 truncated
    bytes(random.Random(8).randrange(256) for _ in range(4096)),
]


def _kafka_round_trip(bootstrap: str, topic: str, value: bytes) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    p = KafkaProducer(bootstrap_servers=bootstrap)
    meta = p.send(topic, value=value, partition=0).get(timeout=15)
    p.close()
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek(tp, meta.offset)
    got = []
    deadline = time.monotonic() + 15
    while not got and time.monotonic() < deadline:
        got = [r.value for recs in c.poll(timeout_ms=500).values() for r in recs]
    c.close()
    assert got[:1] == [value]


async def _rocketmq_round_trip(namesrv: str, topic: str, value: bytes) -> None:
    from rokka.net.remoting.client import NamesrvClient, Producer, PullConsumer, RemotingClient

    with trio.fail_after(20):
        async with RemotingClient() as rc:
            ns = NamesrvClient(rc, [namesrv])
            sent = await Producer(rc, ns, "bad-input-pg").send(topic, value, queue=0)
            while await ns.get_route(topic) is None:  # an auto-created topic reaches the name server async
                await trio.sleep(0.05)
            pulled = await PullConsumer(rc, ns, "bad-input-cg").pull(sent.queue, sent.queue_offset)
            assert pulled.messages[0].body == value


def _unknown_code_answer(addr: str) -> dict[str, object]:
    header = json.dumps({"code": 9999, "flag": 0, "language": "JAVA", "opaque": 42, "version": 407}).encode()
    with socket.create_connection(_split(addr), timeout=5) as sock:
        sock.sendall(_remoting_frame(header))
        raw = b""
        while len(raw) < 8 or len(raw) < 4 + struct.unpack(">i", raw[:4])[0]:
            chunk = sock.recv(65536)
            if not chunk:
                break
            raw += chunk
    assert len(raw) >= 8, "no answer to an unknown request code"
    total, hl = struct.unpack(">ii", raw[:8])
    return json.loads(raw[8:8 + (hl & 0xFFFFFF)])


@pytest.mark.timeout(180)
def test_garbage_on_every_port_while_clients_keep_working(rokka: harness.ServerProcess) -> None:
    _kafka_round_trip(rokka.kafka, "bad-input-k", b"before")
    trio.run(_rocketmq_round_trip, rokka.namesrv, "bad-input-r", b"before")
    for payload in GARBAGE_REMOTING:
        _blast(rokka.broker, payload)
        _blast(rokka.namesrv, payload)
    for payload in GARBAGE_KAFKA:
        _blast(rokka.kafka, payload)
    answer = _unknown_code_answer(rokka.broker)
    assert answer["code"] == 3 and answer["opaque"] == 42 and "not supported" in str(answer.get("remark"))
    _kafka_round_trip(rokka.kafka, "bad-input-k", b"after")
    trio.run(_rocketmq_round_trip, rokka.namesrv, "bad-input-r", b"after")
    assert rokka.stderr_path is not None
    log = rokka.stderr_path.read_text()
    assert "Traceback" not in log
    assert "protocol" in log  # the bad connections were logged


@pytest.mark.timeout(240)
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.binary(min_size=1, max_size=300), port=st.sampled_from(["broker", "kafka", "namesrv"]))
def test_random_frames_never_break_the_server(shared_rokka: harness.ServerProcess, data: bytes, port: str) -> None:
    _blast(getattr(shared_rokka, port), data, read=False)
    assert shared_rokka.proc is not None and shared_rokka.proc.poll() is None  # still running


@pytest.fixture(scope="module")
def shared_rokka(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    srv = harness.start_serve(tmp_path_factory.mktemp("bad-input"))
    yield srv
    _kafka_round_trip(srv.kafka, "bad-input-after-fuzz", b"alive")
    srv.stop()
