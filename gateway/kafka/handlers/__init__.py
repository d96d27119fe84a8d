"""Kafka request handlers on top of the core ``Broker``.

``build_routes(env)`` returns the api_key -> Route table for ``KafkaServer``;
the versions listed here are what ApiVersions advertises (kafka-wire.md §3.5).
Group coordination, idempotent-producer and transaction APIs are added by
``gateway/kafka/groups`` (merge its routes into this dict).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from rokka.gateway.kafka.handlers.alter_configs import handle_alter_configs, handle_incremental_alter_configs
from rokka.gateway.kafka.handlers.common import KafkaEnv
from rokka.gateway.kafka.handlers.fetch import (
    handle_delete_records,
    handle_fetch,
    handle_list_offsets,
    handle_offset_for_leader_epoch,
)
from rokka.gateway.kafka.handlers.metadata import (
    handle_create_partitions,
    handle_create_topics,
    handle_delete_topics,
    handle_describe_cluster,
    handle_describe_configs,
    handle_metadata,
)
from rokka.gateway.kafka.handlers.produce import handle_produce
from rokka.gateway.kafka.server import Route

__all__ = ["KafkaEnv", "build_routes"]

# api_key: (handler, min_version, max_version)
_TABLE: dict[int, tuple[Any, int, int]] = {
    0: (handle_produce, 0, 9),
    1: (handle_fetch, 4, 12),
    2: (handle_list_offsets, 1, 7),
    3: (handle_metadata, 0, 12),
    19: (handle_create_topics, 0, 7),
    20: (handle_delete_topics, 0, 5),
    21: (handle_delete_records, 0, 2),
    23: (handle_offset_for_leader_epoch, 0, 4),
    32: (handle_describe_configs, 0, 4),
    33: (handle_alter_configs, 0, 2),
    37: (handle_create_partitions, 0, 3),
    44: (handle_incremental_alter_configs, 0, 1),
    60: (handle_describe_cluster, 0, 1),
}


def build_routes(env: KafkaEnv) -> dict[int, Route]:
    """Routes for every data-plane/admin API this package implements, bound to ``env``."""
    return {key: Route(partial(fn, env), lo, hi) for key, (fn, lo, hi) in _TABLE.items()}
