"""``python -m benchmarks.fuzz.replay FILE_OR_DIR...``: send saved fuzz frames to a fresh ``rokka serve``.

Each ``<port>-<n>-<label>.bin`` (as the driver saves them in ``suspects/`` when RSS passes the limit) goes
to its port (kafka / broker / namesrv) on its own connection; after each the server's RSS, whether it is
alive and the new log lines are printed, so the frame that hurts shows by itself.
"""

from __future__ import annotations

import socket
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.fuzz.driver import _addr, harness, rss_mib


def replay(paths: list[Path], settle_s: float = 1.0) -> int:
    files = sorted(p for path in paths for p in (path.glob("*.bin") if path.is_dir() else [path]))
    work = Path(tempfile.mkdtemp(prefix="rokka-replay-"))
    srv = harness.start_serve(work)
    assert srv.proc is not None and srv.stderr_path is not None
    try:
        for f in files:
            port = f.name.split("-", 1)[0]
            before, seen = rss_mib(srv.proc.pid), srv.stderr_path.stat().st_size
            peak = before
            try:
                with socket.create_connection(_addr(getattr(srv, port)), timeout=5) as s:
                    s.sendall(f.read_bytes())
                    s.settimeout(0.05)
                    deadline = time.monotonic() + settle_s
                    while time.monotonic() < deadline:
                        peak = max(peak, rss_mib(srv.proc.pid))
                        try:
                            if not s.recv(1 << 16):
                                break
                        except TimeoutError:
                            pass
            except OSError as exc:
                print(f"{f.name}: {exc!r}")
            peak = max(peak, rss_mib(srv.proc.pid))
            with open(srv.stderr_path, "rb") as log:
                log.seek(seen)
                new = [ln[:160] for ln in log.read().decode(errors="replace").splitlines()]
            print(f"{f.name}: RSS {before:.0f} -> peak {peak:.0f} MiB, alive={srv.running()}, log: {new[:2]}")
            if not srv.running():
                return 1
    finally:
        srv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(replay([Path(a) for a in sys.argv[1:]]))
