"""Prometheus metrics over HTTP (RocketMQ 5's ``metricsExporterType=PROM``).

Theory of operation
-------------------
With ``metricsExporterType=PROM`` the broker listens on ``metricsPromExporterHost`` :
``metricsPromExporterPort`` (RocketMQ 5's keys; default 5557) and answers ``GET /metrics`` in the
Prometheus text format.  The HTTP side is h11 (sans-IO) driven by one trio task per connection:
one request per connection, its head bounded by ``MAX_REQUEST_BYTES`` and its arrival by
``REQUEST_TIMEOUT_S``; anything but GET/HEAD of ``/metrics`` gets 404 or 405.

Every value but the request-duration histogram is read from the broker's own state when Prometheus
scrapes (``BrokerCollector``), so the produce and fetch paths carry no counters.  Names follow
RocketMQ 5.1's broker metrics where the meaning is the same (labels ``cluster``,
``node_type="broker"``, ``node_id`` = brokerName):

* ``rocketmq_messages_in_total{topic}``: messages written to the topic since it was created (the
  sum of its queues' max offsets: ConsumeQueue offsets count messages, so it survives restarts);
* ``rocketmq_consumer_lag_messages{topic,consumer_group}``: messages after the group's committed
  offsets (from the queue's min offset when the commit is older), for every group with commits
  (RocketMQ and Kafka groups share the offset table);
* ``rocketmq_topic_number``, ``rocketmq_consumer_group_number`` (groups with committed offsets),
  ``rocketmq_storage_size`` (CommitLog bytes kept), ``rokka_storage_flush_behind_bytes``;
* ``rokka_kafka_connections_total``, ``rokka_kafka_requests_total``,
  ``rokka_kafka_protocol_errors_total`` (the Kafka listener's counters),
  ``rokka_kafka_request_duration_seconds{api}`` (a histogram of time in the handler; the one thing
  measured on the request path, and only while metrics are on), and the process's own CPU, memory
  and file descriptors (prometheus_client's process collector).

The collector runs on the trio thread (the broker's tables are not shared with threads); its cost
is a few dictionary walks per topic and group.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import h11
import structlog
import trio
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Histogram, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from rokka.core.broker import Broker

__all__ = ["BrokerCollector", "MetricsServer", "kafka_request_timer", "registry_for"]

log = structlog.get_logger(__name__)

MAX_REQUEST_BYTES = 16 * 1024
REQUEST_TIMEOUT_S = 10.0
PATH = "/metrics"


class BrokerCollector(Collector):
    """Metric families computed from a Broker (and the Kafka listener's counters) at scrape time."""

    def __init__(self, broker: Broker, kafka_stats: Callable[[], Any] | None = None) -> None:
        self.broker = broker
        self.kafka_stats = kafka_stats

    def collect(self) -> Iterator[Any]:
        b = self.broker
        base = {"cluster": b.cfg.broker_cluster_name, "node_type": "broker", "node_id": b.cfg.broker_name}
        names = list(base)
        store = b.store
        queues = store.queues()
        messages = CounterMetricFamily("rocketmq_messages_in", "Messages written to the topic since its creation.",
                                       labels=[*names, "topic"])
        max_offsets: dict[tuple[str, int], int] = {}
        for topic, qids in sorted(queues.items()):
            total = 0
            for q in qids:
                max_offsets[(topic, q)] = m = store.max_offset(topic, q)
                total += m
            messages.add_metric([*base.values(), topic], total)
        yield messages
        lag = GaugeMetricFamily("rocketmq_consumer_lag_messages",
                                "Messages after the consumer group's committed offsets.",
                                labels=[*names, "topic", "consumer_group"])
        groups: set[str] = set()
        for group, topic, committed in sorted(b.offsets.entries()):
            groups.add(group)
            behind = 0
            for q, off in committed.items():
                hi = max_offsets.get((topic, q))
                if hi is not None and off >= 0:
                    behind += max(hi - max(off, store.min_offset(topic, q)), 0)
            lag.add_metric([*base.values(), topic, group], behind)
        yield lag
        yield _gauge("rocketmq_topic_number", "Topics of the broker.", base, len(b.topics.all()))
        yield _gauge("rocketmq_consumer_group_number", "Consumer groups with committed offsets.", base, len(groups))
        yield _gauge("rocketmq_storage_size", "CommitLog bytes kept (max - min offset).", base,
                     store.commitlog_max_offset - store.commitlog_min_offset)
        yield _gauge("rokka_storage_flush_behind_bytes", "CommitLog bytes written but not yet flushed.", base,
                     max(store.commitlog_max_offset - store.flushed_offset, 0))
        if self.kafka_stats is not None:
            stats = self.kafka_stats()
            for name, value, doc in (("connections", stats.connections, "Kafka connections accepted."),
                                     ("requests", stats.requests, "Kafka requests received."),
                                     ("protocol_errors", stats.protocol_errors,
                                      "Kafka connections closed for a protocol error.")):
                fam = CounterMetricFamily(f"rokka_kafka_{name}", doc, labels=names)
                fam.add_metric(list(base.values()), value)
                yield fam


def _gauge(name: str, doc: str, base: dict[str, str], value: float) -> GaugeMetricFamily:
    fam = GaugeMetricFamily(name, doc, labels=list(base))
    fam.add_metric(list(base.values()), value)
    return fam


def registry_for(collector: Collector) -> CollectorRegistry:
    """A registry with ``collector`` and the process's own metrics."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    ProcessCollector(registry=registry)
    return registry


#: Request durations from a few hundred microseconds (Produce, Metadata) to long polls (Fetch, JoinGroup).
DURATION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


def kafka_request_timer(registry: CollectorRegistry, names: Callable[[int], str],
                        base: dict[str, str]) -> Callable[[int, float], None]:
    """``observe(api_key, seconds)`` feeding ``rokka_kafka_request_duration_seconds{api}`` (time in the
    handler, long polls included, as Kafka's request metrics count them)."""
    hist = Histogram("rokka_kafka_request_duration_seconds", "Kafka request time in the broker, by API.",
                     [*base, "api"], buckets=DURATION_BUCKETS, registry=registry)
    children: dict[int, Any] = {}

    def observe(api_key: int, seconds: float) -> None:
        child = children.get(api_key)
        if child is None:
            child = children[api_key] = hist.labels(*base.values(), names(api_key))
        child.observe(seconds)
    return observe


class MetricsServer:
    """``GET /metrics`` over HTTP/1.1 (h11), one request per connection."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    async def serve(self, host: str, port: int, *,
                    task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(port, host=host)
        sock = listeners[0].socket.getsockname()
        log.info("metrics.listening", host=sock[0], port=sock[1], path=PATH)
        task_status.started((sock[0], sock[1]))
        await trio.serve_listeners(self.handle, listeners)

    async def handle(self, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_REQUEST_BYTES)
        try:
            request = await self._read_request(stream, conn)
            if request is not None:
                status, headers, body = self.respond(request)
                out = conn.send(h11.Response(status_code=status, headers=[
                    *headers, ("Content-Length", str(len(body))), ("Connection", "close")]))
                if request.method != b"HEAD":
                    out += conn.send(h11.Data(data=body))
                out += conn.send(h11.EndOfMessage())
                await stream.send_all(out)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await stream.aclose()

    async def _read_request(self, stream: trio.SocketStream, conn: h11.Connection) -> h11.Request | None:
        with trio.move_on_after(REQUEST_TIMEOUT_S):
            while True:
                try:
                    event = conn.next_event()
                except h11.RemoteProtocolError as exc:
                    log.info("metrics.bad_request", error=str(exc))
                    return None
                if isinstance(event, h11.Request):
                    return event
                if event is h11.NEED_DATA:
                    conn.receive_data(await stream.receive_some(MAX_REQUEST_BYTES))
                elif isinstance(event, h11.ConnectionClosed):
                    return None
        return None

    def respond(self, request: h11.Request) -> tuple[int, list[tuple[str, str]], bytes]:
        path = request.target.split(b"?", 1)[0]
        if path != PATH.encode():
            return 404, [("Content-Type", "text/plain")], b"not found: rokka serves /metrics\n"
        if request.method not in (b"GET", b"HEAD"):
            return 405, [("Allow", "GET, HEAD"), ("Content-Type", "text/plain")], b"method not allowed\n"
        return 200, [("Content-Type", CONTENT_TYPE_LATEST)], generate_latest(self.registry)
