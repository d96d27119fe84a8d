"""Fixtures of the Spark connector tests: one local SparkSession and one rokka server per session.

Rules: Spark runs in local mode (``local[2]``, no UI, 2 shuffle partitions) and is shared by the
whole directory so the suite stays fast; rokka runs as a real ``rokka serve`` subprocess on
127.0.0.1 with port 0 (interop/harness.py), started with ``enablePropertyFilter=true`` so SQL92
reads work.  Every test uses its own topics.  Without pyspark the tests skip with the reason
(each module calls ``pytest.importorskip``); ``make test`` installs the ``[pipeline]`` extra.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from interop.harness import ServerProcess, serve_argv

PYSPARK_MISSING = "pyspark>=4 and pyarrow are needed: pip install -e '.[pipeline]'"


def start_rokka(workdir: Path, conf_lines: tuple[str, ...] = ("enablePropertyFilter=true",)) -> ServerProcess:
    """``rokka serve`` with a broker.conf holding ``conf_lines`` (restartable on the same ports)."""
    data = workdir / "data"
    data.mkdir(parents=True, exist_ok=True)
    conf = workdir / "broker.conf"
    conf.write_text("\n".join(conf_lines) + "\n")
    srv = ServerProcess("rokka-serve", serve_argv(data, "json", conf), workdir, data_dir=data)
    return srv.start()


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    pytest.importorskip("pyspark", reason=PYSPARK_MISSING)
    from pyspark.sql import SparkSession
    from rokka.pipeline.source import register

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (SparkSession.builder.master("local[2]").appName("rokka-tests")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2").config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", "2g").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def rokka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    srv = start_rokka(tmp_path_factory.mktemp("rokka"))
    yield srv
    srv.stop_clean()
