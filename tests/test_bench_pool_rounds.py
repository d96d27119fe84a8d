"""benchmarks.kafka_pool_rounds: per-round ratios pooled from saved bench_kafka outputs."""

from __future__ import annotations

from benchmarks.kafka_pool_rounds import pool, table

RUN = """round 1 of 2
  tansu produce 100 B acks=1: confluent 800,000/s
  tansu consume 100 B: confluent 1,000,000/s
  rokka produce 100 B acks=1: confluent 880,000/s
  rokka produce 100 B acks=1: kcat 1,500,000/s
  rokka consume 100 B: confluent 900,000/s
round 2 of 2
  rokka produce 100 B acks=1: confluent 700,000/s
  rokka consume 100 B: confluent 1,200,000/s
  tansu produce 100 B acks=1: confluent 700,000/s
  tansu consume 100 B: confluent 1,000,000/s
"""


def test_rounds_pool_across_runs() -> None:
    rows = pool([RUN, RUN.replace("880,000", "440,000")])
    assert [round(r, 2) for r in rows[("produce", "100", "1")]] == [1.1, 1.0, 0.55, 1.0]
    assert [round(r, 2) for r in rows[("consume", "100", "")]] == [0.9, 1.2, 0.9, 1.2]
    out = table(rows)
    assert "| produce 100 B acks=1 | 4 | 1.00x | 3 of 4 | 0.55x | 1.10x |" in out
    assert "| consume 100 B | 4 | 1.05x | 2 of 4 | 0.90x | 1.20x |" in out


def test_a_round_without_tansu_numbers_is_left_out() -> None:
    assert pool(["round 1 of 1\n  rokka produce 100 B acks=1: confluent 5/s\n"]) == {}
