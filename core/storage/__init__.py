"""rokka's store: RocketMQ 4.9's on-disk format (CommitLog + ConsumeQueue + IndexFile).

This package is the store's one door for code outside ``rokka.core.storage``: import the names
below from ``rokka.core.storage``, never the modules that define them (``tests/test_layering.py``
enforces it for the gateway, ``compat`` and the pipeline).  Besides this package, the public
modules are the persistence helpers ``metafile`` (atomic JSON / bytes files) and ``packfile``
(atomic msgpack files); the record format is ``rokka.core.record``.

* the contract: ``MessageStore`` and its types (``StoreConfig``, ``FlushDiskType``, ``PutResult`` /
  ``PutStatus``, ``GetResult`` / ``GetStatus``, ``RecordRun`` / ``release_runs``, ``MessageFilter``);
* its two engines: ``DiskStore`` (``DiskStore(config).open()``) and ``MemoryStore``;
* durability: ``FlushService`` (trio);
* refusals at open: ``StoreCorrupt``, ``StoreLocked``;
* compacted topics: ``set_key_reader`` (how a record's key and tombstone are read; the Kafka side sets it);
* replication (RocketMQ HA) on a ``DiskStore``: ``read_transfer``, ``ReplicaAppender``, ``ReplicaError``.
"""

from rokka.core.storage.api import (
    FlushDiskType,
    GetResult,
    GetStatus,
    MessageFilter,
    MessageStore,
    PutResult,
    PutStatus,
    RecordRun,
    StoreConfig,
    release_runs,
)
from rokka.core.storage.compaction import set_key_reader
from rokka.core.storage.engine import DiskStore, StoreLocked
from rokka.core.storage.flush import FlushService
from rokka.core.storage.memory import MemoryStore
from rokka.core.storage.recovery import StoreCorrupt
from rokka.core.storage.replica import ReplicaAppender, ReplicaError, read_transfer

__all__ = ["DiskStore", "FlushDiskType", "FlushService", "GetResult", "GetStatus", "MemoryStore", "MessageFilter",
           "MessageStore", "PutResult", "PutStatus", "RecordRun", "ReplicaAppender", "ReplicaError", "StoreConfig",
           "StoreCorrupt", "StoreLocked", "read_transfer", "release_runs",
           "set_key_reader"]
