"""A slave's copy of its master's Kafka state (beside SlaveSynchronize's topics, groups and offsets).

Theory of operation
-------------------
RocketMQ's SlaveSynchronize copies what RocketMQ clients need from a promoted slave
(``rokka.gateway.ha.sync``); a slave that takes over for Kafka clients needs rokka's Kafka state
too.  Every sync round (10 s) the slave asks its master with ``GET_KAFKA_STATE`` (9720, rokka's
own request code, answered by every rokka broker; an Apache RocketMQ master answers
REQUEST_CODE_NOT_SUPPORTED and the slave logs it once and goes on without it).  The answer's body
is a msgpack map:

* ``retention`` / ``configs``: the per-topic Kafka configs (``rokka.core.topic_retention``:
  retention.ms, retention.bytes, max.message.bytes, min.insync.replicas, cleanup.policy, ...);
* ``acls``: the Kafka ACL bindings (rows as stored), or nil when the master checks no Kafka ACLs;
* ``producerIds``: the end of the master's reserved producer id block; the slave hands out no id
  below it plus ``PRODUCER_ID_MARGIN`` (ids the master may reserve between two rounds), so a
  promoted slave never gives a new producer an id the master gave another;
* ``views``: the Kafka views (``rokka.compat.views``: name -> source topic, filter, filter type);
* ``users``: the bytes of the master's SASL users file (``kafkaSaslUsers``: passwords and SCRAM
  credentials), or nil when it has no SASL or the RocketMQ ACL is off (see below).

The slave makes its own copies equal (``KafkaState.apply``): the topic-config table and the views
adopted whole, the ACL table replaced, the users file rewritten atomically and reloaded at once - each only when it
differs, and each only where the slave has the feature on (a slave without ``kafkaAclEnable``
keeps no ACL table; one without SASL writes no users file), so a promoted slave authenticates,
authorizes and applies topic configs as its master did as of the last round.  A request from a
client that is not a broker is refused when the RocketMQ ACL is on (``brokers_only``).  The users
file travels only then (the request is signed with the brokers' own account): without the
RocketMQ ACL anyone could ask for it, so give the slave the same users file by hand.

Not copied: the idempotent sequences per partition (a producer unknown to the new master is taken at
any sequence, so a batch retried across the failover may be stored twice), open transactions and
group membership (members join the new coordinator again; committed offsets already travel with the
RocketMQ consumer offsets).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack
import structlog
from rokka.compat.views import KafkaView, ViewRegistry
from rokka.core.storage.metafile import write_bytes_atomic
from rokka.core.topic_retention import TopicRetention
from rokka.gateway.kafka.acls import Acl, AclStore
from rokka.gateway.kafka.producers.state import ProducerStateManager
from rokka.net.remoting.codec.codes import ResponseCode
from rokka.net.remoting.codec.remoting import RemotingCommand

log = structlog.get_logger(__name__)

GET_KAFKA_STATE = 9720
PRODUCER_ID_MARGIN = 100_000


@dataclass
class KafkaState:
    """The Kafka state of one broker that a slave copies (module docstring)."""

    retention: TopicRetention
    acls: AclStore | None = None
    views: ViewRegistry | None = None
    producers: ProducerStateManager | None = None
    users_file: Path | None = None                      # the SASL users file (None: no SASL)
    reload_users: Callable[[], None] | None = None      # re-read it after a rewrite

    def body(self, with_users: bool) -> bytes:
        retention_ms, configs = self.retention.snapshot()
        users = None
        if with_users and self.users_file is not None:
            try:
                users = self.users_file.read_bytes()
            except OSError as exc:
                log.warning("kafka.state_users_unreadable", file=str(self.users_file), error=str(exc))
        acls = [list(_row(a)) for a in self.acls.all()] if self.acls is not None else None
        views = ({n: [v.topic, v.expression, v.expression_type] for n, v in self.views.all().items()}
                 if self.views is not None else None)
        return msgpack.packb({"retention": retention_ms, "configs": configs, "acls": acls, "users": users,
                              "views": views,
                              "producerIds": self.producers.reserved_until if self.producers is not None else None},
                             use_bin_type=True)

    def apply(self, body: bytes) -> int:
        """Adopt a master's ``body``; returns how many parts changed (module docstring)."""
        data = msgpack.unpackb(body, raw=False, strict_map_key=False)
        if not isinstance(data, dict):
            raise ValueError("GET_KAFKA_STATE body is not a map")
        changed = 0
        retention = {str(t): int(ms) for t, ms in (data.get("retention") or {}).items()}
        configs = {str(t): {str(k): str(v) for k, v in c.items()} for t, c in (data.get("configs") or {}).items()}
        changed += self.retention.adopt(retention, configs)
        rows = data.get("acls")
        if self.acls is not None and rows is not None and self.acls.replace(Acl.from_row(r) for r in rows):
            log.info("kafka.state_acls_adopted", acls=len(rows))
            changed += 1
        views = data.get("views")
        if self.views is not None and isinstance(views, dict):
            changed += self.views.adopt({str(n): KafkaView(str(n), str(v[0]), str(v[1]), str(v[2]))
                                         for n, v in views.items()})
        ids = data.get("producerIds")
        floor = ids + PRODUCER_ID_MARGIN if isinstance(ids, int) else 0
        if self.producers is not None and floor and self.producers.skip_ids_below(floor):
            log.info("kafka.state_producer_ids_adopted", next_id=floor)
            changed += 1
        users = data.get("users")
        if self.users_file is not None and isinstance(users, bytes) and _differs(self.users_file, users):
            write_bytes_atomic(self.users_file, users, backup=False)
            if self.reload_users is not None:
                self.reload_users()
            log.info("kafka.state_users_adopted", file=str(self.users_file))
            changed += 1
        return changed


def _row(a: Acl) -> tuple[Any, ...]:
    return (a.resource_type, a.name, a.pattern, a.principal, a.host, a.operation, a.permission)


def _differs(path: Path, data: bytes) -> bool:
    try:
        return path.read_bytes() != data
    except OSError:
        return True


def state_handler(state: KafkaState, acl: Any = None) -> Callable[[Any, RemotingCommand], Any]:
    """The master's GET_KAFKA_STATE handler (behind ``brokers_only`` when the RocketMQ ACL is on; the
    users file is sent only then)."""
    from rokka.gateway.kafka.txn.participants import brokers_only

    async def get_kafka_state(channel: Any, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.make_response(ResponseCode.SUCCESS, body=state.body(with_users=acl is not None))

    return get_kafka_state if acl is None else brokers_only(acl, get_kafka_state)
