"""Kafka protocol gateway: sans-IO codec and connection, trio server, request handlers."""

from gateway.kafka.connection import KafkaRequest, KafkaServerConnection
from gateway.kafka.errors import ErrorCode, KafkaError, KafkaProtocolError
from gateway.kafka.server import Handler, KafkaRequestContext, KafkaServer, Route

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
