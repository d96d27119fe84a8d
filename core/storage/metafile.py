"""Atomic JSON metadata files (RocketMQ's ``config/*.json``).

Theory of operation
-------------------
RocketMQ's ConfigManager writes ``<name>.json`` through a temp file and keeps
the previous version as ``<name>.json.bak``.  We do the same, but durably:
write ``<name>.json.tmp``, fsync it, hard-link the current file to ``.bak``,
rename the temp file over the target and fsync the directory, so the target
never disappears, even for an instant.  A reader falls back
to ``.bak`` when the main file is missing or is not valid JSON, and reports
which one it used, so a corrupt metadata file is never silently replaced by
an empty table.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import structlog

log = structlog.get_logger(__name__)


class MetadataCorrupt(Exception):
    """Both the file and its backup exist but neither parses."""


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Durably replace ``path`` with ``data``; the previous version stays as ``<name>.bak``.

    ``path`` always exists with either the old or the new content: the old file is hard-linked to
    ``.bak`` first, then the fsynced temp file is renamed over it, then the directory is fsynced.
    Writers of one path must be serialised by the caller (they share the ``.tmp`` name).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    if path.exists():
        bak = path.with_name(path.name + ".bak")
        try:
            os.unlink(bak)
        except FileNotFoundError:
            pass
        os.link(path, bak)
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def write_json_atomic(path: Path, obj: Any) -> None:
    write_bytes_atomic(path, json.dumps(obj, indent=2, sort_keys=False, ensure_ascii=False).encode("utf-8"))


def read_json(path: Path) -> Any | None:
    """Return the parsed file, its ``.bak`` if the file is damaged, or None if neither exists.

    Raises:
        MetadataCorrupt: a file exists but neither it nor the backup parses.
    """
    bak = path.with_name(path.name + ".bak")
    for candidate in (path, bak):
        if not candidate.exists():
            continue
        try:
            return json.loads(candidate.read_text("utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            log.error("metadata file unreadable", path=str(candidate), error=str(exc))
    if path.exists() or bak.exists():
        raise MetadataCorrupt(f"{path}: neither the file nor its .bak is valid JSON")
    return None
