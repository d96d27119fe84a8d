"""Pool the rounds of several ``bench_kafka`` runs: per compared row, the rokka/Tansu ratio of every round.

Run: ``python -m benchmarks.kafka_pool_rounds OUT1 [OUT2 ...]`` with the saved output of
``python -m benchmarks.bench_kafka`` (or ``benchmarks.run kafka``).

Theory of operation
-------------------
A run prints, for each round, one line per broker, row and client (``  rokka produce 100 B acks=1:
confluent 778,364/s``, ``... : kcat 1,512,000/s``).  Each round's rokka number is divided by the same round's Tansu
number; the table gives, per row, how many rounds there were, their median ratio, how many were at
or above 1.0x, and the extremes.  One run of three rounds is a small sample on a machine whose rows
swing +-35 %; several runs pooled say how often a row passes.
"""

from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path

_ROUND = re.compile(r"round \d+ of \d+")
_ROW = re.compile(r"  (rokka|tansu) (produce|consume) (\d+) B(?: acks=(\w+))?: (confluent|kcat) ([\d,]+)/s")


Row = tuple[str, str, str, str]  # (op, size, acks, client)


def pool(texts: list[str]) -> dict[Row, list[float]]:
    """{(op, size, acks, client): [rokka/Tansu per round]} over every round of every run."""
    rows: dict[Row, list[float]] = {}
    for text in texts:
        for rnd in _ROUND.split(text)[1:]:
            vals = {(b, op, size, acks, client): float(v.replace(",", ""))
                    for b, op, size, acks, client, v in _ROW.findall(rnd)}
            for (b, op, size, acks, client), v in vals.items():
                tansu = vals.get(("tansu", op, size, acks, client))
                if b == "rokka" and tansu:
                    rows.setdefault((op, size, acks, client), []).append(v / tansu)
    return rows


def table(rows: dict[Row, list[float]]) -> str:
    out = ["| row | client | rounds | median rokka/Tansu | rounds >= 1.0x | min | max |",
           "|---|---|---|---|---|---|---|"]
    for (op, size, acks, client), rs in rows.items():
        name = f"{op} {size} B" + (f" acks={acks}" if acks else "")
        passed = sum(r >= 1.0 for r in rs)
        out.append(f"| {name} | {client} | {len(rs)} | {statistics.median(rs):.2f}x | {passed} of {len(rs)}"
                   f" | {min(rs):.2f}x | {max(rs):.2f}x |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    paths = sys.argv[1:] if argv is None else argv
    if not paths:
        sys.exit("usage: python -m benchmarks.kafka_pool_rounds OUTPUT [OUTPUT ...]")
    print(table(pool([Path(p).read_text() for p in paths])))


if __name__ == "__main__":
    main()
