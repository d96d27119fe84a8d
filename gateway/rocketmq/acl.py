"""RocketMQ 4.9 plain ACL on the broker: AccessKey signatures and topic / group permissions.

Theory of operation
-------------------
With ``aclEnable=true`` every request to the broker's remoting ports passes
``PlainAcl.check`` before its handler (``guard`` wraps the handler table), as
RocketMQ's ``PlainAccessValidator`` does; the name server is not checked
(RocketMQ 4.9 does not either).  The accounts come from ``plain_acl.yml``
(RocketMQ's file format, path ``plainAclFile``)::

    globalWhiteRemoteAddresses: [10.10.103.*, 192.168.0.*]
    accounts:
      - accessKey: RocketMQ
        secretKey: 12345678
        whiteRemoteAddress: 192.168.0.*
        admin: false
        defaultTopicPerm: DENY
        defaultGroupPerm: SUB
        topicPerms: [topicA=DENY, topicB=PUB|SUB]
        groupPerms: [groupA=DENY, groupB=PUB|SUB]

Order of the checks (RocketMQ's ``PlainPermissionManager.validate``):

1. a remote address in ``globalWhiteRemoteAddresses`` passes;
2. the request's ``AccessKey`` must name an account;
3. an address in the account's ``whiteRemoteAddress`` passes;
4. ``Signature`` = Base64(HmacSHA1(secretKey, the values of every other
   extField in key order, then the body)) must match (constant time);
5. admin request codes (create/update/delete topic or group, broker config;
   rokka adds the listings GET_ALL_TOPIC_CONFIG / GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
   need ``admin: true``;
6. each resource the request touches needs its permission: sending needs
   PUB on the topic, pulling / offsets / heartbeats SUB on the topic and on
   the group (a group is named by its retry topic ``%RETRY%group``, and a
   retry topic in a request means its group).  An explicit
   ``topicPerms``/``groupPerms`` entry decides (DENY refuses); otherwise
   ``defaultTopicPerm`` / ``defaultGroupPerm``.  An admin account with neither
   ``topicPerms`` nor ``groupPerms`` may use every topic and group (4.9's
   ``checkPerm``: no owned permission map and admin).

The resources of a request are read from exactly the fields its handler uses: a
send's topic is the one ``SendMessageRequestHeader.pick_send`` gives the send handler, whatever
the request code and whether it came as ``topic`` or ``b`` (4.9 checked ``topic``
for SEND_MESSAGE and ``b`` for SEND_MESSAGE_V2 while the handler honoured both, so
a header carrying both was checked against one topic and stored to the other).
Two codes name a record by its CommitLog offset: CONSUMER_SEND_MSG_BACK copies it
into the group's retry topic (so a group's consumer could copy any topic's record
into a queue it may read) and VIEW_MESSAGE_BY_ID returns it.  With the broker's
``topic_at`` resolver set (offset -> the record's topic), both also need SUB on
the topic the record is stored in; VIEW_MESSAGE_BY_ID without a resolver is
admin-only.  GET_CONSUME_STATS needs SUB on its group (and topic), INVOKE_BROKER_TO_RESET_OFFSET
SUB on its topic and group, as UPDATE_CONSUMER_OFFSET (RocketMQ 5's ACL 2.0 asks
GET / UPDATE on both; 4.9 checked nothing).

What is kept from 4.9 and why: the signature covers the extField values
concatenated without separators (values can be shifted between adjacent fields
of a captured request) and carries no timestamp (a captured request can be
replayed): the 4.9 Java client (AccessKey, SecurityToken) and the C++ client
(AccessKey, OnsChannel) sign exactly that and send no time, so a stricter check
would refuse every real client.  Keep the RocketMQ ports on a trusted network.

On the name server (``guard_namesrv``, when ``aclEnable`` is on in the same
process) WIPE_WRITE_PERM_OF_BROKER needs an admin account's signature or an
address in ``globalWhiteRemoteAddresses``; the rest of the name server stays
open, as in 4.9 (brokers register there unsigned).

The file is re-read when it changes (``rokka.gateway.filewatch``, as RocketMQ 4.9's file watcher); a file that
does not load is logged and the accounts in force stay.

The broker signs its own requests to other brokers (Kafka group offsets it
forwards) with an admin account of the file (``broker_credentials``); the
brokers of a cluster share the file.

mqadmin's ACL request codes (``handlers/admin_acl.py``) edit the file through ``update_account``,
``delete_account`` and ``update_global_white`` (RocketMQ 4.9's ``PlainPermissionManager``: an update merges
into the existing account, keys longer than 6 characters, ``dataVersion: [{counter, timestamp}]`` bumped
on every write).  Each edit is checked by loading the result before anything is written, and the file is
replaced atomically (temp file, fsync, rename; mode 0600), so a refused or interrupted edit leaves the
accounts in force.  Comments in a hand-written file do not survive an edit (Java rewrites it too).

A refusal is answered like RocketMQ 4.9 answers an ``AclException``:
SYSTEM_ERROR with the reason in the remark, and logged.  Address patterns:
exact, ``*`` per dotted part, and ``{a,b}`` / ``a-b`` lists in the last part.
"""

