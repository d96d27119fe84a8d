"""structlog set-up: human-readable on a terminal, JSON lines with ``--log-format json``.

Logs go to stderr; stdout is reserved for the one ``rokka ready ...`` line
(and for admin command output).
"""

from __future__ import annotations

import logging
import sys

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
