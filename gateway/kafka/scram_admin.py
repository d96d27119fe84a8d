"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51) over the SASL users file.

Theory of operation
-------------------
Offered when the Kafka port uses SASL (``kafkaSaslMechanisms`` + ``kafkaSaslUsers``).  Users
created through Kafka's admin APIs (``kafka-configs --alter --add-config 'SCRAM-SHA-256=[...]'``,
the clients' ``alter_user_scram_credentials``) are written to the users file's ``"scram"`` section
as Kafka stores them -- salt, iterations, stored key and server key, never the password (the client
sends the salted password) -- then the file is re-read and new connections use it at once.  Users
the operator wrote with a password in ``"users"`` stay the operator's: altering or deleting them
through the API is refused (edit the file).

Errors per user as Kafka's: an unknown mechanism UNSUPPORTED_SASL_MECHANISM; an empty name or an
iteration count outside 4096..16384 UNACCEPTABLE_CREDENTIAL; the same user and mechanism twice in a
request DUPLICATE_RESOURCE; deleting a credential that does not exist RESOURCE_NOT_FOUND.  A user
with an error is left unchanged; the others are applied.

Who may call: cluster DESCRIBE / ALTER under ``kafkaAclEnable`` (``rokka.gateway.kafka.authz``).
Without ACLs (``super_users`` given), Kafka would let any authenticated user change anyone's
credentials (no authorizer: everything allowed); rokka is stricter: the ``kafkaSuperUsers`` may
describe and alter every user, any other user only its own credentials (changing one's own
password); other users are answered CLUSTER_AUTHORIZATION_FAILED, per user, and logged.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import structlog
from rokka.core.storage.metafile import write_json_atomic
from rokka.gateway.kafka.codec import Struct
from rokka.gateway.kafka.context import KafkaRequestContext
from rokka.gateway.kafka.errors import ErrorCode as E
from rokka.gateway.kafka.sasl import SESSION, SaslConfigError, UserStore, stored_credential

__all__ = ["ScramAdmin"]

log = structlog.get_logger(__name__)

MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
MECHANISM_IDS = {v: k for k, v in MECHANISMS.items()}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384
UNSUPPORTED_SASL_MECHANISM, RESOURCE_NOT_FOUND = E.UNSUPPORTED_SASL_MECHANISM, E.RESOURCE_NOT_FOUND
DUPLICATE_RESOURCE, UNACCEPTABLE_CREDENTIAL = E.DUPLICATE_RESOURCE, E.UNACCEPTABLE_CREDENTIAL
CLUSTER_AUTHORIZATION_FAILED = E.CLUSTER_AUTHORIZATION_FAILED
NOT_YOURS = (CLUSTER_AUTHORIZATION_FAILED, "only kafkaSuperUsers may manage other users' credentials")