from __future__ import annotations

import hmac
import json
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from rokka.core.model import RETRY_PREFIX
from rokka.core.storage.metafile import write_bytes_atomic
from rokka.net.remoting.codec.codes import RequestCode as RC
from rokka.net.remoting.codec.codes import ResponseCode
from rokka.net.remoting.codec.header_decl import RequestHeader
from rokka.net.remoting.codec.remoting import RemotingCommand
from rokka.net.remoting.codec.request_headers import (
    ConsumerSendMsgBackRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetConsumeStatsRequestHeader,
    PullMessageRequestHeader,
    QueryConsumerOffsetRequestHeader,
    QueryMessageRequestHeader,
    ResetOffsetRequestHeader,
    SendMessageRequestHeader,
    TopicRequestHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    ViewMessageRequestHeader,
)
from rokka.net.remoting.signing import ACCESS_KEY, SIGNATURE, sign

__all__ = ["AclConfigError", "AclEditError", "PlainAcl", "acl_config", "delete_account", "guard", "guard_namesrv",
           "record_topics", "sign", "update_account", "update_global_white"]

log = structlog.get_logger(__name__)

DENY, PUB, SUB = 1, 2, 4
ADMIN_CODES = frozenset({RC.UPDATE_AND_CREATE_TOPIC, RC.UPDATE_BROKER_CONFIG, RC.DELETE_TOPIC_IN_BROKER,
                         RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, RC.DELETE_SUBSCRIPTIONGROUP,
                         RC.GET_ALL_TOPIC_CONFIG, RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
                         # issue 27 operations codes: broker config, maintenance and diagnostics
                         RC.GET_BROKER_CONFIG, RC.GET_ALL_CONSUMER_OFFSET, RC.GET_ALL_DELAY_OFFSET,
                         RC.QUERY_TOPIC_CONSUME_BY_WHO, RC.QUERY_CONSUME_TIME_SPAN, RC.CLEAN_EXPIRED_CONSUMEQUEUE,
                         RC.GET_CONSUMER_RUNNING_INFO, RC.CONSUME_MESSAGE_DIRECTLY, RC.CLONE_GROUP_OFFSET,
                         RC.VIEW_BROKER_STATS_DATA, RC.CLEAN_UNUSED_TOPIC, RC.GET_BROKER_CONSUME_STATS,
                         RC.QUERY_CONSUME_QUEUE, RC.RESUME_CHECK_HALF_MESSAGE,
                         RC.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, RC.GET_ALL_PRODUCER_INFO,
                         # the ACL codes (4.9 let any signed account call them: rokka asks for admin),
                         # manual CommitLog deletion and the all-groups offset query
                         RC.UPDATE_AND_CREATE_ACL_CONFIG, RC.DELETE_ACL_CONFIG, RC.GET_BROKER_CLUSTER_ACL_INFO,
                         RC.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, RC.GET_BROKER_CLUSTER_ACL_CONFIG,
                         RC.DELETE_EXPIRED_COMMITLOG, RC.QUERY_CORRECTION_OFFSET})
