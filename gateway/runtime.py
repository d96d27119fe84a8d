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

Every listener (name server, broker ports, Kafka) shares one ``Budget`` (``rokka.gateway.budget``,
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
import time
from functools import partial
from pathlib import Path
from typing import Any

import structlog
import trio
from rokka.core.broker import Broker
from rokka.core.config import BrokerConfig
from rokka.gateway import allocator
from rokka.gateway.budget import Budget, Limits, raise_fd_limit

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
    from rokka.core.storage.engine import StoreCorrupt, StoreLocked
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
    log.info("acl enabled", file=str(path))
    return acl


def budget_from(cfg: BrokerConfig) -> Budget:
    """The process's connection and memory budget from broker.conf (0 = off for the timeouts)."""
    raise_fd_limit()
    return Budget(Limits(
        max_connections=cfg.max_connections, max_connections_per_ip=cfg.max_connections_per_ip,
        max_buffered_frame_bytes=cfg.max_buffered_frame_bytes, frame_timeout_s=float(cfg.frame_timeout_seconds),
        write_timeout_s=float(cfg.connection_write_timeout_seconds),
        max_pending_write_bytes=cfg.max_pending_write_bytes, max_read_ahead_bytes=cfg.max_read_ahead_bytes,
        max_unread_response_bytes=cfg.max_unread_response_bytes))


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

            # kvConfig.json: where `rokka namesrv [-c]` says, else beside the store of `rokka serve`
            ns_cfg = namesrv_config or NamesrvConfig.under(Path(cfg.store_path_root_dir) / "namesrv")
            namesrv = NamesrvServer(max_frame_bytes=cfg.max_frame_bytes, budget=budget, config=ns_cfg)
            if cfg.acl_enable:      # WIPE_WRITE_PERM_OF_BROKER: admin signature or globalWhiteRemoteAddresses only
                from rokka.gateway.rocketmq.acl import guard_namesrv
                guard_namesrv(_load_acl(cfg), namesrv.remoting.handlers)
            ns_addr = await nursery.start(namesrv.serve, cfg.listen_host, namesrv_port)
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
        self.kafka_node: Any = None
        self.kafka_server: Any = None
        self.metrics_addr: tuple[str, int] | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        from rokka.gateway.filewatch import watch_files
        from rokka.gateway.rocketmq.acl import AclConfigError, PlainAcl, guard, record_topics
        from rokka.gateway.rocketmq.client import RemotingClient
        from rokka.gateway.rocketmq.handlers import build_handlers
        from rokka.gateway.rocketmq.handlers.client import on_channel_closed, scan_expired_clients
        from rokka.gateway.rocketmq.handlers.context import BrokerContext
        from rokka.gateway.rocketmq.handlers.txn import run_transaction_checks
        from rokka.gateway.rocketmq.server import RemotingServer

        cfg = self.cfg
        acl = _load_acl(cfg)
        signer = acl.broker_credentials() if acl is not None else None
        if acl is not None and signer is None:
            log.warning("aclEnable: plain_acl.yml has no admin account, so this broker's requests to other "
                        "brokers (Kafka group offsets) go unsigned; list the brokers in globalWhiteRemoteAddresses")
        with self._cancel:
            async with RemotingClient(credentials=signer) as rc, trio.open_nursery() as nursery:
                holder: dict[str, BrokerContext] = {}
                rmq = RemotingServer({}, name="broker", max_frame_bytes=cfg.max_frame_bytes,
                                     idle_timeout_s=cfg.server_channel_max_idle_time_seconds,
                                     budget=self.budget,
                                     write_timeout_s=float(cfg.connection_write_timeout_seconds or 1e9),
                                     on_channel_closed=lambda ch: on_channel_closed(holder["ctx"], ch)
                                     if "ctx" in holder else None)
                ports = [cfg.listen_port, cfg.vip_port] if cfg.listen_port else [0, 0]
                addrs = await nursery.start(rmq.serve, cfg.listen_host, ports)
                self._servers.append(rmq)
                cfg.listen_port = addrs[0][1]
                self.broker_addr = (cfg.advertised_host, cfg.listen_port)
                self.broker = broker = await trio.to_thread.run_sync(Broker, cfg)
                if acl is not None:     # a record named by CommitLog offset is checked against its topic
                    acl.topic_at = record_topics(broker.store)
                await nursery.start(broker.run)
                ctx = BrokerContext(broker, _fmt(self.broker_addr), nursery=nursery)
                ctx.extra["boot_ms"] = int(time.time() * 1000)
                holder["ctx"] = ctx
                self.ctx = ctx
                ctx.extra["acl"] = acl     # the ACL request codes edit its file (handlers/admin_acl.py)
                for code, handler in build_handlers(ctx).items():
                    rmq.register(code, handler if acl is None else guard(acl, handler))
                if acl is not None:       # plain_acl.yml edits apply at once; the forward signer follows
                    def reloaded(fresh: PlainAcl) -> None:
                        acl.replace_with(fresh)
                        rc.credentials = acl.broker_credentials()
                    path = _acl_path(cfg)
                    nursery.start_soon(partial(watch_files, [path], partial(PlainAcl.load, path), reloaded,
                                               what="plain_acl.yml", errors=(AclConfigError,)))
                self.kafka_addr = await self._start_kafka(nursery, ctx, rc)
                if cfg.metrics_exporter_type.upper() == "PROM":
                    self.metrics_addr = await self._start_metrics(nursery, broker)
                self._registrar = await self._start_registration(nursery, ctx, rc)
                nursery.start_soon(self._expiry_loop, ctx, scan_expired_clients)
                await nursery.start(run_transaction_checks, ctx)
                task_status.started()

    async def _start_kafka(self, nursery: trio.Nursery, ctx: Any, rc: Any) -> tuple[str, int]:
        """Kafka listener: data-plane routes + group coordinator + producer ids, one core broker.

        In a cluster the Kafka side sees every broker through a ``ClusterView`` fed by the name
        servers, and group offsets are stored by the broker owning each queue (``RoutedOffsets``);
        on a single node both reduce to "this broker, partition = queue".
        """
        from rokka.compat.groups import GroupOwnership
        from rokka.compat.views import ViewRegistry
        from rokka.core.kafka_txn import KafkaTxnCoordinator
        from rokka.core.producer_state import ProducerStateManager
        from rokka.gateway.filewatch import watch_files
        from rokka.gateway.kafka.acls import AclStore
        from rokka.gateway.kafka.authz import Authz, authorize_routes
        from rokka.gateway.kafka.cluster import ClusterView, KafkaNode, RoutedOffsets, derive_node_id
        from rokka.gateway.kafka.groups.coordinator import GroupCoordinator
        from rokka.gateway.kafka.groups.types import GroupConfig
        from rokka.gateway.kafka.handlers import KafkaEnv, build_routes
        from rokka.gateway.kafka.handlers.acl_api import build_acl_routes
        from rokka.gateway.kafka.handlers.common import resolve
        from rokka.gateway.kafka.handlers.group_api import build_group_routes
        from rokka.gateway.kafka.handlers.txn import build_txn_routes
        from rokka.gateway.kafka.sasl import SaslConfigError, UserStore
        from rokka.gateway.kafka.sasl import configure as configure_sasl
        from rokka.gateway.kafka.scram_admin import ScramAdmin, build_scram_routes
        from rokka.gateway.kafka.server import KafkaServer
        from rokka.gateway.kafka.tls import TlsConfigError, server_context
        from rokka.gateway.kafka.tls import settings_from as tls_settings
        from rokka.gateway.rocketmq.client import NamesrvClient

        cfg, broker = self.cfg, ctx.broker
        config_dir = Path(cfg.store_path_root_dir) / "config"
        listeners = await trio.open_tcp_listeners(cfg.kafka_listen_port, host=cfg.listen_host)
        port = listeners[0].socket.getsockname()[1]
        cfg.kafka_listen_port = port
        host = cfg.advertised_host
        coord_holder: dict[str, GroupCoordinator] = {}
        node_id = cfg.kafka_node_id or derive_node_id(cfg.broker_name)   # kafkaNodeId=0: derived, stable
        view = ClusterView(cfg.broker_name, KafkaNode(node_id, host, port), _fmt(self.broker_addr),
                           lambda t: (tc.read_queue_nums or None) if (tc := broker.topics.get(t)) else None,
                           NamesrvClient(rc, cfg.namesrv_addrs) if cfg.namesrv_addrs else None)
        routed = RoutedOffsets(view, broker.offsets, rc)

        def kafka_live(group: str) -> bool:
            coord = coord_holder.get("c")
            return bool(coord and any(g.members for g in coord.describe([group])))

        ownership = GroupOwnership(broker.consumers.is_live, kafka_live)
        ctx.extra["refuse_rocketmq_group"] = ownership.refuse_rocketmq
        coord = GroupCoordinator(
            GroupConfig(config_dir=config_dir, initial_rebalance_delay_ms=cfg.kafka_group_initial_rebalance_delay_ms,
                        node_id=node_id, host=host, port=port),
            routed, admit_group=ownership.refuse_kafka,
            partition_exists=lambda t, p: (lay := view.layout(t)) is not None and 0 <= p < lay.total,
            live_elsewhere=broker.consumers.is_live, on_group_deleted=broker.sub_groups.delete)
        coord_holder["c"] = coord
        producers = ProducerStateManager(config_dir, id_base=int(cfg.extra.get("kafkaProducerIdBase", 0)))
        producers.recover(broker.store.max_offset)
        broker.store.add_flush_hook(producers.sync_journal)     # the producer journal is durable before acks
        views = ViewRegistry(config_dir)
        env = KafkaEnv(broker=broker, node_id=node_id, host=host, port=port, producers=producers,
                       views=views, cluster=view)
        txns = KafkaTxnCoordinator(broker, producers, config_dir)   # Kafka transactions on half messages
        env.transactions = txns
        coord.pending_txn_offset = txns.pending_offset
        routes = build_routes(env)
        routes |= build_group_routes(coord, producers, lambda t: resolve(env, t)[0], routed)
        routes |= build_txn_routes(env, txns, coord, producers)
        sasl = configure_sasl(cfg.kafka_sasl_mechanisms, cfg.kafka_sasl_users)
        holder: dict[str, KafkaServer] = {}

        def use_users(store: Any) -> None:
            server = holder["server"]
            assert server.sasl is not None
            server.sasl = (server.sasl[0], store)

        supers = [u.strip() for u in cfg.kafka_super_users.split(";") if u.strip()]
        if sasl is not None:        # SCRAM users managed with Kafka's admin APIs (no ACLs: super users or oneself)
            routes |= build_scram_routes(ScramAdmin(Path(cfg.kafka_sasl_users), lambda: holder["server"].sasl[1],  # type: ignore[index]
                                                    use_users, None if cfg.kafka_acl_enable else supers))
        acls = AclStore(config_dir, super_users=supers,
                        allow_if_no_acl=cfg.kafka_allow_everyone_if_no_acl_found) if cfg.kafka_acl_enable else None
        if cfg.acl_enable and acls is None:
            log.warning("security.kafka_port_open", port=port, reason="aclEnable covers the RocketMQ ports only: "
                        "every Kafka client may read and write every topic; set kafkaAclEnable (and SASL or TLS)")
        routes |= build_acl_routes(acls)
        if acls is not None:
            routes = authorize_routes(routes, Authz(acls, views))
            log.info("kafka.acl", acls=len(acls.all()), super_users=sorted(acls.super_users),
                     allow_everyone_if_no_acl_found=acls.allow_if_no_acl)
        tls = tls_settings(cfg.kafka_ssl_cert_file, cfg.kafka_ssl_key_file, cfg.kafka_ssl_key_password,
                           cfg.kafka_ssl_ca_file, cfg.kafka_ssl_client_auth)
        server = holder["server"] = KafkaServer(routes, max_frame_bytes=cfg.kafka_max_frame_bytes, sasl=sasl,
                                                tls=server_context(tls) if tls is not None else None,
                                                budget=self.budget,
                                                max_unauthenticated_frame_bytes=cfg.kafka_sasl_max_receive_bytes)
        if tls is not None:
            def use_tls(context: Any) -> None:
                server.tls = context
            nursery.start_soon(partial(watch_files, tls.files, partial(server_context, tls), use_tls,
                                       what="kafka TLS files", errors=(TlsConfigError,)))
            log.info("kafka.tls", cert=str(tls.cert_file), client_auth=tls.client_auth,
                     security_protocol="SASL_SSL" if sasl is not None else "SSL")
        if sasl is not None:
            users = Path(cfg.kafka_sasl_users)
            nursery.start_soon(partial(watch_files, [users], partial(UserStore.load, users), use_users,
                                       what="kafka SASL users", errors=(SaslConfigError,)))
        await nursery.start(self._run_kafka_services, coord, view, producers, txns)
        self.kafka_node = view.node
        nursery.start_soon(trio.serve_listeners, server.handle_stream, listeners)
        self._servers.append(server)
        self.kafka_server = server
        self._closers.append(producers.close)
        self._closers.append(coord.save)
        self._closers.append(txns.save)
        ctx.extra["kafka_addr"] = (host, port)
        return (host, port)

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

    async def _start_registration(self, nursery: trio.Nursery, ctx: Any, rc: Any) -> Any:
        from rokka.gateway.kafka.cluster import PublishingRegistrar

        cfg = self.cfg
        # Each round also publishes this broker's Kafka endpoint (KV ROKKA_KAFKA/<brokerName>).
        registrar = PublishingRegistrar(
            rc, cfg.namesrv_addrs, cluster=cfg.broker_cluster_name, broker_name=cfg.broker_name,
            broker_addr=ctx.broker_addr, topic_configs=ctx.broker.topics.serialize, broker_id=cfg.broker_id,
            ha_addr=f"{cfg.advertised_host}:{cfg.listen_port + 1}",
            interval_s=cfg.register_name_server_period / 1000, kafka_node=self.kafka_node)
        ctx.topic_changed = registrar.trigger
        # Every topic change, whichever protocol made it (Kafka CreateTopics, auto-create, retry/DLQ
        # topics), is registered with the name servers at once so RocketMQ clients can route to it.
        ctx.broker.topics.on_change(registrar.trigger)
        await nursery.start(registrar.run)
        return registrar

    async def _expiry_loop(self, ctx: Any, scan: Any) -> None:
        while True:
            await trio.sleep(EXPIRY_SCAN_S)
            scan(ctx)

    async def _run_kafka_services(self, coord: Any, view: Any, producers: Any, txns: Any, *,
                                  task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The Kafka coordinators' background loops, in a scope of their own: ``shutdown`` cancels them
        and waits for them before the store closes (a transaction completion or group upkeep must never
        read a closed CommitLog; their final saves run as they stop)."""
        done = self._kafka_services_done = trio.Event()
        try:
            with self._kafka_services:
                async with trio.open_nursery() as inner:
                    await inner.start(coord.run)
                    inner.start_soon(view.run)
                    await inner.start(producers.run)
                    await inner.start(txns.run)
                    task_status.started()
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
