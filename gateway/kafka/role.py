"""The Kafka role of a broker process: everything the Kafka listener needs, built in one place.

Theory of operation
-------------------
``KafkaRole.build`` is the Kafka side of the composition root (``rokka.gateway.runtime`` calls it
once the store is open).  It builds, in this order, each part from explicit inputs:

1. the listener socket (the port must be known before the coordinators: it is in their answers);
2. the cluster view (``ClusterView``: every broker's Kafka endpoint, fed by the name servers) and the
   group offsets store that forwards remote partitions (``RoutedOffsets``);
3. the coordinators: consumer groups (``GroupCoordinator``, which refuses a group RocketMQ consumers
   are live in, and back: ``GroupOwnership``), producer ids (``ProducerStateManager``, durable before
   acks) and transactions (``KafkaTxnCoordinator``);
4. security: SASL users (``sasl``), their SCRAM admin, the Kafka ACLs (``authz``), TLS;
5. the routes, from the registry (``apis.routes``), and the ``KafkaServer``.

No holder dicts: the one cycle (SCRAM admin <-> the server's current users) goes through
``SaslUsers``, a small mutable cell both read.  ``run`` starts the coordinators' loops (in a scope
``stop_services`` cancels and waits for, so no completion touches a closed store), the file watches
(TLS files, SASL users) and the listener; ``close`` writes the coordinators' final state.
What the RocketMQ side needs from Kafka is exposed, typed: ``refuse_rocketmq_group`` and ``address``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import structlog
import trio
from rokka.compat.groups import GroupOwnership
from rokka.compat.views import ViewRegistry
from rokka.core.broker import Broker
from rokka.core.config import BrokerConfig
from rokka.gateway.filewatch import watch_files
from rokka.gateway.kafka.acls import AclStore
from rokka.gateway.kafka.apis import KafkaServices, routes
from rokka.gateway.kafka.authz import Authz
from rokka.gateway.kafka.cluster import ClusterView, KafkaNode, replica_node_id
from rokka.gateway.kafka.groups.coordinator import GroupCoordinator
from rokka.gateway.kafka.groups.types import GroupConfig
from rokka.gateway.kafka.handlers import KafkaEnv
from rokka.gateway.kafka.handlers.txn import attach as attach_transactions
from rokka.gateway.kafka.producers.state import ProducerStateManager
from rokka.gateway.kafka.routed_offsets import RoutedOffsets
from rokka.gateway.kafka.sasl import SaslConfigError, UserStore
from rokka.gateway.kafka.sasl import configure as configure_sasl
from rokka.gateway.kafka.scram_admin import ScramAdmin
from rokka.gateway.kafka.server import KafkaServer
from rokka.gateway.kafka.shared_acls import acl_store
from rokka.gateway.kafka.state_sync import KafkaState
from rokka.gateway.kafka.tls import TlsConfigError, TlsSettings, server_context
from rokka.gateway.kafka.tls import settings_from as tls_settings
from rokka.gateway.kafka.txn.coordinator import KafkaTxnCoordinator
from rokka.net.budget import Budget
from rokka.net.remoting.client import NamesrvClient, RemotingClient

__all__ = ["KafkaRole", "SaslUsers"]

log = structlog.get_logger(__name__)


@dataclass
class SaslUsers:
    """The enabled SASL mechanisms and the current users (replaced when the users file changes or
    the SCRAM admin APIs edit it); the server reads it for each new connection."""

    mechanisms: tuple[str, ...]
    users: UserStore
    server: KafkaServer | None = None

    def replace(self, users: UserStore) -> None:
        self.users = users
        if self.server is not None:
            self.server.sasl = (self.mechanisms, users)


@dataclass
class KafkaRole:
    """The Kafka side of one broker (see the module docstring)."""

    cfg: BrokerConfig
    server: KafkaServer
    listeners: list[trio.SocketListener]
    view: ClusterView
    groups: GroupCoordinator
    ownership: GroupOwnership
    producers: ProducerStateManager
    transactions: KafkaTxnCoordinator
    sasl: SaslUsers | None
    tls: TlsSettings | None
    state: KafkaState            # what a slave copies from its master (gateway/kafka/state_sync.py)

    @property
    def address(self) -> tuple[str, int]:
        """The advertised Kafka endpoint (host, port)."""
        return (self.view.node.host, self.view.node.port)

    @property
    def node(self) -> KafkaNode:
        return self.view.node

    def refuse_rocketmq_group(self, group: str) -> str | None:
        """Why a RocketMQ consumer may not join ``group`` (Kafka members are live in it), or None."""
        return self.ownership.refuse_rocketmq(group)

    @classmethod
    async def build(cls, cfg: BrokerConfig, broker: Broker, client: RemotingClient, broker_addr: str,
                    budget: Budget) -> KafkaRole:
        listeners = await trio.open_tcp_listeners(cfg.kafka_listen_port, host=cfg.listen_host)
        port = cfg.kafka_listen_port = listeners[0].socket.getsockname()[1]
        config_dir = Path(cfg.store_path_root_dir) / "config"
        node_id = cfg.kafka_node_id or replica_node_id(cfg.broker_name, cfg.broker_id)
        node = KafkaNode(node_id, cfg.advertised_host, port)
        view = ClusterView(cfg.broker_name, node, broker_addr,
                           lambda t: (tc.read_queue_nums or None) if (tc := broker.topics.get(t)) else None,
                           NamesrvClient(client, cfg.namesrv_addrs) if cfg.namesrv_addrs else None,
                           follower=lambda: broker.store.replica_only)
        routed = RoutedOffsets(view, broker.offsets, client)
        live = _LiveKafkaGroups()
        ownership = GroupOwnership(broker.consumers.is_live, live)
        groups = live.groups = GroupCoordinator(
            GroupConfig(config_dir=config_dir, initial_rebalance_delay_ms=cfg.kafka_group_initial_rebalance_delay_ms,
                        node_id=node.node_id, host=node.host, port=port),
            routed, admit_group=ownership.refuse_kafka,
            partition_exists=lambda t, p: (lay := view.layout(t)) is not None and 0 <= p < lay.total,
            live_elsewhere=broker.consumers.is_live, on_group_deleted=broker.sub_groups.delete)
        producers = ProducerStateManager(config_dir, id_base=int(cfg.extra.get("kafkaProducerIdBase", 0)))
        producers.recover(broker.store.max_offset)
        broker.store.add_flush_hook(producers.sync_journal)     # the producer journal is durable before acks
        views = ViewRegistry(config_dir)
        txns = KafkaTxnCoordinator(broker, producers, config_dir)   # Kafka transactions on half messages
        env = KafkaEnv(broker=broker, node_id=node.node_id, host=node.host, port=port, producers=producers,
                       views=views, cluster=view, transactions=txns)
        groups.pending_txn_offset = txns.pending_offset
        attach_transactions(env, txns)
        sasl, scram, acls = _security(cfg, config_dir, port)
        tls = tls_settings(cfg.kafka_ssl_cert_file, cfg.kafka_ssl_key_file, cfg.kafka_ssl_key_password,
                           cfg.kafka_ssl_ca_file, cfg.kafka_ssl_client_auth)
        table = routes(KafkaServices(env, groups=groups, routed=routed, acls=acls, scram=scram, sasl=sasl is not None),
                       authorizer=Authz(acls, views) if acls is not None else None)
        server = KafkaServer(table, max_frame_bytes=cfg.kafka_max_frame_bytes,
                             sasl=(sasl.mechanisms, sasl.users) if sasl is not None else None,
                             tls=server_context(tls) if tls is not None else None, budget=budget,
                             max_unauthenticated_frame_bytes=cfg.kafka_sasl_max_receive_bytes)
        if sasl is not None:
            sasl.server = server
        state = KafkaState(broker.retention, acls, views, producers)
        if sasl is not None:
            users_file = state.users_file = Path(cfg.kafka_sasl_users)
            state.reload_users = lambda: sasl.replace(UserStore.load(users_file))
        return cls(cfg, server, listeners, view, groups, ownership, producers, txns, sasl, tls, state)

    async def run_services(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The coordinators' background loops (cancel the surrounding scope to stop them; their final
        saves run as they stop)."""
        async with trio.open_nursery() as inner:
            await inner.start(self.groups.run)
            inner.start_soon(self.view.run)
            await inner.start(self.producers.run)
            await inner.start(self.transactions.run)
            task_status.started()

    def start_watches(self, nursery: trio.Nursery) -> None:
        """Re-read the TLS files and the SASL users file when they change."""
        server, tls, sasl = self.server, self.tls, self.sasl
        if tls is not None:
            def use_tls(context: Any) -> None:
                server.tls = context
            nursery.start_soon(partial(watch_files, tls.files, partial(server_context, tls), use_tls,
                                       what="kafka TLS files", errors=(TlsConfigError,)))
            log.info("kafka.tls", cert=str(tls.cert_file), client_auth=tls.client_auth,
                     security_protocol="SASL_SSL" if sasl is not None else "SSL")
        if sasl is not None:
            users = Path(self.cfg.kafka_sasl_users)
            nursery.start_soon(partial(watch_files, [users], partial(UserStore.load, users), sasl.replace,
                                       what="kafka SASL users", errors=(SaslConfigError,)))

    def close(self) -> None:
        """Write the coordinators' final state (after their loops stopped)."""
        self.producers.close()
        self.groups.save()
        self.transactions.save()


