"""Kafka request handlers on top of the core ``Broker``.

One module per family of APIs: ``produce``, ``fetch`` (Fetch, ListOffsets, OffsetForLeaderEpoch,
DeleteRecords), ``metadata`` (Metadata, topics, DescribeConfigs, DescribeCluster), ``alter_configs``,
``group_api`` (consumer groups), ``txn`` (producer ids and transactions), ``acl_api``.  A handler is
``async def handle_x(<what it is bound to>, ctx, body) -> response``; which API it serves, at which
versions, under which authorization, is said once, in the registry ``rokka.gateway.kafka.apis``.
"""

from __future__ import annotations

from rokka.gateway.kafka.handlers.common import KafkaEnv

__all__ = ["KafkaEnv"]
