"""Broker configuration: RocketMQ ``broker.conf`` keys, typed, with defaults.

Theory of operation
-------------------
``BrokerConfig`` is one flat dataclass whose field names are the snake_case
forms of RocketMQ's camelCase keys (``brokerClusterName`` ->
``broker_cluster_name``).  ``load_broker_conf`` reads a Java properties file
(via ``jproperties``) and converts each known key by the field's declared
type; unknown keys are returned so the caller can log a warning (never a
failure).  Command-line flags are applied *after* the file by the CLI, so
they win.  ``store_config()`` derives the storage engine's config.

A few keys are rokka's own (the Kafka listener and Kafka defaults); they
follow the same camelCase convention in the file (``kafkaListenPort``).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rokka.core.storage.api import DEFAULT_DELAY_LEVELS, FlushDiskType, StoreConfig, parse_delay_levels

# Keys whose RocketMQ spelling does not follow the simple camel->snake rule.
_ALIASES = {
    "mapedFileSizeCommitLog": "mapped_file_size_commit_log",
    "mappedFileSizeCommitLog": "mapped_file_size_commit_log",
    "mapedFileSizeConsumeQueue": "mapped_file_size_consume_queue",
    "mappedFileSizeConsumeQueue": "mapped_file_size_consume_queue",
    "brokerIP1": "broker_ip1",
    "brokerIP2": "broker_ip2",
    "transactionTimeOut": "transaction_timeout",
    # TLS on the RocketMQ ports: RocketMQ's TlsSystemConfig system-property names
    "tls.server.mode": "tls_server_mode",
    "tls.test.mode.enable": "tls_test_mode_enable",
    "tls.server.certPath": "tls_server_cert_path",
    "tls.server.keyPath": "tls_server_key_path",
    "tls.server.keyPassword": "tls_server_key_password",
    "tls.server.need.client.auth": "tls_server_need_client_auth",
    "tls.server.authClient": "tls_server_auth_client",
    "tls.server.trustCertPath": "tls_server_trust_cert_path",
    "tls.config.file": "tls_config_file",
    "tls.enable": "tls_enable",
    "tls.client.authServer": "tls_client_auth_server",
    "tls.client.trustCertPath": "tls_client_trust_cert_path",
    "tls.client.certPath": "tls_client_cert_path",
    "tls.client.keyPath": "tls_client_key_path",
}
#: The TLS keys of the RocketMQ ports (rokka.gateway.rocketmq.tls reads them by these names).
TLS_KEYS = tuple(k for k in _ALIASES if k.startswith("tls."))
#: The same keys as their field names print (``tlsServerMode``): neither spelling may change at runtime.
TLS_FIELD_KEYS = tuple(_ALIASES[k].split("_")[0] + "".join(p.title() for p in _ALIASES[k].split("_")[1:])
                       for k in TLS_KEYS)


@dataclass
class BrokerConfig:
    # identity
    broker_cluster_name: str = "DefaultCluster"
    broker_name: str = "broker-a"
    broker_id: int = 0
    broker_ip1: str = ""            # advertised address; default = listen host (127.0.0.1 if wildcard)
    broker_ip2: str = ""
    region_id: str = "DefaultRegion"
    trace_on: bool = True
    # network
    listen_host: str = "127.0.0.1"
    listen_port: int = 10911
    kafka_listen_port: int = 9092
    namesrv_addr: str = ""          # "h:p;h:p"
    register_name_server_period: int = 30_000
    server_channel_max_idle_time_seconds: int = 120
    max_frame_bytes: int = 16 * 1024 * 1024    # RocketMQ frames (broker and name server), Java's 16 MiB
    # connection and memory budgets of all listeners (rokka's keys; README, Security / Limits)
    max_connections: int = 0                   # open connections, all listeners (0 = open-file limit - 512)
    max_connections_per_ip: int = 1000         # from one client address, all listeners (0 = no limit)
    max_buffered_frame_bytes: int = 256 << 20  # bytes of unfinished frames, all connections together
    frame_timeout_seconds: int = 30            # to finish a frame once its first byte arrived
    connection_write_timeout_seconds: int = 30  # a response send that makes no progress this long closes
    max_pending_write_bytes: int = 64 << 20    # RocketMQ responses waiting for one slow reader
    max_read_ahead_bytes: int = 128 << 20      # Kafka Fetch read-ahead, all connections together
    max_unread_response_bytes: int = 512 << 20  # responses blocked on peers that do not read, all together
    idle_spin_micros: int = 200                # rokka: the event loop polls this long after a response (0 = off)
    kafka_max_frame_bytes: int = 100 << 20     # Kafka's socket.request.max.bytes
    kafka_sasl_max_receive_bytes: int = 524288  # frames before SASL authentication (sasl.server.max.receive.size)
    # store
    store_path_root_dir: str = "./data"
    store_path_commit_log: str = ""
    mapped_file_size_commit_log: int = 1 << 30
    mapped_file_size_consume_queue: int = 300_000 * 20
    flush_disk_type: str = "ASYNC_FLUSH"
    flush_interval_commit_log: int = 500
    commit_log_cache_window: int = 0   # rokka: CommitLog bytes kept in page cache below the flushed tail (0 = no limit)
    commit_log_warm_ahead: int = 0     # rokka: CommitLog bytes past the tail cached while the store idles (0 = off)
    sync_flush_timeout: int = 5000
    access_message_in_memory_max_ratio: int = 40   # % of RAM: a read further behind the CommitLog's end is "on disk"
    file_reserved_time: int = 72
    delete_when: str = "04"
    disk_max_used_space_ratio: int = 75
    # RocketMQ's key, rokka's default: above 85 % disk use, delete unexpired (maybe unconsumed) CommitLog
    # segments (true, RocketMQ's default) or refuse writes until space returns (false)
    clean_file_forcibly_enable: bool = False
    clean_resource_interval: int = 10_000   # ms between retention passes (RocketMQ cleanResourceInterval)
    max_message_size: int = 4 * 1024 * 1024
    max_index_num: int = 20_000_000
    max_hash_slot_num: int = 5_000_000
    # topics and groups
    auto_create_topic_enable: bool = True
    auto_create_subscription_group: bool = True
    default_topic_queue_nums: int = 8
    broker_permission: int = 6
    cluster_topic_enable: bool = True
    broker_topic_enable: bool = True
    # messaging semantics
    message_delay_level: str = DEFAULT_DELAY_LEVELS
    long_polling_enable: bool = True
    short_polling_time_mills: int = 1000
    enable_property_filter: bool = False
    transaction_timeout: int = 6000
    transaction_check_max: int = 15
    transaction_check_interval: int = 60_000
    reject_transaction_message: bool = False
    # send back-pressure (RocketMQ's keys and defaults; gateway/rocketmq/handlers/flow.py)
    send_thread_pool_queue_capacity: int = 10_000   # sends accepted and not yet answered, all connections
    os_page_cache_busy_time_out_mills: int = 1000   # a CommitLog write-back running longer: the store is busy
    wait_time_mills_in_send_queue: int = 200        # a send that waited this long before service is refused
    broker_fast_failure_enable: bool = True         # refuse queued sends (TIMEOUT_CLEAN_QUEUE, PCBUSY_CLEAN_QUEUE)
    # access control (RocketMQ's aclEnable; the file in RocketMQ's plain_acl.yml format)
    acl_enable: bool = False
    plain_acl_file: str = ""        # rokka: path of plain_acl.yml (default <storePathRootDir>/../conf/plain_acl.yml)
    # kafka side (rokka's own keys)
    kafka_num_partitions: int = 4
    kafka_auto_create_topics_enable: bool = True
    kafka_group_initial_rebalance_delay_ms: int = 3000
    kafka_node_id: int = 0
    kafka_sasl_mechanisms: str = ""    # "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512": the Kafka port requires SASL
    kafka_sasl_users: str = ""         # JSON file {"users": {"name": "password"}} (with kafkaSaslMechanisms)
    kafka_ssl_cert_file: str = ""      # PEM certificate (+ chain, + key): the Kafka port speaks TLS
    kafka_ssl_key_file: str = ""       # PEM private key when not in kafkaSslCertFile
    kafka_ssl_key_password: str = ""   # for an encrypted kafkaSslKeyFile
    kafka_ssl_ca_file: str = ""        # PEM CA certificates for client certificates
    kafka_ssl_client_auth: str = "none"   # none | requested | required (Kafka's ssl.client.auth)
    kafka_acl_enable: bool = False     # Kafka ACL authorization (principals from SASL / TLS)
    kafka_super_users: str = ""        # "User:admin;User:ops" (Kafka's super.users)
    kafka_allow_everyone_if_no_acl_found: bool = False
    # message trace (RocketMQ's keys): the broker creates the trace topic (1 queue) at start
    trace_topic_enable: bool = False
    msg_trace_topic_name: str = "RMQ_SYS_TRACE_TOPIC"
    # TLS on the RocketMQ ports (RocketMQ's tls.* keys and defaults; gateway/rocketmq/tls.py)
    tls_server_mode: str = "permissive"        # disabled | permissive (TLS or plaintext) | enforcing (TLS only)
    tls_test_mode_enable: bool = True          # self-signed certificate, the tls.server.* files ignored (as Java)
    tls_server_cert_path: str = ""             # PEM certificate chain
    tls_server_key_path: str = ""              # PEM private key (default: in the certificate file)
    tls_server_key_password: str = ""
    tls_server_need_client_auth: str = "none"  # none | optional | require (needs tls.server.trustCertPath)
    tls_server_auth_client: bool = False
    tls_server_trust_cert_path: str = ""       # PEM CA certificates for client certificates
    tls_config_file: str = ""                  # a properties file with the tls.server.* / tls.client.* keys
    tls_enable: bool = False                   # the broker's own connections (name servers, brokers) use TLS
    tls_client_auth_server: bool = False       # ... and check the server's certificate against:
    tls_client_trust_cert_path: str = ""
    tls_client_cert_path: str = ""             # ... presenting this certificate (PEM) and key
    tls_client_key_path: str = ""
    # metrics (RocketMQ 5's keys): PROM serves Prometheus text on metricsPromExporterPort
    metrics_exporter_type: str = "DISABLE"
    metrics_prom_exporter_host: str = ""    # default: the listen host
    metrics_prom_exporter_port: int = 5557
    # master/slave replication (RocketMQ 4.9 HA keys; gateway/ha)
    broker_role: str = ""                      # ASYNC_MASTER | SYNC_MASTER | SLAVE ("" = ASYNC_MASTER, no HA port)
    ha_listen_port: int = 0                    # 0 = listenPort + 1 (RocketMQ's default)
    ha_master_address: str = ""                # "host:port" of the master's HA port (slave; else from the name server)
    ha_send_heartbeat_interval: int = 5000     # ms: master heartbeat / slave report interval
    ha_housekeeping_interval: int = 20000      # ms without traffic before an HA connection is closed
    ha_transfer_batch_size: int = 32768        # most CommitLog bytes in one HA frame
    ha_slave_fallbehind_max: int = 256 << 20   # SYNC_MASTER: a slave further behind is SLAVE_NOT_AVAILABLE
    slave_read_enable: bool = False
    slave_timeout: int = 3000                  # ms SYNC_MASTER waits for a slave's ack (RocketMQ 4.9 slaveTimeout)
    # automatic failover (RocketMQ 5 controller mode; gateway/ha/controlled.py, core/namesrv/controller.py)
    enable_controller_mode: bool = False       # the controller decides master/slave (brokerRole: master flavour)
    controller_addr: str = ""                  # "host:port;..." of the controller ("" = the name servers)
    broker_heartbeat_interval: int = 1000      # ms between heartbeats to the controller
    broker_not_active_timeout_millis: int = 3000   # ms of silence after which the controller replaces a master
    # operator switches (command line only)
    store_repair: bool = False      # truncate a damaged CommitLog at the damage instead of refusing to start
    # extras kept from the file that we do not interpret
    extra: dict[str, str] = field(default_factory=dict)

    # -- derived -----------------------------------------------------------
    @property
    def vip_port(self) -> int:
        return self.listen_port - 2 if self.listen_port else 0

    @property
    def ha_port(self) -> int:
        return self.ha_listen_port or (self.listen_port + 1 if self.listen_port else 0)

    @property
    def is_slave(self) -> bool:
        return self.broker_role.upper() == "SLAVE"

    @property
    def advertised_host(self) -> str:
        if self.broker_ip1:
            return self.broker_ip1
        if self.listen_host in ("", "0.0.0.0", "::"):
            return "127.0.0.1"
        return self.listen_host

    @property
    def namesrv_addrs(self) -> list[str]:
        return [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]

    def tls_properties(self) -> dict[str, str]:
        """The ``tls.*`` keys with their values as the file spells them."""
        out = {}
        for key in TLS_KEYS:
            value = getattr(self, _ALIASES[key])
            out[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)
        return out

    @property
    def delay_levels_ms(self) -> list[int]:
        return parse_delay_levels(self.message_delay_level)

    def store_config(self) -> StoreConfig:
        root = Path(self.store_path_root_dir)
        return StoreConfig(
            root_dir=root,
            commitlog_dir=Path(self.store_path_commit_log) if self.store_path_commit_log else None,
            commitlog_file_size=self.mapped_file_size_commit_log,
            consumequeue_file_size=self.mapped_file_size_consume_queue,
            index_hash_slots=self.max_hash_slot_num,
            index_max_entries=self.max_index_num,
            flush_disk_type=FlushDiskType(self.flush_disk_type),
            flush_interval_ms=self.flush_interval_commit_log,
            cache_window_bytes=self.commit_log_cache_window,
            warm_ahead_bytes=self.commit_log_warm_ahead,
            sync_flush_timeout_ms=self.sync_flush_timeout,
            file_reserved_time_hours=self.file_reserved_time,
            delete_when=self.delete_when,
            disk_max_used_space_ratio=self.disk_max_used_space_ratio,
            clean_file_forcibly_enable=self.clean_file_forcibly_enable,
            max_message_size=self.max_message_size,
            store_host=(self.advertised_host, self.listen_port),
            delay_levels_ms=self.delay_levels_ms,
        )

    def validate(self) -> None:
        """Raise ValueError with a clear message for inconsistent settings."""
        FlushDiskType(self.flush_disk_type)
        self.delay_levels_ms  # noqa: B018 - parses, raising ValueError on bad input
        if self.mapped_file_size_consume_queue % 20:
            raise ValueError("mapedFileSizeConsumeQueue must be a multiple of 20")
        if self.mapped_file_size_commit_log < 64 * 1024:
            raise ValueError("mapedFileSizeCommitLog must be at least 64 KiB")
        if self.commit_log_cache_window < 0:
            raise ValueError("commitLogCacheWindow must be >= 0 (0 leaves page-cache use to the kernel)")
        if self.commit_log_warm_ahead < 0:
            raise ValueError("commitLogWarmAhead must be >= 0 (0 turns the warm-ahead off)")
        if not 0 <= self.idle_spin_micros <= 10_000:
            raise ValueError("idleSpinMicros must be within 0..10000 (0 turns the idle spin off)")
        if not 0 <= self.access_message_in_memory_max_ratio <= 100:
            raise ValueError("accessMessageInMemoryMaxRatio must be within 0..100")
        if not 1 <= self.disk_max_used_space_ratio <= 95:
            raise ValueError("diskMaxUsedSpaceRatio must be within 1..95")
        for key in ("maxConnections", "maxConnectionsPerIp", "maxBufferedFrameBytes", "frameTimeoutSeconds",
                    "connectionWriteTimeoutSeconds", "maxPendingWriteBytes", "maxReadAheadBytes",
                    "maxUnreadResponseBytes", "kafkaMaxFrameBytes", "kafkaSaslMaxReceiveBytes",
                    "sendThreadPoolQueueCapacity", "osPageCacheBusyTimeOutMills", "waitTimeMillsInSendQueue"):
            if getattr(self, camel_to_snake(key)) < 0:
                raise ValueError(f"{key} must be >= 0")
        if self.broker_role.upper() not in ("", "ASYNC_MASTER", "SYNC_MASTER", "SLAVE"):
            raise ValueError(f"brokerRole={self.broker_role}: expected ASYNC_MASTER, SYNC_MASTER or SLAVE")
        if self.is_slave and self.broker_id == 0:
            raise ValueError("brokerRole=SLAVE needs brokerId > 0 (brokerId 0 is the master)")
        for key in ("haListenPort", "haSendHeartbeatInterval", "haHousekeepingInterval", "haSlaveFallbehindMax",
                    "slaveTimeout", "brokerHeartbeatInterval", "brokerNotActiveTimeoutMillis"):
            if getattr(self, camel_to_snake(key)) < 0:
                raise ValueError(f"{key} must be >= 0")
        if not 1 <= self.ha_transfer_batch_size <= 4 * 1024 * 1024 - 12:
            raise ValueError("haTransferBatchSize must be within 1..4194292 (the slave's 4 MiB read buffer)")
        if self.tls_server_mode.lower() not in ("disabled", "permissive", "enforcing"):
            raise ValueError(f"tls.server.mode={self.tls_server_mode}: expected disabled, permissive or enforcing")
        if self.metrics_exporter_type.upper() not in ("DISABLE", "PROM"):
            raise ValueError(f"metricsExporterType={self.metrics_exporter_type}: rokka offers DISABLE or PROM "
                             "(Prometheus text on metricsPromExporterPort)")


def camel_to_snake(key: str) -> str:
    if key in _ALIASES:
        return _ALIASES[key]
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def _convert(raw: str, typ: Any, key: str) -> Any:
    raw = raw.strip()
    if typ in (bool, "bool"):
        low = raw.lower()
        if low in ("true", "1", "yes", "on"):
            return True
        if low in ("false", "0", "no", "off"):
            return False
        raise ValueError(f"{key}: expected true/false, got {raw!r}")
    if typ in (int, "int"):
        try:
            return int(raw)
        except ValueError:
            raise ValueError(f"{key}: expected an integer, got {raw!r}") from None
    return raw


def apply_settings(cfg: BrokerConfig, settings: dict[str, str]) -> list[str]:
    """Apply camelCase settings to ``cfg``; return the keys it does not know."""
    fields = {f.name: f for f in dataclasses.fields(cfg)}
    unknown: list[str] = []
    for key, value in settings.items():
        name = camel_to_snake(key)
        f = fields.get(name)
        if f is None or name == "extra":
            unknown.append(key)
            cfg.extra[key] = value
            continue
        setattr(cfg, name, _convert(value, f.type, key))
    return unknown


def load_broker_conf(path: Path, cfg: BrokerConfig | None = None) -> tuple[BrokerConfig, list[str]]:
    """Read a RocketMQ broker.conf (Java properties).

    Returns:
        The config and the list of unknown keys (to be logged as warnings).
    Raises:
        FileNotFoundError, ValueError: unreadable file or a bad value (the message names the key).
    """
    from jproperties import Properties

    props = Properties()
    with open(path, "rb") as f:
        props.load(f, "utf-8")
    settings = {k: v.data for k, v in props.items()}
    cfg = cfg or BrokerConfig()
    unknown = apply_settings(cfg, settings)
    return cfg, unknown
