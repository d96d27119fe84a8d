"""The example job (pipeline/jobs/order_events.py) end to end on generated data."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="pyspark>=4 and pyarrow are needed: pip install -e '.[pipeline]'")

from rokka.pipeline.jobs.order_events import JobConfig, drain, expected_revenue, generate, start_query  # noqa: E402

from tests.pipeline.helpers import read_all  # noqa: E402

START_MS = 1_700_000_040_000  # a minute boundary


def test_order_events_job_windows_per_category(spark: Any, rokka: Any, tmp_path: Path) -> None:
    events = generate(rokka.namesrv, "JobOrders", 1500, start_ms=START_MS, step_ms=100)
    cfg = JobConfig(namesrv=rokka.namesrv, source_topic="JobOrders", result_topic="JobRevenue",
                    output=str(tmp_path / "out"), checkpoint=str(tmp_path / "ck"), max_per_trigger=600)
    query = start_query(spark, cfg, trigger="500 milliseconds")
    drain(query, idle_s=3.0, timeout_s=240)
    want = expected_revenue(events, 60_000)
    got = {(r.category, int(r.window_start.timestamp() * 1000)): (r.orders, r.revenue_cents)
           for r in spark.read.parquet(cfg.output).collect()}
    assert got == want
    published = read_all(spark, rokka.namesrv, "JobRevenue")
    assert len(published) == len(want)
    for r in published:
        doc = json.loads(r.body)
        assert r.tags == doc["category"]
        start = int(datetime.fromisoformat(doc["window_start"]).timestamp() * 1000)
        assert want[(doc["category"], start)] == (doc["orders"], doc["revenue_cents"])
