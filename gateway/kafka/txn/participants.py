"""Kafka transactions across the brokers of a cluster: the broker-to-broker requests.

Theory of operation
-------------------
``rokka.gateway.kafka.txn.peers`` describes the protocol (a coordinator opens a
*share* of a transaction on every other broker that leads one of its
partitions or coordinates one of its groups, and ends each share after its own
Prepare* is durable).  This module carries it between rokka brokers over the
RocketMQ remoting port they already use for each other (group offsets,
``rokka.gateway.kafka.cluster``), with two rokka-internal request codes whose
body is JSON:

* ``OPEN_SHARE`` (9710): ``{"tid", "pid", "epoch", "timeout", "partitions":
  [[topic, partition], ...], "groups": [...]}``; SUCCESS once the share is
  durable on the participant;
* ``END_SHARE`` (9711): ``{"tid", "pid", "epoch", "commit"}``; SUCCESS once the
  share is completed (or was already), SYSTEM_BUSY while it cannot be yet;
* ``QUERY_SHARE`` (9712, participant -> coordinator, for a share idle past its
  timeout): ``{"tid", "pid", "epoch"}``; SUCCESS with body ``{"open": bool}``.

OPEN_SHARE also names the coordinator (``"from"``: its broker name), which the
share keeps for QUERY_SHARE.

Partitions travel in Kafka numbering; the participant refreshes the routes of
their topics first (``ClusterView.ensure``) so its markers go to the queue the
coordinator meant.  ``ClusterPeers`` is the coordinator's ``TxnPeers``: the owner
of a partition comes from the cluster view's topic layout, the owner of a group
from ``ClusterView.coordinator_broker``, the address from the live broker list.
``install`` wires both sides into a broker (the runtime calls it).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from rokka.gateway.kafka.cluster import _ERRORS, REMOTE_TIMEOUT_S, ClusterView
from rokka.gateway.kafka.routed_offsets import RoutedOffsets
from rokka.gateway.kafka.txn.coordinator import KafkaTxnCoordinator, TxnOutcome
from rokka.gateway.kafka.txn.states import Partition
from rokka.net.remoting.client.remoting import RemotingClient
from rokka.net.remoting.codec.codes import ResponseCode
from rokka.net.remoting.codec.remoting import RemotingCommand

log = structlog.get_logger(__name__)

OPEN_SHARE = 9710
END_SHARE = 9711
QUERY_SHARE = 9712

Handler = Callable[[Any, RemotingCommand], Awaitable[RemotingCommand | None]]


class ClusterPeers:
    """``TxnPeers`` over the cluster view and a remoting client (see the module docstring)."""

    def __init__(self, view: ClusterView, client: RemotingClient, source: Callable[[str], str] = str) -> None:
        self.view, self.client, self._source = view, client, source

    def owner(self, topic: str, partition: int) -> str | None:
        if not self.view.clustered:
            return None
        lay = self.view.layout(self._source(topic))
        found = lay.owner_of(partition) if lay is not None else None
        if found is None or found[0].broker == self.view.broker_name:
            return None
        return found[0].broker

    def group_owner(self, group: str) -> str | None:
        if not self.view.clustered:
            return None
        broker = self.view.coordinator_broker(group)
        return None if broker == self.view.broker_name else broker

    async def open(self, broker: str, tid: str, pid: int, epoch: int, timeout_ms: int,
                   partitions: list[Partition], groups: list[str]) -> bool:
        return await self._call(broker, OPEN_SHARE, {
            "tid": tid, "pid": pid, "epoch": epoch, "timeout": timeout_ms,
            "partitions": [list(p) for p in partitions], "groups": groups,
            "from": self.view.broker_name}) is not None

    async def end(self, broker: str, tid: str, pid: int, epoch: int, commit: bool) -> bool:
        return await self._call(broker, END_SHARE,
                                {"tid": tid, "pid": pid, "epoch": epoch, "commit": commit}) is not None

    async def is_open(self, broker: str, tid: str, pid: int, epoch: int) -> bool | None:
        resp = await self._call(broker, QUERY_SHARE, {"tid": tid, "pid": pid, "epoch": epoch})
        try:
            return None if resp is None else bool(json.loads(resp.body)["open"])
        except (ValueError, KeyError, TypeError):
            return None

    async def _call(self, broker: str, code: int, body: dict[str, Any]) -> RemotingCommand | None:
        addr = self.view.master_addr(broker)
        if addr is None:
            log.warning("kafka.txn.participant_unreachable", broker=broker, reason="not live")
            return None
        cmd = RemotingCommand(code, ext_fields={}, body=json.dumps(body).encode("utf-8"))
        try:
            resp = await self.client.invoke(addr, cmd, REMOTE_TIMEOUT_S)
        except _ERRORS as exc:
            log.warning("kafka.txn.participant_call_failed", broker=broker, addr=addr, error=str(exc))
            return None
        if resp.code != ResponseCode.SUCCESS:
            log.info("kafka.txn.participant_refused", broker=broker, code=resp.code, remark=resp.remark)
            return None
        return resp


def _answer(cmd: RemotingCommand, outcome: TxnOutcome) -> RemotingCommand:
    if outcome is TxnOutcome.OK:
        return cmd.make_response(ResponseCode.SUCCESS)
    code = ResponseCode.SYSTEM_BUSY if outcome is TxnOutcome.CONCURRENT_TRANSACTIONS else ResponseCode.SYSTEM_ERROR
    return cmd.make_response(code, outcome.value)


def share_handlers(txns: KafkaTxnCoordinator, view: ClusterView,
                   source: Callable[[str], str] = str) -> dict[int, Handler]:
    """The participant side: request code -> handler for the broker's remoting server."""

    async def refresh(topics: set[str]) -> None:
        await view.ensure({source(t) for t in topics}, force=True)

    async def open_share(channel: Any, cmd: RemotingCommand) -> RemotingCommand:
        try:
            req = json.loads(cmd.body)
            parts = [(str(t), int(p)) for t, p in req["partitions"]]
            tid, pid, epoch = str(req["tid"]), int(req["pid"]), int(req["epoch"])
            timeout, groups = int(req["timeout"]), [str(g) for g in req["groups"]]
            coordinator = str(req.get("from") or "") or None
        except (ValueError, KeyError, TypeError) as exc:
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, f"bad OPEN_SHARE body: {exc}")
        await refresh({t for t, _ in parts})
        return _answer(cmd, await txns.open_share(tid, pid, epoch, timeout, parts, groups, coordinator))

    async def end_share(channel: Any, cmd: RemotingCommand) -> RemotingCommand:
        try:
            req = json.loads(cmd.body)
            tid, pid, epoch, commit = str(req["tid"]), int(req["pid"]), int(req["epoch"]), bool(req["commit"])
        except (ValueError, KeyError, TypeError) as exc:
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, f"bad END_SHARE body: {exc}")
        held = txns.share_topics(tid)
        if held:
            await refresh(held)
        return _answer(cmd, await txns.end_share_request(tid, pid, epoch, commit))

    async def query_share(channel: Any, cmd: RemotingCommand) -> RemotingCommand:
        try:
            req = json.loads(cmd.body)
            held = txns.holds_open(str(req["tid"]), int(req["pid"]), int(req["epoch"]))
        except (ValueError, KeyError, TypeError) as exc:
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, f"bad QUERY_SHARE body: {exc}")
        return cmd.make_response(ResponseCode.SUCCESS, body=json.dumps({"open": held}).encode("utf-8"))

    return {OPEN_SHARE: open_share, END_SHARE: end_share, QUERY_SHARE: query_share}


