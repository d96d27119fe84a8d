"""Atomic JSON metadata files (RocketMQ's ``config/*.json``).

Theory of operation
-------------------
RocketMQ's ConfigManager writes ``<name>.json`` through a temp file and keeps
the previous version as ``<name>.json.bak``.  We do the same, but durably:
write a temp file, fsync it, hard-link the current file to ``.bak``, rename
the temp file over the target and fsync the directory, so the target never
disappears, even for an instant.  A reader falls back to ``.bak`` when the
main file is missing or is not valid JSON, and reports which one it used, so
a corrupt metadata file is never silently replaced by an empty table.

Concurrent writers are safe: every write has its own temp names
(``<name>.tmp.<random>`` from ``mkstemp``, and the ``.bak`` link is made
under a unique name and renamed into place), so two writers never share a
file; writers of one path in this process are also serialised by a per-path
lock, and the last rename wins whole (the file is always one complete
version).  A writer that encoded its content earlier than a version already
written can pass the ``ticket`` it took at encoding time (``take_ticket``):
its write is then skipped, so a slow periodic snapshot finishing after the
shutdown snapshot never replaces the newer one.  A crash can leave a stale
temp file; readers never look at temps and ``remove_stale_temps`` clears a
directory at start (before any writer runs).
"""

from __future__ import annotations

import itertools
import json
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

log = structlog.get_logger(__name__)


class MetadataCorrupt(Exception):
    """Both the file and its backup exist but neither parses."""


_TEMP_MARK = ".tmp"
_registry_lock = threading.Lock()
_path_locks: dict[str, threading.Lock] = {}
_written: dict[str, int] = {}
_tickets = itertools.count(1)


def _key(path: Path) -> str:
    return os.path.abspath(path)


def _lock_for(path: Path) -> threading.Lock:
    with _registry_lock:
        lock = _path_locks.get(_key(path))
        if lock is None:
            lock = _path_locks[_key(path)] = threading.Lock()
        return lock


def take_ticket() -> int:
    """A number that orders writes: take it when the content is encoded, pass it to the write."""
    return next(_tickets)


def write_bytes_atomic(path: Path, data: bytes, *, ticket: int | None = None, backup: bool = True) -> bool:
    """Durably replace ``path`` with ``data``; the previous version stays as ``<name>.bak`` (unless
    ``backup`` is False: a file whose old versions must not linger, such as a secrets file).

    ``path`` always exists with either the old or the new content: the old file is hard-linked to
    ``.bak`` first, then the fsynced temp file is renamed over it, then the directory is fsynced.
    Safe with concurrent writers (threads or processes; see the module docstring).  With a
    ``ticket`` (``take_ticket``), the write is skipped when a write with a later ticket already
    replaced this path in this process; returns False then, True when written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with _lock_for(path):
        if ticket is not None and ticket < _written.get(_key(path), 0):
            return False
        _replace(path, data, backup)
        if ticket is not None:
            _written[_key(path)] = ticket
    return True


def _replace(path: Path, data: bytes, backup: bool = True) -> None:
    fd, tmp_name = tempfile.mkstemp(prefix=path.name + _TEMP_MARK + ".", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        with open(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if backup:
            _keep_backup(path)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _keep_backup(path: Path) -> None:
    """Hard-link the current ``path`` to ``<name>.bak`` through a unique name (no shared temp)."""
    bak = path.with_name(path.name + ".bak")
    link = path.with_name(f"{path.name}{_TEMP_MARK}.bak.{os.getpid()}.{threading.get_ident()}.{take_ticket()}")
    try:
        os.link(path, link)
    except FileNotFoundError:
        return                      # no current version yet
    try:
        os.replace(link, bak)
    finally:    # rename() between two links of one file does nothing and leaves ``link`` behind
        link.unlink(missing_ok=True)


def is_temp_name(name: str) -> bool:
    """True for the temp files ``write_bytes_atomic`` and ``write_checkpoint`` leave after a crash."""
    return name.endswith(_TEMP_MARK) or (_TEMP_MARK + ".") in name


def remove_stale_temps(directory: Path) -> int:
    """Delete temp files left by a crash in ``directory``; call at start, before any writer runs.

    Returns how many were removed (each is logged)."""
    removed = 0
    try:
        entries = list(directory.iterdir())
    except FileNotFoundError:
        return 0
    for p in entries:
        if p.is_file() and is_temp_name(p.name):
            p.unlink(missing_ok=True)
            removed += 1
            log.info("store.stale_temp_removed", path=str(p))
    return removed


def write_json_atomic(path: Path, obj: Any, *, ticket: int | None = None) -> bool:
    return write_bytes_atomic(path, json.dumps(obj, indent=2, sort_keys=False, ensure_ascii=False).encode("utf-8"),
                              ticket=ticket)


def read_with_backup(path: Path, decode: Callable[[bytes], Any], what: str) -> Any | None:
    """``decode`` of the file, of its ``.bak`` if the file is damaged (``decode`` raised ValueError),
    or None if neither exists; ``what`` names the format in the error.

    Raises:
        MetadataCorrupt: a file exists but neither it nor the backup decodes.
    """
    bak = path.with_name(path.name + ".bak")
    for candidate in (path, bak):
        if not candidate.exists():
            continue
        try:
            return decode(candidate.read_bytes())
        except ValueError as exc:       # UnicodeDecodeError and msgpack's errors are ValueErrors
            log.error("store.metadata_file_unreadable", path=str(candidate), error=str(exc))
    if path.exists() or bak.exists():
        raise MetadataCorrupt(f"{path}: neither the file nor its .bak is valid {what}")
    return None


def read_json(path: Path) -> Any | None:
    """The parsed JSON file, its ``.bak`` if the file is damaged, or None (``read_with_backup``)."""
    return read_with_backup(path, lambda raw: json.loads(raw.decode("utf-8")), "JSON")
