"""Process runtime: start the roles, print the ready line, shut down cleanly.

Theory of operation
-------------------
``run_roles`` runs one trio event loop holding any of: the name server, the
RocketMQ broker listeners (main port and VIP port = port - 2) and the Kafka
listener, all on the one core ``Broker``.  Start order matters because
ports may be 0 ("pick a free port") and the broker's advertised address is
written into every stored record (STOREHOST): listeners bind first, then the
store opens with the real address, then handlers are installed, then the
broker registers with its name servers, then exactly one line goes to stdout:

    rokka ready namesrv=H:P broker=H:P kafka=H:P

Every listener (name server, broker ports, Kafka) shares one ``Budget`` (``rokka.net.budget``,
from broker.conf's maxConnections, maxConnectionsPerIp, maxBufferedFrameBytes, frameTimeoutSeconds,
connectionWriteTimeoutSeconds, maxPendingWriteBytes, maxReadAheadBytes, maxUnreadResponseBytes): caps count
across all ports, and its trim loop gives memory freed by departed connections back to the kernel.

SIGTERM / SIGINT: stop accepting, let in-flight requests finish (bounded),
unregister from the name servers, flush, write the checkpoint, remove the
abort marker, exit 0.  A store that cannot be opened (corruption that
cannot be repaired safely) is reported on stderr and exits 2, without a
traceback.
"""

from __future__ import annotations

import gc
import signal
import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog
import trio
from rokka.core.broker import Broker
from rokka.core.config import BrokerConfig
from rokka.gateway import allocator
from rokka.net.budget import Budget, Limits, raise_fd_limit

if TYPE_CHECKING:
    from rokka.gateway.kafka.cluster import KafkaNode
    from rokka.gateway.kafka.role import KafkaRole
    from rokka.gateway.kafka.server import KafkaServer

log = structlog.get_logger("rokka")

EXPIRY_SCAN_S = 10.0
GRACE_S = 5.0


def run_roles(cfg: BrokerConfig, *, namesrv_port: int | None, run_broker: bool, namesrv_config: Any = None) -> int:
    if run_broker:
        allocator.tune()
    try:
        return trio.run(_main, cfg, namesrv_port, run_broker, namesrv_config)
    except KeyboardInterrupt:  # pragma: no cover - SIGINT before handlers were installed
        return 0
    except BaseException as exc:  # noqa: BLE001 - top level: report clearly, no traceback spam
        reason = _startup_failure(exc)
        if reason is None:
            raise
        log.error("cannot start", error=str(reason), kind=type(reason).__name__)
        hint = " (start with --repair to truncate the store there)" if "repair" in str(reason) else ""
        print(f"rokka: cannot start: {reason}{hint}", file=sys.stderr, flush=True)
        return 2