def brokers_only(acl: Any, handler: Handler) -> Handler:
    """``handler`` behind the RocketMQ ACL (``guard``) and, further, only for the account the brokers
    sign their own requests with (``PlainAcl.broker_credentials``) or a globally white-listed
    address (the request then carries no access key): no client may open or end a share."""
    from rokka.gateway.rocketmq.acl import ACCESS_KEY, guard

    checked = guard(acl, handler)

    async def brokers(channel: Any, cmd: RemotingCommand) -> RemotingCommand | None:
        key = (cmd.ext_fields or {}).get(ACCESS_KEY)
        own = acl.broker_credentials()
        if key and (own is None or key != own[0]):
            log.warning("kafka.txn.share_request_refused", code=cmd.code, access_key=key)
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, "AclException: brokers only")
        return await checked(channel, cmd)
    return brokers


def install(txns: KafkaTxnCoordinator, view: ClusterView, client: RemotingClient, local_offsets: Any,
            register: Callable[[int, Handler], None], acl: Any = None, source: Callable[[str], str] = str) -> None:
    """Wire cross-broker transactions into one broker: the coordinator's peers, the offsets a
    commit applies (routed to the partition's owner, remote ones forwarded after the commit) and
    the participant's request handlers (``register(code, handler)``; ``brokers_only`` with an ACL)."""
    routed = RoutedOffsets(view, local_offsets, client)
    txns.peers = ClusterPeers(view, client, source)
    txns.apply_offset = lambda g, t, p, o: routed.commit(g, t, p, o)

    async def flush() -> None:
        failed = await routed.push(routed.take_outbox())
        if failed:
            log.warning("kafka.txn.offsets_forward_failed", partitions=sorted(failed))

    txns.offsets_flush = flush
    for code, handler in share_handlers(txns, view, source).items():
        register(code, handler if acl is None else brokers_only(acl, handler))