BY_OFFSET_CODES = frozenset({RC.CONSUMER_SEND_MSG_BACK, RC.VIEW_MESSAGE_BY_ID})
SEND_CODES = frozenset({RC.SEND_MESSAGE, RC.SEND_MESSAGE_V2, RC.SEND_BATCH_MESSAGE, RC.SEND_REPLY_MESSAGE,
                        RC.SEND_REPLY_MESSAGE_V2})
NAMESRV_ADMIN_CODES = frozenset({RC.WIPE_WRITE_PERM_OF_BROKER, RC.ADD_WRITE_PERM_OF_BROKER,
                                 RC.UPDATE_NAMESRV_CONFIG})

Handler = Callable[[Any, RemotingCommand], Awaitable[RemotingCommand | None]]


class AclConfigError(ValueError):
    """``plain_acl.yml`` cannot be used (rokka refuses to start)."""


class AclEditError(ValueError):
    """An edit of ``plain_acl.yml`` by an ACL request code is refused (the text is the remark)."""


def _perm(text: str) -> int:
    value = {"DENY": DENY, "PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB,
             "ANY": PUB | SUB}.get(str(text).strip().upper())
    if value is None:
        raise AclConfigError(f"unknown permission {text!r} (DENY, PUB, SUB, PUB|SUB)")
    return value


def _address_matcher(pattern: str) -> Callable[[str], bool]:
    """RocketMQ's remote-address strategies for IPv4: exact, '*' parts, {a,b} or a-b in the last part."""
    pattern = pattern.strip()
    if not pattern:
        return lambda addr: False
    if pattern == "*":
        return lambda addr: True
    parts = pattern.split(".")
    out = []
    for i, part in enumerate(parts):
        if part == "*":
            out.append(r"\d{1,3}")
        elif i == len(parts) - 1 and part.startswith("{") and part.endswith("}"):
            out.append("(?:" + "|".join(re.escape(p.strip()) for p in part[1:-1].split(",")) + ")")
        elif i == len(parts) - 1 and re.fullmatch(r"\d+-\d+", part):
            lo, hi = (int(x) for x in part.split("-"))
            out.append("(?:" + "|".join(str(n) for n in range(lo, hi + 1)) + ")")
        else:
            out.append(re.escape(part))
    regex = re.compile(r"\.".join(out))
    return lambda addr: regex.fullmatch(addr) is not None


@dataclass
class Account:
    access_key: str
    secret_key: str
    admin: bool = False
    default_topic_perm: int = DENY
    default_group_perm: int = DENY
    perms: dict[str, int] = field(default_factory=dict)     # topic or %RETRY%group -> permission
    white: Callable[[str], bool] = lambda addr: False


