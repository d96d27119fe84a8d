"""Bugs `make fuzz` found (issue 19), each against a real ``rokka serve``.

* A JSON remoting header may escape a lone UTF-16 surrogate (``"g\\ud800"``).  Python decodes it
  to a string that cannot be written as UTF-8, so a consumer group stored with it made every later
  save of the offset table fail and stopped the server.  Such a frame is refused now (the
  connection is closed with one warning line), and the server keeps serving and saving.
* Kafka CreatePartitions / CreateTopics took any partition count (2147483647), and the next
  Metadata request built one entry per partition until memory ran out.  Counts are bounded by the
  same 1..1024 as RocketMQ's UPDATE_AND_CREATE_TOPIC (INVALID_PARTITIONS beyond).
"""

from __future__ import annotations

import json
import socket
import struct
import time

import pytest
from kafka.admin import KafkaAdminClient, NewPartitions, NewTopic
from kafka.errors import InvalidPartitionsError

from interop import harness

UPDATE_CONSUMER_OFFSET = 15
PUT_KV_CONFIG = 100


def _frame(code: int, ext_json: str) -> bytes:
    """A remoting request whose JSON header carries ``ext_json`` verbatim (escapes included)."""
    header = ('{"code":%d,"extFields":%s,"flag":0,"language":"JAVA","opaque":7,'
              '"serializeTypeCurrentRPC":"JSON","version":399}' % (code, ext_json)).encode()
    return struct.pack(">ii", 4 + len(header), len(header)) + header


def _send_raw(addr: str, data: bytes) -> bytes:
    """Send ``data`` and read until the server answers or closes (bounded)."""
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(data)
        chunks = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not chunk:
                break
            chunks.append(chunk)
            if len(b"".join(chunks)) >= 8:
                size = struct.unpack(">i", b"".join(chunks)[:4])[0]
                if len(b"".join(chunks)) >= 4 + size:
                    break
        return b"".join(chunks)


def _response_code(answer: bytes) -> int | None:
    if len(answer) < 8:
        return None
    hlen = struct.unpack(">i", answer[4:8])[0] & 0xFFFFFF
    return int(json.loads(answer[8:8 + hlen])["code"])


def test_lone_surrogate_names_are_refused_and_the_server_keeps_saving(rokka: harness.ServerProcess) -> None:
    ext = ('{"consumerGroup":"g\\ud800","topic":"SurrogateT","queueId":"0","commitOffset":"5"}')
    answer = _send_raw(rokka.broker, _frame(UPDATE_CONSUMER_OFFSET, ext))
    assert _response_code(answer) is None, "the frame is refused: the connection closes without an answer"
    kv = '{"namespace":"ns\\udfff","key":"k","value":"v"}'
    assert _response_code(_send_raw(rokka.namesrv, _frame(PUT_KV_CONFIG, kv))) is None
    # An ordinary commit right after is answered, and the offset table is saved (every 5 s) without
    # the process dying: wait past one save, then the server still answers.
    good = '{"consumerGroup":"g_ok","topic":"SurrogateT","queueId":"0","commitOffset":"5"}'
    assert _response_code(_send_raw(rokka.broker, _frame(UPDATE_CONSUMER_OFFSET, good))) is not None
    time.sleep(6)
    assert rokka.proc is not None and rokka.proc.poll() is None, rokka.stderr_tail()
    assert _response_code(_send_raw(rokka.broker, _frame(UPDATE_CONSUMER_OFFSET, good))) is not None
    assert "Traceback" not in rokka.stderr_tail(400)
    assert "lone UTF-16 surrogate" in rokka.stderr_tail(400)


def test_partition_counts_are_bounded(rokka: harness.ServerProcess) -> None:
    admin = KafkaAdminClient(bootstrap_servers=rokka.kafka, request_timeout_ms=10000)
    try:
        admin.create_topics([NewTopic("BoundedT", 2, 1)])
        with pytest.raises(InvalidPartitionsError):
            admin.create_partitions({"BoundedT": NewPartitions(total_count=2147483647)})
        with pytest.raises(InvalidPartitionsError):
            admin.create_topics([NewTopic("HugeT", 2147483647, 1)])
        admin.create_partitions({"BoundedT": NewPartitions(total_count=1024)})
        described = admin.describe_topics(["BoundedT"])
        assert len(described[0]["partitions"]) == 1024
    finally:
        admin.close()
