"""The Kafka API registry: one record per API, everything else about an API derives from it.

Theory of operation
-------------------
An API is described in three places only: its wire declaration (``codec/messages_*.py``: the
``Api(key, name, versions, request, response)`` schema), its handler (``handlers/*.py``, ``sasl``,
``scram_admin``) and its record here, an ``ApiSpec`` in ``REGISTRY``:

* ``key`` - the ``ApiKey`` member (Kafka's number);
* ``bind`` - how the handler is made from the broker's services (``KafkaServices``), or None when
  the server answers the API itself (ApiVersions); a binding returns None when a service it needs is
  absent (SCRAM admin without SASL, the group APIs without a coordinator), and the API is then not
  offered;
* ``versions`` - the versions the handler speaks (clipped to the codec's when advertised);
* ``authz`` - the check Kafka makes for this API under ACLs (a function of ``authz``: ``anyone``,
  ``super_only`` or the API's own adapter).  It is a required field: a record cannot be declared
  without saying who may call the API;
* ``quick`` - the handler answers at once (no long poll, no flush wait, no group barrier), so its
  answer may be held and sent with the next one of the same read (``server``): librdkafka sends its
  first Metadata requests back to back and retires the bootstrap connection once it has handled the
  first answer, so an answer that arrives apart is lost and asked again ~50 ms later;
* ``pre_auth`` - allowed before SASL authentication (ApiVersions and the two SASL APIs).

``routes(services, authorizer=...)`` turns the registry into the ``Route`` table the trio server
takes; ApiVersions is derived by the server from those routes, so only what is bound is advertised.
``QUICK_APIS``, ``PRE_AUTH_APIS`` and ``ADAPTERS`` are views of the registry for the tests and docs.
Each key appears once (``InitProducerId`` included: the transactional handler, which falls back to
the plain producer-id handler for idempotent producers).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from functools import partial
from typing import TYPE_CHECKING, Any

from rokka.gateway.kafka import authz as az
from rokka.gateway.kafka.acls import Op
from rokka.gateway.kafka.context import Handler, Route
from rokka.gateway.kafka.handlers import acl_api, alter_configs, fetch, group_api, log_dirs, metadata, produce, txn
from rokka.gateway.kafka.handlers.common import KafkaEnv, resolve
from rokka.gateway.kafka.sasl import handle_sasl_authenticate, handle_sasl_handshake
from rokka.gateway.kafka.scram_admin import ScramAdmin

if TYPE_CHECKING:
    from rokka.gateway.kafka.acls import AclStore
    from rokka.gateway.kafka.groups.coordinator import GroupCoordinator
    from rokka.gateway.kafka.routed_offsets import RoutedOffsets

__all__ = ["ADAPTERS", "PRE_AUTH_APIS", "QUICK_APIS", "REGISTRY", "SPECS", "ApiKey", "ApiSpec", "KafkaServices",
           "authorize_routes", "routes", "sasl_routes"]


class ApiKey(IntEnum):
    """Kafka's API keys that rokka serves (names as in Kafka's ``ApiKeys``)."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    INCREMENTAL_ALTER_CONFIGS = 44
    OFFSET_DELETE = 47
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66


@dataclass
class KafkaServices:
    """What the handlers are bound to (built once by the composition root, ``rokka.gateway.runtime``).

    ``env`` carries the broker, producer ids, transactions, views and the cluster view; ``groups`` is the
    group coordinator (None: no group APIs); ``routed`` its offsets store in a cluster; ``acls`` the
    Kafka ACLs (None: the ACL APIs answer SECURITY_DISABLED); ``scram`` the SCRAM admin (None: not
    offered); ``sasl`` whether the SASL APIs are offered."""

    env: KafkaEnv
    groups: GroupCoordinator | None = None
    routed: RoutedOffsets | None = None
    acls: AclStore | None = None
    scram: ScramAdmin | None = None
    sasl: bool = False

    def resolve_topic(self, topic: str) -> str:
        """The stored topic behind a Kafka name (a view's source)."""
        return resolve(self.env, topic)[0]


Bind = Callable[[KafkaServices], Handler | None]
Adapter = Callable[..., Any]


@dataclass(frozen=True)
class ApiSpec:
    """One API's record (see the module docstring); every field but the flags is required."""

    key: ApiKey
    bind: Bind | None
    versions: tuple[int, int]
    authz: Adapter
    quick: bool = False
    pre_auth: bool = False


def _env(fn: Callable[..., Any]) -> Bind:
    """A data-plane / admin handler taking the ``KafkaEnv`` first."""
    return lambda s: partial(fn, s.env)


def _groups(fn: Callable[..., Any], *needs: str) -> Bind:
    """A group handler: the coordinator first, then the named extras (``routed``, ``resolve``)."""
    def bind(s: KafkaServices) -> Handler | None:
        if s.groups is None:
            return None
        extra = {"routed": s.routed, "resolve": s.resolve_topic}
        return partial(fn, s.groups, *(extra[n] for n in needs))
    return bind


