"""rokka's store: RocketMQ 4.9's on-disk format (CommitLog + ConsumeQueue + IndexFile).

Public API: ``MessageStore`` (the contract, ``api.py``), ``DiskStore`` and
``MemoryStore`` (its two engines), ``FlushService`` (durability, trio),
``StoreCorrupt`` / ``StoreLocked`` (refusals at open), and the record codec
in ``rokka.core.storage.layout``.
"""

from rokka.core.storage.api import MessageStore, StoreConfig
from rokka.core.storage.engine import DiskStore, StoreLocked
from rokka.core.storage.flush import FlushService
from rokka.core.storage.memory import MemoryStore
from rokka.core.storage.recovery import StoreCorrupt

__all__ = ["DiskStore", "FlushService", "MemoryStore", "MessageStore", "StoreConfig", "StoreCorrupt",
           "StoreLocked"]
