"""CHECK_CLIENT_CONFIG (46): the Java push consumer's pre-start check of its subscription.

RocketMQ's broker answers SUCCESS for tag subscriptions, SYSTEM_ERROR when a SQL92 subscription
reaches a broker without enablePropertyFilter, SUBSCRIPTION_PARSE_FAILED when the expression does
not compile, else SUCCESS.  Before rokka knew the code, every SQL92 push consumer of the Java client
failed to start ("request type 46 not supported").
"""

from __future__ import annotations

import json
from pathlib import Path

import trio
from rokka.core.config import BrokerConfig
from rokka.gateway import runtime
from rokka.gateway.namesrv.server import NamesrvServer
from rokka.net.remoting.client import RemotingClient
from rokka.net.remoting.codec.codes import RequestCode, ResponseCode
from rokka.net.remoting.codec.remoting import RemotingCommand


def check(etype: str, expr: str) -> RemotingCommand:
    body = {"clientId": "127.0.0.1@x", "group": "G",
            "subscriptionData": {"topic": "T", "subString": expr, "expressionType": etype, "subVersion": 1,
                                 "tagsSet": [], "codeSet": [], "classFilterMode": False}}
    return RemotingCommand(RequestCode.CHECK_CLIENT_CONFIG, ext_fields={"clientId": "127.0.0.1@x", "group": "G"},
                           body=json.dumps(body).encode())


async def run_checks(root: Path, property_filter: bool) -> dict[str, tuple[int, str]]:
    out: dict[str, tuple[int, str]] = {}
    async with trio.open_nursery() as nursery:
        ns = NamesrvServer()
        host, port = await nursery.start(ns.serve, "127.0.0.1", 0)
        cfg = BrokerConfig(listen_port=0, kafka_listen_port=0, store_path_root_dir=str(root / "store"),
                           namesrv_addr=f"{host}:{port}", enable_property_filter=property_filter)
        role = runtime.BrokerRole(cfg)
        await nursery.start(role.run)
        broker = f"{role.broker_addr[0]}:{role.broker_addr[1]}"
        async with RemotingClient() as rc:
            for name, (etype, expr) in {"tag": ("TAG", "a || b"), "sql": ("SQL92", "a > 5 AND b = 'x'"),
                                        "bad_sql": ("SQL92", "a >>> (")}.items():
                r = await rc.invoke(broker, check(etype, expr))
                out[name] = (r.code, r.remark or "")
        await role.shutdown()
        nursery.cancel_scope.cancel()
    return out


async def test_sql92_subscriptions_are_checked(tmp_path: Path) -> None:
    with trio.fail_after(30):
        got = await run_checks(tmp_path / "on", True)
    assert got["tag"][0] == ResponseCode.SUCCESS
    assert got["sql"][0] == ResponseCode.SUCCESS
    assert got["bad_sql"][0] == ResponseCode.SUBSCRIPTION_PARSE_FAILED


async def test_sql92_refused_without_property_filter(tmp_path: Path) -> None:
    with trio.fail_after(30):
        got = await run_checks(tmp_path / "off", False)
    assert got["tag"][0] == ResponseCode.SUCCESS
    assert got["sql"] == (ResponseCode.SYSTEM_ERROR, "The broker does not support consumer to filter message by SQL92")
