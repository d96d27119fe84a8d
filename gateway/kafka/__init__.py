"""Kafka protocol gateway: sans-IO codec and connection, trio server, request handlers."""

from rokka.gateway.kafka.connection import KafkaRequest, KafkaServerConnection
from rokka.gateway.kafka.errors import ErrorCode, KafkaError, KafkaProtocolError
from rokka.gateway.kafka.server import Handler, KafkaRequestContext, KafkaServer, Route

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
