"""Produce requests with several partitions: admitted, appended together (one CommitLog write for the
runs: ``Broker.append_uniforms``), then answered, with every partition's outcome as if it had come
alone -- refusals in place, a partition named twice or a view beside its source taken one after the
other, idempotent retries of the whole request answered as duplicates."""

from __future__ import annotations

from pathlib import Path

import pytest
from rokka.compat.kafka_records import kafka_rows
from rokka.compat.views import KafkaView
from rokka.core.broker import Broker
from rokka.core.config import BrokerConfig
from rokka.gateway.kafka import KafkaServer
from rokka.gateway.kafka.codec import APIS, Struct
from rokka.gateway.kafka.codec import records as R
from rokka.gateway.kafka.errors import ErrorCode as E
from rokka.gateway.kafka.handlers import KafkaEnv
from rokka.gateway.kafka.handlers import produce as P
from rokka.gateway.kafka.producers.journal import journal_files, read_entries
from rokka.gateway.kafka.producers.state import ProducerStateManager
from rokka.gateway.kafka.server import KafkaRequestContext


@pytest.fixture
def env(tmp_path: Path) -> KafkaEnv:
    cfg = BrokerConfig(store_path_root_dir=str(tmp_path / "store"))
    e = KafkaEnv(Broker(cfg), node_id=7, host="127.0.0.1", port=9092,
                 producers=ProducerStateManager(tmp_path / "producers"))
    e.broker.topics.ensure("t", 4)
    e.broker.topics.ensure("u", 2)
    return e


def batch(tag: str, n: int, *, keyed: bool = True, headers: bool = False, pid: int = -1, seq: int = -1) -> bytes:
    recs = [R.Record(i, i, f"{tag}-k{i}".encode() if keyed else None, f"{tag}-v{i}".encode(),
                     (R.Header("h", b"\xff" + tag.encode()),) if headers else ()) for i in range(n)]
    return R.encode_batch(recs, base_timestamp=1000, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                          base_sequence=seq)


async def produce(env: KafkaEnv, topics: list[tuple[str, list[tuple[int, bytes]]]]) -> list[list[Struct]]:
    body = APIS[0].request.make(acks=1, timeout_ms=100, transactional_id=None, topic_data=[
        Struct(name=name, partition_data=[Struct(index=i, records=r) for i, r in parts]) for name, parts in topics])
    ctx = KafkaRequestContext(("127.0.0.1", 1), "t", 0, 9, 1, {}, KafkaServer({}, max_frame_bytes=1 << 20))
    out = await P.handle_produce(env, ctx, body)
    assert out is not None
    APIS[0].encode_response(9, out)
    return [t.partition_responses for t in out.responses]


def rows(env: KafkaEnv, topic: str, queue: int) -> list[tuple[bytes | None, bytes | None]]:
    return [(r[3], r[4]) for r in kafka_rows(env.broker.store.get_messages(topic, queue, 0, 100).records)]


def sent(tag: str, n: int) -> list[tuple[bytes | None, bytes | None]]:
    return [(f"{tag}-k{i}".encode(), f"{tag}-v{i}".encode()) for i in range(n)]


async def test_partitions_of_two_topics_are_one_write(env: KafkaEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    clog = env.broker.store.clog    # type: ignore[attr-defined]
    writes: list[int] = []
    write_runs = clog.write_runs
    monkeypatch.setattr(clog, "write_runs", lambda parts: (writes.append(sum(map(len, parts))), write_runs(parts))[1])
    (t, u), = [await produce(env, [("t", [(p, batch(f"t{p}", 3 + p, headers=p == 2)) for p in range(4)]),
                                   ("u", [(1, batch("u1", 2, keyed=False))])])]
    assert [(r.error_code, r.base_offset) for r in t + u] == [(0, 0)] * 5
    for p in range(4):
        assert [(k, v) for k, v in rows(env, "t", p)] == sent(f"t{p}", 3 + p)
    assert [v for _, v in rows(env, "u", 1)] == [b"u1-v0", b"u1-v1"]
    # the runs lie back to back in the CommitLog, in request order: one write
    spans = []
    for topic, queue in [("t", 0), ("t", 1), ("t", 2), ("t", 3), ("u", 1)]:
        units = env.broker.store.cq_units(topic, queue, 0, 100)
        spans.append((units[0].commitlog_offset, units[-1].commitlog_offset + units[-1].size))
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))
    assert writes == [spans[-1][1] - spans[0][0]]
    again = await produce(env, [("t", [(p, batch(f"s{p}", 2)) for p in range(4)])])
    assert [r.base_offset for r in again[0]] == [3, 4, 5, 6]


async def test_refused_partitions_answer_in_place(env: KafkaEnv) -> None:
    bad = bytearray(batch("bad", 2))
    bad[-1] ^= 0xFF                                     # CRC no longer holds
    (t, nope), = [await produce(env, [("t", [(0, batch("a", 2)), (9, batch("b", 1)), (1, bytes(bad)),
                                             (2, batch("c", 1))]),
                                      ("nope", [(0, batch("d", 1))])])]
    assert [r.error_code for r in t] == [0, E.UNKNOWN_TOPIC_OR_PARTITION, E.CORRUPT_MESSAGE, 0]
    assert nope[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    assert rows(env, "t", 0) == sent("a", 2) and rows(env, "t", 1) == [] and rows(env, "t", 2) == sent("c", 1)


async def test_a_partition_twice_and_a_view_beside_its_source(env: KafkaEnv) -> None:
    env.views.put(KafkaView("t-view", "t"))
    (t, view), = [await produce(env, [("t", [(0, batch("a", 2)), (0, batch("b", 3)), (1, batch("c", 1))]),
                                      ("t-view", [(1, batch("d", 2))])])]
    assert [(r.error_code, r.base_offset) for r in t + view] == [(0, 0), (0, 2), (0, 0), (0, 1)]
    assert rows(env, "t", 0) == sent("a", 2) + sent("b", 3)
    assert rows(env, "t", 1) == sent("c", 1) + sent("d", 2)


async def test_idempotent_request_retried_whole_is_answered_as_duplicates(env: KafkaEnv, tmp_path: Path) -> None:
    assert env.producers is not None
    pid = 4242
    parts = [(p, batch(f"i{p}", 2 + p, pid=pid, seq=0)) for p in range(3)]
    first = await produce(env, [("t", parts)])
    assert [(r.error_code, r.base_offset) for r in first[0]] == [(0, 0)] * 3
    # each batch journaled once, before the append, with the offsets it then got (a kill -9 after the
    # one write still answers the retry as a duplicate)
    ((_, path),) = journal_files(tmp_path / "producers")
    assert sorted((e[3], e[6], e[7]) for e in read_entries(path)) == [(0, 0, 1), (1, 0, 2), (2, 0, 3)]
    retry = await produce(env, [("t", parts)])
    assert [(r.error_code, r.base_offset) for r in retry[0]] == [(0, 0)] * 3
    assert [len(rows(env, "t", p)) for p in range(3)] == [2, 3, 4]
    nxt = await produce(env, [("t", [(0, batch("n", 1, pid=pid, seq=2)), (1, batch("n", 1, pid=pid, seq=9))])])
    assert [r.error_code for r in nxt[0]] == [0, E.OUT_OF_ORDER_SEQUENCE_NUMBER]
    assert nxt[0][0].base_offset == 2 and len(rows(env, "t", 1)) == 3
    # the journaled intents matched the offsets the runs got
    dup = env.producers.check_batch(pid, 0, "t", 2, 0, 3)
    assert (dup.base_offset, dup.last_offset) == (0, 3)
