"""The name server: ``RemotingServer`` + name server handlers + expiry scan.

Theory of operation
-------------------
``NamesrvServer.serve(host, port)`` runs a ``RemotingServer`` with the
handlers of ``rokka.gateway.namesrv.handlers`` and, next to it, a loop that calls
``RouteInfoManager.scan_expired`` every ``scan_interval_s`` (10 s, as Java)
so brokers silent for 120 s disappear from routes.  A closed connection
drops the brokers registered over it at once (Java ``onChannelDestroy``).

With a ``NamesrvConfig`` (``rokka namesrv -c namesrv.properties``) the KV table
is loaded from ``kvConfigPath`` at start and rewritten after every change,
before the change is answered (by a worker thread: the event loop never waits
for the file), and
UPDATE_NAMESRV_CONFIG persists to ``configStorePath``; without one (tests,
embedded use) both live in memory only.

Stop it by cancelling ``serve`` or with ``stop()`` (graceful).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import structlog
import trio
from rokka.core.namesrv.config import KVConfigStore, NamesrvConfig
from rokka.core.namesrv.controller import Controller
from rokka.core.namesrv.routes import BROKER_EXPIRED_MS, RouteInfoManager
from rokka.gateway.controller.service import ControllerService
from rokka.gateway.kafka.cluster import KV_NAMESPACE as KAFKA_KV_NAMESPACE
from rokka.gateway.namesrv.handlers import NamesrvHandlers
from rokka.gateway.rocketmq.server import RemotingServer
from rokka.gateway.rocketmq.tls import RemotingTls
from rokka.net.budget import Budget
from rokka.net.remoting.channel import Channel, HostPort
from rokka.net.remoting.codec.remoting import DEFAULT_MAX_FRAME_BYTES

log = structlog.get_logger(__name__)


class NamesrvServer:
    """A RocketMQ 4.9-compatible name server.

    Args:
        clock: "now" in ms for broker expiry (injected in tests); default wall clock.
        scan_interval_s: how often expired brokers are removed.
        broker_expired_ms: silence after which a broker is dropped.
        budget: connection and memory budget shared with the process's other listeners
            (``rokka.net.budget``; default: a private one).
        config: name server configuration; with one, KV config and config updates are persisted
            (a damaged ``kvConfig.json`` raises ValueError here) and its
            ``serverChannelMaxIdleTimeSeconds`` replaces ``idle_timeout_s`` (0 = never).
        tls: ``tls.server.mode`` and certificates (``rokka.gateway.rocketmq.tls``; None: plaintext only).
    """

    def __init__(self, *, clock: Callable[[], int] | None = None, scan_interval_s: float = 10.0,
                 broker_expired_ms: int = BROKER_EXPIRED_MS, idle_timeout_s: float | None = 120.0,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, budget: Budget | None = None,
                 config: NamesrvConfig | None = None, tls: RemotingTls | None = None) -> None:
        self.routes = (RouteInfoManager(clock, broker_expired_ms) if clock is not None
                       else RouteInfoManager(broker_expired_ms=broker_expired_ms))
        self.config = config if config is not None else NamesrvConfig()
        self._kv_store: KVConfigStore | None = None
        self._kv_generation = 0
        self._kv_on_disk = 0
        self._kv_lock = trio.Lock()
        if config is not None:
            idle_timeout_s = float(config.server_channel_max_idle_time_seconds or 0) or None
            self._kv_store = KVConfigStore(Path(config.kv_config_path), ephemeral=frozenset({KAFKA_KV_NAMESPACE}))
            self.routes.load_kv(self._kv_store.load())
            self.routes.on_kv_change = self._kv_changed
        self.handlers = NamesrvHandlers(self.routes, self.config, persist_config=config is not None)
        self.handlers.persist_kv = self.persist_kv
        self.scan_interval_s = scan_interval_s
        table = self.handlers.table()
        self.controller: ControllerService | None = None
        if self.config.enable_controller_in_namesrv:    # RocketMQ 5 controller mode (gateway/controller)
            self.controller = ControllerService(self.routes, Controller(
                elect_unclean=self.config.enable_elect_unclean_master),
                self.config.scan_not_active_broker_interval / 1000)
            self.handlers.controller = self.controller.controller
            table.update(self.controller.table())  # type: ignore[arg-type]
        self.remoting = RemotingServer(
            table, name="namesrv", idle_timeout_s=idle_timeout_s,
            max_frame_bytes=max_frame_bytes, on_channel_closed=self._channel_closed, budget=budget,
            tls=tls)

    # -- kvConfig.json: written before a change is answered, off the event loop ---------------------------
    def _kv_changed(self, table: dict[str, dict[str, str]]) -> None:
        del table
        self._kv_generation += 1

    def _kv_snapshot(self) -> tuple[dict[str, dict[str, str]], int]:
        return {ns: dict(kv) for ns, kv in self.routes.kv.items()}, self._kv_generation

    async def persist_kv(self) -> None:
        """Return once the KV table as it is now is on disk (Java answers a KV change after writing the
        file too).  A worker thread writes, so the JSON and the fsync never hold the event loop; callers
        that arrive during a write share the next one."""
        store = self._kv_store
        if store is None or self._kv_on_disk >= self._kv_generation:
            return
        want = self._kv_generation
        async with self._kv_lock:
            if self._kv_on_disk >= want:
                return
            table, generation = self._kv_snapshot()
            await trio.to_thread.run_sync(store.persist, table, generation)
            self._kv_on_disk = generation

    def flush_kv(self) -> None:
        """Write the KV table now if a change is not on disk yet (synchronous: at stop)."""
        if self._kv_store is not None and self._kv_on_disk < self._kv_generation:
            table, generation = self._kv_snapshot()
            self._kv_store.persist(table, generation)
            self._kv_on_disk = generation

    def _channel_closed(self, channel: Channel) -> None:
        gone = self.routes.on_channel_closed(channel.id)
        if gone:
            log.info("namesrv.brokers_dropped_with_connection", brokers=gone)

    def scan_once(self) -> list[str]:
        gone = self.routes.scan_expired()
        if gone:
            log.warning("namesrv.brokers_expired", brokers=gone)
        return gone

    async def _scan_loop(self) -> None:
        while True:
            await trio.sleep(self.scan_interval_s)
            self.scan_once()

    async def serve(self, host: str | None, port: int, *,
                    task_status: trio.TaskStatus[HostPort] = trio.TASK_STATUS_IGNORED) -> None:
        """Listen on ``port`` (0 = any free port) and report the bound ``(host, port)``."""
        async with trio.open_nursery() as nursery:
            addrs = await nursery.start(self.remoting.serve, host, [port])
            nursery.start_soon(self._scan_loop)
            if self.controller is not None:
                nursery.start_soon(self.controller.run)
            task_status.started(addrs[0])
            try:
                await self.remoting.wait_stopped()
            finally:
                self.flush_kv()
            nursery.cancel_scope.cancel()

    def stop(self, grace_s: float = 5.0) -> None:
        self.flush_kv()
        self.remoting.stop(grace_s)
