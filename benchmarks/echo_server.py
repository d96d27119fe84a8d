"""The per-request floor of the RocketMQ stack: a trio server that answers every frame with empty SUCCESS.

Run: ``python -m benchmarks.echo_server [--host 127.0.0.1] [--port 0] [--queues 4]``; prints
``echo ready H:P`` once listening and runs until SIGTERM / SIGINT.

Theory of operation
-------------------
It is ``rokka.gateway.rocketmq.server.RemotingServer`` (so the same ``Channel`` reader, dispatch,
per-request task and write path as the real broker) with one handler, registered for every
request code 0..65535, that returns ``req.make_response(0)``: no header fields, no body.  Oneway
requests get no reply (the ``Channel`` rule).  The single exception is GET_ROUTEINFO_BY_TOPIC,
which answers a route naming this very server as the only broker (``--queues`` read/write
queues), so unmodified clients (the RocketMQ C++ client, our trio ``Producer``) can use this
process as both name server and broker; and the three send codes, whose SUCCESS carries a
constant ``msgId/queueId/queueOffset`` header (the C++ client segfaults on a send response
without them).  The send handler says it completes without waiting (``inline``), as the broker's
does under ASYNC_FLUSH, so it runs in the connection's reader like a real send (no task per request).
Route lookups happen once per client, outside the timed loops.  The benchmark subtracts nothing:
the numbers it measures against this server are "what the client + remoting stack can do when the
broker does no work at all".
"""

from __future__ import annotations

import argparse
import signal
import sys

import structlog
import trio
from rokka.net.remoting.channel import Channel
from rokka.net.remoting.codec.bodies import dumps
from rokka.net.remoting.codec.codes import RequestCode
from rokka.net.remoting.codec.remoting import RemotingCommand
from rokka.gateway.rocketmq.server import RemotingServer

READY_PREFIX = "echo ready"
# The C++ client crashes on a send response without these header fields, so sends get this constant.
SEND_EXT = {"msgId": "0" * 32, "queueId": "0", "queueOffset": "0"}


def route_body(addr: str, queues: int) -> bytes:
    """TopicRouteData with one broker (``echo``) at ``addr``."""
    return dumps({
        "brokerDatas": [{"brokerAddrs": {"0": addr}, "brokerName": "echo", "cluster": "EchoCluster"}],
        "filterServerTable": {},
        "queueDatas": [{"brokerName": "echo", "perm": 6, "readQueueNums": queues, "topicSysFlag": 0,
                        "writeQueueNums": queues}],
    })


async def serve(host: str, port: int, queues: int) -> None:
    route: dict[str, bytes] = {}

    async def echo(channel: Channel, req: RemotingCommand) -> RemotingCommand:
        return req.make_response(0)

    async def get_route(channel: Channel, req: RemotingCommand) -> RemotingCommand:
        return req.make_response(0, body=route["body"])

    async def sent(channel: Channel, req: RemotingCommand) -> RemotingCommand:
        return req.make_response(0, ext_fields=SEND_EXT)

    sent.inline = lambda req: True  # type: ignore[attr-defined]  # the broker's ASYNC_FLUSH send path
    handlers = dict.fromkeys(range(65536), echo)
    handlers[int(RequestCode.GET_ROUTEINFO_BY_TOPIC)] = get_route
    for code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
        handlers[int(code)] = sent
    server = RemotingServer(handlers, name="echo", idle_timeout_s=None)
    async with trio.open_nursery() as nursery:
        addrs = await nursery.start(server.serve, host, [port])
        h, p = addrs[0]
        route["body"] = route_body(f"{h}:{p}", queues)
        print(f"{READY_PREFIX} {h}:{p}", flush=True)
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for _ in signals:
                break
        await server.aclose(grace_s=1.0)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--queues", type=int, default=4)
    args = ap.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30),
                        logger_factory=structlog.PrintLoggerFactory(sys.stderr))  # warnings and up only
    trio.run(serve, args.host, args.port, args.queues)


if __name__ == "__main__":
    main()
