"""The ACL request codes of ``mqadmin`` (plain_acl.yml edits), manual CommitLog deletion, correction offsets.

Theory of operation
-------------------
Each handler restates one method of Java's ``AdminBrokerProcessor`` (4.9.7) with its header, body
(fastjson field names), response codes and remarks; the ACL file itself is edited by
``rokka.gateway.rocketmq.acl`` (``update_account`` & co.: merge as ``PlainPermissionManager`` does, check
that the result loads, bump ``dataVersion``, replace the file atomically).

* UPDATE_AND_CREATE_ACL_CONFIG (50): CreateAccessConfigRequestHeader (``accessKey``, ``secretKey``,
  ``whiteRemoteAddress``, ``admin``, ``defaultTopicPerm``, ``defaultGroupPerm``, ``topicPerms`` /
  ``groupPerms`` comma-separated); failure UPDATE_AND_CREATE_ACL_CONFIG_FAILED (209) with the reason.
* DELETE_ACL_CONFIG (51): ``accessKey``; an unknown key is DELETE_ACL_CONFIG_FAILED (210), "The
  accessKey[k] corresponding to accessConfig has been deleted failed."
* UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): ``globalWhiteAddrs`` comma-separated (and 4.9.4+'s
  ``aclFileFullPath``, which must name the broker's file); failure 211.
* GET_BROKER_CLUSTER_ACL_INFO (52): GetBrokerAclConfigResponseHeader: ``version`` (DataVersion JSON),
  ``allAclFileVersion`` ({file path: DataVersion}), ``brokerName``, ``brokerAddr``, ``clusterName``.
* GET_BROKER_CLUSTER_ACL_CONFIG (54): body ``{"globalWhiteAddrs": [...], "plainAccessConfigs": [...]}``
  (secret keys included, as in Java: the code is admin-only here).

The edits apply at once (the broker's ``PlainAcl`` is reloaded from the written file; the file watcher
sees the same file).  Without ``aclEnable`` there is no file to edit: the edits answer their FAILED code
and the reads SYSTEM_ERROR, with "ACL is not enabled" (4.9 failed on a null validator there).  All five
are admin codes (``acl.ADMIN_CODES``; 4.9 let any signed account call them).

* DELETE_EXPIRED_COMMITLOG (329): ``executeDeleteFilesManually``: the next retention passes delete
  expired CommitLog files whatever ``deleteWhen`` says (``Broker.delete_expired_files_manually``).
* QUERY_CORRECTION_OFFSET (308): QueryCorrectionOffsetHeader (``topic``, ``compareGroup``,
  ``filterGroups`` comma-separated): per queue the smallest committed offset of the topic's groups other
  than ``filterGroups`` (offsets below the queue's minimum ignored), replaced by Long.MAX_VALUE where
  ``compareGroup`` is behind it; body ``{"correctionOffsets": {queueId: offset}}``.  (4.9 removed the
  filtered groups' offsets from its table while computing this; rokka only reads.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import structlog
import trio
from rokka.gateway.rocketmq.acl import (
    AclConfigError,
    AclEditError,
    PlainAcl,
    acl_config,
    delete_account,
    update_account,
    update_global_white,
)
from rokka.gateway.rocketmq.handlers.context import BrokerEnv
from rokka.net.remoting.codec.codes import ResponseCode
from rokka.net.remoting.codec.remoting import RemotingCommand
from rokka.net.remoting.codec.request_headers import (
    CreateAccessConfigRequestHeader,
    DeleteAccessConfigRequestHeader,
    QueryCorrectionOffsetHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
)

log = structlog.get_logger(__name__)

LONG_MAX = (1 << 63) - 1
NOT_ENABLED = "ACL is not enabled on this broker (aclEnable=false)"
_edit_lock = trio.Lock()        # one read-modify-write of plain_acl.yml at a time


def _acl(env: BrokerEnv) -> PlainAcl | None:
    acl = env.acl
    return acl if isinstance(acl, PlainAcl) and acl.path is not None else None


def _split(raw: str | None) -> list[str] | None:
    """Java's ``UtilAll.split(s, ",")``: None stays None; blanks dropped."""
    return None if raw is None else [p.strip() for p in raw.split(",") if p.strip()]


def _peer(channel: Any) -> str:
    peer = getattr(channel, "peer", ("", 0))
    return f"{peer[0]}:{peer[1]}"


async def _edit(env: BrokerEnv, channel: Any, req: RemotingCommand, failed: int, what: str,
                edit: Any, **log_fields: Any) -> RemotingCommand:
    """Run ``edit(path)`` (in a thread, one at a time), reload the ACL, answer SUCCESS or ``failed``."""
    acl = _acl(env)
    if acl is None:
        log.warning("rocketmq.acl_edit_refused", op=what, peer=_peer(channel), reason=NOT_ENABLED)
        return req.make_response(failed, NOT_ENABLED)
    path: Path = acl.path  # type: ignore[assignment]
    async with _edit_lock:
        try:
            result = await trio.to_thread.run_sync(edit, path)
            if result is False:
                raise AclEditError(None)
            acl.replace_with(await trio.to_thread.run_sync(PlainAcl.load, path))
        except (AclEditError, AclConfigError, OSError) as exc:
            remark = str(exc) if exc.args and exc.args[0] is not None else None
            log.warning("rocketmq.acl_edit_refused", op=what, peer=_peer(channel), reason=remark, **log_fields)
            return req.make_response(failed, remark)
    log.info("rocketmq.acl_edited", op=what, peer=_peer(channel), file=str(path), version=acl.data_version[0],
             **log_fields)
    return req.make_response(ResponseCode.SUCCESS)


