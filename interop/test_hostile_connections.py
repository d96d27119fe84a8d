"""Hostile connections against the live server (issue 19, items 3 and 8): memory, connection caps, logs.

Each scenario runs ``rokka serve`` with small budgets in broker.conf, attacks it over loopback the way
the issue describes (unfinished 16 MiB frames on the name server, Kafka consumers that never read,
too many connections from one address, ``"code":1e400`` frames), and checks the server's anonymous
memory (``RssAnon`` from /proc: the CommitLog's mapped pages are not counted), the refusals, the log
lines, and that a real client (kafka-python, rokka's RocketMQ client) still works afterwards.
Bounds are generous multiples of the budgets; without them each scenario grows by far more.
"""

from __future__ import annotations

import json
import select
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from interop import harness
from interop.test_bad_input import _kafka_round_trip, _rocketmq_round_trip, _split

MIB = 1 << 20


def rss_anon(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no RssAnon in /proc status")


@pytest.fixture
def limited_rokka(tmp_path: Path) -> Iterator[harness.ServerProcess]:
    conf = tmp_path / "broker.conf"
    conf.write_text("\n".join([
        "maxBufferedFrameBytes=33554432",       # 32 MiB of unfinished frames in all
        "maxUnreadResponseBytes=33554432",      # 32 MiB of responses nobody reads
        "maxReadAheadBytes=16777216",
        "maxConnectionsPerIp=60",
        "frameTimeoutSeconds=5",
    ]) + "\n")
    srv = harness.start_serve(tmp_path, conf=conf)
    try:
        yield srv
    finally:
        print(f"--- stderr tail ---\n{srv.stderr_tail(30)}")
        srv.stop()


def _settle(pid: int, seconds: float = 3.0) -> int:
    time.sleep(seconds)     # the server reads / frees; its trim loop runs every second
    return rss_anon(pid)


def _memory_given_back(pid: int, base: int, socks: list[socket.socket], what: str, peak_limit: int,
                       after_limit: int, note: str = "") -> None:
    """While ``socks`` are open the server's RssAnon stays below ``base + peak_limit``; once they are
    closed it falls below ``base + after_limit`` (both printed, with ``what`` held and ``note``)."""
    peak = _settle(pid)
    print(f"RssAnon: base {base / MIB:.0f} MiB, {what} {peak / MIB:.0f} MiB{note}")
    assert peak - base < peak_limit
    for s in socks:
        s.close()
    after = _settle(pid)
    print(f"RssAnon after they left: {after / MIB:.0f} MiB")
    assert after - base < after_limit


@pytest.mark.timeout(180)
def test_unfinished_frames_on_the_name_server_stay_within_the_budget(limited_rokka: harness.ServerProcess) -> None:
    srv = limited_rokka
    assert srv.proc is not None
    base = _settle(srv.proc.pid, 1)
    socks, refused = [], 0
    chunk = b"x" * MIB
    for _ in range(40):         # 40 x (16 MiB - 1): 640 MiB without a budget
        s = socket.create_connection(_split(srv.namesrv), timeout=10)
        socks.append(s)
        try:
            s.sendall(struct.pack(">i", 16 * MIB))
            for _ in range(15):
                s.sendall(chunk)
            s.sendall(chunk[:-1])
        except OSError:
            refused += 1
    _memory_given_back(srv.proc.pid, base, socks, "40 unfinished 16 MiB frames", 96 * MIB, 64 * MIB,
                       f" ({refused} saw their connection closed while sending)")
    trio.run(_rocketmq_round_trip, srv.namesrv, "hostile-r", b"after")
    log = srv.stderr_path.read_text() if srv.stderr_path else ""
    assert "Traceback" not in log
    assert 1 <= log.count("rocketmq.memory_budget") <= 11


def _fetch_frame(topic: str, max_bytes: int) -> bytes:
    from rokka.gateway.kafka.codec import APIS, Struct, encode_request_frame

    body = Struct(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=max_bytes, isolation_level=0,
                  topics=[Struct(topic=topic, partitions=[Struct(partition=0, fetch_offset=0,
                                                                  partition_max_bytes=max_bytes)])])
    return encode_request_frame(APIS[1], 4, 1, body)


@pytest.mark.timeout(180)
def test_consumers_that_never_read_are_bounded_and_give_memory_back(limited_rokka: harness.ServerProcess) -> None:
    from kafka import KafkaProducer

    srv = limited_rokka
    assert srv.proc is not None
    p = KafkaProducer(bootstrap_servers=srv.kafka, max_request_size=2 * MIB, batch_size=MIB, linger_ms=5)
    for _ in range(40):
        p.send("hostile-slow", b"v" * (900 << 10), partition=0)
    p.flush()
    p.close()
    base = _settle(srv.proc.pid, 1)
    frame = _fetch_frame("hostile-slow", 32 * MIB)
    socks = []
    for _ in range(16):         # 16 x 32 MiB answers nobody reads: 512 MiB without a budget
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.settimeout(10)
        s.connect(_split(srv.kafka))
        s.sendall(frame)
        socks.append(s)
    _memory_given_back(srv.proc.pid, base, socks, "16 consumers that never read", 160 * MIB, 48 * MIB)
    _kafka_round_trip(srv.kafka, "hostile-k", b"after")
    log = srv.stderr_path.read_text() if srv.stderr_path else ""
    assert "kafka.unread_budget" in log and "Traceback" not in log


def _refused(socks: list[socket.socket], wait_s: float = 3.0) -> list[socket.socket]:
    """The sockets the server closed without a byte within ``wait_s`` (admitted ones stay silent)."""
    out: list[socket.socket] = []
    left = list(socks)
    deadline = time.monotonic() + wait_s
    while left and (rest := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select(left, [], [], rest)
        for s in ready:
            left.remove(s)
            try:
                if s.recv(1) == b"":
                    out.append(s)
            except ConnectionResetError:
                out.append(s)
    return out


@pytest.mark.timeout(180)
def test_connections_above_the_per_address_cap_are_refused_at_once(limited_rokka: harness.ServerProcess) -> None:
    srv = limited_rokka
    held = [socket.create_connection(_split(srv.kafka), timeout=10) for _ in range(70)]
    # the broker's own connections to its name server come from 127.0.0.1 too and count
    refused = _refused(held)
    assert len(held) - len(refused) <= 60 and len(refused) >= 10
    for addr in (srv.kafka, srv.broker, srv.namesrv):     # every port counts for the one address
        extra = [socket.create_connection(_split(addr), timeout=10) for _ in range(3)]
        assert _refused(extra), addr
        for s in extra:
            s.close()
    for s in held:
        s.close()
    _kafka_round_trip(srv.kafka, "hostile-cap", b"after")
    log = srv.stderr_path.read_text() if srv.stderr_path else ""
    refusals = [json.loads(line) for line in log.splitlines() if "connection.refused" in line]
    assert 1 <= len(refusals) <= 10 and "maxConnectionsPerIp=60" in refusals[0]["reason"]
    assert any("suppressed" in str(r.get("rate_limited")) for r in refusals)


def _send_and_drain(addr: str, payload: bytes) -> None:
    """``payload`` on a fresh connection, then read whatever comes until the server closes it."""
    with socket.create_connection(_split(addr), timeout=10) as s:
        s.sendall(payload)
        s.settimeout(10)
        try:
            while s.recv(65536):
                pass
        except ConnectionResetError:
            pass


@pytest.mark.timeout(180)
def test_hostile_frames_on_every_port_log_a_bounded_number_of_lines(limited_rokka: harness.ServerProcess) -> None:
    srv = limited_rokka
    header = b'{"code":1e400}'
    frame = struct.pack(">ii", 4 + len(header), len(header)) + header
    nested = b'{"code":' + b"[" * 50_000 + b"]" * 50_000 + b"}"
    assert len(frame) == 22
    for i in range(200):
        addr = (srv.broker, srv.namesrv)[i % 2]
        payload = frame if i % 3 else struct.pack(">ii", 4 + len(nested), len(nested)) + nested
        _send_and_drain(addr, payload)
    kafka_garbage = [struct.pack(">ihhi", 8, 999, 0, 1),                       # unknown api key
                     struct.pack(">ihhi", 12, 3, 12, 1) + b"\xff\xff\xff\xff",     # Metadata, bad body
                     struct.pack(">ihhi", 10, 18, 3, 1) + b"\x7f\xff"]            # client id past the frame
    for i in range(150):
        _send_and_drain(srv.kafka, kafka_garbage[i % 3])
    trio.run(_rocketmq_round_trip, srv.namesrv, "hostile-log", b"after")
    _kafka_round_trip(srv.kafka, "hostile-log-k", b"after")
    log = srv.stderr_path.read_text() if srv.stderr_path else ""
    lines = [line for line in log.splitlines() if "rocketmq.protocol_violation" in line or "kafka.protocol_error" in line]
    assert "Traceback" not in log and "rocketmq.channel_crashed" not in log
    assert 1 <= len(lines) <= 10        # PEER_LOG: 10 lines per address per minute, all ports together
    assert len(log.splitlines()) < 80