def _startup_failure(exc: BaseException) -> BaseException | None:
    """The store/OS error behind a failed start (unwrapping trio's exception groups), else None."""
    from rokka.core.storage import StoreCorrupt, StoreLocked
    from rokka.gateway.kafka.sasl import SaslConfigError
    from rokka.gateway.kafka.tls import TlsConfigError
    from rokka.gateway.rocketmq.acl import AclConfigError

    if isinstance(exc, StoreCorrupt | StoreLocked | OSError | SaslConfigError | AclConfigError | TlsConfigError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for sub in exc.exceptions:
            if (found := _startup_failure(sub)) is not None:
                return found
    return None


def _acl_path(cfg: BrokerConfig) -> Path:
    return Path(cfg.plain_acl_file) if cfg.plain_acl_file else \
        Path(cfg.store_path_root_dir).resolve().parent / "conf" / "plain_acl.yml"


def _load_acl(cfg: BrokerConfig) -> Any:
    """The broker's PlainAcl when ``aclEnable`` is on, else None."""
    if not cfg.acl_enable:
        return None
    from rokka.gateway.rocketmq.acl import PlainAcl

    path = _acl_path(cfg)
    acl = PlainAcl.load(path)
    log.info("rocketmq.acl_enabled", file=str(path))
    return acl


def budget_from(cfg: BrokerConfig) -> Budget:
    """The process's connection and memory budget from broker.conf (0 = off for the timeouts)."""
    raise_fd_limit()
    return Budget(Limits(
        max_connections=cfg.max_connections, max_connections_per_ip=cfg.max_connections_per_ip,
        max_buffered_frame_bytes=cfg.max_buffered_frame_bytes, frame_timeout_s=float(cfg.frame_timeout_seconds),
        write_timeout_s=float(cfg.connection_write_timeout_seconds),
        max_pending_write_bytes=cfg.max_pending_write_bytes, max_read_ahead_bytes=cfg.max_read_ahead_bytes,
        max_unread_response_bytes=cfg.max_unread_response_bytes, idle_spin_s=cfg.idle_spin_micros / 1e6))


def _fmt(addr: tuple[str, int]) -> str:
    return f"{addr[0]}:{addr[1]}"


async def _main(cfg: BrokerConfig, namesrv_port: int | None, run_broker: bool, namesrv_config: Any = None) -> int:
    parts: list[str] = []
    stoppers: list[Any] = []
    async with trio.open_nursery() as nursery:
        stop = trio.Event()
        nursery.start_soon(_watch_signals, stop)
        budget = budget_from(cfg)
        nursery.start_soon(budget.run)
        log.info("connection.limits", max_connections=budget.max_connections,
                 max_connections_per_ip=cfg.max_connections_per_ip,
                 max_buffered_frame_bytes=cfg.max_buffered_frame_bytes, frame_timeout_s=cfg.frame_timeout_seconds)
        if namesrv_port is not None:
            from rokka.core.namesrv.config import NamesrvConfig
            from rokka.gateway.namesrv.server import NamesrvServer
            from rokka.gateway.rocketmq.tls import RemotingTls, settings_from

            # kvConfig.json: where `rokka namesrv [-c]` says, else beside the store of `rokka serve`
            ns_cfg = namesrv_config or NamesrvConfig.under(Path(cfg.store_path_root_dir) / "namesrv")
            ns_tls = settings_from(ns_cfg.tls_settings if namesrv_config is not None else cfg.tls_properties())
            namesrv = NamesrvServer(max_frame_bytes=cfg.max_frame_bytes, budget=budget, config=ns_cfg,
                                    tls=RemotingTls(ns_tls))
            if cfg.acl_enable:      # WIPE_WRITE_PERM_OF_BROKER: admin signature or globalWhiteRemoteAddresses only
                from rokka.gateway.rocketmq.acl import guard_namesrv
                guard_namesrv(_load_acl(cfg), namesrv.remoting.handlers)
            ns_addr = await nursery.start(namesrv.serve, cfg.listen_host, namesrv_port)
            ns_cfg.listen_port = ns_addr[1]     # GET_NAMESRV_CONFIG shows the port in use, as Java's does
            parts.append(f"namesrv={_fmt(ns_addr)}")
            stoppers.append(namesrv)
            if run_broker:
                own = f"{cfg.advertised_host}:{ns_addr[1]}"
                cfg.namesrv_addr = ";".join([own, *[a for a in cfg.namesrv_addrs if a != own]])
        broker_role = None
        if run_broker:
            broker_role = BrokerRole(cfg, budget)
            await nursery.start(broker_role.run)
            parts.append(f"broker={_fmt(broker_role.broker_addr)}")
            parts.append(f"kafka={_fmt(broker_role.kafka_addr)}")
            if broker_role.metrics_addr is not None:
                parts.append(f"metrics={_fmt(broker_role.metrics_addr)}")
        # Everything built at start-up lives for the whole process: move it out of the GC's way so
        # full collections stay short (they pause the event loop).
        gc.collect()
        gc.freeze()
        print("rokka ready " + " ".join(parts), flush=True)
        log.info("ready", roles=parts)
        await stop.wait()
        log.info("shutting down")
        if broker_role is not None:
            await broker_role.shutdown()
        for s in stoppers:
            s.stop()
        nursery.cancel_scope.cancel()
    log.info("stopped")
    return 0


async def _watch_signals(stop: trio.Event) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            stop.set()
            return


class BrokerRole:
    """The broker: RocketMQ listeners + Kafka listener over one core ``Broker``."""

    def __init__(self, cfg: BrokerConfig, budget: Budget | None = None) -> None:
        self.cfg = cfg
        self.budget = budget if budget is not None else budget_from(cfg)
        self.broker: Broker | None = None
        self.broker_addr: tuple[str, int] = ("", 0)
        self.kafka_addr: tuple[str, int] = ("", 0)
        self._servers: list[Any] = []
        self._registrar: Any = None
        self._closers: list[Any] = []
        self._cancel = trio.CancelScope()
        self._kafka_services = trio.CancelScope()
        self._kafka_services_done: trio.Event | None = None
        self.kafka: KafkaRole | None = None
        self.kafka_node: KafkaNode | None = None
        self.kafka_server: KafkaServer | None = None
        self.metrics_addr: tuple[str, int] | None = None
        self.ha: Any = None             # gateway.ha: HAMaster / HASlave

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        from rokka.gateway.filewatch import watch_files
        from rokka.gateway.rocketmq.acl import AclConfigError, PlainAcl, guard, record_topics
        from rokka.gateway.rocketmq.handlers import build_handlers
        from rokka.gateway.rocketmq.handlers.client import on_channel_closed, scan_expired_clients
        from rokka.gateway.rocketmq.handlers.context import BrokerEnv
        from rokka.gateway.rocketmq.handlers.txn import run_transaction_checks
        from rokka.gateway.rocketmq.server import RemotingServer
        from rokka.gateway.rocketmq.tls import RemotingTls, client_context_from, settings_from
        from rokka.net.remoting.client import RemotingClient

        cfg = self.cfg
        acl = _load_acl(cfg)
        signer = acl.broker_credentials() if acl is not None else None
        if acl is not None and signer is None:
            log.warning("rocketmq.acl_no_admin_account", reason="plain_acl.yml has no admin account",
                        unsigned="requests to other brokers (Kafka group offsets)",
                        fix="list the brokers in globalWhiteRemoteAddresses")
        with self._cancel:
            client_tls = client_context_from(cfg.tls_properties())     # tls.enable: to name servers too
            async with RemotingClient(credentials=signer, tls=client_tls) as rc, trio.open_nursery() as nursery:
                holder: dict[str, BrokerEnv] = {}
                rmq = RemotingServer({}, name="broker", max_frame_bytes=cfg.max_frame_bytes,
                                     idle_timeout_s=cfg.server_channel_max_idle_time_seconds,
                                     budget=self.budget, tls=RemotingTls(settings_from(cfg.tls_properties())),
                                     write_timeout_s=float(cfg.connection_write_timeout_seconds or 1e9),
                                     on_channel_closed=lambda ch: on_channel_closed(holder["env"], ch)
                                     if "env" in holder else None)
                ports = [cfg.listen_port, cfg.vip_port] if cfg.listen_port else [0, 0]
                addrs = await nursery.start(rmq.serve, cfg.listen_host, ports)
                self._servers.append(rmq)
                cfg.listen_port = addrs[0][1]
                self.broker_addr = (cfg.advertised_host, cfg.listen_port)
                self.broker = broker = await trio.to_thread.run_sync(Broker, cfg)
                if cfg.enable_controller_mode:   # fenced until the controller names the role (gateway/ha/controlled.py)
                    broker.store.replica_only = True
                if acl is not None:     # a record named by CommitLog offset is checked against its topic
                    acl.topic_at = record_topics(broker.store)
                await nursery.start(broker.run)
                env = BrokerEnv(broker, _fmt(self.broker_addr), nursery=nursery)
                holder["env"] = env
                self.env = env
                env.acl = acl     # the ACL request codes edit its file (handlers/admin_acl.py)
                for code, handler in build_handlers(env).items():
                    rmq.register(code, handler if acl is None else guard(acl, handler))
                if acl is not None:       # plain_acl.yml edits apply at once; the forward signer follows
                    def reloaded(fresh: PlainAcl) -> None:
                        acl.replace_with(fresh)
                        rc.credentials = acl.broker_credentials()
                    path = _acl_path(cfg)
                    nursery.start_soon(partial(watch_files, [path], partial(PlainAcl.load, path), reloaded,
                                               what="plain_acl.yml", errors=(AclConfigError,)))
                self.kafka_addr = await self._start_kafka(nursery, env, rc)
                from rokka.gateway.kafka.txn.participants import install as install_txn_shares
                assert self.kafka is not None   # transactions spanning brokers: requests between brokers
                install_txn_shares(self.kafka.transactions, self.kafka.view, rc, broker.offsets, rmq.register, acl)
                if cfg.metrics_exporter_type.upper() == "PROM":
                    self.metrics_addr = await self._start_metrics(nursery, broker)
                from rokka.gateway.ha.service import start_ha  # master/slave replication (brokerRole)
                from rokka.gateway.kafka.state_sync import GET_KAFKA_STATE, state_handler
                rmq.register(GET_KAFKA_STATE, state_handler(self.kafka.state, acl))  # a slave copies Kafka state
                self.ha = await start_ha(nursery, cfg, broker, lambda: self._registrar,
                                         [("kafka", GET_KAFKA_STATE, self.kafka.state.apply)])
                from rokka.gateway.ha.service import replica_hooks
                self.kafka.view.replicas.hooks = replica_hooks(self.ha, cfg)    # Kafka replicas and ISR
                self._registrar = await self._start_registration(nursery, env, rc)
                nursery.start_soon(self._expiry_loop, env, scan_expired_clients)
                await nursery.start(run_transaction_checks, env)
                task_status.started()

    async def _start_kafka(self, nursery: trio.Nursery, env: Any, rc: Any) -> tuple[str, int]:
        """Kafka listener over the same core broker (built by ``KafkaRole.build``: cluster view, group
        coordinator, producer ids, transactions, security, routes from the API registry)."""
        from rokka.gateway.kafka.role import KafkaRole

        kafka = self.kafka = await KafkaRole.build(self.cfg, env.broker, rc, _fmt(self.broker_addr), self.budget)
        env.shared.refuse_rocketmq_group = kafka.refuse_rocketmq_group
        kafka.start_watches(nursery)
        await nursery.start(self._run_kafka_services, kafka)
        self.kafka_node, self.kafka_server = kafka.node, kafka.server
        nursery.start_soon(kafka.server.serve_on, kafka.listeners)
        self._servers.append(kafka.server)
        self._closers.append(kafka.close)
        env.shared.kafka_addr = kafka.address
        return kafka.address

    async def _start_metrics(self, nursery: trio.Nursery, broker: Broker) -> tuple[str, int]:
        from rokka.gateway.kafka.codec import APIS
        from rokka.gateway.metrics import BrokerCollector, MetricsServer, kafka_request_timer, registry_for

        kafka = self.kafka_server
        collector = BrokerCollector(broker, (lambda: kafka.stats) if kafka is not None else None)
        registry = registry_for(collector)
        if kafka is not None:
            base = {"cluster": self.cfg.broker_cluster_name, "node_type": "broker", "node_id": self.cfg.broker_name}
            kafka.observe = kafka_request_timer(registry, lambda k: APIS[k].name if k in APIS else str(k), base)
        server = MetricsServer(registry)
        return await nursery.start(server.serve, self.cfg.metrics_prom_exporter_host or self.cfg.listen_host,
                                   self.cfg.metrics_prom_exporter_port)

    async def _start_registration(self, nursery: trio.Nursery, env: Any, rc: Any) -> Any:
        from rokka.gateway.kafka.cluster import PublishingRegistrar
        from rokka.gateway.kafka.replicas import EndpointPublisher
        from rokka.net.remoting.client.namesrv import NamesrvClient

        cfg = self.cfg
        assert self.kafka is not None
        view = self.kafka.view
        # Each round also publishes this broker's Kafka entries (gateway/kafka/replicas.py: the set's
        # endpoint from its master, a replica entry from each broker that replicates); a change in
        # them (a role switch, the ISR) is published within a second.
        async def no_name_server(namespace: str, key: str, value: str) -> None:
            return None
        put = NamesrvClient(rc, cfg.namesrv_addrs).put_kv if cfg.namesrv_addrs else no_name_server
        publisher = EndpointPublisher(view.published, put)
        registrar = PublishingRegistrar(
            rc, cfg.namesrv_addrs, cluster=cfg.broker_cluster_name, broker_name=cfg.broker_name,
            broker_addr=env.broker_addr, topic_configs=env.broker.topics.serialize, broker_id=cfg.broker_id,
            ha_addr=f"{cfg.advertised_host}:{cfg.ha_port}",
            interval_s=cfg.register_name_server_period / 1000, publisher=publisher)
        if cfg.namesrv_addrs:
            nursery.start_soon(publisher.run)
        env.topic_changed = registrar.trigger
        # Every topic change, whichever protocol made it (Kafka CreateTopics, auto-create, retry/DLQ
        # topics), is registered with the name servers at once so RocketMQ clients can route to it.
        env.broker.topics.on_change(registrar.trigger)
        await nursery.start(registrar.run)
        return registrar

    async def _expiry_loop(self, env: Any, scan: Any) -> None:
        while True:
            await trio.sleep(EXPIRY_SCAN_S)
            scan(env)

    async def _run_kafka_services(self, kafka: KafkaRole, *,
                                  task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The Kafka coordinators' background loops, in a scope of their own: ``shutdown`` cancels them
        and waits for them before the store closes (a transaction completion or group upkeep must never
        read a closed CommitLog; their final saves run as they stop)."""
        done = self._kafka_services_done = trio.Event()
        try:
            with self._kafka_services:
                await kafka.run_services(task_status=task_status)
        finally:
            done.set()

    async def shutdown(self) -> None:
        """Graceful stop: servers drain, unregister, store closes (flush + checkpoint)."""
        with trio.CancelScope(shield=True):
            with trio.move_on_after(GRACE_S + 2):
                for server in self._servers:
                    if hasattr(server, "stop"):
                        server.stop(GRACE_S)
                for server in self._servers:
                    if hasattr(server, "aclose"):
                        await server.aclose(GRACE_S)
            if self._registrar is not None:
                with trio.move_on_after(3):
                    await self._registrar.unregister()
            self._kafka_services.cancel()
            if self._kafka_services_done is not None:
                with trio.move_on_after(GRACE_S):
                    await self._kafka_services_done.wait()
            if self.broker is not None:
                await self.broker.stop_background()
                await trio.to_thread.run_sync(self.broker.close)
            for close in self._closers:
                close()
        self._cancel.cancel()