class _LiveKafkaGroups:
    """Whether a group has live Kafka members (for ``GroupOwnership``; set once the coordinator exists)."""

    groups: GroupCoordinator | None = None

    def __call__(self, group: str) -> bool:
        return bool(self.groups and any(g.members for g in self.groups.describe([group])))


def _security(cfg: BrokerConfig, config_dir: Path,
              port: int) -> tuple[SaslUsers | None, ScramAdmin | None, AclStore | None]:
    """SASL users, their SCRAM admin (Kafka's admin APIs; without ACLs: super users or oneself) and
    the Kafka ACLs, from broker.conf."""
    configured = configure_sasl(cfg.kafka_sasl_mechanisms, cfg.kafka_sasl_users)
    supers = [u.strip() for u in cfg.kafka_super_users.split(";") if u.strip()]
    sasl = SaslUsers(*configured) if configured is not None else None
    scram = None
    if sasl is not None:
        scram = ScramAdmin(Path(cfg.kafka_sasl_users), lambda: sasl.users, sasl.replace,
                           None if cfg.kafka_acl_enable else supers)
    acls = acl_store(cfg, config_dir, supers) if cfg.kafka_acl_enable else None   # serve --brokers: one file
    if cfg.acl_enable and acls is None:
        log.warning("security.kafka_port_open", port=port, reason="aclEnable covers the RocketMQ ports only: "
                    "every Kafka client may read and write every topic; set kafkaAclEnable (and SASL or TLS)")
    if acls is not None:
        log.info("kafka.acl", acls=len(acls.all()), super_users=sorted(acls.super_users),
                 allow_everyone_if_no_acl_found=acls.allow_if_no_acl)
    return sasl, scram, acls
