"""The controller's heartbeat handler checks what a peer sends before it reaches the controller's state."""

from __future__ import annotations

from rokka.core.namesrv.controller import Controller
from rokka.core.namesrv.routes import RouteInfoManager
from rokka.gateway.controller import service as svc
from rokka.gateway.controller.codec import BROKER_HEARTBEAT, BrokerHeartbeatRequestHeader
from rokka.net.remoting.codec.codes import ResponseCode
from rokka.net.remoting.codec.remoting import RemotingCommand


async def test_heartbeats_with_bad_names_or_past_the_bounds_are_refused() -> None:
    """The name-server port takes anyone's requests: a heartbeat cannot smuggle a bad broker name into the
    controller, nor grow its sets or a set's replicas without bound."""
    service = svc.ControllerService(RouteInfoManager(clock=lambda: 1), Controller(clock=lambda: 1))

    def beat(name: str, addr: str) -> RemotingCommand:
        ext = BrokerHeartbeatRequestHeader(cluster_name="c", broker_name=name, broker_addr=addr,
                                           broker_id=0, max_offset=0).encode()
        return RemotingCommand(BROKER_HEARTBEAT, ext_fields=ext)

    for bad in ("../x", "a b", ".."):
        resp = await service.heartbeat(None, beat(bad, "127.0.0.1:1"))   # type: ignore[arg-type]
        assert resp.code == ResponseCode.SYSTEM_ERROR and "broker name" in (resp.remark or ""), resp.remark
    assert service.controller.sets == {}
    for i in range(svc.MAX_REPLICAS):
        assert (await service.heartbeat(None, beat("b", f"127.0.0.1:{i + 1}"))).code == 0  # type: ignore[arg-type]
    resp = await service.heartbeat(None, beat("b", "127.0.0.1:9999"))   # type: ignore[arg-type]
    assert resp.code == ResponseCode.SYSTEM_ERROR and len(service.controller.sets["b"].replicas) == svc.MAX_REPLICAS
    assert (await service.heartbeat(None, beat("b", "127.0.0.1:1"))).code == 0   # a known replica goes on
    service.controller.sets.update({f"s{i}": service.controller.sets["b"] for i in range(svc.MAX_BROKER_SETS)})
    resp = await service.heartbeat(None, beat("new", "127.0.0.1:1"))   # type: ignore[arg-type]
    assert resp.code == ResponseCode.SYSTEM_ERROR and "new" not in service.controller.sets
