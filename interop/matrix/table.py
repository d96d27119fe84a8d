"""The matrix as Markdown: one row per (producer, consumer), one column per scenario.

A cell reads ``pass 8→8`` (records produced → records received), ``FAIL 8→6`` or ``n/a``; every
failure and every n/a reason is listed under the table, so nothing is hidden.
"""

from __future__ import annotations

from collections import defaultdict

from matrix.clients import CLIENTS
from matrix.model import CellResult
from matrix.scenarios import SCENARIOS


def cell_text(r: CellResult) -> str:
    if r.status == "n/a":
        return f"n/a: {r.short}"
    arrow = f"{r.sent}→{r.received}"
    if r.expected != r.sent:
        arrow += f" (want {r.expected})"
    return f"{'pass' if r.status == 'pass' else '**FAIL**'} {arrow}"


def render(results: dict[str, list[CellResult]], timings: dict[str, float], header: str = "") -> str:
    scenarios = [s for s in SCENARIOS if s in results]
    by = {(r.scenario, r.producer, r.consumer): r for rs in results.values() for r in rs}
    lines = [header] if header else []
    lines += ["| producer → consumer | " + " | ".join(scenarios) + " |",
              "| --- | " + " | ".join("---" for _ in scenarios) + " |"]
    for p in CLIENTS:
        for c in CLIENTS:
            cells = [by.get((s, p.name, c.name)) for s in scenarios]
            row = " | ".join(cell_text(x) if x else "" for x in cells)
            lines.append(f"| {p.name} → {c.name} | {row} |")
    total: dict[str, int] = defaultdict(int)
    for r in by.values():
        total[r.status] += 1
    lines += ["", f"Cells: {total['pass']} pass, {total['FAIL']} fail, {total['n/a']} n/a. "
              "Wall time per scenario (2 cores): "
              + ", ".join(f"{s} {timings[s]:.0f} s" for s in scenarios if s in timings)
              + f"; total {sum(timings.values()):.0f} s.", ""]
    na: dict[str, list[str]] = defaultdict(list)
    for r in by.values():
        if r.status == "n/a":
            na[r.detail].append(f"{r.scenario}: {r.producer} → {r.consumer}")
    if na:
        lines.append("**n/a cells**")
        lines.append("")
        for why, where in na.items():
            scen = sorted({w.split(":")[0] for w in where})
            prods = sorted({w.split(": ")[1].split(" → ")[0] for w in where})
            lines.append(f"- {', '.join(scen)} / producer {', '.join(prods)} ({len(where)} cells): {why}")
        lines.append("")
    fails = [r for r in by.values() if r.status == "FAIL"]
    if fails:
        lines.append("**Failing cells**")
        lines.append("")
        for r in fails:
            lines.append(f"- {r.scenario}: {r.producer} → {r.consumer}: " + "; ".join(r.problems)[:600])
        lines.append("")
    return "\n".join(lines)
