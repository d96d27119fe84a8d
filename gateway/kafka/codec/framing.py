"""Kafka frames and headers (both directions, so tests and tools can be clients).

Theory of operation
-------------------
A frame is ``int32 size`` + header + body (kafka-wire.md §1.1).  This module
works on *one frame's payload* (the bytes after the size prefix); splitting a
byte stream into frames is the connection's job.

Request header (§1.3)::

    v1: api_key int16 | api_version int16 | correlation_id int32 | client_id nullable int16-string
    v2: v1 + tagged-field section            (used when the request version is flexible)

client_id is always the classic int16 string, even in v2.  The header
version depends on the API's first flexible version, so the first 4 bytes
(api_key, api_version) are read before anything else.

Response header (§1.4)::

    v0: correlation_id int32
    v1: v0 + tagged-field section             (flexible responses, except ApiVersions)

ApiVersions answers always use header v0 (KIP-511).  ``encode_api_versions_error``
builds the special "unsupported version" reply: error 35 and a v0 body
listing our ranges, whatever version was asked for (§1.6).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Any, NamedTuple

from rokka.gateway.kafka.codec import primitives as p
from rokka.gateway.kafka.codec.messages_acl import ACL_APIS
from rokka.gateway.kafka.codec.messages_data import API_VERSIONS, DATA_APIS
from rokka.gateway.kafka.codec.messages_groups import GROUP_APIS
from rokka.gateway.kafka.codec.primitives import DecodeError, Reader
from rokka.gateway.kafka.codec.schema import Api, Struct
from rokka.gateway.kafka.errors import ErrorCode

__all__ = [
    "APIS",
    "API_VERSIONS_KEY",
    "UNSUPPORTED_VERSION",
    "RequestHeader",
    "peek_api",
    "decode_request_header",
    "encode_request_frame",
    "encode_response_frame",
    "encode_response_frame_parts",
    "decode_response_frame",
    "encode_api_versions_error",
]

APIS: dict[int, Api] = {api.key: api for api in (*DATA_APIS, *GROUP_APIS, *ACL_APIS)}
API_VERSIONS_KEY = API_VERSIONS.key
UNSUPPORTED_VERSION = ErrorCode.UNSUPPORTED_VERSION


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str  # null on the wire is reported as ""


_PEEK = struct.Struct(">hhi")
_HEAD = struct.Struct(">hhih")


def peek_api(payload: bytes) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) from a request payload's first 8 bytes."""
    if len(payload) < _PEEK.size:
        raise DecodeError(f"truncated: need {_PEEK.size} header bytes, have {len(payload)}")
    return _PEEK.unpack_from(payload)  # type: ignore[return-value]


def decode_request_header(payload: bytes, flexible: bool) -> tuple[RequestHeader, int]:
    """Parse the request header; return it and the offset where the body starts.

    The usual header (a client id, and in flexible versions no tagged fields) is read in one
    unpack; anything else (a null client id, tags, a truncated or malformed header) by the Reader.

    Raises:
        DecodeError: truncated or malformed header.
    """
    if len(payload) >= _HEAD.size:
        api_key, api_version, correlation_id, n = _HEAD.unpack_from(payload)
        end = _HEAD.size + n
        if n >= 0 and (end < len(payload) and payload[end] == 0 if flexible else end <= len(payload)):
            try:
                client_id = payload[_HEAD.size:end].decode("utf-8")
            except UnicodeDecodeError:
                pass        # the Reader below raises the error
            else:
                return RequestHeader(api_key, api_version, correlation_id, client_id), end + 1 if flexible else end
    return read_request_header(payload, flexible)


def read_request_header(payload: bytes, flexible: bool) -> tuple[RequestHeader, int]:
    """``decode_request_header`` field by field (every header; the reference its one-unpack path is held to)."""
    r = Reader(payload)
    api_key, api_version, correlation_id = r.int16(), r.int16(), r.int32()
    client_id = r.string(False)
    if flexible:
        _skip_tags(r)
    return RequestHeader(api_key, api_version, correlation_id, client_id or ""), r.pos


def _skip_tags(r: Reader) -> None:
    for _ in range(r.uvarint()):
        r.uvarint()
        r.read_raw(r.uvarint())


def _response_header_flexible(api: Api, version: int) -> bool:
    return api.key != API_VERSIONS_KEY and api.is_flexible(version)


def encode_request_frame(
    api: Api, version: int, correlation_id: int, body: Any, client_id: str | None = "rokka"
) -> bytes:
    """A complete request frame (size prefix included), as a client sends it."""
    out = bytearray(4)
    p.write_int16(out, api.key)
    p.write_int16(out, version)
    p.write_int32(out, correlation_id)
    p.write_string(out, client_id, False)
    if api.is_flexible(version):
        out.append(0)
    out += api.encode_request(version, body)
    out[0:4] = (len(out) - 4).to_bytes(4, "big", signed=True)
    return bytes(out)


def encode_response_frame(api: Api, version: int, correlation_id: int, body: Any) -> bytes:
    """A complete response frame (size prefix included)."""
    return b"".join(encode_response_frame_parts(api, version, correlation_id, body))