class ScramAdmin:
    """``super_users`` None: an authorizer guards the APIs; else no authorizer, and only these
    principals (``User:<name>``) may touch other users' credentials."""

    def __init__(self, path: Path, current: Callable[[], UserStore], apply: Callable[[UserStore], None],
                 super_users: Iterable[str] | None = None) -> None:
        self.path = path
        self.current = current
        self.apply = apply
        self.super_users = None if super_users is None else frozenset(super_users)

    def _may(self, ctx: KafkaRequestContext, user: str, *, quiet: bool = False) -> bool:
        """May the caller describe / alter ``user``'s credentials?"""
        if self.super_users is None:
            return True
        sasl = ctx.conn_state.get(SESSION)
        principal = str(sasl.principal) if sasl is not None and sasl.principal else "User:ANONYMOUS"
        if principal in self.super_users or principal == f"User:{user}":
            return True
        if not quiet:
            log.warning("kafka.scram_admin_denied", principal=principal, user=user, peer=ctx.peer[0])
        return False

    async def describe(self, ctx: KafkaRequestContext, req: Struct) -> Struct:
        known = self.current().mechanisms_of()
        if req.users is None:
            names = [n for n in sorted(known) if self._may(ctx, n, quiet=True)]
        else:
            names = [u.name for u in req.users]
        results = []
        for name in names:
            mechs = known.get(name)
            if not self._may(ctx, name):
                results.append(Struct(user=name, error_code=NOT_YOURS[0], error_message=NOT_YOURS[1],
                                      credential_infos=[]))
                continue
            if not mechs:
                results.append(Struct(user=name, error_code=RESOURCE_NOT_FOUND,
                                      error_message="Attempt to describe a user credential that does not exist",
                                      credential_infos=[]))
                continue
            results.append(Struct(user=name, error_code=0, error_message=None, credential_infos=[
                Struct(mechanism=MECHANISM_IDS[m], iterations=i) for m, i in sorted(mechs.items())]))
        return Struct(throttle_time_ms=0, error_code=0, error_message=None, results=results)

    async def alter(self, ctx: KafkaRequestContext, req: Struct) -> Struct:
        store = self.current()
        data = json.loads(self.path.read_text())
        scram: dict[str, dict[str, Any]] = data.setdefault("scram", {})
        errors: dict[str, tuple[int, str]] = {}
        seen: set[tuple[str, int]] = set()
        changes: list[tuple[str, str, Any]] = []       # (user, mechanism, entry or None = delete)
        for op, item in [("delete", d) for d in req.deletions] + [("upsert", u) for u in req.upsertions]:
            name, mech = item.name, MECHANISMS.get(item.mechanism)
            why = self._check(store, scram, op, item, mech, seen) if self._may(ctx, name) else NOT_YOURS
            seen.add((name, item.mechanism))
            if why is not None:
                errors.setdefault(name, why)
                continue
            assert mech is not None
            if op == "delete":
                changes.append((name, mech, None))
            else:
                cred = stored_credential(mech, bytes(item.salt), bytes(item.salted_password), item.iterations)
                changes.append((name, mech, {"salt": _b64(cred.salt), "iterations": cred.iterations,
                                             "stored_key": _b64(cred.stored_key), "server_key": _b64(cred.server_key)}))
        applied = [c for c in changes if c[0] not in errors]
        for name, mech, entry in applied:
            if entry is None:
                scram.get(name, {}).pop(mech, None)
                if not scram.get(name):
                    scram.pop(name, None)
            else:
                scram.setdefault(name, {})[mech] = entry
        if applied:
            write_json_atomic(self.path, data)
            try:
                self.apply(UserStore.load(self.path))
            except SaslConfigError as exc:      # cannot happen with what we wrote; keep the old users
                log.error("kafka.scram_users_not_reloaded", error=str(exc))
            log.info("kafka.scram_credentials_changed", peer=ctx.peer[0],
                     changes=[f"{'delete' if e is None else 'upsert'} {n} {m}" for n, m, e in applied])
        users = list(dict.fromkeys([i.name for i in req.deletions] + [i.name for i in req.upsertions]))
        return Struct(throttle_time_ms=0, results=[
            Struct(user=u, error_code=errors[u][0], error_message=errors[u][1]) if u in errors else
            Struct(user=u, error_code=0, error_message=None) for u in users])

    @staticmethod
    def _check(store: UserStore, scram: dict[str, Any], op: str, item: Any, mech: str | None,
               seen: set[tuple[str, int]]) -> tuple[int, str] | None:
        if not item.name:
            return UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
        if mech is None:
            return UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism {item.mechanism}"
        if (item.name, item.mechanism) in seen:
            return DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"
        if item.name in store.file_users:
            return UNACCEPTABLE_CREDENTIAL, (f"user {item.name} has a password in kafkaSaslUsers; change it there")
        if op == "delete":
            if mech not in scram.get(item.name, {}):
                return RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
            return None
        if not MIN_ITERATIONS <= item.iterations <= MAX_ITERATIONS:
            return UNACCEPTABLE_CREDENTIAL, (f"Iterations must be within {MIN_ITERATIONS}..{MAX_ITERATIONS} "
                                             f"for {mech}")
        if not item.salt or not item.salted_password:
            return UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty"
        return None


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode()
