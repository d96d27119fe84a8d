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
