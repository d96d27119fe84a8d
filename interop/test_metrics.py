"""Prometheus metrics (``metricsExporterType=PROM``): a Kafka producer writes, a group commits part of
the way, and a scrape over HTTP (urllib), parsed by prometheus_client's own text parser, shows the
messages in, the group's lag, the Kafka listener's counters and the process metrics; other paths
and methods are refused.

Everything on 127.0.0.1 with free ports; every call is bounded.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from typing import Any

import harness
import pytest
from kafka_common import topic_name

PROM = {"metricsExporterType": "PROM", "metricsPromExporterPort": "0"}


def scrape(addr: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://{addr}/metrics", timeout=10) as resp:
        assert resp.status == 200 and resp.headers["Content-Type"].startswith("text/plain")
        text = resp.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def value(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float | None:
    for (n, ls), v in samples.items():
        if n == name and set(labels.items()) <= ls:
            return v
    return None


def test_scrape_shows_messages_lag_and_counters(configured_rokka: Any) -> None:
    pytest.importorskip("kafka", reason="kafka-python is not installed")
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    srv = configured_rokka(PROM, {})
    metrics = srv.addrs["metrics"]
    topic, group = topic_name("met"), topic_name("met-g")
    p = KafkaProducer(bootstrap_servers=srv.kafka)
    for i in range(20):
        p.send(topic, f"m{i}".encode(), partition=0)
    p.flush(timeout=30)
    p.close(timeout=10)
    c = KafkaConsumer(bootstrap_servers=srv.kafka, group_id=group, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.commit({tp: OffsetAndMetadata(5, "", -1)})
    finally:
        c.close()
    deadline = time.monotonic() + 20
    while True:         # the producer's messages may still be on their way into the ConsumeQueue
        samples = scrape(metrics)
        if value(samples, "rocketmq_messages_in_total", topic=topic) == 20 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert value(samples, "rocketmq_messages_in_total", topic=topic, node_type="broker",
                 node_id="broker-a", cluster="DefaultCluster") == 20
    assert value(samples, "rocketmq_consumer_lag_messages", topic=topic, consumer_group=group) == 15
    assert (value(samples, "rocketmq_consumer_group_number") or 0) >= 1
    assert (value(samples, "rokka_kafka_requests_total") or 0) > 0
    assert (value(samples, "rocketmq_storage_size") or 0) > 20 * 100
    assert (value(samples, "process_resident_memory_bytes") or 0) > 0
    assert (value(samples, "rokka_kafka_request_duration_seconds_count", api="Produce") or 0) >= 1
    assert (value(samples, "rokka_kafka_request_duration_seconds_bucket", api="Metadata", le="+Inf") or 0) >= 1
    for path, method, code in (("/", "GET", 404), ("/metrics", "POST", 405)):
        req = urllib.request.Request(f"http://{metrics}{path}", method=method, data=b"" if method == "POST" else None)
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(req, timeout=10)
        assert info.value.code == code


def test_unknown_exporter_type_refuses_the_start(configured_rokka: Any) -> None:
    with pytest.raises(harness.HarnessError, match="metricsExporterType=OTLP_GRPC"):
        configured_rokka({"metricsExporterType": "OTLP_GRPC"}, {})
