"""rokka's store: RocketMQ 4.9's on-disk format (CommitLog + ConsumeQueue + IndexFile).

Public API: ``MessageStore`` (the contract, ``api.py``), ``DiskStore`` and
``MemoryStore`` (its two engines), ``FlushService`` (durability, trio),
``StoreCorrupt`` / ``StoreLocked`` (refusals at open), and the record codec
in ``core.storage.layout``.
"""

from core.storage.api import MessageStore, StoreConfig
from core.storage.engine import DiskStore, StoreLocked
from core.storage.flush import FlushService
from core.storage.memory import MemoryStore
from core.storage.recovery import StoreCorrupt

__all__ = ["DiskStore", "FlushService", "MemoryStore", "MessageStore", "StoreConfig", "StoreCorrupt",
           "StoreLocked"]
