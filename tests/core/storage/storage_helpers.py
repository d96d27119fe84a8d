"""Shared helpers for the storage tests (unique module name: imported by plain name)."""

from __future__ import annotations

import ctypes
import mmap
import os
from pathlib import Path

from rokka.core.model import Message
from rokka.core.storage.api import StoreConfig


def small_config(root: Path, **kw: object) -> StoreConfig:
    base: dict[str, object] = dict(root_dir=root, commitlog_file_size=64 * 1024,
                                   consumequeue_file_size=20 * 1000, index_hash_slots=64,
                                   index_max_entries=256)
    base.update(kw)
    return StoreConfig(**base)  # type: ignore[arg-type]


def msg(i: int = 0, topic: str = "T", queue_id: int = 0, body: bytes | None = None, **props: str) -> Message:
    return Message(topic=topic, queue_id=queue_id, body=body if body is not None else f"body-{i}".encode(),
                   properties=dict(props), born_timestamp=1000 + i, born_host=("10.1.2.3", 40000 + i))


_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]


def cached_pages(path: Path, start: int = 0, end: int | None = None) -> int:
    """Pages of ``path`` overlapping ``[start, end)`` now in the page cache: mincore(2) on a read-only map."""
    size = path.stat().st_size
    start -= start % mmap.PAGESIZE
    end = size if end is None else min(end, size)
    if end <= start:
        return 0
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap")
        try:
            pages = (end - start + mmap.PAGESIZE - 1) // mmap.PAGESIZE
            vec = (ctypes.c_ubyte * pages)()
            if _libc.mincore(addr + start, end - start, vec) != 0:
                raise OSError(ctypes.get_errno(), "mincore")
            return sum(v & 1 for v in vec)
        finally:
            _libc.munmap(addr, size)
    finally:
        os.close(fd)


def page_cache_is_droppable(path: Path) -> bool:
    """False on tmpfs/ramfs, whose pages are the file itself (never dropped, holes never cached)."""
    return fs_type(path) not in ("tmpfs", "ramfs")


def fs_type(path: Path) -> str:
    best, kind = "", ""
    for line in Path("/proc/mounts").read_text().splitlines():
        _dev, mnt, fs, *_ = line.split()
        if str(path.resolve()).startswith(mnt) and len(mnt) >= len(best):
            best, kind = mnt, fs
    return kind
