"""One group, two protocols: a group live on one protocol is refused on the other (issue 6).

A kafka-python consumer holds group G: a RocketMQ heartbeat for G gets SYSTEM_ERROR with a clear
remark.  After the Kafka consumer leaves, the RocketMQ consumer joins; now a Kafka JoinGroup of G gets
INCONSISTENT_GROUP_PROTOCOL (23).  Once the RocketMQ consumer unregisters, Kafka can join again.
"""

from __future__ import annotations

import time

import pytest
import trio

from interop import harness
from interop.kafka_common import topic_name


async def _heartbeat(namesrv: str, group: str, topic: str, *, unregister: bool = False) -> tuple[int, str]:
    from rokka.net.remoting.client import NamesrvClient, PullConsumer, RemotingClient, ResponseError

    with trio.fail_after(20):
        async with RemotingClient() as rc:
            consumer = PullConsumer(rc, NamesrvClient(rc, [namesrv]), group)
            try:
                await consumer.heartbeat({topic: "*"})
            except ResponseError as exc:
                return exc.code, str(exc.remark)
            if unregister:
                await consumer.unregister()
            return 0, ""


async def _rocketmq_holds_group_while(rokka: harness.ServerProcess, group: str, topic: str) -> None:
    from rokka.net.remoting.client import NamesrvClient, PullConsumer, RemotingClient

    with trio.fail_after(60):
        async with RemotingClient() as rc:
            consumer = PullConsumer(rc, NamesrvClient(rc, [rokka.namesrv]), group)
            await consumer.heartbeat({topic: "*"})
            assert await trio.to_thread.run_sync(_raw_join_error, rokka.kafka, group) == 23
            await trio.to_thread.run_sync(_kafka_python_is_refused, rokka.kafka, group, topic)
            await consumer.unregister()


def _kafka_python_is_refused(bootstrap: str, group: str, topic: str) -> None:
    from kafka import KafkaConsumer
    from kafka.errors import InconsistentGroupProtocolError

    refused = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, consumer_timeout_ms=500)
    try:
        with pytest.raises(InconsistentGroupProtocolError):  # kafka-python surfaces the refusal
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                refused.poll(timeout_ms=300)
        assert not refused.assignment()
    finally:
        refused.close()


def _raw_join_error(bootstrap: str, group: str) -> int:
    """JoinGroup v5 on a raw socket with rokka's own codec: the wire error code."""
    import socket
    import struct

    from rokka.gateway.kafka.codec.framing import APIS, decode_response_frame, encode_request_frame

    api = APIS[11]
    body = {"group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
            "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b"\x00\x00"}]}
    host, _, port = bootstrap.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=15) as s:
        s.sendall(encode_request_frame(api, 5, 7, body))
        raw = b""
        while len(raw) < 4 or len(raw) < 4 + struct.unpack(">i", raw[:4])[0]:
            chunk = s.recv(65536)
            assert chunk, "connection closed without a JoinGroup answer"
            raw += chunk
    _, resp = decode_response_frame(api, 5, raw[4:])
    return int(resp.error_code)


def _kafka_consumer(bootstrap: str, group: str, topic: str):  # noqa: ANN202
    from kafka import KafkaConsumer

    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, session_timeout_ms=10000,
                      heartbeat_interval_ms=1000, consumer_timeout_ms=1000)
    deadline = time.monotonic() + 20
    while not c.assignment() and time.monotonic() < deadline:
        c.poll(timeout_ms=200)
    return c


@pytest.mark.timeout(120)
def test_group_cannot_be_live_on_both_protocols(rokka: harness.ServerProcess) -> None:
    topic, group = topic_name("own"), topic_name("g")
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=rokka.kafka)
    admin.create_topics([NewTopic(topic, 2, 1)])
    admin.close()
    kc = _kafka_consumer(rokka.kafka, group, topic)
    assert kc.assignment()
    code, remark = trio.run(_heartbeat, rokka.namesrv, group, topic)
    assert code == 1 and "live on the Kafka protocol" in remark
    kc.close()  # LeaveGroup
    # the Kafka group is empty now: RocketMQ may take it, and holds it while its connection lives
    trio.run(_rocketmq_holds_group_while, rokka, group, topic)
    again = _kafka_consumer(rokka.kafka, group, topic)
    assert again.assignment()
    again.close()
