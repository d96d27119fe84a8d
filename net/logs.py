"""structlog set-up: human-readable on a terminal, JSON lines with ``--log-format json``.

Logs go to stderr; stdout is reserved for the one ``rokka ready ...`` line
(and for admin command output).

Lines caused by what a peer sends (malformed frames, refused connections, frame deadlines) go
through ``limited``: at most ``PEER_LOG.per_window`` lines per peer address per minute, then one
``log.suppressed`` line with the count, so a hostile client cannot turn its bytes into disk writes.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from typing import Any

import structlog


def configure_logging(fmt: str = "auto", level: str = "info") -> None:
    lvl = getattr(logging, level.upper(), logging.INFO)
    if fmt == "auto":
        fmt = "console" if sys.stderr.isatty() else "plain"
    processors: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if fmt == "json":
        processors += [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
    elif fmt == "console":
        processors += [structlog.dev.ConsoleRenderer(colors=True)]
    else:
        processors += [structlog.processors.format_exc_info, structlog.dev.ConsoleRenderer(colors=False)]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


class LogLimiter:
    """At most ``per_window`` lines per key (a peer's address) every ``window_s`` seconds.

    ``allow(key)`` says whether a line may be written now, and how many were suppressed for that key
    in the window that just ended (the caller writes one ``log.suppressed`` line for them, see
    ``limited``).  Keys are kept for one window; the table is pruned when it grows past ``max_keys``,
    so a flood of addresses costs bounded memory.
    """

    def __init__(self, per_window: int = 10, window_s: float = 60.0, max_keys: int = 4096,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.per_window = per_window
        self.window_s = window_s
        self.max_keys = max_keys
        self._clock = clock
        self._keys: dict[str, list[float]] = {}    # key -> [window start, lines, suppressed]

    def allow(self, key: str) -> tuple[bool, int]:
        """(write this line?, lines suppressed for ``key`` in its previous window, to report now)."""
        now = self._clock()
        entry = self._keys.get(key)
        reported = 0
        if entry is None or now - entry[0] >= self.window_s:
            reported = int(entry[2]) if entry is not None else 0
            if entry is None and len(self._keys) >= self.max_keys:
                self._prune(now)
            entry = self._keys[key] = [now, 0, 0]
        if entry[1] < self.per_window:
            entry[1] += 1
            return True, reported
        entry[2] += 1
        return False, reported

    def flush(self, logger: Any) -> int:
        """Write the ``log.suppressed`` line of every key whose window has ended with lines
        suppressed (so a peer that went quiet is reported too); returns how many were written."""
        now = self._clock()
        done = [(k, e) for k, e in self._keys.items() if now - e[0] >= self.window_s]
        for key, entry in done:
            del self._keys[key]
            if entry[2]:
                logger.warning("log.suppressed", address=key, suppressed=int(entry[2]), window_s=self.window_s)
        return sum(1 for _, e in done if e[2])

    def used(self, key: str) -> int:
        """Lines written for ``key`` in its current window."""
        entry = self._keys.get(key)
        return int(entry[1]) if entry is not None else 0

    def _prune(self, now: float) -> None:
        for k in [k for k, e in self._keys.items() if now - e[0] >= self.window_s]:
            del self._keys[k]
        if len(self._keys) >= self.max_keys:       # all live: forget the oldest half
            for k in sorted(self._keys, key=lambda k: self._keys[k][0])[: len(self._keys) // 2]:
                del self._keys[k]


#: The one limiter for lines caused by what a peer sends (malformed frames, refused connections).
PEER_LOG = LogLimiter()


def limited(logger: Any, level: str, event: str, key: str, *, limiter: LogLimiter | None = None,
            **fields: Any) -> bool:
    """Write ``event`` at ``level`` unless ``key`` (the peer's address, without port) has used up its
    lines for this window.

    A line for a key whose previous window suppressed lines is preceded by one ``log.suppressed``
    line (``suppressed=K``); the last line a window allows says ``rate_limited=True``.  Returns
    whether the line was written."""
    lim = limiter or PEER_LOG
    ok, suppressed = lim.allow(key)
    if suppressed:
        logger.warning("log.suppressed", address=key, suppressed=suppressed, window_s=lim.window_s)
    if not ok:
        return False
    if lim.used(key) == lim.per_window:
        fields["rate_limited"] = f"further lines for {key} suppressed for up to {lim.window_s:.0f} s"
    getattr(logger, level)(event, **fields)
    return True