def encode_response_frame_parts(api: Api, version: int, correlation_id: int, body: Any) -> list[Any]:
    """``encode_response_frame`` as buffers to send in order: record batches are not copied into the
    frame (``primitives.Gather``), so a Fetch response goes out by one scatter/gather send.  A Produce
    response (one per produce request, the hot path) is written by ``_produce_response``."""
    if api.key == _PRODUCE_KEY and type(body) is Struct:
        frame = _produce_response(version, correlation_id, body)
        if frame is not None:
            return [frame]
    out = p.Gather(bytes(4))
    p.write_int32(out, correlation_id)
    if _response_header_flexible(api, version):
        out.append(0)
    api.encode_response_into(out, version, body)
    out[0:4] = (out.nbytes() - 4).to_bytes(4, "big", signed=True)
    return out.parts()


_PRODUCE_KEY = 0
_I32, _I16, _I64 = struct.Struct(">i"), struct.Struct(">h"), struct.Struct(">q")
_PART_HEAD = struct.Struct(">ihq")      # index, error_code, base_offset


def _produce_response(version: int, correlation_id: int, body: Struct) -> bytes | None:
    """The Produce response frame (v0-v9, size prefix included), byte for byte what the schema codec
    (``messages_data.PRODUCE``) writes, without its per-field dispatch; None when a struct lacks a
    field or holds something unusual (the schema codec then writes it, defaults and errors as ever)."""
    flexible = version >= 9
    out = bytearray(4)
    out += _I32.pack(correlation_id)
    if flexible:
        out.append(0)
    try:
        responses = body.__dict__["responses"]
        _length(out, len(responses), flexible)
        for t in responses:
            td = t.__dict__
            if type(t) is not Struct or not _string(out, td["name"], flexible, False):
                return None
            parts = td["partition_responses"]
            _length(out, len(parts), flexible)
            for pr in parts:
                d = pr.__dict__
                if type(pr) is not Struct:
                    return None
                out += _PART_HEAD.pack(d["index"], d["error_code"], d["base_offset"])
                if version >= 2:
                    out += _I64.pack(d["log_append_time_ms"])
                if version >= 5:
                    out += _I64.pack(d["log_start_offset"])
                if version >= 8:
                    errors = d["record_errors"]
                    _length(out, len(errors), flexible)
                    for e in errors:
                        ed = e.__dict__
                        if type(e) is not Struct:
                            return None
                        out += _I32.pack(ed["batch_index"])
                        if not _string(out, ed["batch_index_error_message"], flexible, True):
                            return None
                        if flexible:
                            out.append(0)
                    if not _string(out, d["error_message"], flexible, True):
                        return None
                if flexible:
                    out.append(0)
            if flexible:
                out.append(0)
        if version >= 1:
            out += _I32.pack(body.__dict__["throttle_time_ms"])
    except (KeyError, AttributeError, TypeError, struct.error):
        return None
    if flexible:
        out.append(0)
    out[0:4] = _I32.pack(len(out) - 4)
    return bytes(out)


def _length(out: bytearray, n: int, compact: bool) -> None:
    """An array's length: uvarint n + 1 (compact) or int32."""
    if compact:
        p.write_uvarint(out, n + 1)
    else:
        out += _I32.pack(n)


def _string(out: bytearray, v: str | None, compact: bool, nullable: bool) -> bool:
    """A (nullable) string as ``primitives.write_string`` writes it; False: not writable here."""
    if v is None:
        if not nullable:
            return False
        if compact:
            out.append(0)
        else:
            out += _I16.pack(-1)
        return True
    if type(v) is not str:
        return False
    data = v.encode("utf-8")
    if compact:
        p.write_uvarint(out, len(data) + 1)
    elif len(data) > 0x7FFF:
        return False
    else:
        out += _I16.pack(len(data))
    out += data
    return True


def decode_response_frame(api: Api, version: int, payload: bytes) -> tuple[int, Struct]:
    """(correlation_id, body) from a response payload (after the size prefix).

    Raises:
        DecodeError: the payload does not parse at that version.
    """
    r = Reader(payload)
    correlation_id = r.int32()
    if _response_header_flexible(api, version):
        _skip_tags(r)
    return correlation_id, api.decode_response(version, payload, r.pos)


def encode_api_versions_error(correlation_id: int, ranges: Iterable[tuple[int, int, int]]) -> bytes:
    """UNSUPPORTED_VERSION reply to an ApiVersions request we cannot parse (v0 body, v0 header)."""
    body = Struct(
        error_code=UNSUPPORTED_VERSION,
        api_keys=[Struct(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in ranges],
    )
    return encode_response_frame(API_VERSIONS, 0, correlation_id, body)


def decode_api_versions_any(payload: bytes, version: int) -> tuple[int, Struct]:
    """Client helper: parse an ApiVersions reply, falling back to v0 on error 35."""
    try:
        return decode_response_frame(API_VERSIONS, version, payload)
    except DecodeError:
        return decode_response_frame(API_VERSIONS, 0, payload)
