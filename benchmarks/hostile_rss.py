"""rokka's memory under hostile connections (issue 19, item 3), read from /proc/<pid>/status.

    .venv/bin/python -m benchmarks.hostile_rss [broker.conf lines, e.g. maxBufferedFrameBytes=33554432]

Starts ``rokka serve`` (defaults, or the given broker.conf keys), then: 150 name-server connections
each sending 16 MiB - 1 bytes of a 16 MiB frame; 20 raw Kafka consumers asking 64 MiB Fetches and
never reading.  Prints VmRSS and RssAnon before, during and after each (RssAnon leaves out the
CommitLog's mapped pages).
"""

from __future__ import annotations

import socket
import struct
import sys
import tempfile
import time
from pathlib import Path

from rokka.gateway.kafka.codec.framing import APIS, encode_request_frame
from rokka.gateway.kafka.codec.schema import Struct

from interop import harness

MIB = 1 << 20


def memory(pid: int) -> str:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "RssAnon:")):
            fields[line.split(":")[0]] = int(line.split()[1]) * 1024
    return " ".join(f"{k}={v / MIB:.0f}MiB" for k, v in fields.items())


def split(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host, int(port)


def unfinished_frames(addr: str, n: int = 150, size: int = 16 * MIB) -> list[socket.socket]:
    socks = []
    chunk = b"x" * MIB
    for _ in range(n):
        s = socket.create_connection(split(addr), timeout=10)
        socks.append(s)
        try:
            s.sendall(struct.pack(">i", size))
            left = size - 1
            while left:
                k = min(left, len(chunk))
                s.sendall(chunk[:k])
                left -= k
        except OSError:
            pass        # closed by the server (budget)
    time.sleep(2)
    return socks


def fill(bootstrap: str, topic: str, n: int = 80) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, max_request_size=2 * MIB, batch_size=MIB, linger_ms=5)
    for _ in range(n):
        p.send(topic, b"v" * (900 << 10), partition=0)
    p.flush()
    p.close()


def consumers_that_never_read(bootstrap: str, topic: str, n: int = 20) -> list[socket.socket]:
    part = Struct(partition=0, fetch_offset=0, partition_max_bytes=64 * MIB)
    body = Struct(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=64 * MIB, isolation_level=0,
                  topics=[Struct(topic=topic, partitions=[part])])
    frame = encode_request_frame(APIS[1], 4, 1, body)
    socks = []
    for _ in range(n):
        s = socket.create_connection(split(bootstrap), timeout=10)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(frame)
        socks.append(s)
    time.sleep(4)
    return socks


def main() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="hostile-rss-"))
    conf = None
    if len(sys.argv) > 1:
        conf = workdir / "broker.conf"
        conf.write_text("\n".join(sys.argv[1:]) + "\n")
    srv = harness.start_serve(workdir, conf=conf)
    assert srv.proc is not None
    pid = srv.proc.pid
    try:
        print("baseline:", memory(pid), flush=True)
        socks = unfinished_frames(srv.namesrv)
        print("150 name-server connections, 16 MiB frames unfinished:", memory(pid), flush=True)
        for s in socks:
            s.close()
        time.sleep(3)
        print("after they left:", memory(pid), flush=True)
        fill(srv.kafka, "hostile-rss")
        print("after producing 72 MB:", memory(pid), flush=True)
        socks = consumers_that_never_read(srv.kafka, "hostile-rss")
        print("20 consumers that never read:", memory(pid), flush=True)
        for s in socks:
            s.close()
        time.sleep(4)
        print("after they left:", memory(pid), flush=True)
    finally:
        srv.stop()
        if srv.stderr_path is not None:
            print("server log lines:", len(srv.stderr_path.read_text().splitlines()))


if __name__ == "__main__":
    main()
