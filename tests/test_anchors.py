"""The real-broker anchors (benchmarks/lib/apache.py) and the conformance comparison (interop/conformance/compare.py).

The Apache Kafka start test needs the jars ``make anchors`` fetches (``make test`` does not fetch them), so
it lives beside them in benchmarks/anchors/test_anchor_smoke.py and ``make anchors`` runs it.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from benchmarks.lib import apache
from interop.conformance import compare, rocketmq_summaries


def _props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line)


def test_kafka_properties_are_one_kraft_node_with_the_shipped_defaults(tmp_path: Path) -> None:
    props = _props(apache.kafka_properties(tmp_path / "logs", 19092, 19093, {"num.partitions": "3"}))
    assert props["process.roles"] == "broker,controller"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:19093"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:19092"
    assert props["log.dirs"] == str(tmp_path / "logs")
    assert props["offsets.topic.replication.factor"] == "1" and props["log.segment.bytes"] == "1073741824"
    assert props["num.partitions"] == "3"  # an override wins over the shipped default


def test_rocketmq_broker_conf_is_async_flush_with_auto_created_topics(tmp_path: Path) -> None:
    props = _props(apache.broker_conf(tmp_path, 20911, "127.0.0.1:9876", {"enablePropertyFilter": "true"}))
    assert props["flushDiskType"] == "ASYNC_FLUSH" and props["autoCreateTopicEnable"] == "true"
    assert props["listenPort"] == "20911" and props["namesrvAddr"] == "127.0.0.1:9876"
    assert props["storePathRootDir"] == str(tmp_path / "store") and props["brokerIP1"] == "127.0.0.1"
    assert props["enablePropertyFilter"] == "true"


def test_free_port_leaves_the_brokers_neighbour_ports_free() -> None:
    port = apache.free_port(neighbours=(-2, 1))
    for p in (port - 2, port, port + 1):
        with socket.socket() as s:
            s.bind(("127.0.0.1", p))  # raises if taken


def test_missing_says_how_to_fetch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(apache, "KAFKA_LIB", tmp_path / "none")
    why = apache.missing()
    assert why is not None and ("make anchors" in why or "java" in why)


def test_compare_drops_volatile_keys_and_names_each_differing_path() -> None:
    rokka = {"sync": [{"status": "SEND_OK", "msg_id": "A1", "queue": 0}], "received": ["a", "b"], "n": 2}
    apache_ = {"sync": [{"status": "SEND_OK", "msg_id": "B2", "queue": 1}], "received": ["a", "b"], "n": 3,
               "extra": True}
    what, paths = compare.verdict(rokka, apache_)
    assert what == "DIFFERENT"
    assert paths == ["extra: — != True", "n: 2 != 3", "sync[0].queue: 0 != 1"]
    assert compare.verdict({"x": [1, 2], "timestamp": 1}, {"x": [1, 2], "timestamp": 2}) == ("same", [])
    assert compare.verdict({"x": [1, 2]}, {"x": [2, 1]})[0] == "DIFFERENT"  # order of scalars is a fact


def test_compare_says_which_side_failed() -> None:
    assert compare.verdict({"error": "boom"}, {"ok": 1}) == ("error on rokka", ["rokka: 'boom'"])
    assert compare.verdict({"ok": 1}, {"error": "x"})[0] == "error on Apache"
    assert compare.table([("kafka: codecs", "ran", "ran", "yes")]).splitlines()[-1] == \
        "| kafka: codecs | ran | ran | yes |"


def _msg(body: str, **props: str) -> dict[str, object]:
    return {"body": body, "tags": "T", "keys": body, "reconsume": 0, "msg_id": body,
            "props": {"UNIQ_KEY": f"u-{body}", "MAX_OFFSET": "9", **props}}


def test_rocketmq_summaries_keep_the_facts_and_drop_what_varies_per_run() -> None:
    run_a = {"received": [_msg("d-1", DELAY="1"), _msg("d-0")], "waited_ms": {"delay-0": 10, "delay-1": 1200}}
    run_b = {"received": [_msg("d-0"), _msg("d-1")], "waited_ms": {"delay-0": 300, "delay-1": 1001}}
    a, b = (rocketmq_summaries.summarize("delay", r) for r in (run_a, run_b))
    assert a["waited_at_least_the_level"] == {"delay-0": True, "delay-1": True}
    assert compare.verdict(a, b) == ("DIFFERENT", ["received[1].props.DELAY: '1' != —"])  # order, ids: not facts
    orderly = {"by_consumer": {"c0": ["k1:0", "k1:1", "k2:0"], "c1": ["k2:1", "k2:2"]}}
    # k2:1 delivered again after its queue moved to c1
    moved = {"by_consumer": {"c0": ["k1:0", "k2:0", "k1:1", "k2:1"], "c1": ["k2:1", "k2:2"]}}
    assert compare.verdict(*(rocketmq_summaries.summarize("orderly", r) for r in (orderly, moved)))[0] == "same"
    backwards = {"by_consumer": {"c0": ["k1:1", "k1:0"]}}
    assert rocketmq_summaries.summarize("orderly", backwards)["in_order_per_key_per_consumer"] is False
    assert rocketmq_summaries.summarize("send", {"error": "boom"}) == {"error": "boom"}
    assert "unexpected result shape" in rocketmq_summaries.summarize("send", {"sync": []})["error"]
