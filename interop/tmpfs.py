"""A small tmpfs for full-disk tests, and a ballast file that fills it as another process would.

Used by the store-level test (tests/core/storage/test_disk_full.py) and the end-to-end one
(interop/test_serve_disk_full.py).  Mounting needs CAP_SYS_ADMIN: where it is not allowed the test is
skipped with the reason; the mount is lazily unmounted afterwards whatever happened.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def mounted_tmpfs(mnt: Path, size: str) -> Iterator[Path]:
    """Mount a tmpfs of ``size`` (e.g. ``"6m"``) on the new directory ``mnt``; skip the test if not allowed."""
    mnt.mkdir()
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], check=True,
                       capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"cannot mount a tmpfs here: {exc}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False, capture_output=True, timeout=30)


def fill(path: Path, chunk_size: int = 64 * 1024, leave: int = 0) -> None:
    """Write a ballast file ``path`` until the filesystem is full, then give back ``leave`` bytes."""
    chunk = bytes(chunk_size)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        while True:
            try:
                os.write(fd, chunk)
            except OSError:
                break
    finally:
        os.close(fd)
    if leave:
        size = path.stat().st_size
        os.truncate(path, max(0, size - leave))
