"""Message trace: decoding the Java client's trace records (rokka.core.trace) and the trace topic a
broker with ``traceTopicEnable`` creates."""

from __future__ import annotations

from pathlib import Path

from rokka.core import trace
from rokka.core.broker import Broker
from rokka.core.config import BrokerConfig, apply_settings
from rokka.core.storage.memory import MemoryStore

C, F = trace.CONTENT_SPLITOR, trace.FIELD_SPLITOR


def rec(*fields: object) -> str:
    return C.join(str(f) for f in fields) + F


def test_decode_the_java_client_layouts() -> None:
    body = (rec("Pub", 1700000000000, "DefaultRegion", "PG", "T", "MSG1", "tagA", "k1", "127.0.0.1:10911", 5, 12, 0,
                "OFFID", "true", "10.0.0.9")
            + rec("SubBefore", 1700000000100, "DefaultRegion", "CG", "req-1", "MSG1", 0, "k1")
            + rec("SubAfter", "req-1", "MSG1", 3, "false", "k1", 0, 1700000000103, "CG")
            + rec("Pub", 1700000000000, "DefaultRegion", "PG", "T", "MSG2", "", "", "h:1", 1, 2, 0, "true"))
    got = trace.decode(body.encode())
    assert [(r.type, r.msg_id, r.group) for r in got] == [
        ("Pub", "MSG1", "PG"), ("SubBefore", "MSG1", "CG"), ("SubAfter", "MSG1", "CG"), ("Pub", "MSG2", "PG")]
    pub, _, sub, old = got
    assert (pub.topic, pub.tags, pub.keys, pub.cost_time, pub.offset_msg_id, pub.status, pub.client_host) == (
        "T", "tagA", "k1", 12, "OFFID", "success", "10.0.0.9")
    assert (sub.cost_time, sub.status, sub.timestamp) == (3, "failed", 1700000000103)
    assert (old.offset_msg_id, old.success) == ("", True)        # the 13-field layout (no offsetMsgId)
    views = trace.views("MSG1", body, "192.168.1.1")
    assert [v.type for v in views] == ["Pub", "SubBefore", "SubAfter"]
    assert {v.client_host for v in views} == {"192.168.1.1"}    # the trace message's born host, as Java


def test_malformed_records_are_skipped() -> None:
    body = rec("Pub", "not-a-number", "r", "g") + rec("Bogus", 1) + rec("SubAfter", "req", "M", 1, "true", "k")
    assert [(r.type, r.msg_id) for r in trace.decode(body)] == [("SubAfter", "M")]
    assert trace.decode(b"\xff\xfe") == [] and trace.decode("") == []


def test_trace_topic_enable_creates_the_trace_topic(tmp_path: Path) -> None:
    for settings, want in (({}, None), ({"traceTopicEnable": "true"}, "RMQ_SYS_TRACE_TOPIC"),
                           ({"traceTopicEnable": "true", "msgTraceTopicName": "MyTrace"}, "MyTrace")):
        cfg = BrokerConfig(store_path_root_dir=str(tmp_path / str(len(settings))))
        assert apply_settings(cfg, settings) == []
        broker = Broker(cfg, store=MemoryStore(cfg.store_config()))
        try:
            names = [t for t in ("RMQ_SYS_TRACE_TOPIC", "MyTrace") if broker.topics.get(t) is not None]
            assert names == ([want] if want else [])
            if want:
                tc = broker.topics.get(want)
                assert (tc.read_queue_nums, tc.write_queue_nums, tc.perm) == (1, 1, 6)
        finally:
            broker.close()
