"""Sans-IO Kafka server connection: bytes in, decoded requests out.

Theory of operation
-------------------
``receive_data(data)`` appends to a buffer and returns every request whose
frame is complete (``b""`` = EOF -> state CLOSED).  Each frame starts with a
signed int32 size, checked against ``max_frame_bytes`` (and a minimum of 8
header bytes) *before* the body is buffered, so an oversized or negative size
fails at once without allocating.

Per frame: read (api_key, api_version) first; the API must be advertised
(``advertised``: api_key -> (min, max)) and the version inside its range,
otherwise the connection enters ERROR and raises ``KafkaProtocolError`` - the
caller logs the hint and closes (there is no valid reply, §1.1).  The one
exception is ApiVersions at an unadvertised version: its body is not parsed
and the request comes out with ``unsupported_version=True``; the reply is
``encode_unsupported_api_versions`` (error 35, v0 body listing our ranges).

A large frame (``LARGE_FRAME`` bytes or more: a produce request) is not
appended chunk by chunk to the buffer: its chunks are kept as received and
joined once, into the payload, when the last one arrives -- one copy of the
request instead of two.

Anything a malformed body makes the decoder raise is a ``KafkaProtocolError``
(one log line, the connection closed), never a crash with a traceback.

Once in ERROR every further call raises.  Responses are encoded in whatever
order the caller asks; keeping them in request order is the caller's job
(the trio glue handles one request at a time).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any, NamedTuple

from rokka.gateway.kafka.codec import framing
from rokka.gateway.kafka.codec.framing import API_VERSIONS_KEY, APIS
from rokka.gateway.kafka.codec.primitives import DecodeError
from rokka.gateway.kafka.codec.schema import Struct
from rokka.gateway.kafka.errors import KafkaProtocolError

__all__ = ["ConnectionState", "KafkaRequest", "KafkaServerConnection"]

PRODUCE_KEY = 0
_MIN_PAYLOAD = 8  # api_key, api_version, correlation_id
#: Frames at least this large are collected as received chunks and joined once (see the module doc).
LARGE_FRAME = 256 * 1024


class ConnectionState(Enum):
    OPEN = "open"
    ERROR = "error"
    CLOSED = "closed"


class KafkaRequest(NamedTuple):
    """A decoded request (a tuple: made for every request, read only)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str
    body: Struct | None  # None only when unsupported_version
    unsupported_version: bool = False

    @property
    def expects_response(self) -> bool:
        """False for Produce with acks=0, which must get no reply at all."""
        return not (self.api_key == PRODUCE_KEY and self.body is not None and self.body.acks == 0)


