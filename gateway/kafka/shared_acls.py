"""Kafka ACLs stored once for the brokers of one machine (``rokka serve --brokers N``).

Theory of operation
-------------------
A broker keeps its Kafka ACLs in its own store (``<store>/config/kafkaAcls.msgpack``,
``rokka.gateway.kafka.acls``).  The brokers of ``rokka serve --brokers N`` share one file instead,
``<data-dir>/cluster/kafkaAcls.msgpack``: the supervisor starts each broker with
``--shared-config-dir <data-dir>/cluster`` (``BrokerConfig.extra["kafkaSharedConfigDir"]``) and
``acl_store`` then builds a ``SharedAclStore`` on it.

* **Reads.**  A decision or a listing first re-reads the file when its (inode, size, mtime)
  changed (one ``stat``, about a microsecond, per decision; ``CHECK_S`` can space the checks):
  an ACL created or deleted through one broker applies on every broker from the moment
  CreateAcls / DeleteAcls is answered (the file is replaced before the answer, atomically, so no
  broker ever decides on a half-written file).
* **Writes.**  CreateAcls / DeleteAcls on any broker are a read-modify-write under an exclusive
  ``flock`` on ``kafkaAcls.lock`` beside the file, re-reading it first, so two brokers changing
  ACLs at the same moment never lose one another's change.

The file is the one of a single broker, so moving from ``--brokers 1`` to N means copying
``<data-dir>/config/kafkaAcls.msgpack`` to ``<data-dir>/cluster/``.  Brokers on other machines
(``rokka broker`` by hand) keep their own ACLs unless they share the directory.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import structlog
from rokka.core.config import BrokerConfig
from rokka.gateway.kafka.acls import FILE_NAME, Acl, AclFilter, AclStore

log = structlog.get_logger(__name__)

SHARED_DIR_KEY = "kafkaSharedConfigDir"
CHECK_S = 0.0     # seconds between two checks of the file (0: every decision)
LOCK_NAME = "kafkaAcls.lock"


def acl_store(cfg: BrokerConfig, config_dir: Path, super_users: Iterable[str]) -> AclStore:
    """This broker's ACL store: the cluster's shared file when the supervisor gave one, else its own."""
    shared = cfg.extra.get(SHARED_DIR_KEY)
    allow = cfg.kafka_allow_everyone_if_no_acl_found
    if shared:
        return SharedAclStore(Path(shared), super_users=super_users, allow_if_no_acl=allow)
    return AclStore(config_dir, super_users=super_users, allow_if_no_acl=allow)


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


class SharedAclStore(AclStore):
    """``AclStore`` on a file several broker processes share; see the module docstring."""

    def __init__(self, directory: Path, *, super_users: Iterable[str] = (), allow_if_no_acl: bool = False) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._dir = directory
        self._file = directory / FILE_NAME
        self._seen = _signature(self._file)
        self._checked = time.monotonic()
        super().__init__(directory, super_users=super_users, allow_if_no_acl=allow_if_no_acl)

    def _reload(self) -> None:
        self._checked = time.monotonic()
        sig = _signature(self._file)
        if sig == self._seen:
            return
        fresh = AclStore(self._dir, super_users=self.super_users, allow_if_no_acl=self.allow_if_no_acl)
        before = len(self._acls)
        self._acls = fresh._acls
        self._seen = sig
        log.info("kafka.acl_reloaded", file=str(self._file), acls=len(self._acls), before=before)

    def _fresh(self) -> None:
        if time.monotonic() - self._checked >= CHECK_S:
            self._reload()

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with open(self._dir / LOCK_NAME, "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                self._reload()
                yield
                self._seen = _signature(self._file)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def all(self) -> list[Acl]:
        self._fresh()
        return super().all()

    def matching(self, f: AclFilter) -> list[Acl]:
        self._fresh()
        return super().matching(f)

    def allowed(self, principal: str, host: str, resource_type: int, name: str, op: int) -> bool:
        self._fresh()
        return super().allowed(principal, host, resource_type, name, op)

    def add(self, acls: Iterable[Acl]) -> None:
        with self._locked():
            super().add(acls)

    def delete(self, f: AclFilter) -> list[Acl]:
        with self._locked():
            return super().delete(f)

    def replace(self, acls: Iterable[Acl]) -> bool:
        with self._locked():
            return super().replace(acls)
