"""``python -m benchmarks.soak``: SIGTERM and kill -9 rounds under load; exit 1 if a check failed.

``--rounds N`` SIGTERM stops and N kill -9 rounds (``make soak``: SOAK_ROUNDS, default 100), ``--round-s``
seconds of load between stops, ``--rate`` records/s per producer, ``--json PATH`` for the result.  The
summary table (machine, date, rounds, acknowledged, lost, duplicates, exit codes) is what README's
reliability section quotes.
"""

from __future__ import annotations

import argparse
import sys

from benchmarks.fuzz.report import finish
from benchmarks.soak.driver import SoakConfig, run_soak


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.soak")
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--round-s", type=float, default=3.0)
    ap.add_argument("--settle-s", type=float, default=15.0)
    ap.add_argument("--rate", type=float, default=100.0)
    ap.add_argument("--roles", nargs="*", default=["idem", "kp-idem", "txn", "plain", "rmq", "cpp"])
    ap.add_argument("--json", default=None)
    ap.add_argument("--server-pythonpath", default=None, help="a folder holding another tree's rokka/ package")
    a = ap.parse_args(argv)
    cfg = SoakConfig(rounds=a.rounds, round_s=a.round_s, settle_s=a.settle_s, rate=a.rate, roles=tuple(a.roles),
                     server_pythonpath=a.server_pythonpath)
    res = run_soak(cfg, log=lambda s: print(s, flush=True))
    print()
    print(res.table())
    failed = res.checks()
    print(f"\nloader errors (nack / reconnects, expected while the server is down): {res.loader_errors}")
    return finish(res, failed, a.json)


if __name__ == "__main__":
    sys.exit(main())