def _txns(fn: Callable[..., Any], *needs: str) -> Bind:
    """A transaction handler: its needs among ``env``, ``txns``, ``groups``, ``producers``, in order."""
    def bind(s: KafkaServices) -> Handler | None:
        have = {"env": s.env, "txns": s.env.transactions, "groups": s.groups, "producers": s.env.producers}
        if any(have[n] is None for n in needs):
            return None
        return partial(fn, *(have[n] for n in needs))
    return bind


def _if(flag: Callable[[KafkaServices], bool], handler: Handler) -> Bind:
    return lambda s: handler if flag(s) else None


def _scram(method: Callable[..., Any]) -> Bind:
    return lambda s: partial(method, s.scram) if s.scram is not None else None


_cluster_describe = partial(az.cluster_op, op=Op.DESCRIBE, refused=az.describe_acls_refused)
K = ApiKey

REGISTRY: tuple[ApiSpec, ...] = (
    # data plane
    ApiSpec(K.PRODUCE, _env(produce.handle_produce), (0, 9), az.produce),
    ApiSpec(K.FETCH, _env(fetch.handle_fetch), (4, 12), az.fetch),
    ApiSpec(K.LIST_OFFSETS, _env(fetch.handle_list_offsets), (1, 7), az.list_offsets, quick=True),
    ApiSpec(K.METADATA, _env(metadata.handle_metadata), (0, 12), az.metadata, quick=True),
    ApiSpec(K.OFFSET_FOR_LEADER_EPOCH, _env(fetch.handle_offset_for_leader_epoch), (0, 4),
            az.offset_for_leader_epoch, quick=True),
    ApiSpec(K.DELETE_RECORDS, _env(fetch.handle_delete_records), (0, 2), az.delete_records),
    # topics, configs, cluster
    ApiSpec(K.CREATE_TOPICS, _env(metadata.handle_create_topics), (0, 7), az.create_topics),
    ApiSpec(K.DELETE_TOPICS, _env(metadata.handle_delete_topics), (0, 5), az.delete_topics),
    ApiSpec(K.CREATE_PARTITIONS, _env(metadata.handle_create_partitions), (0, 3), az.create_partitions),
    ApiSpec(K.DESCRIBE_CONFIGS, _env(metadata.handle_describe_configs), (0, 4),
            partial(az.configs, op=Op.DESCRIBE_CONFIGS, field="results"), quick=True),
    ApiSpec(K.ALTER_CONFIGS, _env(alter_configs.handle_alter_configs), (0, 2),
            partial(az.configs, op=Op.ALTER_CONFIGS, field="responses")),
    ApiSpec(K.INCREMENTAL_ALTER_CONFIGS, _env(alter_configs.handle_incremental_alter_configs), (0, 1),
            partial(az.configs, op=Op.ALTER_CONFIGS, field="responses")),
    ApiSpec(K.DESCRIBE_CLUSTER, _env(metadata.handle_describe_cluster), (0, 1), az.describe_cluster, quick=True),
    ApiSpec(K.DESCRIBE_LOG_DIRS, _env(log_dirs.describe_log_dirs), (1, 5),
            partial(az.cluster_op, op=Op.DESCRIBE, refused=log_dirs.refused)),
    # consumer groups
    ApiSpec(K.FIND_COORDINATOR, _groups(txn.find_coordinator, "routed"), (0, 4), az.find_coordinator,
            quick=True),
    ApiSpec(K.JOIN_GROUP, _groups(group_api.join_group), (0, 7), az.group_read),
    ApiSpec(K.SYNC_GROUP, _groups(group_api.sync_group), (0, 5), az.group_read),
    ApiSpec(K.HEARTBEAT, _groups(group_api.heartbeat), (0, 4), az.group_read),
    ApiSpec(K.LEAVE_GROUP, _groups(group_api.leave_group), (0, 5), az.group_read),
    ApiSpec(K.OFFSET_COMMIT, _groups(group_api.offset_commit, "resolve", "routed"), (2, 8), az.offset_commit),
    ApiSpec(K.OFFSET_FETCH, _groups(group_api.offset_fetch, "resolve", "routed"), (1, 8), az.offset_fetch,
            quick=True),
    ApiSpec(K.DESCRIBE_GROUPS, _groups(group_api.describe_groups), (0, 5), az.describe_groups),
    ApiSpec(K.LIST_GROUPS, _groups(group_api.list_groups), (0, 4), az.list_groups),
    ApiSpec(K.DELETE_GROUPS, _groups(group_api.delete_groups, "routed"), (0, 2), az.delete_groups),
    ApiSpec(K.OFFSET_DELETE, _groups(group_api.offset_delete, "resolve", "routed"), (0, 0), az.offset_delete),
    # producer ids and transactions
    ApiSpec(K.INIT_PRODUCER_ID, _txns(txn.init_producer_id, "txns", "producers"), (0, 4), az.init_producer_id),
    ApiSpec(K.ADD_PARTITIONS_TO_TXN, _txns(txn.add_partitions_to_txn, "env", "txns"), (0, 3),
            az.add_partitions_to_txn),
    ApiSpec(K.ADD_OFFSETS_TO_TXN, _txns(txn.add_offsets_to_txn, "txns"), (0, 3), az.txn_write),
    ApiSpec(K.END_TXN, _txns(txn.end_txn, "txns"), (0, 3), az.txn_write),
    ApiSpec(K.TXN_OFFSET_COMMIT, _txns(txn.txn_offset_commit, "env", "txns", "groups"), (0, 3),
            az.txn_offset_commit),
    ApiSpec(K.DESCRIBE_PRODUCERS, _txns(txn.describe_producers, "env"), (0, 0), az.describe_producers),
    ApiSpec(K.DESCRIBE_TRANSACTIONS, _txns(txn.describe_transactions, "txns"), (0, 0), az.describe_transactions),
    ApiSpec(K.LIST_TRANSACTIONS, _txns(txn.list_transactions, "txns"), (0, 1), az.list_transactions),
    # security: ACLs, SCRAM users, SASL
    ApiSpec(K.DESCRIBE_ACLS, lambda s: partial(acl_api.describe_acls, s.acls), (1, 3), _cluster_describe),
    ApiSpec(K.CREATE_ACLS, lambda s: partial(acl_api.create_acls, s.acls), (1, 3),
            partial(az.cluster_op, op=Op.ALTER, refused=az.create_acls_refused)),
    ApiSpec(K.DELETE_ACLS, lambda s: partial(acl_api.delete_acls, s.acls), (1, 3),
            partial(az.cluster_op, op=Op.ALTER, refused=az.delete_acls_refused)),
    ApiSpec(K.DESCRIBE_USER_SCRAM_CREDENTIALS, _scram(ScramAdmin.describe), (0, 0), _cluster_describe),
    ApiSpec(K.ALTER_USER_SCRAM_CREDENTIALS, _scram(ScramAdmin.alter), (0, 0),
            partial(az.cluster_op, op=Op.ALTER, refused=az.alter_users_refused)),
    # v0 is advertised because librdkafka needs it to see SASL at all; a v0 handshake is refused
    ApiSpec(K.SASL_HANDSHAKE, _if(lambda s: s.sasl, handle_sasl_handshake), (0, 1), az.anyone, pre_auth=True),
    ApiSpec(K.SASL_AUTHENTICATE, _if(lambda s: s.sasl, handle_sasl_authenticate), (0, 2), az.anyone,
            pre_auth=True),
    # answered by the server itself, from the routes (what is bound is what is advertised)
    ApiSpec(K.API_VERSIONS, None, (0, 4), az.anyone, quick=True, pre_auth=True),
)

