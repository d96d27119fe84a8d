"""Process helpers shared by the protocol benchmarks (``bench_rocketmq``, ``bench_kafka``).

Theory of operation
-------------------
Servers and clients run as subprocesses (never in the benchmark's own process), started and
stopped by the benchmark, on 127.0.0.1 with port 0 (or a free port picked by binding port 0 for
servers that cannot report theirs).  ``interop/harness.py`` supplies the process machinery
(``ServerProcess``, ``JsonLinesProcess``, ``run_json``); this module adds the rokka server
(optionally under cProfile), the echo server, a generic "wait for a ready line" server, stats and
Markdown tables.
"""

from __future__ import annotations

import math
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "interop") not in sys.path:
    sys.path.insert(0, str(ROOT / "interop"))

import harness  # noqa: E402  (interop/harness.py)

HOST = "127.0.0.1"


def start_rokka(workdir: Path, profile: Path | None = None, config: Path | None = None) -> harness.ServerProcess:
    """``rokka serve`` on port 0 with a fresh data dir under ``workdir``; under cProfile if ``profile``;
    with ``-c config`` (a broker.conf) if given."""
    data_dir = workdir / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    base = harness.serve_argv(data_dir, "json")

    def build(ports: dict[str, int]) -> list[str]:
        argv = base(ports)
        if config is not None:
            argv += ["-c", str(config)]
        if profile is not None:
            argv = [sys.executable, "-m", "cProfile", "-o", str(profile), *argv]
        return argv

    return harness.ServerProcess("rokka-serve", build, workdir, data_dir=data_dir).start()


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class LineServer:
    """A server subprocess that is ready once a stdout/stderr line contains ``ready_text``."""

    def __init__(self, argv: Sequence[str], workdir: Path, name: str, ready_text: str,
                 env: dict[str, str] | None = None, timeout: float = 30.0, cwd: Path | None = None) -> None:
        import os

        workdir.mkdir(parents=True, exist_ok=True)
        self.log = workdir / f"{name}.log"
        out = open(self.log, "w")  # noqa: SIM115 - closed right after Popen
        self.proc = subprocess.Popen(list(argv), stdout=out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=cwd or workdir,
                                     env=dict(os.environ, **(env or {})), start_new_session=True)
        out.close()
        self.name = name
        deadline = time.monotonic() + timeout
        while ready_text not in self.log.read_text(errors="replace"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise harness.HarnessError(
                    f"{name} did not start: {' '.join(argv)}\n{harness.tail(self.log)}")
            time.sleep(0.05)

    def first_line_with(self, text: str) -> str:
        return next(ln for ln in self.log.read_text(errors="replace").splitlines() if text in ln)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def start_echo(workdir: Path) -> tuple[LineServer, str]:
    """The trivial echo server (``benchmarks/echo_server.py``); returns (process, "H:P")."""
    srv = LineServer([sys.executable, "-m", "benchmarks.echo_server", "--host", HOST, "--port", "0"],
                     workdir, "echo", "echo ready", cwd=ROOT)
    return srv, srv.first_line_with("echo ready").split()[-1]


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return math.nan
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def fmt(x: float | None, digits: int = 0) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    if digits == 0:
        return f"{x:,.0f}"
    return f"{x:,.{digits}f}"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def profile_summary(path: Path, n: int = 25) -> str:
    """Top ``n`` functions by own time, then by cumulative time, of a cProfile dump."""
    import io
    import pstats

    if not path.exists():
        return f"(no profile at {path})"
    buf = io.StringIO()
    st = pstats.Stats(str(path), stream=buf)
    st.sort_stats("tottime").print_stats(n)
    st.sort_stats("cumulative").print_stats(n)
    return buf.getvalue()
