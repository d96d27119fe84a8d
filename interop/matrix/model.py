"""What the matrix sends, what it gets back, and what "correct" means for one cell.

Theory of operation
-------------------
A scenario describes the records of a cell in a protocol-neutral form (``Spec``: value, key,
headers, tag, delay level); each producer role turns a ``Spec`` into its own protocol's message
(Kafka: key, headers + ``rocketmq.TAGS`` / ``rocketmq.DELAY`` headers; RocketMQ: KEYS, TAGS, user
properties, delay level).  Each consumer role reports what it received as an ``Obs`` in its own
protocol's terms (Kafka: key + header list; RocketMQ: KEYS, TAGS, properties).

``check_cell`` holds one received set against the expected specs using the mapping of
``docs/compat.md``: values are the identity (unique per cell), so loss, duplicates and leaks
(filtered-out or aborted records) are found by value; then every field of every record is compared:

* Kafka producer -> Kafka consumer: key and the exact header list (order included).
* RocketMQ producer -> Kafka consumer: key = KEYS; headers without the ``rocketmq.`` prefix are the
  user properties (exactly, as a set); ``rocketmq.TAGS`` / ``rocketmq.KEYS`` carry TAGS / KEYS.
* any producer -> RocketMQ consumer: KEYS = key, TAGS = tag, each header is a user property.
* delayed records read by a RocketMQ consumer were stored no earlier than born + their delay.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

KAFKA = "kafka"
ROCKETMQ = "rocketmq"
DELAY_LEVELS_S = (1, 2, 3)  # the matrix's broker.conf: messageDelayLevel=1s 2s 3s


@dataclass(frozen=True)
class Spec:
    """One record as a scenario means it, before any protocol mapping."""

    value: str
    key: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    tag: str | None = None
    delay: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "key": self.key, "headers": [list(h) for h in self.headers],
                "tag": self.tag, "delay": self.delay}

    def kafka_headers(self) -> list[tuple[str, str]]:
        """The header list a Kafka producer sends for this record."""
        out = list(self.headers)
        if self.tag:
            out.append(("rocketmq.TAGS", self.tag))
        if self.delay:
            out.append(("rocketmq.DELAY", str(self.delay)))
        return out


@dataclass
class Obs:
    """One received record, normalised by the consumer driver."""

    value: str
    key: str | None = None                       # Kafka key, or RocketMQ KEYS
    headers: list[tuple[str, str]] | None = None  # Kafka consumers only
    tags: str | None = None                      # RocketMQ consumers only
    props: dict[str, str] | None = None          # RocketMQ consumers only (the names asked for)
    born_ts: int | None = None
    store_ts: int | None = None

    @classmethod
    def from_json(cls, e: dict[str, Any]) -> Obs:
        headers = e.get("headers")
        return cls(value=e["value"], key=e.get("key") or None,
                   headers=None if headers is None else [(str(k), str(v)) for k, v in headers],
                   tags=e.get("tags") or None, props=e.get("props"), born_ts=e.get("born_ts"),
                   store_ts=e.get("store_ts"))


@dataclass
class Job:
    """One cell's work for one consumer run: read ``read`` (a topic or a view of ``topic``)."""

    cell: tuple[str, str]
    topic: str
    read: str
    expect: int
    expression: str = "*"
    props: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "read": self.read, "expect": self.expect, "expression": self.expression,
                "props": list(self.props)}


@dataclass
class CellResult:
    producer: str
    consumer: str
    scenario: str
    status: str = "pass"  # pass | FAIL | n/a
    sent: int = 0
    received: int = 0
    expected: int = 0
    detail: str = ""
    problems: list[str] = field(default_factory=list)
    short: str = ""  # the n/a reason as the table cell shows it

    def fail(self, why: str) -> None:
        self.status = "FAIL"
        self.problems.append(why)

    def na(self, why: str, short: str) -> None:
        self.status = "n/a"
        self.detail = why
        self.short = short


def check_cell(res: CellResult, producer_proto: str, consumer_proto: str, want: list[Spec],
               got: list[Obs]) -> None:
    """Compare ``got`` with ``want`` for one cell; records problems on ``res`` (max 6 shown)."""
    res.expected = len(want)
    res.received = len(got)
    by_value = {s.value: s for s in want}
    counts = Counter(o.value for o in got)
    missing = [v for v in by_value if v not in counts]
    extra = [v for v in counts if v not in by_value]
    dups = {v: n for v, n in counts.items() if n > 1}
    if missing:
        res.fail(f"{len(missing)} of {len(want)} records missing, e.g. {missing[:3]}")
    if extra:
        res.fail(f"{len(extra)} records that should not be visible, e.g. {extra[:3]}")
    if dups:
        res.fail(f"{len(dups)} records delivered more than once, e.g. {list(dups.items())[:3]}")
    field_problems: list[str] = []
    for o in got:
        spec = by_value.get(o.value)
        if spec is None:
            continue
        if consumer_proto == KAFKA:
            field_problems += _check_kafka(producer_proto, spec, o)
        else:
            field_problems += _check_rocketmq(spec, o)
    if field_problems:
        res.fail(f"{len(field_problems)} field mismatches: " + "; ".join(field_problems[:4]))


def _check_kafka(producer_proto: str, spec: Spec, o: Obs) -> list[str]:
    out = []
    if o.key != spec.key:
        out.append(f"{spec.value!r}: key {o.key!r} != {spec.key!r}")
    headers = o.headers or []
    if producer_proto == KAFKA:
        if headers != spec.kafka_headers():
            out.append(f"{spec.value!r}: headers {headers} != {spec.kafka_headers()}")
        return out
    user = [(k, v) for k, v in headers if not k.startswith("rocketmq.")]
    if sorted(user) != sorted(spec.headers):
        out.append(f"{spec.value!r}: user headers {user} != {list(spec.headers)}")
    system = dict((k, v) for k, v in headers if k.startswith("rocketmq."))
    if spec.tag and system.get("rocketmq.TAGS") != spec.tag:
        out.append(f"{spec.value!r}: rocketmq.TAGS {system.get('rocketmq.TAGS')!r} != {spec.tag!r}")
    if spec.key and system.get("rocketmq.KEYS") != spec.key:
        out.append(f"{spec.value!r}: rocketmq.KEYS {system.get('rocketmq.KEYS')!r} != {spec.key!r}")
    return out


def _check_rocketmq(spec: Spec, o: Obs) -> list[str]:
    out = []
    if o.key != spec.key:
        out.append(f"{spec.value!r}: KEYS {o.key!r} != {spec.key!r}")
    if o.tags != spec.tag:
        out.append(f"{spec.value!r}: TAGS {o.tags!r} != {spec.tag!r}")
    props = o.props or {}
    for k, v in spec.headers:
        if props.get(k) != v:
            out.append(f"{spec.value!r}: property {k}={props.get(k)!r} != {v!r}")
    if spec.delay and o.born_ts and o.store_ts is not None:
        due = o.born_ts + DELAY_LEVELS_S[spec.delay - 1] * 1000
        if o.store_ts < due:
            out.append(f"{spec.value!r}: delivered {due - o.store_ts} ms early (level {spec.delay})")
    return out
