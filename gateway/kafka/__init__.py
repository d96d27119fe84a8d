"""Kafka protocol gateway: sans-IO codec and connection, trio server, request handlers.

Where to start: ``apis`` (the registry of APIs), ``context`` (what a handler sees), ``server`` (the
trio glue), ``role`` (how the broker process builds it all); see docs/dev/architecture.md.
"""

from rokka.gateway.kafka.connection import KafkaRequest, KafkaServerConnection
from rokka.gateway.kafka.context import Handler, KafkaRequestContext, Route
from rokka.gateway.kafka.errors import ErrorCode, KafkaError, KafkaProtocolError
from rokka.gateway.kafka.server import KafkaServer

__all__ = [
    "ErrorCode",
    "Handler",
    "KafkaError",
    "KafkaProtocolError",
    "KafkaRequest",
    "KafkaRequestContext",
    "KafkaServer",
    "KafkaServerConnection",
    "Route",
]