class PlainAcl:
    """The accounts of one ``plain_acl.yml``; ``check`` answers None (allowed) or the refusal."""

    def __init__(self, accounts: dict[str, Account], global_white: list[Callable[[str], bool]],
                 path: Path | None = None, data_version: tuple[int, int] = (0, 0)) -> None:
        self._accounts = accounts
        self._global_white = global_white
        self.path = path                    # the plain_acl.yml it came from (the ACL request codes edit it)
        self.data_version = data_version    # (counter, timestamp ms): the file's ``dataVersion``
        #: The broker's CommitLog offset -> topic of the record there (None: no record); unset: the
        #: codes that name a record by offset cannot be checked per topic (VIEW_MESSAGE_BY_ID admin-only).
        self.topic_at: Callable[[int], str | None] | None = None

    @classmethod
    def load(cls, path: Path) -> PlainAcl:
        data = read_document(path)
        try:
            mtime_ms = int(path.stat().st_mtime * 1000)
        except OSError:
            mtime_ms = 0
        acl = cls.from_document(data, path)
        acl.data_version = _data_version(data, mtime_ms)
        return acl

    @classmethod
    def from_document(cls, data: dict[str, Any], path: Path) -> PlainAcl:
        """The accounts of a parsed ``plain_acl.yml`` (AclConfigError names ``path`` on a bad entry)."""
        accounts: dict[str, Account] = {}
        for raw in data.get("accounts") or []:
            if not isinstance(raw, dict) or not raw.get("accessKey") or not raw.get("secretKey"):
                raise AclConfigError(f"plainAclFile {path}: every account needs accessKey and secretKey")
            perms = {}
            for key, prefix in (("topicPerms", ""), ("groupPerms", RETRY_PREFIX)):
                for entry in raw.get(key) or []:
                    name, sep, perm = str(entry).partition("=")
                    if not sep or not name.strip():
                        raise AclConfigError(f"plainAclFile {path}: bad {key} entry {entry!r}")
                    perms[prefix + name.strip()] = _perm(perm)
            accounts[str(raw["accessKey"])] = Account(
                str(raw["accessKey"]), str(raw["secretKey"]), bool(raw.get("admin", False)),
                _perm(raw.get("defaultTopicPerm", "DENY")), _perm(raw.get("defaultGroupPerm", "DENY")),
                perms, _address_matcher(str(raw.get("whiteRemoteAddress") or "")))
        white = [_address_matcher(str(p)) for p in data.get("globalWhiteRemoteAddresses") or []]
        return cls(accounts, white, path)

    def replace_with(self, other: PlainAcl) -> None:
        """Take ``other``'s accounts, white list and version (a reloaded file); checks in flight see either."""
        self._accounts, self._global_white = other._accounts, other._global_white
        self.data_version = other.data_version

    def broker_credentials(self) -> tuple[str, str] | None:
        """(accessKey, secretKey) of the admin account this broker signs its own requests to other
        brokers with (brokers of a cluster share the file): an admin account without permission
        lists (it may use every topic and group) first, then by accessKey; None without any."""
        admins = sorted((bool(a.perms), a.access_key) for a in self._accounts.values() if a.admin)
        return (admins[0][1], self._accounts[admins[0][1]].secret_key) if admins else None

    def check(self, cmd: RemotingCommand, remote_host: str) -> str | None:
        if any(w(remote_host) for w in self._global_white):
            return None
        ext = cmd.ext_fields or {}
        access_key = ext.get(ACCESS_KEY)
        if not access_key:
            return "No accessKey is configured"
        account = self._accounts.get(access_key)
        if account is None:
            return f"No acl config for {access_key}"
        if account.white(remote_host):
            return None
        given = ext.get(SIGNATURE, "")
        if not hmac.compare_digest(given.encode(), sign(ext, cmd.body, account.secret_key).encode()):
            return f"Check signature failed for accessKey={access_key}"
        admin_only = cmd.code in ADMIN_CODES or (cmd.code == RC.VIEW_MESSAGE_BY_ID and self.topic_at is None)
        if admin_only and not account.admin:
            return f"Need admin permission for request code={cmd.code}, but accessKey={access_key} is not admin"
        if account.admin and not account.perms:
            return None         # RocketMQ 4.9: an admin account without topicPerms/groupPerms may use every resource
        for resource, needed in resources(cmd, self.topic_at).items():
            owned = account.perms.get(resource)
            if owned is None:
                owned = account.default_group_perm if resource.startswith(RETRY_PREFIX) else account.default_topic_perm
            if owned == DENY or not owned & needed:
                kind = "group" if resource.startswith(RETRY_PREFIX) else "topic"
                name = resource[len(RETRY_PREFIX):] if kind == "group" else resource
                return f"No permission for {kind} {name} (needs {_perm_name(needed)}) for accessKey={access_key}"
        return None


