"""``cd interop && python -m matrix [scenario ...] [--producers a,b] [--consumers c,d]``: run and print."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from matrix.clients import BY_NAME
from matrix.scenarios import SCENARIOS, run_scenario
from matrix.table import render


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("scenarios", nargs="*", default=SCENARIOS)
    ap.add_argument("--producers", default="")
    ap.add_argument("--consumers", default="")
    args = ap.parse_args()
    prods = [BY_NAME[n] for n in args.producers.split(",") if n] or None
    cons = [BY_NAME[n] for n in args.consumers.split(",") if n] or None
    base = Path(tempfile.mkdtemp(prefix="rokka-matrix-"))
    results, timings = {}, {}
    for s in args.scenarios:
        results[s], timings[s] = run_scenario(s, base / s.replace("+", "_"), prods, cons)
        print(f"{s}: {timings[s]:.1f} s", flush=True)
    print(render(results, timings))
    print(f"(work dirs under {base})")


if __name__ == "__main__":
    main()
