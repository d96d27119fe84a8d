"""``make bench`` runs every ``benchmarks/bench_*.py`` through ``benchmarks.run``, which hands each module's
``main`` the options it was given (``--quick`` among them): every module must take them.

A module whose ``main`` took no argument, or refused ``--quick``, ended ``make bench`` at that module
(bench_compaction and bench_ha did, until this test).  ``--help`` makes argparse print and exit before
any benchmark starts, so this only checks the command line each module accepts.
"""

from __future__ import annotations

import contextlib
import importlib
import io
from pathlib import Path

import pytest

MODULES = sorted(p.stem for p in (Path(__file__).resolve().parents[1] / "benchmarks").glob("bench_*.py"))


def test_every_module_is_found() -> None:
    assert {"bench_kafka", "bench_rocketmq", "bench_compaction", "bench_ha"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_main_takes_the_runner_options_and_quick(name: str) -> None:
    mod = importlib.import_module(f"benchmarks.{name}")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
        mod.main(["--help"])
    assert done.value.code == 0
    assert "--quick" in out.getvalue(), f"{name} does not accept --quick (make bench --quick passes it)"


def test_key_and_two_headers_carries_a_traceparent_of_its_own_per_record() -> None:
    # tracing stamps each record with its own trace: the shape must not let a broker reuse the last
    # record's mapped headers (rokka's mappers cache the previous header list)
    import re

    from benchmarks.lib.kafka_role import shape_parts
    keys, lists = shape_parts("key+2-headers")
    assert keys is not None and lists is not None and len(lists) == 1000
    parents = [dict(hs)["traceparent"] for hs in lists]
    assert len(set(parents)) == 1000
    assert all(re.fullmatch(rb"00-[0-9a-f]{32}-[0-9a-f]{16}-01", p) for p in parents)
    assert all(dict(hs)["content-type"] == b"application/json" for hs in lists)
    plain_keys, none = shape_parts("plain")
    assert plain_keys is None and none is None


def test_mapping_micro_benchmark_measures_every_shape() -> None:
    micro = importlib.import_module("benchmarks.micro_kafka_mapping")
    if micro._crecords is None:
        pytest.skip("the native Kafka record helper is not built (make test builds it)")
    for shape in micro.SHAPES:
        produce, fetch = micro.measure(shape, reps=3)
        assert produce > 0 and fetch > 0


def test_produce_micro_benchmark_stores_every_request() -> None:
    """Every shape and layout goes through the real handler into a real store: each partition holds
    all the records of every run (one warm-up run and the counted ones)."""
    micro = importlib.import_module("benchmarks.micro_kafka_produce")
    for shape in micro.SHAPES:
        rec, req, stored = micro.measure(shape, 3, 5, count=2, runs=2, sleep_s=0.0005)
        assert rec > 0 and req > 0
        assert stored == [2 * 5 * 3] * 3        # 2 requests x 5 records x (1 warm-up + 2 runs)