def read_document(path: Path) -> dict[str, Any]:
    """``plain_acl.yml`` parsed (an empty file is an empty mapping); AclConfigError when unreadable."""
    import yaml  # PyYAML: only needed when aclEnable is on

    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise AclConfigError(f"plainAclFile {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise AclConfigError(f"plainAclFile {path}: expected a mapping")
    return data


def _data_version(data: Mapping[str, Any], default_ts: int) -> tuple[int, int]:
    """(counter, timestamp) of the file's ``dataVersion: [{counter, timestamp}]`` (RocketMQ 4.9 writes it)."""
    versions = data.get("dataVersion")
    if isinstance(versions, list) and versions and isinstance(versions[0], dict):
        try:
            return int(versions[0].get("counter", 0)), int(versions[0].get("timestamp", default_ts))
        except (TypeError, ValueError):
            pass
    return 0, default_ts


def _perm_name(perm: int) -> str:
    return {PUB: "PUB", SUB: "SUB", PUB | SUB: "PUB|SUB"}.get(perm, str(perm))


def _topic(topic: str | None, perm: int, out: dict[str, int]) -> None:
    if topic:
        out[topic] = out.get(topic, 0) | (SUB if topic.startswith(RETRY_PREFIX) else perm)


def _group(group: str | None, out: dict[str, int]) -> None:
    if group:
        out[RETRY_PREFIX + group] = out.get(RETRY_PREFIX + group, 0) | SUB


# codes whose resources are a topic and a group: the declaration and its group field
_TOPIC_AND_GROUP: dict[int, tuple[type[RequestHeader], str]] = {
    RC.GET_CONSUME_STATS: (GetConsumeStatsRequestHeader, "consumer_group"),
    RC.INVOKE_BROKER_TO_RESET_OFFSET: (ResetOffsetRequestHeader, "group"),
    RC.PULL_MESSAGE: (PullMessageRequestHeader, "consumer_group"),
    RC.LITE_PULL_MESSAGE: (PullMessageRequestHeader, "consumer_group"),
    RC.UPDATE_CONSUMER_OFFSET: (UpdateConsumerOffsetRequestHeader, "consumer_group"),
    RC.QUERY_CONSUMER_OFFSET: (QueryConsumerOffsetRequestHeader, "consumer_group"),
}


def resources(cmd: RemotingCommand, topic_at: Callable[[int], str | None] | None = None) -> dict[str, int]:
    """Resource -> permission the request needs (RocketMQ ``PlainAccessValidator.parse``, and the
    stored topic of a record named by offset when ``topic_at`` can tell)."""
    out: dict[str, int] = {}
    code = cmd.code
    if code in BY_OFFSET_CODES and topic_at is not None:
        (offset,) = (ConsumerSendMsgBackRequestHeader if code == RC.CONSUMER_SEND_MSG_BACK
                     else ViewMessageRequestHeader).pick(cmd, "offset")
        if offset is not None:              # no offset: the handler refuses the request
            _topic(topic_at(offset), SUB, out)
    if code in SEND_CODES:                 # the very field the send handler stores to
        _topic(SendMessageRequestHeader.pick_send(cmd, "topic")[0], PUB, out)
    elif code in _TOPIC_AND_GROUP:
        declared, group_field = _TOPIC_AND_GROUP[code]
        topic, group = declared.pick(cmd, "topic", group_field)
        _topic(topic, SUB, out)
        _group(group, out)
    elif code == RC.CONSUMER_SEND_MSG_BACK:
        _group(ConsumerSendMsgBackRequestHeader.pick(cmd, "group")[0], out)
    elif code == RC.QUERY_MESSAGE:
        _topic(QueryMessageRequestHeader.pick(cmd, "topic")[0], SUB, out)
    elif code == RC.GET_TOPIC_CONFIG:
        _topic(TopicRequestHeader.pick(cmd, "topic")[0], SUB, out)
    elif code == RC.UNREGISTER_CLIENT:
        _group(UnregisterClientRequestHeader.pick(cmd, "consumer_group")[0], out)
    elif code == RC.GET_CONSUMER_LIST_BY_GROUP:
        _group(GetConsumerListByGroupRequestHeader.pick(cmd, "consumer_group")[0], out)
    elif code == RC.HEART_BEAT:
        try:
            data = json.loads((cmd.body or b"{}").decode("utf-8") or "{}")
        except (UnicodeDecodeError, ValueError):
            data = {}
        for cd in data.get("consumerDataSet") or []:
            _group(str(cd.get("groupName") or ""), out)
            for sd in cd.get("subscriptionDataSet") or []:
                topic = str(sd.get("topic") or "")
                if not topic.startswith(RETRY_PREFIX):
                    _topic(topic, SUB, out)
    return out


def record_topics(store: Any) -> Callable[[int], str | None]:
    """``PlainAcl.topic_at`` over a message store: the topic of the record at a CommitLog offset."""
    def topic_at(offset: int) -> str | None:
        try:
            msg = store.read_message(offset)
        except (OSError, ValueError, IndexError):
            return None
        return None if msg is None else str(msg.topic)
    return topic_at


def guard(acl: PlainAcl, handler: Handler) -> Handler:
    """``handler`` behind the ACL check (a refusal: SYSTEM_ERROR with the reason, logged)."""
    async def checked(channel: Any, cmd: RemotingCommand) -> RemotingCommand | None:
        peer = getattr(channel, "peer", ("", 0))
        refusal = acl.check(cmd, str(peer[0]))
        if refusal is not None:
            log.warning("acl refused", code=cmd.code, peer=f"{peer[0]}:{peer[1]}", reason=refusal)
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, f"AclException: {refusal}")
        return await handler(channel, cmd)
    return checked


