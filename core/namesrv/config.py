"""Name server configuration (``namesrv.properties``) and the persisted KV table (``kvConfig.json``).

Theory of operation
-------------------
``NamesrvConfig`` holds RocketMQ 4.9's ``NamesrvConfig`` keys (``rocketmqHome``,
``kvConfigPath``, ``configStorePath``, ``productEnvName``, ``clusterTest``,
``orderMessageEnable``) and the ``NettyServerConfig`` keys rokka uses
(``listenPort``, ``serverChannelMaxIdleTimeSeconds``).  Defaults are Java's:
``~/namesrv/kvConfig.json`` and ``~/namesrv/namesrv.properties``.
``load_namesrv_conf(path)`` reads a Java properties file (``rokka namesrv -c
namesrv.properties``); as Java's ``NamesrvStartup``, the file itself then
becomes ``configStorePath``, where UPDATE_NAMESRV_CONFIG persists changes.

``update_properties`` applies runtime changes: the path keys are refused (Java
4.9.7's "Can not update config path"), unknown keys and bad values raise
``ValueError`` (Java drops them silently); ``rewrite_properties_file`` replaces
the changed keys in the file (other lines and comments stay, the old file is
kept as ``.bak``, the new one replaces it atomically).

``KVConfigStore`` is Java's ``KVConfigManager`` persistence: ``{"configTable":
{namespace: {key: value}}}`` in ``kvConfigPath``, loaded at start and rewritten
(atomically, previous version as ``.bak``) after every PUT / DELETE.  A file
that does not parse stops the start with a clear error rather than being
overwritten with an empty table.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog
from rokka.core.config import _convert, camel_to_snake
from rokka.core.storage.metafile import read_json, write_bytes_atomic, write_json_atomic

log = structlog.get_logger(__name__)

PATH_KEYS = frozenset({"kvConfigPath", "configStorePath"})
PATH_REMARK = "Can not update config path"
_file_lock = threading.Lock()


def _home() -> str:
    return os.path.expanduser("~")


@dataclass
class NamesrvConfig:
    rocketmq_home: str = dataclasses.field(default_factory=lambda: os.environ.get("ROCKETMQ_HOME", ""))
    kv_config_path: str = dataclasses.field(
        default_factory=lambda: os.path.join(_home(), "namesrv", "kvConfig.json"))
    config_store_path: str = dataclasses.field(
        default_factory=lambda: os.path.join(_home(), "namesrv", "namesrv.properties"))
    product_env_name: str = "center"
    cluster_test: bool = False
    order_message_enable: bool = False
    listen_port: int = 9876
    server_channel_max_idle_time_seconds: int = 120
    #: RocketMQ 5: run the controller inside the name server (``rokka.core.namesrv.controller``).
    enable_controller_in_namesrv: bool = False
    scan_not_active_broker_interval: int = 1000     # ms between the controller's scans for silent masters
    enable_elect_unclean_master: bool = False        # elect a replica outside the sync-state set
    #: The ``tls.*`` keys of the file (``rokka.gateway.rocketmq.tls``; read at start only, not in to_properties).
    tls_settings: dict[str, str] = dataclasses.field(default_factory=dict)

    @classmethod
    def under(cls, directory: Path) -> NamesrvConfig:
        """Defaults with ``kvConfig.json`` and ``namesrv.properties`` in ``directory``."""
        return cls(kv_config_path=str(directory / "kvConfig.json"),
                   config_store_path=str(directory / "namesrv.properties"))

    def to_properties(self) -> dict[str, str]:
        """Every key in RocketMQ spelling, values as Java prints them."""
        out = {}
        for f in dataclasses.fields(self):
            if f.name == "tls_settings":
                continue
            value = getattr(self, f.name)
            head, *rest = f.name.split("_")
            key = head + "".join(p[:1].upper() + p[1:] for p in rest)
            out[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)
        return out

    def apply(self, props: dict[str, str]) -> None:
        """Set ``props`` (camelCase keys); ValueError naming the key for an unknown key or bad value.
        Nothing is changed unless every key is good."""
        fields = {f.name: f for f in dataclasses.fields(self)}
        staged = {}
        for key, raw in props.items():
            f = fields.get(camel_to_snake(key))
            if f is None or f.name == "tls_settings":
                raise ValueError(f"unknown name server config key: {key}")
            staged[f.name] = _convert(raw, f.type, key)
        for name, value in staged.items():
            setattr(self, name, value)


def load_namesrv_conf(path: Path, cfg: NamesrvConfig | None = None) -> NamesrvConfig:
    """Read ``namesrv.properties``; the file becomes ``configStorePath`` (Java ``NamesrvStartup``).

    Raises:
        OSError, ValueError: unreadable file, unknown key or bad value (the message names it).
    """
    from jproperties import Properties

    props = Properties()
    with open(path, "rb") as f:
        props.load(f, "utf-8")
    cfg = cfg or NamesrvConfig()
    settings = {str(k): str(v.data) for k, v in props.items()}
    cfg.tls_settings.update({k: v.strip() for k, v in settings.items() if k.startswith("tls.")})
    cfg.apply({k: v for k, v in settings.items() if not k.startswith("tls.")})
    cfg.config_store_path = str(Path(path).resolve())
    return cfg


def rewrite_properties_file(path: Path, props: dict[str, str]) -> None:
    """Replace (or append) ``props`` in the properties file at ``path``; ``.bak`` kept; atomic."""
    with _file_lock:
        old = path.read_text("utf-8") if path.exists() else ""
        pending = dict(props)
        lines = []
        for line in old.splitlines():
            stripped = line.strip()
            key = stripped.split("=", 1)[0].split(":", 1)[0].strip() if stripped else ""
            if key and not stripped.startswith(("#", "!")) and key in pending:
                line = f"{key}={pending.pop(key)}"
            lines.append(line)
        lines += [f"{k}={v}" for k, v in pending.items()]
        write_bytes_atomic(path, ("\n".join(lines) + "\n").encode("utf-8"))


class KVConfigStore:
    """``kvConfig.json`` of one name server (``path`` None: memory only).

    ``ephemeral`` namespaces are registrations the brokers repeat every round (rokka's Kafka
    endpoints): they are neither written nor loaded, so a restarted name server never serves an
    endpoint of a broker that is gone (or moved to another port)."""

    def __init__(self, path: Path | None, ephemeral: frozenset[str] = frozenset()) -> None:
        self.path = path
        self.ephemeral = ephemeral
        self._lock = threading.Lock()
        self._written = -1          # the newest generation on disk: an older snapshot never replaces it

    def load(self) -> dict[str, dict[str, str]]:
        """The stored table ({} when there is no file).  Raises ValueError for a damaged file."""
        if self.path is None:
            return {}
        try:
            data: Any = read_json(self.path)
        except Exception as exc:  # noqa: BLE001 - MetadataCorrupt and friends: refuse to start
            raise ValueError(f"cannot read {self.path}: {exc}") from None
        if data is None:
            return {}
        table = data.get("configTable") if isinstance(data, dict) else None
        if not isinstance(table, dict):
            raise ValueError(f"{self.path}: no configTable object")
        out = {str(ns): {str(k): str(v) for k, v in (kv or {}).items()} for ns, kv in table.items()
               if str(ns) not in self.ephemeral}
        log.info("namesrv.kv_config_loaded", path=str(self.path), namespaces=len(out))
        return out

    def persist(self, table: dict[str, dict[str, str]], generation: int) -> None:
        """Write ``table`` (a snapshot the caller no longer changes) unless a newer ``generation`` is on
        disk already (the name server writes from a worker thread and, at stop, from its own)."""
        if self.path is None:
            return
        with self._lock:
            if generation <= self._written:
                return
            try:
                write_json_atomic(self.path, {"configTable": {ns: kv for ns, kv in table.items()
                                                              if ns not in self.ephemeral}})
                self._written = generation
            except OSError as exc:
                log.error("namesrv.kv_config_persist_failed", path=str(self.path), error=str(exc))
