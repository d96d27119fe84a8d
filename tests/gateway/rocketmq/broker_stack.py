"""A name server and one broker (default ``BrokerConfig``, ports 0, store under a temp dir) for tests
that talk to them over real sockets, and the plain-ACL SUB check the request-code tests share.

Theory of operation
-------------------
``running_stack(root)`` starts both in a nursery of its own, yields their addresses, and on exit
shuts the broker down and cancels the nursery.  The caller bounds it (``trio.fail_after``) and opens
its own clients, with whatever handlers or language it needs; ``stack_with_topic`` adds one client
with a topic created.  ``check_needs_sub`` signs a request as account ``app`` and checks that a plain
ACL grants it on a SUB topic and refuses it elsewhere.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import trio
from rokka.core.config import BrokerConfig
from rokka.gateway import runtime
from rokka.gateway.namesrv.server import NamesrvServer
from rokka.gateway.rocketmq.acl import PlainAcl, sign
from rokka.net.remoting.client import Admin, NamesrvClient, RemotingClient
from rokka.net.remoting.codec.remoting import RemotingCommand


@dataclass(frozen=True)
class Stack:
    namesrv: str    # "host:port" of the name server
    broker: str     # "host:port" of the broker's RocketMQ listener


@asynccontextmanager
async def running_stack(root: Path) -> AsyncIterator[Stack]:
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(NamesrvServer().serve, "127.0.0.1", 0)
        cfg = BrokerConfig(listen_port=0, kafka_listen_port=0, store_path_root_dir=str(root / "store"),
                           namesrv_addr=f"{host}:{port}")
        role = runtime.BrokerRole(cfg)
        await nursery.start(role.run)
        yield Stack(namesrv=f"{host}:{port}", broker=f"{role.broker_addr[0]}:{role.broker_addr[1]}")
        await role.shutdown()
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def stack_with_topic(root: Path, topic: str, read: int = 1,
                           write: int = 1) -> AsyncIterator[tuple[str, RemotingClient, NamesrvClient]]:
    """``running_stack`` with ``topic`` created on its broker: (broker address, client, name server client)."""
    async with running_stack(root) as stack, RemotingClient() as rc:
        nsc = NamesrvClient(rc, [stack.namesrv])
        await Admin(rc, nsc).create_topic(stack.broker, topic, read_queue_nums=read, write_queue_nums=write)
        yield stack.broker, rc, nsc


def check_needs_sub(root: Path, command: Callable[[str], RemotingCommand], extra_yaml: str = "") -> None:
    """Under a plain ACL whose account ``app`` may SUB topic ``open`` only (plus ``extra_yaml`` lines),
    ``command(topic)`` signed by ``app`` passes for ``open`` and is refused for ``closed``."""
    (root / "plain_acl.yml").write_text(
        "accounts:\n  - accessKey: app\n    secretKey: app-secret\n    defaultTopicPerm: DENY\n"
        f"{extra_yaml}    topicPerms: [open=SUB]\n")
    acl = PlainAcl.load(root / "plain_acl.yml")

    def check(topic: str) -> str | None:
        cmd = command(topic)
        cmd.ext_fields["AccessKey"] = "app"
        cmd.ext_fields["Signature"] = sign(cmd.ext_fields, b"", "app-secret")
        return acl.check(cmd, "127.0.0.1")

    assert check("open") is None
    assert check("closed") == "No permission for topic closed (needs SUB) for accessKey=app"
