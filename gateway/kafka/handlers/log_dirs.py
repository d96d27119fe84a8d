"""DescribeLogDirs (API key 35, v1-v5): the store root as the broker's one log directory.

Theory of operation
-------------------
Kafka answers, per log directory of the broker, the partitions whose log lives there with their
size, offset lag and whether the log is a "future" one (being moved by AlterReplicaLogDirs).  rokka
keeps every partition in one store (one CommitLog shared by all topics, one ConsumeQueue per
partition), so it answers exactly one directory: the absolute store root.

* Partitions: the Kafka-visible topics stored here (RocketMQ system, retry and DLQ topics hidden,
  as in Metadata; views are not logs of their own and are left out), each partition this broker
  hosts (in a cluster: the local queues, under their Kafka partition index).  ``topics`` null asks
  for all of them; a requested topic or partition this broker does not host is left out of the
  answer, as Kafka's ``ReplicaManager.describeLogDirs`` leaves out what is not in the directory.
* ``partition_size``: the bytes of the partition's records in the CommitLog -- the sum of the
  record sizes its ConsumeQueue units name, from the queue's min to max offset.  That is exact up to
  ``EXACT_UNITS`` records per partition; for a longer queue it is the record count times the mean
  size of the first and last ``SAMPLE_UNITS`` units (an estimate; Kafka's figure, the segment file
  sizes, includes its index overhead neither way).  Records removed by retention are not counted
  once their CommitLog file is gone (the queue's min offset moves with it).  The scan reads the
  ConsumeQueue in chunks on the trio thread (the store is not shared with worker threads), with a
  checkpoint between chunks; statvfs runs in a worker thread.
* ``offset_lag`` 0 (a replica is never behind itself), ``is_future_key`` false, ``is_cordoned``
  false; ``total_bytes`` / ``usable_bytes`` (v4+) are the volume's size and the space available to
  the broker (``statvfs``: ``f_blocks`` and ``f_bavail`` times ``f_frsize``), -1 when it cannot be
  read.

Authorization (ACLs on) is DESCRIBE on the CLUSTER, as Kafka; a refused request gets
CLUSTER_AUTHORIZATION_FAILED at the top level with no results (``refused``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import structlog
import trio
from rokka.gateway.kafka.codec import Struct
from rokka.gateway.kafka.context import KafkaRequestContext
from rokka.gateway.kafka.errors import ErrorCode as E
from rokka.gateway.kafka.handlers.common import KafkaEnv, kafka_topics, partition_count

if TYPE_CHECKING:
    from rokka.core.storage import MessageStore

log = structlog.get_logger(__name__)

__all__ = ["EXACT_UNITS", "SAMPLE_UNITS", "describe_log_dirs", "partition_size", "refused", "volume_bytes"]

#: a partition with at most this many records is measured exactly (its ConsumeQueue units summed)
EXACT_UNITS = 100_000
#: units read at each end of a longer partition to estimate its mean record size
SAMPLE_UNITS = 1_000
_CHUNK = 4_096


async def partition_size(store: MessageStore, topic: str, queue_id: int) -> int:
    """Bytes of the records of ``topic``/``queue_id`` in the CommitLog (module docstring)."""
    lo, hi = store.min_offset(topic, queue_id), store.max_offset(topic, queue_id)
    count = hi - lo
    if count <= 0:
        return 0
    if count <= EXACT_UNITS:
        return await _sum_units(store, topic, queue_id, lo, hi)
    head = store.cq_units(topic, queue_id, lo, SAMPLE_UNITS)
    tail = store.cq_units(topic, queue_id, hi - SAMPLE_UNITS, SAMPLE_UNITS)
    sample = [u.size for u in (*head, *tail)]
    return count * sum(sample) // len(sample) if sample else 0


async def _sum_units(store: MessageStore, topic: str, queue_id: int, lo: int, hi: int) -> int:
    total, off = 0, lo
    while off < hi:
        await trio.lowlevel.checkpoint()       # a long queue is read in chunks, other tasks run between
        units = store.cq_units(topic, queue_id, off, min(_CHUNK, hi - off))
        if not units:
            break
        total += sum(u.size for u in units)
        off = units[-1].queue_offset + 1
    return total


def volume_bytes(path: Path) -> tuple[int, int]:
    """(total, usable) bytes of the volume holding ``path``; (-1, -1) when statvfs fails."""
    try:
        st = os.statvfs(path)
    except OSError as exc:
        log.warning("kafka.log_dirs_statvfs_failed", path=str(path), error=str(exc))
        return -1, -1
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


def _local_partitions(env: KafkaEnv, topic: str) -> dict[int, int]:
    """Kafka partition index -> local queue id, for every partition of ``topic`` hosted here."""
    tc = kafka_topics(env).get(topic)
    if tc is None:
        return {}
    queues = range(partition_count(tc))
    if env.cluster is None:
        return {q: q for q in queues}
    return {env.cluster.partition_of(topic, q): q for q in queues}


def _wanted(env: KafkaEnv, req: Struct) -> list[tuple[str, list[tuple[int, int]]]]:
    """(topic, [(partition, queue)]) for the request, hosted partitions only, in request order."""
    if req.topics is None:
        asked: Iterable[tuple[str, list[int] | None]] = ((t, None) for t in sorted(kafka_topics(env)))
    else:
        merged: dict[str, list[int]] = {}
        for t in req.topics:
            merged.setdefault(t.topic, []).extend(t.partitions)
        asked = merged.items()
    out = []
    for topic, parts in asked:
        local = _local_partitions(env, topic)
        picked = sorted(local.items()) if parts is None else \
            [(p, local[p]) for p in dict.fromkeys(parts) if p in local]
        if picked:
            out.append((topic, picked))
    return out


async def describe_log_dirs(env: KafkaEnv, ctx: KafkaRequestContext, req: Struct) -> Struct:
    """DescribeLogDirs: one result, the store root (module docstring)."""
    store = env.broker.store
    topics = [Struct(name=topic, partitions=[
        Struct(partition_index=p, partition_size=await partition_size(store, topic, q), offset_lag=0,
               is_future_key=False) for p, q in parts]) for topic, parts in _wanted(env, req)]
    root, (total, usable) = await trio.to_thread.run_sync(_volume, env.broker.cfg.store_path_root_dir)
    result = Struct(error_code=E.NONE, log_dir=str(root), topics=topics, total_bytes=total, usable_bytes=usable,
                    is_cordoned=False)
    return Struct(throttle_time_ms=0, error_code=E.NONE, results=[result])


def _volume(root_dir: str) -> tuple[Path, tuple[int, int]]:
    root = Path(root_dir).resolve()
    return root, volume_bytes(root)


def refused(body: Struct) -> Struct:
    """Kafka's answer without DESCRIBE on the cluster: CLUSTER_AUTHORIZATION_FAILED, no results."""
    return Struct(throttle_time_ms=0, error_code=E.CLUSTER_AUTHORIZATION_FAILED, results=[])
