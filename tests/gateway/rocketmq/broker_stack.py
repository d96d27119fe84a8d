"""A name server and one broker (default ``BrokerConfig``, ports 0, store under a temp dir) for tests
that talk to them over real sockets.

Theory of operation
-------------------
``running_stack(root)`` starts both in a nursery of its own, yields their addresses, and on exit
shuts the broker down and cancels the nursery.  The caller bounds it (``trio.fail_after``) and
opens its own clients, with whatever handlers or language it needs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import trio
from rokka.core.config import BrokerConfig
from rokka.gateway import runtime
from rokka.gateway.namesrv.server import NamesrvServer


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
