"""benchmarks.kafka_pool_rounds (per-round ratios pooled from saved bench_kafka outputs) and bench_kafka's kcat."""

from __future__ import annotations

from pathlib import Path

import confluent_kafka
import pytest

from benchmarks import bench_kafka
from benchmarks.kafka_pool_rounds import pool, table
from interop import harness

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
    assert [round(r, 2) for r in rows[("produce", "100", "1", "confluent")]] == [1.1, 1.0, 0.55, 1.0]
    assert [round(r, 2) for r in rows[("consume", "100", "", "confluent")]] == [0.9, 1.2, 0.9, 1.2]
    out = table(rows)
    assert "| produce 100 B acks=1 | confluent | 4 | 1.00x | 3 of 4 | 0.55x | 1.10x |" in out
    assert "| consume 100 B | confluent | 4 | 1.05x | 2 of 4 | 0.90x | 1.20x |" in out


def test_a_round_without_tansu_numbers_is_left_out() -> None:
    assert pool(["round 1 of 1\n  rokka produce 100 B acks=1: confluent 5/s\n"]) == {}


def test_kcat_rows_pool_apart_from_confluent_rows() -> None:
    run = RUN.replace("round 2 of 2", "  tansu produce 100 B acks=1: kcat 1,000,000/s\nround 2 of 2")
    rows = pool([run])
    assert rows[("produce", "100", "1", "kcat")] == [1.5]
    assert [round(r, 2) for r in rows[("produce", "100", "1", "confluent")]] == [1.1, 1.0]
    assert "| produce 100 B acks=1 | kcat | 1 | 1.50x | 1 of 1 | 1.50x | 1.50x |" in table(rows)


def test_kcat_runs_with_the_librdkafka_of_the_confluent_kafka_wheel(tmp_path: Path) -> None:
    """bench_kafka's kcat rows use the wheel's librdkafka (Debian's cannot talk to Tansu): kcat -V says so."""
    if harness.kcat_path() is None:
        pytest.fail("kcat is not installed: `make test` installs it (interop/install.sh)")
    env = bench_kafka.kcat_env(tmp_path)
    assert env is not None and str(tmp_path / "kcat-lib") in env["LD_LIBRARY_PATH"]
    old, bench_kafka.KCAT_ENV = bench_kafka.KCAT_ENV, env
    try:
        assert f"librdkafka {confluent_kafka.libversion()[0]} " in bench_kafka.kcat_version()
    finally:
        bench_kafka.KCAT_ENV = old
