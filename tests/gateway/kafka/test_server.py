"""Live KafkaServer on 127.0.0.1 port 0.

Rules: every test is bounded by trio.fail_after; peers are real (raw trio
sockets speaking our codec, and the kafka-python client in a worker thread);
no timing assertions.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
import trio
import trio.testing
from rokka.gateway.kafka import KafkaError, KafkaRequestContext, KafkaServer, Route
from rokka.gateway.kafka.codec import APIS, Struct, decode_response_frame, encode_request_frame
from rokka.gateway.kafka.codec.framing import decode_api_versions_any

API_VERSIONS, DESCRIBE_CLUSTER, PRODUCE, DELETE_TOPICS = APIS[18], APIS[60], APIS[0], APIS[20]


_pending: dict[int, bytes] = {}


async def read_frame(stream: trio.SocketStream) -> bytes:
    """One response payload; bytes of following frames are kept for the next call."""
    buf = _pending.pop(id(stream), b"")
    while len(buf) < 4 or len(buf) < 4 + int.from_bytes(buf[:4], "big"):
        chunk = await stream.receive_some(65536)
        if not chunk:
            raise EOFError(f"closed after {len(buf)} bytes")
        buf += chunk
    size = int.from_bytes(buf[:4], "big")
    if len(buf) > 4 + size:
        _pending[id(stream)] = buf[4 + size :]
    return buf[4 : 4 + size]


async def read_eof(stream: trio.SocketStream) -> bool:
    try:
        return await stream.receive_some(65536) == b""
    except trio.BrokenResourceError:
        return True


async def start(nursery: trio.Nursery, server: KafkaServer) -> tuple[str, int]:
    return await nursery.start(server.serve, "127.0.0.1", 0)  # type: ignore[no-any-return]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # kafka-python's importlib.resources.open_text
async def test_kafka_python_negotiates_api_versions_with_only_api_versions_registered() -> None:
    server = KafkaServer({}, max_frame_bytes=1 << 20)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            host, port = await start(nursery, server)

            def client() -> Any:
                from kafka.net.compat import KafkaNetClient

                c = KafkaNetClient(bootstrap_servers=f"{host}:{port}", request_timeout_ms=5000)
                node = c.cluster.bootstrap_brokers()[0]

                async def connect() -> Any:
                    conn = c._manager.get_connection(node.node_id, timeout_ms=5000)
                    await conn
                    return conn.broker_version_data.api_versions

                try:
                    return c._net.run(connect)
                finally:
                    c.close()

            assert await trio.to_thread.run_sync(client) == {18: (0, 4)}
            nursery.cancel_scope.cancel()
    assert server.stats.requests == 1 and server.stats.protocol_errors == 0


async def _describe(ctx: KafkaRequestContext, body: Struct) -> Struct:
    ctx.conn_state["n"] = ctx.conn_state.get("n", 0) + 1
    return Struct(cluster_id=f"{ctx.client_id}:{ctx.conn_state['n']}", controller_id=1, brokers=[])


async def test_garbage_connection_closed_while_other_keeps_working() -> None:
    server = KafkaServer({60: Route(_describe, 0, 1, quick=True)}, max_frame_bytes=1 << 16)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            host, port = await start(nursery, server)
            good = await trio.open_tcp_stream(host, port)
            for corr in (1, 2):
                await good.send_all(encode_request_frame(DESCRIBE_CLUSTER, 1, corr, {}, client_id="g"))
                c, body = decode_response_frame(DESCRIBE_CLUSTER, 1, await read_frame(good))
                assert (c, body.cluster_id) == (corr, f"g:{corr}")
                for garbage in (b"\xff" * 16, struct.pack(">i", 1 << 30), struct.pack(">ihhi", 8, 999, 0, 1)):
                    bad = await trio.open_tcp_stream(host, port)
                    await bad.send_all(garbage)
                    assert await read_eof(bad)
                    await bad.aclose()
            await good.send_all(encode_request_frame(DESCRIBE_CLUSTER, 0, 3, {}, client_id="g"))
            assert decode_response_frame(DESCRIBE_CLUSTER, 0, await read_frame(good))[1].cluster_id == "g:3"
            await good.aclose()
            nursery.cancel_scope.cancel()
    assert server.stats.protocol_errors == 6


async def test_api_versions_derived_and_unsupported_version_answer() -> None:
    server = KafkaServer({60: Route(_describe, 0, 5, quick=True), 20: Route(_describe, 2, 3)}, max_frame_bytes=1 << 16)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            host, port = await start(nursery, server)
            s = await trio.open_tcp_stream(host, port)
            await s.send_all(encode_request_frame(API_VERSIONS, 3, 1, {"client_software_name": "t"}))
            _, body = decode_response_frame(API_VERSIONS, 3, await read_frame(s))
            assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [
                (18, 0, 4), (20, 2, 3), (60, 0, 1)]
            payload = struct.pack(">hhih", 18, 9, 2, 0) + b"\x01\x02\x03"
            await s.send_all(struct.pack(">i", len(payload)) + payload)
            corr, body = decode_api_versions_any(await read_frame(s), 9)
            assert corr == 2 and body.error_code == 35
            await s.send_all(encode_request_frame(DELETE_TOPICS, 1, 3, {}))  # v1 not advertised
            assert await read_eof(s)
            nursery.cancel_scope.cancel()


async def test_order_acks0_kafka_error_and_crash() -> None:
    release = trio.Event()
    seen: list[int] = []

    async def slow(ctx: KafkaRequestContext, body: Struct) -> Struct:
        seen.append(ctx.correlation_id)
        if ctx.correlation_id == 1:
            await release.wait()
        return Struct(cluster_id=str(ctx.correlation_id))

    async def produce(ctx: KafkaRequestContext, body: Struct) -> Struct:
        seen.append(ctx.correlation_id)
        return Struct(responses=[])

    async def failing(ctx: KafkaRequestContext, body: Struct) -> Struct:
        if body.include_cluster_authorized_operations:
            raise RuntimeError("handler bug")
        raise KafkaError(31, "denied")

    server = KafkaServer({60: Route(slow, 0, 1, quick=True), 0: Route(produce, 3, 9)},
                         max_frame_bytes=1 << 16)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            host, port = await start(nursery, server)
            s = await trio.open_tcp_stream(host, port)
            acks0 = {"acks": 0, "timeout_ms": 1, "topic_data": []}
            await s.send_all(encode_request_frame(DESCRIBE_CLUSTER, 1, 1, {})
                             + encode_request_frame(PRODUCE, 9, 2, acks0)
                             + encode_request_frame(DESCRIBE_CLUSTER, 1, 3, {}))
            await trio.testing.wait_all_tasks_blocked()
            assert seen == [1]  # the parked request blocks only this connection, in order
            release.set()
            assert decode_response_frame(DESCRIBE_CLUSTER, 1, await read_frame(s))[0] == 1
            assert decode_response_frame(DESCRIBE_CLUSTER, 1, await read_frame(s))[0] == 3  # none for acks=0
            assert seen == [1, 2, 3]

            server.routes[60] = Route(failing, 0, 1, quick=True)
            await s.send_all(encode_request_frame(DESCRIBE_CLUSTER, 1, 4, {}))
            corr, body = decode_response_frame(DESCRIBE_CLUSTER, 1, await read_frame(s))
            assert (corr, body.error_code) == (4, 31)
            await s.send_all(encode_request_frame(DESCRIBE_CLUSTER, 1, 5, {"include_cluster_authorized_operations": True}))
            assert await read_eof(s)
            nursery.cancel_scope.cancel()
    assert server.stats.handler_errors == 1


async def test_quick_answers_of_one_read_leave_together_and_never_wait_for_a_parked_handler() -> None:
    """librdkafka sends its first Metadata requests back to back and reads the bootstrap connection
    only until the first answer: answers of quick APIs from one read leave in one send (one
    segment on loopback), in order; a handler that may park gets the held answers sent first."""
    release = trio.Event()

    async def parked_produce(ctx: KafkaRequestContext, body: Struct) -> Struct:
        await release.wait()
        return Struct(responses=[])

    server = KafkaServer({60: Route(_describe, 0, 1, quick=True), 0: Route(parked_produce, 3, 9)},
                         max_frame_bytes=1 << 16)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            host, port = await start(nursery, server)
            s = await trio.open_tcp_stream(host, port)
            await s.send_all(b"".join(encode_request_frame(DESCRIBE_CLUSTER, 1, corr, {}, client_id="q")
                                      for corr in (1, 2, 3)))
            data = b""
            while len(data) < 12 or len(data) < 4 + int.from_bytes(data[:4], "big"):
                data += await s.receive_some(65536)
            first = 4 + int.from_bytes(data[:4], "big")
            # the first answer did not leave alone: the others came in the same segment
            assert len(data) > first, "the answers of one read left apart"
            _pending[id(s)] = data
            assert [decode_response_frame(DESCRIBE_CLUSTER, 1, await read_frame(s))[0] for _ in range(3)] == [1, 2, 3]

            produce = {"acks": 1, "timeout_ms": 1000, "topic_data": []}
            await s.send_all(encode_request_frame(DESCRIBE_CLUSTER, 1, 4, {}, client_id="q")
                             + encode_request_frame(PRODUCE, 9, 5, produce))
            # the Produce handler is parked: the DescribeCluster answer before it is out already
            corr, body = decode_response_frame(DESCRIBE_CLUSTER, 1, await read_frame(s))
            assert (corr, body.cluster_id) == (4, "q:4")
            release.set()
            assert decode_response_frame(PRODUCE, 9, await read_frame(s))[0] == 5
            nursery.cancel_scope.cancel()


async def test_after_response_hooks_run_once_the_answer_is_out_and_a_failing_one_is_only_logged() -> None:
    ran: list[str] = []

    async def hooked(ctx: KafkaRequestContext, body: Struct) -> Struct:
        def hook() -> None:
            ran.append(f"hook {ctx.correlation_id}")
            if ctx.correlation_id == 1:
                raise RuntimeError("hook bug")
        ctx.after_response.append(hook)
        ran.append(f"handler {ctx.correlation_id}")
        return Struct(cluster_id=str(ctx.correlation_id), controller_id=1, brokers=[])

    server = KafkaServer({60: Route(hooked, 0, 1, quick=True)}, max_frame_bytes=1 << 16)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            host, port = await start(nursery, server)
            s = await trio.open_tcp_stream(host, port)
            await s.send_all(encode_request_frame(DESCRIBE_CLUSTER, 1, 1, {})
                             + encode_request_frame(DESCRIBE_CLUSTER, 1, 2, {}))
            assert [decode_response_frame(DESCRIBE_CLUSTER, 1, await read_frame(s))[0] for _ in range(2)] == [1, 2]
            await s.send_all(encode_request_frame(DESCRIBE_CLUSTER, 1, 3, {}))
            assert decode_response_frame(DESCRIBE_CLUSTER, 1, await read_frame(s))[0] == 3
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
    # quick answers of one read leave together, then their hooks run; the failing hook closed nothing
    assert ran == ["handler 1", "handler 2", "hook 1", "hook 2", "handler 3", "hook 3"]
    assert server.stats.handler_errors == 0


async def test_stop_ends_idle_connections_lets_a_parked_request_answer_and_aclose_waits() -> None:
    """``stop``/``aclose`` as RemotingServer: no new connections; a connection waiting for its next
    request ends at once; one whose handler is parked gets its answer first; ``statistics()`` counts."""
    release = trio.Event()

    async def parked(ctx: KafkaRequestContext, body: Struct) -> Struct:
        await release.wait()
        return Struct(cluster_id="late", controller_id=1, brokers=[])

    server = KafkaServer({60: Route(parked, 0, 1)}, max_frame_bytes=1 << 16)
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            host, port = await start(nursery, server)
            idle = await trio.open_tcp_stream(host, port)
            busy = await trio.open_tcp_stream(host, port)
            await busy.send_all(encode_request_frame(DESCRIBE_CLUSTER, 1, 7, {}))
            await trio.testing.wait_all_tasks_blocked()
            stats = server.statistics()
            assert (stats.address, stats.open_connections, stats.requests_total) == ((host, port), 2, 1)
            closed = trio.Event()

            async def close_server() -> None:
                await server.aclose(grace_s=15)
                closed.set()

            nursery.start_soon(close_server)
            assert await read_eof(idle)                       # waiting for a request: ended at once
            await trio.testing.wait_all_tasks_blocked()
            assert not closed.is_set()                        # the parked request is still being served
            with pytest.raises(OSError):
                await trio.open_tcp_stream(host, port)        # no longer accepting
            release.set()
            assert decode_response_frame(DESCRIBE_CLUSTER, 1, await read_frame(busy))[1].cluster_id == "late"
            assert await read_eof(busy)
            await closed.wait()
    assert server.statistics().open_connections == 0
