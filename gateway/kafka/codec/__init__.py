"""Kafka protocol codec: primitives, declarative message schemas, frames, record batches.

Public API: ``APIS`` (api_key -> Api), ``Api`` (encode/decode request/response at a
version), ``Struct`` (decoded values), frame helpers and ``DecodeError``/``EncodeError``.
"""

from rokka.gateway.kafka.codec.framing import (
    API_VERSIONS_KEY,
    APIS,
    RequestHeader,
    decode_request_header,
    decode_response_frame,
    encode_api_versions_error,
    encode_request_frame,
    encode_response_frame,
    encode_response_frame_parts,
    peek_api,
)
from rokka.gateway.kafka.codec.primitives import DecodeError, EncodeError
from rokka.gateway.kafka.codec.schema import Api, Struct

__all__ = [
    "APIS",
    "API_VERSIONS_KEY",
    "Api",
    "DecodeError",
    "EncodeError",
    "RequestHeader",
    "Struct",
    "decode_request_header",
    "decode_response_frame",
    "encode_api_versions_error",
    "encode_request_frame",
    "encode_response_frame",
    "encode_response_frame_parts",
    "peek_api",
]