class KafkaServerConnection:
    """Server side of one Kafka connection, without I/O."""

    def __init__(
        self, *, max_frame_bytes: int, advertised: Mapping[int, tuple[int, int]] | None = None
    ) -> None:
        """Args:
        max_frame_bytes: largest accepted frame payload (excluding the 4-byte size).
        advertised: api_key -> (min, max) we accept; defaults to every declared API.
        """
        self.max_frame_bytes = max_frame_bytes
        self.advertised = dict(advertised) if advertised is not None else {
            k: (a.min_version, a.max_version) for k, a in APIS.items()
        }
        self.state = ConnectionState.OPEN
        self._buf = bytearray()
        self._parts: list[bytes] = []   # a large frame's chunks (size prefix first), while incomplete
        self._have = 0                  # their total length
        self._need = 0                  # 4 + the frame's size

    def _fail(self, hint: str) -> KafkaProtocolError:
        self.state = ConnectionState.ERROR
        return KafkaProtocolError(hint)

    def receive_data(self, data: bytes) -> list[KafkaRequest]:
        """Feed bytes from the socket; ``b""`` means EOF.

        Returns:
            the requests completed by this data, in arrival order.
        Raises:
            KafkaProtocolError: the peer broke the protocol; close the connection.
        """
        if self.state is ConnectionState.ERROR:
            raise KafkaProtocolError("connection already failed")
        if not data:
            self.state = ConnectionState.CLOSED
            if self._buf or self._parts:
                raise self._fail(f"EOF inside a frame ({len(self._buf) + self._have} bytes pending)")
            return []
        out = []
        if self._parts:
            self._parts.append(data)
            self._have += len(data)
            if self._have < self._need:
                return out
            out.append(self._parse(self._join_large()))
        else:
            self._buf += data
        while len(self._buf) >= 4:
            size = int.from_bytes(self._buf[:4], "big", signed=True)
            if size < _MIN_PAYLOAD or size > self.max_frame_bytes:
                raise self._fail(f"frame size {size} outside [{_MIN_PAYLOAD}, {self.max_frame_bytes}]")
            if len(self._buf) < 4 + size:
                if size >= LARGE_FRAME:     # collect the rest as it comes (see the module doc)
                    self._parts, self._have, self._need = [bytes(self._buf)], len(self._buf), 4 + size
                    self._buf.clear()
                break
            with memoryview(self._buf) as view:     # one copy of the frame, not two (slice, then bytes)
                payload = bytes(view[4 : 4 + size])
            del self._buf[: 4 + size]
            out.append(self._parse(payload))
        return out

    def _join_large(self) -> bytes:
        """The completed large frame's payload, joined in one copy; bytes after it go to the buffer."""
        parts, extra = self._parts, self._have - self._need
        self._parts, self._have, self._need = [], 0, 0
        views = [memoryview(x) for x in parts]
        views[0] = views[0][4:]
        if extra:
            self._buf += views[-1][len(views[-1]) - extra:]
            views[-1] = views[-1][:len(views[-1]) - extra]
        try:
            return b"".join(views)
        finally:
            for v in views:
                v.release()

    @property
    def buffered(self) -> int:
        """Bytes of an unfinished frame held (for the memory budget)."""
        return len(self._buf) + self._have

    def release(self) -> None:
        """Drop what is buffered (the connection ended): its memory goes back at once."""
        self._buf = bytearray()
        self._parts, self._have, self._need = [], 0, 0

    def bytes_wanted(self) -> int:
        """Bytes still missing from the frame being received (0 if its size is not known yet)."""
        if self._parts:
            return self._need - self._have
        if len(self._buf) < 4:
            return 0
        return max(0, 4 + int.from_bytes(self._buf[:4], "big", signed=True) - len(self._buf))

    def _parse(self, payload: bytes) -> KafkaRequest:
        api_key, version, correlation_id = framing.peek_api(payload)
        api = APIS.get(api_key)
        rng = self.advertised.get(api_key)
        if api is None or rng is None:
            raise self._fail(f"unknown or unadvertised api_key {api_key}")
        in_range = rng[0] <= version <= rng[1] and api.supports(version)
        if not in_range and api_key != API_VERSIONS_KEY:
            raise self._fail(f"{api.name} v{version} not advertised ({rng[0]}-{rng[1]})")
        try:
            if not in_range:  # ApiVersions we cannot parse: answer 35 without reading the body
                header, _ = framing.decode_request_header(payload, flexible=False)
                return KafkaRequest(api_key, version, correlation_id, header.client_id, None, True)
            header, at = framing.decode_request_header(payload, api.is_flexible(version))
            body = api.decode_request(version, payload, at)
        except DecodeError as e:
            raise self._fail(f"malformed {api.name} v{version} request: {e}") from None
        except Exception as e:  # noqa: BLE001 - whatever a hostile body trips is a protocol error, not a crash
            raise self._fail(f"malformed {api.name} v{version} request: {type(e).__name__}: {str(e)[:200]}") \
                from None
        return KafkaRequest(api_key, version, correlation_id, header.client_id, body)

    def encode_response(self, request: KafkaRequest, body: Any) -> bytes:
        """Encode a full response frame for ``request``.

        Raises:
            EncodeError: the body does not fit the response schema (a handler bug).
        """
        return b"".join(self.encode_response_parts(request, body))

    def encode_response_parts(self, request: KafkaRequest, body: Any) -> list[Any]:
        """``encode_response`` as buffers to send in order (large record batches are not copied)."""
        if request.unsupported_version:
            return [self.encode_unsupported_api_versions(request)]
        api = APIS[request.api_key]
        return framing.encode_response_frame_parts(api, request.api_version, request.correlation_id, body)

    def encode_unsupported_api_versions(self, request: KafkaRequest) -> bytes:
        ranges = sorted((k, lo, hi) for k, (lo, hi) in self.advertised.items())
        return framing.encode_api_versions_error(request.correlation_id, ranges)

    def api_versions_body(self) -> Struct:
        """The ApiVersions response body listing exactly the advertised ranges."""
        return Struct(
            error_code=0,
            api_keys=[Struct(api_key=k, min_version=lo, max_version=hi)
                      for k, (lo, hi) in sorted(self.advertised.items())],
            throttle_time_ms=0,
        )

