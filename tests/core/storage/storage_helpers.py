"""Shared helpers for the storage tests (unique module name: imported by plain name)."""

from __future__ import annotations

from pathlib import Path

from core.model import Message
from core.storage.api import StoreConfig


def small_config(root: Path, **kw: object) -> StoreConfig:
    base: dict[str, object] = dict(root_dir=root, commitlog_file_size=64 * 1024,
                                   consumequeue_file_size=20 * 1000, index_hash_slots=64,
                                   index_max_entries=256)
    base.update(kw)
    return StoreConfig(**base)  # type: ignore[arg-type]


def msg(i: int = 0, topic: str = "T", queue_id: int = 0, body: bytes | None = None, **props: str) -> Message:
    return Message(topic=topic, queue_id=queue_id, body=body if body is not None else f"body-{i}".encode(),
                   properties=dict(props), born_timestamp=1000 + i, born_host=("10.1.2.3", 40000 + i))
