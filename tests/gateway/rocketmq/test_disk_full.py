"""A RocketMQ send while retention has marked the disk full: SERVICE_NOT_AVAILABLE naming the full disk,
nothing stored; sends succeed again once the disk has room.

Rules: ports 0 on 127.0.0.1, a tmp_path store, the project's own client library as the peer; the disk
figures come from a stand-in for ``os.statvfs`` (the only thing replaced), every test bounded by
``trio.fail_after``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio
from rokka.net.remoting.client import Admin, NamesrvClient, Producer, RemotingClient
from rokka.net.remoting.client.remoting import ResponseError
from rokka.net.remoting.codec.codes import ResponseCode

from tests.gateway.rocketmq.test_txn_handlers import addr_of, start_stack, wait_route


async def test_send_to_full_disk_is_refused_until_space_returns(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    free = {"blocks": 30}       # of 1000, all available to us: 97 % in use
    monkeypatch.setattr(os, "statvfs", lambda _path: os.statvfs_result(
        (4096, 4096, 1000, free["blocks"], free["blocks"], 0, 0, 0, 0, 255)))
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            ns_addr, role = await start_stack(nursery, tmp_path)
            store = role.broker.store
            async with RemotingClient() as rc:
                ns = NamesrvClient(rc, [ns_addr])
                await wait_route(ns, Admin(rc, ns), addr_of(role), "DF")
                producer = Producer(rc, ns, "df-pg")
                store.run_retention(0)
                with pytest.raises(ResponseError) as err:
                    await producer.send("DF", b"x", queue=0)
                assert err.value.code == ResponseCode.SERVICE_NOT_AVAILABLE and "disk is full" in err.value.remark
                assert store.max_offset("DF", 0) == 0
                free["blocks"] = 600
                store.run_retention(0)
                assert (await producer.send("DF", b"x", queue=0)).status == "SEND_OK"
                assert store.max_offset("DF", 0) == 1
            nursery.cancel_scope.cancel()