def _admin_refusal(acl: PlainAcl, cmd: RemotingCommand, remote_host: str) -> str | None:
    """None when a globally white-listed address sent ``cmd`` or an admin account signed it."""
    if any(w(remote_host) for w in acl._global_white):
        return None
    ext = cmd.ext_fields or {}
    access_key = ext.get(ACCESS_KEY)
    account = acl._accounts.get(access_key or "")
    if account is None:
        return "No accessKey is configured" if not access_key else f"No acl config for {access_key}"
    if not hmac.compare_digest(ext.get(SIGNATURE, "").encode(), sign(ext, cmd.body, account.secret_key).encode()):
        return f"Check signature failed for accessKey={access_key}"
    if not account.admin:
        return f"Need admin permission for request code={cmd.code}, but accessKey={access_key} is not admin"
    return None


def guard_namesrv(acl: PlainAcl, handlers: dict[int, Handler]) -> None:
    """Put the name server's admin-only codes (``NAMESRV_ADMIN_CODES``) of ``handlers`` (edited in
    place) behind an admin signature or ``globalWhiteRemoteAddresses``."""
    for code in NAMESRV_ADMIN_CODES:
        if code in handlers:
            handlers[code] = _admin_only(acl, handlers[code])


def _admin_only(acl: PlainAcl, handler: Handler) -> Handler:
    async def checked(channel: Any, cmd: RemotingCommand) -> RemotingCommand | None:
        peer = getattr(channel, "peer", ("", 0))
        refusal = _admin_refusal(acl, cmd, str(peer[0]))
        if refusal is not None:
            log.warning("acl refused", code=cmd.code, peer=f"{peer[0]}:{peer[1]}", reason=refusal, role="namesrv")
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, f"AclException: {refusal}")
        return await handler(channel, cmd)
    return checked


# ----- editing plain_acl.yml (the ACL request codes; RocketMQ 4.9's PlainPermissionManager)

MIN_KEY_LENGTH = 6      # accessKey and secretKey must be longer (AclConstants)


def _check_perm_entries(key: str, entries: list[str] | None) -> None:
    for entry in entries or []:
        name, sep, perm = str(entry).partition("=")
        try:
            ok = bool(sep and name.strip()) and _perm(perm) > 0
        except AclConfigError:
            ok = False
        if not ok:
            raise AclEditError(f"Parse resource permission failed for {key}: {entry!r} (name=DENY|PUB|SUB|PUB|SUB)")


