"""Settings files that apply without a restart: re-read when they change.

Theory of operation
-------------------
``watch_files`` polls the files' (mtime, size) every ``interval_s`` seconds; when any changed and
all exist, ``load`` runs on a worker thread (parsing, key derivation) and its result goes to
``apply`` on the trio thread.  A file that does not load (``errors``) is logged and the settings in
force stay; the next change is tried again.  Used for the Kafka SASL users file, the Kafka TLS
certificate files and RocketMQ's plain_acl.yml.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import structlog
import trio

__all__ = ["stamps", "watch_files"]

log = structlog.get_logger(__name__)

T = TypeVar("T")


def stamps(paths: Sequence[Path]) -> tuple[tuple[int, int] | None, ...]:
    """(mtime ns, size) of each file, None for a file that cannot be stat'ed."""
    out: list[tuple[int, int] | None] = []
    for p in paths:
        try:
            st = p.stat()
            out.append((st.st_mtime_ns, st.st_size))
        except OSError:
            out.append(None)
    return tuple(out)


async def watch_files(paths: Sequence[Path], load: Callable[[], T], apply: Callable[[T], None], *, what: str,
                      errors: tuple[type[Exception], ...], interval_s: float = 2.0) -> None:
    """Until cancelled: ``apply(load())`` whenever one of ``paths`` changed (logged as "<what>
    reloaded", or "<what> not reloaded" with the error)."""
    seen = stamps(paths)
    while True:
        await trio.sleep(interval_s)
        now = stamps(paths)
        if now == seen or None in now:
            continue
        seen = now
        try:
            value = await trio.to_thread.run_sync(load)
        except errors as exc:
            log.error(f"{what} not reloaded; the settings in force stay", error=str(exc))
            continue
        apply(value)
        log.info(f"{what} reloaded", files=[str(p) for p in paths])
