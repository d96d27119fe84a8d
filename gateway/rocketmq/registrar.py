"""Broker -> name server registration (REGISTER_BROKER every 30 s, on change, and UNREGISTER at stop).

Theory of operation
-------------------
One long-lived connection per name server (a ``Channel`` used as a client),
re-opened when it breaks.  Keeping it open matters: a name server drops a
broker as soon as its connection closes, so a killed broker leaves the routes
at once instead of after the 120 s silence timeout.  ``trigger()`` asks for
an immediate re-registration (a topic was created or deleted); registrations
are coalesced so a burst of topic changes costs one request.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable
from typing import Any

import structlog
import trio

from core.config import BrokerConfig
from gateway.rocketmq.channel import Channel
from gateway.rocketmq.codec.codes import RequestCode, ResponseCode
from gateway.rocketmq.codec.remoting import RemotingCommand

log = structlog.get_logger(__name__)

REQUEST_TIMEOUT_S = 3.0


class BrokerRegistrar:
    def __init__(self, cfg: BrokerConfig, *, topics_body: Callable[[], dict[str, Any]], broker_addr: str) -> None:
        self.cfg = cfg
        self._topics_body = topics_body
        self.broker_addr = broker_addr
        self._wake = trio.Event()
        self._channels: dict[str, Channel] = {}
        self._nursery: trio.Nursery | None = None
        self.registrations = 0

    def trigger(self) -> None:
        self._wake.set()

    def _header(self) -> dict[str, str]:
        c = self.cfg
        return {"brokerName": c.broker_name, "brokerAddr": self.broker_addr, "clusterName": c.broker_cluster_name,
                "haServerAddr": f"{c.advertised_host}:{c.listen_port + 1}", "brokerId": str(c.broker_id)}

    async def _channel(self, addr: str) -> Channel:
        ch = self._channels.get(addr)
        if ch is not None and not ch.closed:
            return ch
        host, _, port = addr.rpartition(":")
        stream = await trio.open_tcp_stream(host, int(port))
        ch = Channel(stream, name="registrar")
        assert self._nursery is not None
        await self._nursery.start(ch.run)
        self._channels[addr] = ch
        return ch

    async def register_once(self) -> int:
        body = json.dumps({"filterServerList": [], "topicConfigSerializeWrapper": self._topics_body()}).encode()
        header = self._header() | {"compressed": "false", "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF)}
        ok = 0
        for addr in self.cfg.namesrv_addrs:
            cmd = RemotingCommand(code=RequestCode.REGISTER_BROKER, ext_fields=dict(header), body=body)
            try:
                with trio.fail_after(REQUEST_TIMEOUT_S):
                    resp = await (await self._channel(addr)).send_request(cmd, REQUEST_TIMEOUT_S)
            except (OSError, trio.TooSlowError, Exception) as exc:  # noqa: BLE001 - retry next period
                log.warning("register broker failed", namesrv=addr, error=str(exc))
                continue
            if resp.code == ResponseCode.SUCCESS:
                ok += 1
            else:
                log.warning("register broker refused", namesrv=addr, code=resp.code, remark=resp.remark)
        self.registrations += 1
        return ok

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await self.register_once()
            task_status.started()
            period = self.cfg.register_name_server_period / 1000
            while True:
                with trio.move_on_after(period):
                    await self._wake.wait()
                self._wake = trio.Event()
                await trio.sleep(0.05)  # coalesce bursts of topic changes
                await self.register_once()

    async def unregister(self) -> None:
        for addr in self.cfg.namesrv_addrs:
            cmd = RemotingCommand(code=RequestCode.UNREGISTER_BROKER, ext_fields=self._header())
            try:
                with trio.fail_after(REQUEST_TIMEOUT_S):
                    await (await self._channel(addr)).send_request(cmd, REQUEST_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001
                log.info("unregister broker failed", namesrv=addr, error=str(exc))
        for ch in self._channels.values():
            ch.close()
