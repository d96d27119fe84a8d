"""The controller embedded in the name server (RocketMQ 5 ``enableControllerInNamesrv``).

Theory of operation
-------------------
``ControllerService`` binds the controller's request codes (``codec``) to one
``core.namesrv.controller.Controller`` and runs its scan every
``scanNotActiveBrokerInterval``.  Every election is applied to the name
server's routes at once (``RouteInfoManager.set_master``: the elected replica
becomes brokerId 0, the silent master's address is dropped), so clients of
both protocols see the new master on their next route refresh (RocketMQ
clients every 30 s or on a failed send; rokka's Kafka metadata every 3 s).
REGISTER_BROKER of a broker set the controller manages is answered with the
controller's view too (``NamesrvHandlers.controller``): the master's
registration gets brokerId 0 whatever its broker.conf says.

A heartbeat is refused (SYSTEM_ERROR, a rate-limited log line) when its broker
name is not a valid RocketMQ name, or when it would add a broker set past
``MAX_BROKER_SETS`` or a replica past ``MAX_REPLICAS`` in a set: the port takes
anyone's requests, and the controller's state lives in memory.
"""

from __future__ import annotations

import structlog
import trio
from rokka.core import names
from rokka.core.namesrv.controller import BrokerSet, Controller
from rokka.core.namesrv.routes import RouteInfoManager
from rokka.gateway.controller.codec import BROKER_HEARTBEAT, CONTROLLER_GET_REPLICA_INFO, decode_heartbeat, encode_info
from rokka.net.logs import limited
from rokka.net.remoting.channel import Channel
from rokka.net.remoting.codec.codes import ResponseCode
from rokka.net.remoting.codec.namesrv_headers import BrokerNameRequestHeader
from rokka.net.remoting.codec.remoting import RemotingCommand

log = structlog.get_logger(__name__)

MAX_BROKER_SETS = 1024      # broker sets one controller keeps
MAX_REPLICAS = 16           # brokers (master + slaves) in one set


class ControllerService:
    def __init__(self, routes: RouteInfoManager, controller: Controller, scan_interval_s: float = 1.0) -> None:
        self.routes = routes
        self.controller = controller
        self.scan_interval_s = scan_interval_s

    def table(self) -> dict[int, object]:
        return {BROKER_HEARTBEAT: self.heartbeat, CONTROLLER_GET_REPLICA_INFO: self.replica_info}

    async def heartbeat(self, channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        try:
            hb = decode_heartbeat(cmd.ext_fields)
        except ValueError as exc:
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, str(exc))
        before = self.controller.sets.get(hb.broker_name)
        if (why := self._refusal(hb.broker_name, hb.broker_addr, before)) is not None:
            peer = getattr(channel, "peer", None)
            host = str(peer[0]) if isinstance(peer, tuple) and peer else "?"
            limited(log, "warning", "controller.heartbeat_refused", host, peer=str(peer), reason=why)
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, why)
        old_master = before.master if before is not None else None
        info = self.controller.heartbeat(hb)
        if info.master_addr is not None and info.master_addr != old_master:
            log.info("controller.master_elected", broker=hb.broker_name, master=info.master_addr,
                     epoch=info.epoch, old=old_master)
            self.routes.set_master(hb.broker_name, info.master_addr)
        return cmd.make_response(ResponseCode.SUCCESS, ext_fields=encode_info(info))

    def _refusal(self, broker_name: str, broker_addr: str, known: BrokerSet | None) -> str | None:
        """Why a heartbeat may not change the controller's state, or None."""
        if (bad := names.topic_problem(broker_name)) is not None:
            return bad.replace("topic", "broker name")
        if known is None and len(self.controller.sets) >= MAX_BROKER_SETS:
            return f"the controller already manages {MAX_BROKER_SETS} broker sets"
        if known is not None and broker_addr not in known.replicas and len(known.replicas) >= MAX_REPLICAS:
            return f"broker set {broker_name} already has {MAX_REPLICAS} brokers"
        return None

    async def replica_info(self, channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        del channel
        name = BrokerNameRequestHeader.pick(cmd, "broker_name")[0] or ""
        if not self.controller.manages(name):
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, f"broker set {name!r} is not known")
        return cmd.make_response(ResponseCode.SUCCESS, ext_fields=encode_info(self.controller.info(name, "")))

    def scan_once(self) -> None:
        for e in self.controller.scan():
            dropped = self.routes.set_master(e.broker_name, e.new_master)
            log.warning("controller.master_elected", broker=e.broker_name, master=e.new_master, epoch=e.epoch,
                        old=e.old_master, dropped_from_routes=dropped)

    async def run(self) -> None:
        while True:
            await trio.sleep(self.scan_interval_s)
            self.scan_once()
