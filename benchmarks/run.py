"""``make bench``: run every benchmark module in turn and print their tables.

Each ``benchmarks/bench_*.py`` exposes ``main(argv=None)``.  Pass names to run
a subset: ``python -m benchmarks.run storage kafka``; ``--quick`` is passed
through to modules that support a shorter run.
"""

from __future__ import annotations

import importlib
import platform
import subprocess
import sys
import time
from pathlib import Path


def machine() -> str:
    cpu = "unknown cpu"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        import os

        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / (1 << 30)
        cores = os.cpu_count()
    except (ValueError, OSError):
        mem, cores = 0.0, 0
    return f"{cpu}, {cores} cores, {mem:.0f} GiB RAM, {platform.system()} {platform.release()}, Python {platform.python_version()}"


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    passthrough = [a for a in args if a.startswith("-")]
    wanted = [a for a in args if not a.startswith("-")]
    here = Path(__file__).parent
    names = sorted(p.stem[len("bench_"):] for p in here.glob("bench_*.py"))
    if wanted:
        names = [n for n in names if n in wanted]
    print(f"# rokka benchmarks — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"# machine: {machine()}")
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"# commit: {rev}")
    for name in names:
        print(f"\n## {name}\n", flush=True)
        mod = importlib.import_module(f"benchmarks.bench_{name}")
        mod.main(passthrough)


if __name__ == "__main__":
    main()
