"""``python -m benchmarks.fuzz``: one fuzz run against a fresh ``rokka serve``; exit 1 if a check failed.

Families (``--only`` / ``--without``): valid names traversal numbers json bombs lengths mutate.
``--strict`` adds the checks issue 19's fixes should turn green (no traceback, bounded log, RSS under
``--rss-limit-mib``, nothing outside the store, SIGTERM exit 0).  ``--json PATH`` writes the result.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time

from benchmarks.fuzz import hostile
from benchmarks.fuzz.driver import PORTS, FuzzConfig, run_fuzz
from benchmarks.fuzz.report import finish


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.fuzz")
    ap.add_argument("--frames", type=int, default=1_000_000, help="frames per port")
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100_000)
    ap.add_argument("--only", nargs="*", default=None, help="families to use (default: all)")
    ap.add_argument("--without", nargs="*", default=[], help="families to leave out")
    ap.add_argument("--ports", nargs="*", default=list(PORTS))
    ap.add_argument("--bomb-mib", type=int, default=256, help="how far a compressed bomb inflates")
    ap.add_argument("--time-limit-s", type=float, default=3 * 3600)
    ap.add_argument("--rss-limit-mib", type=int, default=512)
    ap.add_argument("--kill-rss-mib", type=int, default=6144, help="kill the server when its own memory passes this")
    ap.add_argument("--no-steady", action="store_true")
    ap.add_argument("--strict", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--avoid", nargs="*", default=[], help="known bugs not to trigger (kafka_frames.KNOWN_BUGS)")
    ap.add_argument("--server-pythonpath", default=None,
                    help="run the server from another rokka tree (a folder holding a rokka/ package)")
    a = ap.parse_args(argv)
    families = set(a.only if a.only is not None else hostile.FAMILIES) - set(a.without)
    cfg = FuzzConfig(frames_per_port=a.frames, seed=a.seed, families=frozenset(families),
                     bomb_bytes=a.bomb_mib << 20, time_limit_s=a.time_limit_s, rss_limit_mib=a.rss_limit_mib,
                     kill_rss_mib=a.kill_rss_mib, ports=tuple(a.ports), steady=not a.no_steady,
                     avoid=frozenset(a.avoid),
                     server_env={"PYTHONPATH": a.server_pythonpath} if a.server_pythonpath else {})
    print(f"fuzz: seed {a.seed}, {a.frames} frames per port on {', '.join(a.ports)}, families "
          f"{' '.join(sorted(families))}, bombs inflate to {a.bomb_mib} MiB", flush=True)
    res = run_fuzz(cfg, log=lambda s: print(s, flush=True))
    print(f"\n{platform.node()} {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, seed {a.seed}\n")
    print(res.table())
    failed = res.checks(strict=a.strict)
    print()
    return finish(res, failed, a.json)


if __name__ == "__main__":
    sys.exit(main())
