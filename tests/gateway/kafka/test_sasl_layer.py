"""The SASL layer (``sasl.handle_sasl_*`` routed by the registry) on a live KafkaServer, raw frames."""

from __future__ import annotations

from typing import Any

import trio
from rokka.gateway.kafka import KafkaRequestContext, KafkaServer, Route
from rokka.gateway.kafka.apis import ApiKey, sasl_routes
from rokka.gateway.kafka.codec import APIS, Struct, decode_response_frame, encode_request_frame
from rokka.gateway.kafka.errors import ErrorCode
from rokka.gateway.kafka.sasl import UserStore


async def _describe(ctx: KafkaRequestContext, body: Struct) -> Struct:
    return Struct(cluster_id="c", controller_id=1, brokers=[])


def _server() -> KafkaServer:
    return KafkaServer({ApiKey.DESCRIBE_CLUSTER: Route(_describe, 0, 1), **sasl_routes()},
                       sasl=(("PLAIN",), UserStore({"alice": "pw"})), max_frame_bytes=1 << 16)


async def _call(s: trio.SocketStream, key: int, version: int, body: dict[str, Any]) -> Struct | None:
    """The answer, or None when the server closed the connection instead."""
    await s.send_all(encode_request_frame(APIS[key], version, 1, body))
    buf = b""
    while len(buf) < 4 or len(buf) < 4 + int.from_bytes(buf[:4], "big"):
        chunk = await s.receive_some(65536)
        if not chunk:
            return None
        buf += chunk
    return decode_response_frame(APIS[key], version, buf[4:])[1]


async def _closed(s: trio.SocketStream) -> bool:
    try:
        return await s.receive_some(10) == b""
    except trio.BrokenResourceError:
        return True


async def test_the_sasl_layer_gates_authenticates_and_refuses_what_kafka_refuses() -> None:
    server = _server()
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            addr = await nursery.start(server.serve, "127.0.0.1", 0)
            async with await trio.open_tcp_stream(*addr) as s:        # anything else first: closed
                assert await _call(s, ApiKey.DESCRIBE_CLUSTER, 0, {}) is None
            async with await trio.open_tcp_stream(*addr) as s:        # v0 handshake: refused, closed
                out = await _call(s, ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})
                assert out is not None and out.error_code == ErrorCode.UNSUPPORTED_VERSION
                assert await _closed(s)
            async with await trio.open_tcp_stream(*addr) as s:
                out = await _call(s, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "GSSAPI"})
                assert out is not None and out.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
                assert out.mechanisms == ["PLAIN"]
                assert (await _call(s, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})).error_code == 0  # type: ignore[union-attr]
                out = await _call(s, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0alice\0pw"})
                assert out is not None and out.error_code == 0
                assert (await _call(s, ApiKey.DESCRIBE_CLUSTER, 0, {})).cluster_id == "c"  # type: ignore[union-attr]
                # no re-authentication on an authenticated connection
                assert await _call(s, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}) is None
            async with await trio.open_tcp_stream(*addr) as s:        # a wrong password: answered, closed
                assert (await _call(s, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})).error_code == 0  # type: ignore[union-attr]
                out = await _call(s, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0alice\0nope"})
                assert out is not None and out.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
                assert await _closed(s)
            nursery.cancel_scope.cancel()
    assert server.statistics().protocol_errors == 2      # the early request and the re-authentication


def test_a_sasl_server_needs_the_sasl_routes() -> None:
    try:
        KafkaServer({ApiKey.DESCRIBE_CLUSTER: Route(_describe, 0, 1)}, sasl=(("PLAIN",), UserStore({})))
    except ValueError as exc:
        assert "before authentication" in str(exc)
    else:
        raise AssertionError("a SASL server without the SASL routes must not start")
