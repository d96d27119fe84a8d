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
from rokka.gateway.rocketmq.codec.headers import Header, to_ext

BROKER_HEARTBEAT = 904                  # RocketMQ 5 RequestCode.BROKER_HEARTBEAT
CONTROLLER_GET_REPLICA_INFO = 1004      # RocketMQ 5 RequestCode.CONTROLLER_GET_REPLICA_INFO


def encode_heartbeat(hb: Heartbeat) -> dict[str, str]:
    return to_ext(clusterName=hb.cluster, brokerName=hb.broker_name, brokerAddr=hb.broker_addr,
                  haServerAddr=hb.ha_addr, brokerId=hb.broker_id, maxOffset=hb.max_offset, epoch=hb.epoch,
                  epochStartOffset=hb.epoch_start, heartbeatTimeoutMills=hb.timeout_ms)


def decode_heartbeat(ext: Mapping[str, str]) -> Heartbeat:
    """Raises HeaderFieldError (a ValueError) for a missing or malformed field."""
    h = Header(ext)
    return Heartbeat(h.str("clusterName"), h.str("brokerName"), h.str("brokerAddr"), h.str("haServerAddr", ""),
                     h.long("brokerId"), h.long("maxOffset"), h.long("epoch", 0), h.long("epochStartOffset", -1),
                     h.long("heartbeatTimeoutMills", 3000))


def encode_info(info: ReplicaInfo) -> dict[str, str]:
    return to_ext(masterAddress=info.master_addr, masterHaAddress=info.master_ha_addr, masterEpoch=info.epoch,
                  masterBrokerId=0 if info.master_addr else None, brokerId=info.broker_id,
                  epochs=",".join(f"{e}:{s}" for e, s in info.epochs), syncStateSet=";".join(info.sync_state))


def decode_info(ext: Mapping[str, str]) -> ReplicaInfo:
    h = Header(ext)
    epochs: list[tuple[int, int]] = []
    for part in (h.str("epochs", "") or "").split(","):
        e, sep, s = part.partition(":")
        if sep:
            epochs.append((int(e), int(s)))
    sync = tuple(a for a in (h.str("syncStateSet", "") or "").split(";") if a)
    return ReplicaInfo(h.str("masterAddress", None, empty_is_none=True),
                       h.str("masterHaAddress", None, empty_is_none=True), h.long("masterEpoch", 0),
                       h.long("brokerId", -1), tuple(sorted(epochs)), sync)