SPECS: dict[int, ApiSpec] = {spec.key: spec for spec in REGISTRY}
QUICK_APIS = frozenset(spec.key for spec in REGISTRY if spec.quick)
PRE_AUTH_APIS = frozenset(spec.key for spec in REGISTRY if spec.pre_auth)
#: api_key -> the authorization adapter of its record (``authz``)
ADAPTERS: dict[int, Adapter] = {spec.key: spec.authz for spec in REGISTRY}


def routes(services: KafkaServices, *, authorizer: az.Authz | None = None) -> dict[int, Route]:
    """The route table for ``KafkaServer``: every API whose handler can be bound from ``services``,
    each behind its authorization check when ``authorizer`` is given (ACLs on)."""
    out: dict[int, Route] = {}
    for spec in REGISTRY:
        handler = spec.bind(services) if spec.bind is not None else None
        if handler is not None:
            out[spec.key] = Route(handler, *spec.versions, quick=spec.quick, pre_auth=spec.pre_auth)
    return out if authorizer is None else authorize_routes(out, authorizer)


def sasl_routes() -> dict[int, Route]:
    """The SASL layer's two routes alone, for a server assembled by hand (tests, tools)."""
    sasl = (SPECS[K.SASL_HANDSHAKE], SPECS[K.SASL_AUTHENTICATE])
    return {spec.key: Route(handler, *spec.versions, pre_auth=True)
            for spec, handler in zip(sasl, (handle_sasl_handshake, handle_sasl_authenticate), strict=True)}


def authorize_routes(table: Mapping[int, Route], authorizer: az.Authz) -> dict[int, Route]:
    """The same routes, each behind its record's ``authz`` check (a key without a record: super users
    only, fail closed)."""
    out: dict[int, Route] = {}
    for key, route in table.items():
        spec = SPECS.get(key)
        check = spec.authz if spec is not None else az.super_only
        if check is az.anyone:
            out[key] = route
            continue
        out[key] = Route(partial(check, authorizer, route.handler), route.min_version, route.max_version,
                         quick=route.quick, pre_auth=route.pre_auth)
    return out
