"""``rokka pipeline run order_events ...``: the one-command path a user takes (own process, own Spark)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="pyspark>=4 and pyarrow are needed: pip install -e '.[pipeline]'")

from interop.harness import rokka_executable  # noqa: E402


def test_pipeline_list_and_unknown_job() -> None:
    out = subprocess.run([rokka_executable(), "pipeline", "list"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "order_events" in out.stdout.split()
    bad = subprocess.run([rokka_executable(), "pipeline", "run", "nope"], capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2 and "unknown job 'nope'" in bad.stderr


def test_pipeline_run_order_events_end_to_end(rokka: Any, tmp_path: Path) -> None:
    out_dir = tmp_path / "revenue"
    proc = subprocess.run(
        [rokka_executable(), "pipeline", "run", "order_events", "--namesrv", rokka.namesrv, "--generate", "600",
         "--source-topic", "CliOrders", "--result-topic", "CliRevenue", "--output", str(out_dir),
         "--idle-seconds", "2"], capture_output=True, text=True, timeout=280, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "sent 600 order events" in proc.stdout
    assert "window results in" in proc.stdout
    assert any(out_dir.glob("batch_id=*/*.parquet"))
