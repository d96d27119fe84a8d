"""Atomic msgpack state files (rokka's own ``config/*.msgpack``).

Theory of operation
-------------------
The same discipline as ``rokka.core.storage.metafile`` (RocketMQ's JSON config
files), for state that is ours alone and is rewritten often enough that
JSON would be wasteful: Kafka group metadata and idempotent-producer state.

``write_msgpack_atomic`` uses ``metafile.write_bytes_atomic``: the target is
replaced by an fsynced temp file and the previous version is kept as
``<name>.bak``.  A crash leaves either the old or the new file in place (plus
possibly a stale temp file, which readers ignore and the store removes at start).
``read_msgpack`` falls back to ``.bak`` when the main file is missing or does
not decode, and raises ``MetadataCorrupt`` only when a file exists but
neither copy decodes, so damaged state is never silently replaced by an
empty table.

Concurrent writers of one path are safe (unique temp names, a per-path lock);
a periodic snapshot and a shutdown snapshot should pass the ``ticket`` taken
when each was encoded (``take_ticket``) so the older one never lands last.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
from rokka.core.storage.metafile import MetadataCorrupt, read_with_backup, take_ticket, write_bytes_atomic

__all__ = ["MetadataCorrupt", "load_msgpack", "pack", "read_msgpack", "take_ticket", "write_msgpack_atomic",
           "write_packed_atomic"]


def pack(obj: Any) -> bytes:
    """Encode ``obj`` the way ``read_msgpack`` expects (bin type for bytes, str keys allowed)."""
    data: bytes = msgpack.packb(obj, use_bin_type=True)
    return data


def write_packed_atomic(path: Path, data: bytes, *, ticket: int | None = None) -> bool:
    """Durably replace ``path`` with already-packed ``data`` (see the module docstring).

    Returns False when skipped because a write with a later ``ticket`` already landed."""
    return write_bytes_atomic(path, data, ticket=ticket)


def write_msgpack_atomic(path: Path, obj: Any, *, ticket: int | None = None) -> bool:
    return write_packed_atomic(path, pack(obj), ticket=ticket)


def _unpack(raw: bytes) -> Any:
    try:
        return msgpack.unpackb(raw, raw=False, strict_map_key=False)
    except msgpack.UnpackException as exc:      # not every one of them is a ValueError
        raise ValueError(str(exc)) from exc


def load_msgpack(path: Path, decode: Callable[[Any], None], what: str) -> bool:
    """Read ``path`` (``read_msgpack``) and hand its content to ``decode``; False when there is no
    file.  ``decode`` raises KeyError / TypeError / ValueError on a malformed table, which becomes
    ``MetadataCorrupt`` naming ``what`` (damaged state is never silently replaced by an empty one)."""
    data = read_msgpack(path)
    if data is None:
        return False
    try:
        decode(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise MetadataCorrupt(f"{path}: malformed {what}: {exc}") from exc
    return True


def read_msgpack(path: Path) -> Any | None:
    """The decoded file, its ``.bak`` if the file is damaged, or None if neither exists
    (``metafile.read_with_backup``; MetadataCorrupt when a file exists but neither copy decodes)."""
    return read_with_backup(path, _unpack, "msgpack")
