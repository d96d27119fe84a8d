"""Connection and memory budgets of the listeners, over real loopback sockets (issue 19, items 3 and 8).

Rules: servers on 127.0.0.1 port 0, peers are raw sockets speaking bytes, every test bounded by
``trio.fail_after``; what is checked is the server's answer (a close, a reply), its budget counters
and its log lines (``structlog.testing.capture_logs``), never how long something took.
"""

from __future__ import annotations

import json
import struct
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import structlog
import trio
import trio.testing
from rokka.net import logs
from rokka.net.budget import SMALL_FRAME, Budget, Limits
from rokka.gateway.kafka import KafkaRequestContext, KafkaServer, Route
from rokka.gateway.kafka.codec import APIS, Struct, decode_response_frame, encode_request_frame
from rokka.gateway.namesrv.server import NamesrvServer
from rokka.net.remoting.channel import Channel
from rokka.net.remoting.codec import RemotingCommand, ResponseCode
from rokka.net.remoting.connection import RemotingConnection
from rokka.gateway.rocketmq.server import RemotingServer

DESCRIBE_CLUSTER = APIS[60]


@pytest.fixture(autouse=True)
def fresh_log_limiter(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts with its own per-peer line allowance (all peers here are 127.0.0.1)."""
    monkeypatch.setattr(logs, "PEER_LOG", logs.LogLimiter(per_window=5))
    yield


async def echo(channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
    return cmd.make_response(ResponseCode.SUCCESS, body=cmd.body)


async def _describe(ctx: KafkaRequestContext, body: Struct) -> Struct:
    return Struct(cluster_id="c" * ctx.conn_state.get("size", 1), controller_id=1, brokers=[])


async def closed_by_server(stream: trio.SocketStream) -> bool:
    """True once the server closed the connection (EOF or reset), reading whatever it sent."""
    try:
        while await stream.receive_some(65536):
            pass
    except trio.BrokenResourceError:
        pass
    return True


async def rocketmq_echo(addr: tuple[str, int], body: bytes = b"ping") -> bytes:
    conn = RemotingConnection()
    stream = await trio.open_tcp_stream(*addr)
    async with stream:
        await stream.send_all(conn.start_request(RemotingCommand(code=10, body=body)))
        while True:
            data = await stream.receive_some(65536)
            assert data, "closed instead of answering"
            got = conn.receive_data(data)
            if got:
                return got[0].body


async def kafka_describe(addr: tuple[str, int], stream: trio.SocketStream | None = None) -> str:
    own = stream is None
    s = stream or await trio.open_tcp_stream(*addr)
    try:
        await s.send_all(encode_request_frame(DESCRIBE_CLUSTER, 0, 7, {}, client_id="t"))
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + int.from_bytes(buf[:4], "big"):
            chunk = await s.receive_some(65536)
            assert chunk, "closed instead of answering"
            buf += chunk
        return str(decode_response_frame(DESCRIBE_CLUSTER, 0, buf[4:])[1].cluster_id)
    finally:
        if own:
            await s.aclose()


def events(captured: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in captured if e["event"] == name]


async def non_reader(addr: tuple[str, int]) -> trio.SocketStream:
    """A connection with a 4 KiB receive buffer that the test never reads: the server's answers back up."""
    s = trio.socket.socket()
    s.setsockopt(trio.socket.SOL_SOCKET, trio.socket.SO_RCVBUF, 4096)
    await s.connect(addr)
    return trio.SocketStream(s)


async def closed_after(captured: list[dict[str, Any]], budget: Budget, event: str, count: int = 1) -> None:
    """Waits for ``count`` log lines ``event``, then for the server to have closed every connection."""
    while len(events(captured, event)) < count:  # noqa: ASYNC110 - the server gives up on the peer
        await trio.sleep(0.01)
    while budget.connections:     # noqa: ASYNC110 - the server closes it
        await trio.sleep(0.01)


@asynccontextmanager
async def kafka_answering(budget: Budget, size: int) -> AsyncIterator[tuple[Any, list[dict[str, Any]]]]:
    """A Kafka listener whose DescribeCluster answer carries a ``size``-byte cluster id: (its address,
    the log lines captured while it runs)."""

    async def big(ctx: KafkaRequestContext, body: Struct) -> Struct:
        return Struct(cluster_id="c" * size, controller_id=1, brokers=[])

    kafka = KafkaServer({60: Route(big, 0, 1, quick=True)}, budget=budget)
    with structlog.testing.capture_logs() as captured:
        async with trio.open_nursery() as nursery:
            addr = await nursery.start(kafka.serve, "127.0.0.1", 0)
            yield addr, captured
            nursery.cancel_scope.cancel()


async def rocketmq_unread_answers(budget: Budget, requests: int, event: str) -> list[dict[str, Any]]:
    """A broker answering 1 MiB per request; one peer asks ``requests`` times and reads nothing.

    Returns the captured log once ``event`` was logged and the server closed the peer (``budget.unread`` is
    checked to be 0 at that point).
    """

    async def big(channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.make_response(ResponseCode.SUCCESS, body=b"b" * (1 << 20))

    rmq = RemotingServer({10: big}, name="broker", budget=budget)
    with trio.fail_after(30), structlog.testing.capture_logs() as captured:
        async with trio.open_nursery() as nursery:
            addr = (await nursery.start(rmq.serve, "127.0.0.1", [0]))[0]
            stream = await non_reader(addr)
            conn = RemotingConnection()
            try:
                for _ in range(requests):
                    await stream.send_all(conn.start_request(RemotingCommand(code=10)))
            except trio.BrokenResourceError:
                pass
            await closed_after(captured, budget, event)
            assert budget.unread == 0
            await stream.aclose()
            nursery.cancel_scope.cancel()
    return captured


# --------------------------------------------------------------------------- connection caps


async def test_per_address_cap_counts_every_listener_and_refuses_at_once() -> None:
    budget = Budget(Limits(max_connections_per_ip=3))
    rmq = RemotingServer({10: echo}, name="broker", budget=budget)
    kafka = KafkaServer({60: Route(_describe, 0, 1, quick=True)}, budget=budget)
    with trio.fail_after(20), structlog.testing.capture_logs() as captured:
        async with trio.open_nursery() as nursery:
            rmq_addr = (await nursery.start(rmq.serve, "127.0.0.1", [0]))[0]
            k_addr = await nursery.start(kafka.serve, "127.0.0.1", 0)
            held = [await trio.open_tcp_stream(*rmq_addr), await trio.open_tcp_stream(*rmq_addr)]
            k_held = await trio.open_tcp_stream(*k_addr)
            assert await kafka_describe(k_addr, k_held) == "c"     # admitted: the third from 127.0.0.1
            for addr in (rmq_addr, k_addr, rmq_addr, k_addr):      # a fourth, on either port: refused
                extra = await trio.open_tcp_stream(*addr)
                assert await closed_by_server(extra)
                await extra.aclose()
            assert budget.refused == 4 and budget.per_ip == {"127.0.0.1": 3}
            await held.pop().aclose()
            while budget.connections > 2:       # noqa: ASYNC110 - the server notices the close
                await trio.sleep(0.01)
            assert await rocketmq_echo(rmq_addr) == b"ping"      # a slot freed: admitted again
            for s in [*held, k_held]:
                await s.aclose()
            nursery.cancel_scope.cancel()
    refusals = events(captured, "connection.refused")
    assert len(refusals) == 4 and "maxConnectionsPerIp=3" in refusals[0]["reason"]
    assert all(e["log_level"] == "warning" for e in refusals)


async def test_global_cap_and_refusal_lines_are_rate_limited(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logs, "PEER_LOG", logs.LogLimiter(per_window=2))
    budget = Budget(Limits(max_connections=2, max_connections_per_ip=0))
    namesrv = NamesrvServer(budget=budget)
    with trio.fail_after(20), structlog.testing.capture_logs() as captured:
        async with trio.open_nursery() as nursery:
            addr = await nursery.start(namesrv.serve, "127.0.0.1", 0)
            held = [await trio.open_tcp_stream(*addr) for _ in range(2)]
            for _ in range(6):
                extra = await trio.open_tcp_stream(*addr)
                assert await closed_by_server(extra)
                await extra.aclose()
            assert budget.refused == 6
            for s in held:
                await s.aclose()
            nursery.cancel_scope.cancel()
    refusals = events(captured, "connection.refused")
    assert len(refusals) == 2 and "maxConnections=2" in refusals[0]["reason"]
    assert "suppressed" in refusals[-1]["rate_limited"]


# --------------------------------------------------------------------------- memory for unfinished frames


@pytest.mark.parametrize("listener", ["namesrv", "kafka"])
async def test_unfinished_frames_share_one_budget_and_the_connection_crossing_it_is_closed(listener: str) -> None:
    limit = 1 << 20
    budget = Budget(Limits(max_buffered_frame_bytes=limit))
    namesrv = NamesrvServer(budget=budget)
    kafka = KafkaServer({60: Route(_describe, 0, 1, quick=True)}, budget=budget)
    chunk = b"x" * (600 << 10)
    # the length of a 16 MiB frame, then 600 KiB of it: one fits the budget, the second does not
    head = struct.pack(">i", 16 << 20) if listener == "namesrv" else struct.pack(">ihhi", 16 << 20, 60, 0, 1)
    with trio.fail_after(20), structlog.testing.capture_logs() as captured:
        async with trio.open_nursery() as nursery:
            addr = await nursery.start(namesrv.serve if listener == "namesrv" else kafka.serve, "127.0.0.1", 0)
            first = await trio.open_tcp_stream(*addr)
            await first.send_all(head + chunk)
            while budget.buffered < len(chunk):     # noqa: ASYNC110 - the server reads it
                await trio.sleep(0.01)
            second = await trio.open_tcp_stream(*addr)
            try:
                await second.send_all(head + chunk)
            except trio.BrokenResourceError:
                pass
            assert await closed_by_server(second)
            assert budget.buffered <= limit and budget.over_budget >= 1
            # small requests still pass while the budget is spent
            if listener == "namesrv":
                reply = await rocketmq_echo(addr, b"")
                assert reply is not None
            else:
                assert await kafka_describe(addr) == "c"
            await first.aclose()
            await second.aclose()
            while budget.connections:       # noqa: ASYNC110 - the server notices the closes
                await trio.sleep(0.01)
            assert budget.buffered == 0     # everything given back
            nursery.cancel_scope.cancel()
    name = "rocketmq.memory_budget" if listener == "namesrv" \
        else "kafka.memory_budget"
    assert len(events(captured, name)) == 1


def test_small_frames_are_always_granted() -> None:
    budget = Budget(Limits(max_buffered_frame_bytes=1))
    lease = budget.admit("t", ("10.0.0.1", 1))
    assert lease is not None
    assert lease.buffer(SMALL_FRAME) and not lease.buffer(SMALL_FRAME + 1)
    lease.release()
    lease.release()
    assert (budget.connections, budget.buffered, budget.per_ip) == (0, 0, {})
    unlimited = Budget(Limits(max_buffered_frame_bytes=0, max_unread_response_bytes=0))   # 0: no limit
    lease = unlimited.admit("t", ("10.0.0.1", 1))
    assert lease is not None and lease.buffer(1 << 30) and unlimited.reserve_unread(1 << 40)


# --------------------------------------------------------------------------- frame deadline (slowloris)


@pytest.mark.parametrize("listener", ["broker", "kafka"])
async def test_a_frame_must_be_finished_in_time_while_an_idle_connection_stays(listener: str) -> None:
    budget = Budget(Limits(frame_timeout_s=0.3))
    rmq = RemotingServer({10: echo}, name="broker", budget=budget, idle_timeout_s=600)
    kafka = KafkaServer({60: Route(_describe, 0, 1, quick=True)}, budget=budget)
    with trio.fail_after(20), structlog.testing.capture_logs() as captured:
        async with trio.open_nursery() as nursery:
            if listener == "broker":
                addr = (await nursery.start(rmq.serve, "127.0.0.1", [0]))[0]
            else:
                addr = await nursery.start(kafka.serve, "127.0.0.1", 0)
            idle = await trio.open_tcp_stream(*addr)
            slow = await trio.open_tcp_stream(*addr)
            frame = struct.pack(">i", 64) + b"\x00" * 64
            closed = False
            for i in range(len(frame)):         # one byte at a time, slower than the deadline allows
                try:
                    await slow.send_all(frame[i:i + 1])
                except trio.BrokenResourceError:
                    closed = True
                    break
                with trio.move_on_after(0.1):
                    try:
                        closed = await slow.receive_some(1) == b""
                    except trio.BrokenResourceError:
                        closed = True
                if closed:
                    break
            assert closed or await closed_by_server(slow)
            # the idle connection (no unfinished frame) is still served
            if listener == "broker":
                conn = RemotingConnection()
                await idle.send_all(conn.start_request(RemotingCommand(code=10, body=b"still")))
                got: list[RemotingCommand] = []
                while not got:
                    got = conn.receive_data(await idle.receive_some(65536))
                assert got[0].body == b"still"
            else:
                assert await kafka_describe(addr, idle) == "c"
            await idle.aclose()
            await slow.aclose()
            nursery.cancel_scope.cancel()
    name = "rocketmq.frame_timeout" if listener == "broker" else "kafka.frame_timeout"
    assert len(events(captured, name)) == 1


# --------------------------------------------------------------------------- consumers that never read


async def test_a_peer_that_never_reads_is_closed_and_gives_its_response_back() -> None:
    budget = Budget(Limits(max_unread_response_bytes=1 << 20, write_timeout_s=0.5))

    with trio.fail_after(30):
        async with kafka_answering(budget, 4 << 20) as (addr, captured):
            readers = []
            for _ in range(3):        # ask for a 4 MiB answer, never read it
                stream = await non_reader(addr)
                await stream.send_all(encode_request_frame(DESCRIBE_CLUSTER, 0, 1, {}, client_id="r"))
                readers.append(stream)
            await closed_after(captured, budget, "kafka.unread_budget", count=3)
            assert budget.unread == 0
            for s in readers:
                await s.aclose()
    assert len(events(captured, "kafka.unread_budget")) == 3


async def test_a_reader_that_stops_is_closed_after_the_write_timeout() -> None:
    budget = Budget(Limits(write_timeout_s=0.3))

    with trio.fail_after(30):
        async with kafka_answering(budget, 8 << 20) as (addr, captured):
            stream = await non_reader(addr)
            await stream.send_all(encode_request_frame(DESCRIBE_CLUSTER, 0, 1, {}, client_id="r"))
            await closed_after(captured, budget, "kafka.slow_reader")
            await stream.aclose()
    assert len(events(captured, "kafka.slow_reader")) == 1 and budget.unread == 0


async def test_a_rocketmq_peer_that_never_reads_its_responses_is_closed() -> None:
    budget = Budget(Limits(max_pending_write_bytes=2 << 20))
    event = "rocketmq.slow_reader"
    captured = await rocketmq_unread_answers(budget, 64, event)     # 64 MiB of answers asked for, none read
    assert len(events(captured, event)) == 1


# --------------------------------------------------------------------------- malformed input: one line each


def _remoting_frame(header: bytes) -> bytes:
    return struct.pack(">ii", 4 + len(header), len(header)) + header


HOSTILE_HEADERS = [
    b'{"code":1e400}',                                 # the 22-byte frame of issue 19
    b'{"code":' + b"[" * 100_000 + b"]" * 100_000 + b"}",   # nested past any parser
    b'{"code":NaN}',
    b'{"code":10,"opaque":4294967296}',
]


@pytest.mark.parametrize("header", HOSTILE_HEADERS, ids=["1e400", "nested", "nan", "opaque-overflow"])
async def test_hostile_json_headers_are_one_warning_without_traceback(header: bytes) -> None:
    rmq = RemotingServer({10: echo}, name="broker")
    with trio.fail_after(20), structlog.testing.capture_logs() as captured:
        async with trio.open_nursery() as nursery:
            addr = (await nursery.start(rmq.serve, "127.0.0.1", [0]))[0]
            bad = await trio.open_tcp_stream(*addr)
            await bad.send_all(_remoting_frame(header))
            assert await closed_by_server(bad)
            await bad.aclose()
            assert await rocketmq_echo(addr) == b"ping"     # the server goes on
            nursery.cancel_scope.cancel()
    assert len(_remoting_frame(b'{"code":1e400}')) == 22
    bad_lines = [e for e in captured if e["log_level"] in ("warning", "error")]
    assert [e["event"] for e in bad_lines] == ["rocketmq.protocol_violation"]
    assert "exc_info" not in bad_lines[0] and "rocketmq.channel_crashed" not in str(captured)


async def test_hostile_bodies_are_answered_not_crashed() -> None:
    from rokka.net.remoting.codec.bodies import loads_body

    async def parse(channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.make_response(ResponseCode.SUCCESS, body=json.dumps(loads_body(cmd.body)).encode())

    rmq = RemotingServer({10: parse}, name="broker")
    with trio.fail_after(20), structlog.testing.capture_logs() as captured:
        async with trio.open_nursery() as nursery:
            addr = (await nursery.start(rmq.serve, "127.0.0.1", [0]))[0]
            for body in (b'{"a":1e400}', b"[" * 5000 + b"]" * 5000, b'{0:"x"}'):
                conn = RemotingConnection()
                async with await trio.open_tcp_stream(*addr) as s:
                    await s.send_all(conn.start_request(RemotingCommand(code=10, body=body)))
                    got: list[RemotingCommand] = []
                    while not got:
                        got = conn.receive_data(await s.receive_some(65536))
                    expected = ResponseCode.SUCCESS if body == b'{0:"x"}' else ResponseCode.SYSTEM_ERROR
                    assert got[0].code == expected, got[0].remark
            nursery.cancel_scope.cancel()
    assert not [e for e in captured if e.get("exc_info")]


async def test_malformed_kafka_frames_are_rate_limited_per_peer(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [0.0]
    monkeypatch.setattr(logs, "PEER_LOG", logs.LogLimiter(per_window=3, window_s=60, clock=lambda: now[0]))
    kafka = KafkaServer({60: Route(_describe, 0, 1, quick=True)})
    garbage = [struct.pack(">ihhi", 8, 999, 0, 1),          # unknown api key
               struct.pack(">ihhi", 10, 60, 0, 1) + b"\xff\xff",   # bad client id length
               struct.pack(">ihhi", 8, 60, 77, 1)]         # version not advertised
    with trio.fail_after(20), structlog.testing.capture_logs() as captured:
        async with trio.open_nursery() as nursery:
            addr = await nursery.start(kafka.serve, "127.0.0.1", 0)
            for i in range(20):
                s = await trio.open_tcp_stream(*addr)
                await s.send_all(garbage[i % 3])
                assert await closed_by_server(s)
                await s.aclose()
            now[0] = 61.0       # the next window: the count of what was suppressed comes first
            s = await trio.open_tcp_stream(*addr)
            await s.send_all(garbage[0])
            assert await closed_by_server(s)
            await s.aclose()
            assert await kafka_describe(addr) == "c"
            nursery.cancel_scope.cancel()
    assert kafka.stats.protocol_errors == 21
    lines = [e for e in captured if e["log_level"] in ("warning", "error")]
    assert [e["event"] for e in lines] == ["kafka.protocol_error"] * 3 + ["log.suppressed", "kafka.protocol_error"]
    assert lines[3]["suppressed"] == 17 and "rate_limited" in lines[2]
    assert not [e for e in captured if e.get("exc_info")]


async def test_request_bodies_in_service_are_bounded_per_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    from rokka.net.remoting import channel as channel_mod

    monkeypatch.setattr(channel_mod, "MAX_INFLIGHT_BYTES", 3 << 19)     # 1.5 MiB
    release = trio.Event()
    calls: list[int] = []

    async def parked(channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        calls.append(len(cmd.body))
        await release.wait()
        return cmd.make_response(ResponseCode.SUCCESS)

    rmq = RemotingServer({10: parked}, name="broker")
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            addr = (await nursery.start(rmq.serve, "127.0.0.1", [0]))[0]
            conn = RemotingConnection()
            async with await trio.open_tcp_stream(*addr) as s:

                async def send() -> None:       # may block: the server stops reading
                    for _ in range(3):
                        await s.send_all(conn.start_request(RemotingCommand(code=10, body=b"b" * (1 << 20))))

                nursery.start_soon(send)
                while len(calls) < 1:     # noqa: ASYNC110
                    await trio.sleep(0.01)
                await trio.testing.wait_all_tasks_blocked(0.05)
                assert calls == [1 << 20]       # the second waits: 2 MiB would exceed 1.5 MiB
                release.set()
                got: list[RemotingCommand] = []
                while len(got) < 3:
                    got += conn.receive_data(await s.receive_some(65536))
                assert [c.code for c in got] == [ResponseCode.SUCCESS] * 3 and len(calls) == 3
            nursery.cancel_scope.cancel()


async def test_rocketmq_responses_queued_for_non_readers_share_the_process_budget() -> None:
    budget = Budget(Limits(max_unread_response_bytes=3 << 20))
    event = "rocketmq.unread_budget"
    # 32 MiB of answers asked for (below maxPendingWriteBytes), none read
    captured = await rocketmq_unread_answers(budget, 32, event)
    assert events(captured, event)


async def test_frames_before_sasl_authentication_are_capped_then_the_full_limit_applies() -> None:
    from rokka.gateway.kafka.apis import sasl_routes
    from rokka.gateway.kafka.sasl import UserStore

    kafka = KafkaServer({60: Route(_describe, 0, 1, quick=True), **sasl_routes()},
                        sasl=(("PLAIN",), UserStore({"alice": "pw"})),
                        max_unauthenticated_frame_bytes=4096)
    big_client_id = "x" * 5000      # a 5 KiB DescribeCluster frame

    async def call(s: trio.SocketStream, api_key: int, version: int, body: dict[str, Any],
                   client_id: str = "t") -> Struct:
        await s.send_all(encode_request_frame(APIS[api_key], version, 1, body, client_id=client_id))
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + int.from_bytes(buf[:4], "big"):
            chunk = await s.receive_some(65536)
            assert chunk, "closed instead of answering"
            buf += chunk
        return decode_response_frame(APIS[api_key], version, buf[4:])[1]

    with trio.fail_after(20), structlog.testing.capture_logs() as captured:
        async with trio.open_nursery() as nursery:
            addr = await nursery.start(kafka.serve, "127.0.0.1", 0)
            async with await trio.open_tcp_stream(*addr) as early:   # before SASL: 5 KiB is too much
                await early.send_all(encode_request_frame(DESCRIBE_CLUSTER, 0, 1, {}, client_id=big_client_id))
                assert await closed_by_server(early)
            async with await trio.open_tcp_stream(*addr) as s:
                assert (await call(s, 17, 1, {"mechanism": "PLAIN"})).error_code == 0
                assert (await call(s, 36, 0, {"auth_bytes": b"\0alice\0pw"})).error_code == 0
                assert (await call(s, 60, 0, {}, client_id=big_client_id)).cluster_id == "c"
            nursery.cancel_scope.cancel()
    errors = events(captured, "kafka.protocol_error")
    assert len(errors) == 1 and "4096" in errors[0]["hint"]


def test_broker_conf_keys_reach_the_budget() -> None:
    from rokka.core.config import BrokerConfig, apply_settings
    from rokka.gateway.runtime import budget_from

    cfg = BrokerConfig()
    assert apply_settings(cfg, {"maxConnections": "100", "maxConnectionsPerIp": "7", "maxBufferedFrameBytes": "1024",
                                "frameTimeoutSeconds": "0", "connectionWriteTimeoutSeconds": "9",
                                "maxPendingWriteBytes": "5", "maxReadAheadBytes": "6",
                                "maxUnreadResponseBytes": "8", "kafkaMaxFrameBytes": "1048576",
                                "kafkaSaslMaxReceiveBytes": "2048"}) == []
    cfg.validate()
    b = budget_from(cfg)
    assert b.max_connections == 100 and b.limits == Limits(
        max_connections=100, max_connections_per_ip=7, max_buffered_frame_bytes=1024, frame_timeout_s=0.0,
        write_timeout_s=9.0, max_pending_write_bytes=5, max_read_ahead_bytes=6, max_unread_response_bytes=8)
    defaults = BrokerConfig()
    assert (defaults.kafka_max_frame_bytes, defaults.max_frame_bytes, defaults.kafka_sasl_max_receive_bytes) == \
        (100 << 20, 16 << 20, 524288)
    with pytest.raises(ValueError, match="maxConnectionsPerIp"):
        apply_settings(defaults, {"maxConnectionsPerIp": "-1"})
        defaults.validate()


def test_a_quiet_peers_suppressed_lines_are_reported_when_its_window_ends() -> None:
    now = [0.0]
    lim = logs.LogLimiter(per_window=2, window_s=60, clock=lambda: now[0])
    logger = structlog.get_logger("t")
    with structlog.testing.capture_logs() as captured:
        for _ in range(5):
            logs.limited(logger, "warning", "x.bad", "10.0.0.9", limiter=lim)
        assert lim.flush(logger) == 0       # the window is still open
        now[0] = 61.0
        assert lim.flush(logger) == 1
    assert [e["event"] for e in captured] == ["x.bad", "x.bad", "log.suppressed"]
    assert captured[-1]["suppressed"] == 3 and captured[-1]["address"] == "10.0.0.9"