async def handle_update_acl(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    h = CreateAccessConfigRequestHeader.decode(req)
    config = {"accessKey": h.access_key, "secretKey": h.secret_key, "whiteRemoteAddress": h.white_remote_address,
              "defaultTopicPerm": h.default_topic_perm, "defaultGroupPerm": h.default_group_perm,
              "topicPerms": _split(h.topic_perms), "groupPerms": _split(h.group_perms), "admin": h.admin}
    failed = ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED
    resp = await _edit(env, channel, req, failed, "update_account",
                       lambda path: update_account(path, config) or True, access_key=config["accessKey"])
    if resp.code == failed and resp.remark is None:
        resp.remark = f"The accessKey[{config['accessKey']}] corresponding to accessConfig has been updated failed."
    return resp


async def handle_delete_acl(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    access_key = DeleteAccessConfigRequestHeader.decode(req).access_key
    resp = await _edit(env, channel, req, ResponseCode.DELETE_ACL_CONFIG_FAILED, "delete_account",
                       lambda path: delete_account(path, access_key), access_key=access_key)
    if resp.code == ResponseCode.DELETE_ACL_CONFIG_FAILED and resp.remark is None:
        resp.remark = f"The accessKey[{access_key}] corresponding to accessConfig has been deleted failed."
    return resp


async def handle_update_global_white(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    h = UpdateGlobalWhiteAddrsConfigRequestHeader.decode(req)
    raw = h.global_white_addrs
    failed = ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED
    if raw is None:
        log.warning("rocketmq.acl_edit_refused", op="update_global_white", peer=_peer(channel),
                    reason="no globalWhiteAddrs")
        return req.make_response(failed, "Parameter value globalWhiteAddrsList is null,Please check your parameter")
    addresses, file_path = _split(raw) or [], h.acl_file_full_path
    resp = await _edit(env, channel, req, failed, "update_global_white",
                       lambda path: update_global_white(path, addresses, file_path), addresses=addresses)
    if resp.code == failed and resp.remark is None:
        resp.remark = f"The globalWhiteAddresses[{raw}] has been updated failed."
    return resp


def _version_json(counter: int, timestamp: int) -> dict[str, int]:
    return {"counter": counter, "stateVersion": 0, "timestamp": timestamp}


async def handle_acl_info(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    acl = _acl(env)
    if acl is None:
        return req.make_response(ResponseCode.SYSTEM_ERROR, NOT_ENABLED)
    version = _version_json(*acl.data_version)
    ext = {"version": json.dumps(version, separators=(",", ":")),
           "allAclFileVersion": json.dumps({str(acl.path): version}, separators=(",", ":")),
           "brokerName": env.cfg.broker_name, "brokerAddr": env.broker_addr,
           "clusterName": env.cfg.broker_cluster_name}
    return req.make_response(ResponseCode.SUCCESS, ext_fields=ext)


async def handle_acl_config(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    acl = _acl(env)
    if acl is None:
        return req.make_response(ResponseCode.SYSTEM_ERROR, NOT_ENABLED)
    try:
        body = await trio.to_thread.run_sync(acl_config, acl.path)
    except AclConfigError as exc:
        log.error("rocketmq.acl_config_unreadable", error=str(exc))
        return req.make_response(ResponseCode.SYSTEM_ERROR, str(exc))
    return req.make_response(ResponseCode.SUCCESS, body=json.dumps(body).encode())


async def handle_delete_expired_commitlog(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    env.broker.delete_expired_files_manually()
    log.info("rocketmq.delete_expired_commitlog", peer=_peer(channel))
    return req.make_response(ResponseCode.SUCCESS)


def correction_offsets(env: BrokerEnv, topic: str, compare_group: str, filter_groups: set[str]) -> dict[int, int]:
    broker = env.broker
    out: dict[int, int] = {}
    for group, t, queues in broker.offsets.entries():
        if t != topic or group in filter_groups:
            continue
        for q, off in queues.items():
            if off >= broker.store.min_offset(topic, q):
                out[q] = min(out.get(q, LONG_MAX), off)
    for q, off in broker.offsets.offsets(compare_group, topic).items() if compare_group else ():
        if q in out and out[q] > off:
            out[q] = LONG_MAX
    return out


async def handle_query_correction_offset(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    h = QueryCorrectionOffsetHeader.decode(req)
    topic, compare = h.topic, h.compare_group
    filters = set(_split(h.filter_groups) or [])
    offsets = correction_offsets(env, topic, compare, filters)
    body = {"correctionOffsets": {str(q): off for q, off in sorted(offsets.items())}}
    return req.make_response(ResponseCode.SUCCESS, body=json.dumps(body).encode())
