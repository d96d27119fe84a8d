"""Fixtures for the storage tests: small-file StoreConfigs and both engines."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from rokka.core.storage.api import MessageStore
from rokka.core.storage.engine import DiskStore
from rokka.core.storage.memory import MemoryStore
from storage_helpers import small_config


@pytest.fixture(params=["disk", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MessageStore]:
    cfg = small_config(tmp_path / "store")
    s: DiskStore | MemoryStore = DiskStore(cfg) if request.param == "disk" else MemoryStore(cfg)
    s.open()
    yield s
    s.close()
