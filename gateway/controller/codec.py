"""Sans-IO codec of the controller's two requests (remoting extFields <-> ``Heartbeat`` / ``ReplicaInfo``).

Theory of operation
-------------------
The broker's heartbeat travels as RocketMQ 5's ``BROKER_HEARTBEAT`` (904)
request with header fields named as Java's ``BrokerHeartbeatRequestHeader``
where Java has them (``clusterName``, ``brokerName``, ``brokerAddr``,
``brokerId``, ``heartbeatTimeoutMills``, ``epoch``, ``maxOffset``) plus
rokka's ``haServerAddr`` and ``epochStartOffset``.  Unlike Java (whose
heartbeat answer is empty and whose broker asks for the replica info
separately), the answer carries the replica info at once, in the fields of
Java's ``GetReplicaInfoResponseHeader`` (``masterAddress``, ``masterEpoch``,
``masterBrokerId``) plus ``masterHaAddress``, ``brokerId`` (the asker's id in
routes), ``epochs`` (``"epoch:startOffset,..."``) and ``syncStateSet``
(``"addr;addr"``).  ``CONTROLLER_GET_REPLICA_INFO`` (1004, header
``brokerName``) answers the same fields for tools and tests.

So a rokka broker and the rokka controller speak to each other; an Apache
RocketMQ 5 broker or controller does not interoperate with them (different
message flow), which the README states.
"""

from __future__ import annotations

from collections.abc import Mapping

from rokka.core.namesrv.controller import Heartbeat, ReplicaInfo
from rokka.net.remoting.codec.header_decl import I64, RequestHeader, ResponseHeader, declare, java

BROKER_HEARTBEAT = 904                  # RocketMQ 5 RequestCode.BROKER_HEARTBEAT
CONTROLLER_GET_REPLICA_INFO = 1004      # RocketMQ 5 RequestCode.CONTROLLER_GET_REPLICA_INFO


@declare
class BrokerHeartbeatRequestHeader(RequestHeader):
    """Java's BrokerHeartbeatRequestHeader fields plus rokka's haServerAddr and epochStartOffset."""

    cluster_name: str
    broker_name: str
    broker_addr: str
    ha_server_addr: str = ""
    broker_id: I64
    max_offset: I64
    epoch: I64 = 0
    epoch_start_offset: I64 = -1
    heartbeat_timeout_mills: I64 = 3000


@declare
class ReplicaInfoResponseHeader(ResponseHeader):
    """Java's GetReplicaInfoResponseHeader fields plus rokka's (see the module docstring)."""

    master_address: str | None = java(empty_is_none=True)
    master_ha_address: str | None = java(empty_is_none=True)
    master_epoch: I64 = 0
    master_broker_id: I64 | None = None                 # sent, never read back
    broker_id: I64 = -1
    epochs: str = ""
    sync_state_set: str = ""


def encode_heartbeat(hb: Heartbeat) -> dict[str, str]:
    return BrokerHeartbeatRequestHeader(
        cluster_name=hb.cluster, broker_name=hb.broker_name, broker_addr=hb.broker_addr, ha_server_addr=hb.ha_addr,
        broker_id=hb.broker_id, max_offset=hb.max_offset, epoch=hb.epoch, epoch_start_offset=hb.epoch_start,
        heartbeat_timeout_mills=hb.timeout_ms).encode()


def decode_heartbeat(ext: Mapping[str, str]) -> Heartbeat:
    """Raises HeaderFieldError (a ValueError) for a missing or malformed field."""
    h = BrokerHeartbeatRequestHeader.decode(ext)
    return Heartbeat(h.cluster_name, h.broker_name, h.broker_addr, h.ha_server_addr, h.broker_id, h.max_offset,
                     h.epoch, h.epoch_start_offset, h.heartbeat_timeout_mills)


def encode_info(info: ReplicaInfo) -> dict[str, str]:
    return ReplicaInfoResponseHeader(
        master_address=info.master_addr, master_ha_address=info.master_ha_addr, master_epoch=info.epoch,
        master_broker_id=0 if info.master_addr else None, broker_id=info.broker_id,
        epochs=",".join(f"{e}:{s}" for e, s in info.epochs), sync_state_set=";".join(info.sync_state)).encode()


def decode_info(ext: Mapping[str, str]) -> ReplicaInfo:
    h = ReplicaInfoResponseHeader.decode(ext)
    epochs: list[tuple[int, int]] = []
    for part in h.epochs.split(","):
        e, sep, s = part.partition(":")
        if sep:
            epochs.append((int(e), int(s)))
    sync = tuple(a for a in h.sync_state_set.split(";") if a)
    return ReplicaInfo(h.master_address, h.master_ha_address, h.master_epoch, h.broker_id, tuple(sorted(epochs)), sync)
