"""CommitLog.write_runs: runs written back to back by one vectored write land as one joined write would.

Short writes (``pwritev`` may stop anywhere, in the middle of a part) go on from where they stopped;
more parts than ``MAX_IOV`` are joined first; a write that makes no progress raises.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rokka.core.storage import commitlog
from rokka.core.storage.engine import DiskStore
from storage_helpers import small_config


def _written(store: DiskStore, start: int) -> bytes:
    return bytes(store.clog.read_span(start, store.clog.write_offset) or b"")


@settings(max_examples=80, deadline=None)
@given(parts=st.lists(st.binary(min_size=1, max_size=700), min_size=1, max_size=12), step=st.integers(1, 900))
def test_parts_land_back_to_back_through_short_writes(tmp_path_factory: pytest.TempPathFactory, parts: list[bytes],
                                                      step: int) -> None:
    s = DiskStore(small_config(tmp_path_factory.mktemp("wr"))).open()
    calls: list[int] = []
    real = os.pwritev

    def short(fd: int, bufs: list[Any], pos: int) -> int:      # at most `step` bytes a call
        calls.append(len(bufs))
        flat = b"".join(bytes(b) for b in bufs)[:step]
        return os.pwrite(fd, flat, pos)

    try:
        s.clog.write_run(b"head")
        start = s.clog.write_offset
        os.pwritev = short  # type: ignore[assignment]
        try:
            s.clog.write_runs(parts)
        finally:
            os.pwritev = real  # type: ignore[assignment]
        assert _written(s, start) == b"".join(parts)
        assert s.clog.write_offset == start + sum(map(len, parts)) == s.clog.stage_end
        total = sum(map(len, parts))
        if len(parts) > 1:
            assert len(calls) == -(-total // step)
    finally:
        s.close()


def test_many_parts_are_joined_and_no_progress_raises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = DiskStore(small_config(tmp_path / "s")).open()
    try:
        parts = [bytes([i % 256]) * 3 for i in range(commitlog.MAX_IOV + 1)]
        s.clog.write_runs(parts)
        assert _written(s, 0) == b"".join(parts)
        monkeypatch.setattr(os, "pwritev", lambda fd, bufs, pos: 0)
        with pytest.raises(OSError, match="wrote nothing"):
            s.clog.write_runs([b"a", b"b"])
    finally:
        s.close()
