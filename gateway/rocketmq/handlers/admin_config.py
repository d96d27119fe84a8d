"""GET_BROKER_CONFIG / UPDATE_BROKER_CONFIG: the broker's configuration at runtime.

Theory of operation
-------------------
As the Java broker (``AdminBrokerProcessor`` 4.9.7):

* GET_BROKER_CONFIG answers the whole configuration as Java properties text
  (``key=value\\n`` per key, RocketMQ's camelCase names) in the body, and the
  configuration's data version JSON in the ``version`` header field.  Values of
  keys naming a password or secret read ``******`` (Java prints them).
* UPDATE_BROKER_CONFIG carries properties text in its body.  The keys are
  checked, the runtime ones applied (below), the data version moves on, and
  the file the broker was started with (``-c broker.conf``, remembered by the
  CLI as ``brokerConfigPath``) is rewritten: the changed keys are replaced in
  place (or appended), other lines and comments stay, the previous file is
  kept as ``broker.conf.bak`` and the new one replaces it atomically
  (``rokka.core.namesrv.config.rewrite_properties_file``).  Java's
  ``MixAll.string2File`` rewrites every key it knows; rokka only the changed
  ones, so that command-line overrides are not frozen into the file.  Without
  a file nothing is written (Java writes ``~/store/config/broker.properties``).

Keys that take effect at once (``RUNTIME_KEYS``): ``brokerPermission`` (sends
are refused while the broker lacks PERM_WRITE; the broker re-registers with its
name servers, as Java), ``autoCreateSubscriptionGroup`` and the keys the request
handlers read per request (``maxMessageSize``, ``longPollingEnable``, ...).
Every other known key (identity, listeners, store layout, budgets ...) is only
written to the file and applies at the next start; the running configuration,
and so GET_BROKER_CONFIG, keeps the value in force.  Java sets every field in
memory at once, even those it only reads at start (a live ``brokerName`` change
re-registers under the new name); rokka does not pretend to apply those.

Refused, with RocketMQ 5's answer (NO_PERMISSION "Can not update config in
black list."): 5's ``configBlackList`` keys (``configBlackList``,
``brokerConfigPath``) and, in rokka, every key naming a file or directory or a
security switch (store paths, ACL / SASL / TLS files, aclEnable ...): 4.9.7
refuses nothing, and a remotely chosen path is how CVE-2023-33246-style attacks
start.  A key rokka does not know is refused with SYSTEM_ERROR (Java would drop
it silently) and a value that does not parse too, each with one log line;
nothing is applied unless every key is good.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import structlog
from rokka.core.config import TLS_FIELD_KEYS, TLS_KEYS, BrokerConfig, apply_settings, camel_to_snake
from rokka.core.namesrv.config import rewrite_properties_file
from rokka.gateway.rocketmq.handlers.context import BrokerEnv
from rokka.net.remoting.codec.codes import ResponseCode
from rokka.net.remoting.codec.remoting import RemotingCommand

log = structlog.get_logger(__name__)

CONFIG_PATH_KEY = "brokerConfigPath"
BLACK_LIST_REMARK = "Can not update config in black list."
#: RocketMQ 5's default configBlackList plus rokka's path and security keys.
BLACK_LIST = frozenset({
    "configBlackList", CONFIG_PATH_KEY, "rocketmqHome", "storePathRootDir", "storePathCommitLog",
    "plainAclFile", "aclEnable", "kafkaSaslUsers", "kafkaSaslMechanisms", "kafkaSslCertFile",
    "kafkaSslKeyFile", "kafkaSslKeyPassword", "kafkaSslCaFile", "kafkaSslClientAuth", "kafkaAclEnable",
    "kafkaSuperUsers", "kafkaAllowEveryoneIfNoAclFound", "storeRepair", "extra", *TLS_KEYS, *TLS_FIELD_KEYS,
})
#: Keys applied to the running broker at once; the others are persisted for the next start.
RUNTIME_KEYS = frozenset({
    "brokerPermission", "autoCreateSubscriptionGroup", "maxMessageSize", "longPollingEnable",
    "shortPollingTimeMills", "enablePropertyFilter", "regionId", "traceOn", "rejectTransactionMessage",
    "cleanResourceInterval",
})
_JAVA_SPELLING = {"mapped_file_size_commit_log": "mapedFileSizeCommitLog",
                  "mapped_file_size_consume_queue": "mapedFileSizeConsumeQueue",
                  "broker_ip1": "brokerIP1", "broker_ip2": "brokerIP2", "transaction_timeout": "transactionTimeOut"}


def snake_to_camel(name: str) -> str:
    if name in _JAVA_SPELLING:
        return _JAVA_SPELLING[name]
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def is_secret(key: str) -> bool:
    low = key.lower()
    return "password" in low or "secret" in low


def config_properties(cfg: BrokerConfig) -> dict[str, str]:
    """Every key of ``cfg`` in RocketMQ spelling (plus the file's keys rokka keeps uninterpreted);
    a set password or secret reads ``******``."""
    out = {snake_to_camel(f.name): _text(getattr(cfg, f.name))
           for f in dataclasses.fields(cfg) if f.name not in ("extra", "store_repair")}
    for key, value in sorted(cfg.extra.items()):
        out.setdefault(key, str(value))
    return {k: "******" if v and is_secret(k) else v for k, v in out.items()}


def properties_text(props: dict[str, str]) -> str:
    """Java's ``MixAll.properties2String``: ``key=value`` lines."""
    return "".join(f"{k}={v}\n" for k, v in props.items())


def parse_properties(text: str) -> dict[str, str]:
    """Java ``Properties.load`` of ``text`` (``MixAll.string2Properties``)."""
    from jproperties import Properties

    props = Properties()
    props.load(text.encode("utf-8"), "utf-8")
    return {str(k): str(v.data) for k, v in props.items()}


def _data_version(env: BrokerEnv) -> dict[str, int]:
    return env.config_data_version


async def handle_get_broker_config(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    body = properties_text(config_properties(env.cfg)).encode("utf-8")
    version = json.dumps(_data_version(env), separators=(",", ":"))
    return req.make_response(ResponseCode.SUCCESS, ext_fields={"version": version}, body=body)


def _check_keys(cfg: BrokerConfig, props: dict[str, str]) -> tuple[int, str] | None:
    known = {f.name for f in dataclasses.fields(cfg)}
    for key in props:
        if key in BLACK_LIST:
            return ResponseCode.NO_PERMISSION, BLACK_LIST_REMARK
        if camel_to_snake(key) not in known and key not in cfg.extra:
            return ResponseCode.SYSTEM_ERROR, f"unknown broker config key: {key}"
    trial = dataclasses.replace(cfg, extra=dict(cfg.extra))
    try:
        apply_settings(trial, props)
        trial.validate()
    except ValueError as exc:
        return ResponseCode.SYSTEM_ERROR, f"bad broker config value: {exc}"
    return None


def _apply_runtime(env: BrokerEnv, props: dict[str, str]) -> list[str]:
    """Apply the ``RUNTIME_KEYS`` of ``props``; return the keys left for the next start."""
    cfg, broker = env.cfg, env.broker
    apply_settings(cfg, {k: v for k, v in props.items() if k in RUNTIME_KEYS})
    if "brokerPermission" in props:
        broker.topics.broker_perm = cfg.broker_permission
        broker.topics.data_version.bump()
        env.topic_changed()
    if "autoCreateSubscriptionGroup" in props:
        broker.sub_groups.auto_create = cfg.auto_create_subscription_group
    dv = _data_version(env)
    dv["counter"] += 1
    dv["timestamp"] = int(time.time() * 1000)
    return sorted(k for k in props if k not in RUNTIME_KEYS)


async def handle_update_broker_config(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    peer = str(getattr(channel, "peer", ""))
    if not req.body:
        return req.make_response(ResponseCode.SUCCESS)
    try:
        props = parse_properties(req.body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, Exception) as exc:  # noqa: BLE001 - jproperties' own errors
        log.warning("rocketmq.update_broker_config_refused", peer=peer, reason=f"string2Properties error: {exc}")
        return req.make_response(ResponseCode.SYSTEM_ERROR, "string2Properties error")
    refused = _check_keys(env.cfg, props)
    if refused is not None:
        log.warning("rocketmq.update_broker_config_refused", peer=peer, keys=sorted(props), reason=refused[1])
        return req.make_response(refused[0], refused[1])
    later = _apply_runtime(env, props)
    conf = env.cfg.extra.get(CONFIG_PATH_KEY)
    log.info("rocketmq.update_broker_config", peer=peer, config=props, at_next_start=later, file=conf)
    if conf:
        try:
            await _to_thread(rewrite_properties_file, Path(conf), props)
        except OSError as exc:
            log.error("rocketmq.broker_conf_persist_failed", path=conf, error=str(exc))
            return req.make_response(ResponseCode.SYSTEM_ERROR, f"config applied but not persisted: {exc}")
    return req.make_response(ResponseCode.SUCCESS)


async def _to_thread(fn: Any, *args: Any) -> Any:
    import trio

    return await trio.to_thread.run_sync(fn, *args)