def update_account(path: Path, config: Mapping[str, Any]) -> bool:
    """Create or update the account ``config["accessKey"]`` (``updateAccessConfig``); True when created.

    Keys as in the file.  An existing account keeps what ``config`` leaves out (None or empty), except
    ``admin``, which is always set (4.9 sends it as a primitive boolean); a new account is appended."""
    ak, sk = str(config.get("accessKey") or ""), str(config.get("secretKey") or "")
    if len(ak) <= MIN_KEY_LENGTH or len(sk) <= MIN_KEY_LENGTH:
        raise AclEditError(f"The accessKey={ak} and secretKey cannot be null and length should longer than "
                           f"{MIN_KEY_LENGTH}")
    for key in ("topicPerms", "groupPerms"):
        _check_perm_entries(key, config.get(key))
    doc = read_document(path) if path.exists() else {}
    accounts = [a for a in doc.get("accounts") or [] if isinstance(a, dict)]
    old = next((a for a in accounts if str(a.get("accessKey")) == ak), None)
    merged = dict(old or {})
    merged.update(accessKey=ak, secretKey=sk)
    if config.get("whiteRemoteAddress") is not None:
        merged["whiteRemoteAddress"] = str(config["whiteRemoteAddress"])
    for key in ("defaultTopicPerm", "defaultGroupPerm"):
        if config.get(key):
            merged[key] = str(config[key])
    for key in ("topicPerms", "groupPerms"):
        if config.get(key) is not None:
            merged[key] = [str(e) for e in config[key]]
    merged["admin"] = bool(config.get("admin", False))
    doc["accounts"] = [a for a in accounts if a is not old] + [merged]
    _write_document(path, doc)
    return old is None


def delete_account(path: Path, access_key: str) -> bool:
    """Remove the account ``access_key`` (``deleteAccessConfig``); False when there is none."""
    if not access_key:
        raise AclEditError("Parameter value accesskey is null or empty String,Please check your parameter")
    doc = read_document(path)
    accounts = [a for a in doc.get("accounts") or [] if isinstance(a, dict)]
    kept = [a for a in accounts if str(a.get("accessKey")) != access_key]
    if len(kept) == len(accounts):
        return False
    doc["accounts"] = kept
    _write_document(path, doc)
    return True


def update_global_white(path: Path, addresses: list[str], file_path: str | None = None) -> None:
    """Replace ``globalWhiteRemoteAddresses`` (``updateGlobalWhiteAddrsConfig``); ``file_path`` (mqadmin's
    ``-p``), when given, must name this broker's file (rokka has one)."""
    if file_path and Path(file_path).resolve() != path.resolve():
        raise AclEditError(f"Parameter value {file_path} is not the ACL file of this broker ({path.name})")
    for addr in addresses:
        if not re.fullmatch(r"[0-9A-Za-z.*{},:\-]+", addr):
            raise AclEditError(f"Parameter value {addr!r} is not a remote address pattern")
    doc = read_document(path) if path.exists() else {}
    doc["globalWhiteRemoteAddresses"] = list(addresses)
    _write_document(path, doc)


def acl_config(path: Path) -> dict[str, Any]:
    """GetBrokerClusterAclConfigResponseBody of the file: ``globalWhiteAddrs`` and ``plainAccessConfigs``."""
    doc = read_document(path)
    configs = []
    for a in doc.get("accounts") or []:
        if isinstance(a, dict):
            configs.append({"accessKey": str(a.get("accessKey", "")), "secretKey": str(a.get("secretKey", "")),
                            "whiteRemoteAddress": str(a.get("whiteRemoteAddress") or ""),
                            "admin": bool(a.get("admin", False)),
                            "defaultTopicPerm": str(a.get("defaultTopicPerm") or "DENY"),
                            "defaultGroupPerm": str(a.get("defaultGroupPerm") or "DENY"),
                            "topicPerms": [str(e) for e in a.get("topicPerms") or []],
                            "groupPerms": [str(e) for e in a.get("groupPerms") or []]})
    return {"globalWhiteAddrs": [str(w) for w in doc.get("globalWhiteRemoteAddresses") or []],
            "plainAccessConfigs": configs}


def _write_document(path: Path, doc: dict[str, Any]) -> None:
    """Check that ``doc`` loads, bump its ``dataVersion`` and replace the file atomically (0600, fsynced)."""
    import yaml

    try:
        PlainAcl.from_document(doc, path)
    except AclConfigError as exc:
        raise AclEditError(str(exc)) from None
    counter, _ = _data_version(doc, 0)
    doc["dataVersion"] = [{"counter": counter + 1, "timestamp": int(time.time() * 1000)}]
    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, default_flow_style=False)
    write_bytes_atomic(path, text.encode(), backup=False)     # a 0600 temp file, fsynced, renamed over it
