"""What the broker's background services use of it: ``ServicePorts``.

Theory of operation
-------------------
The delay scheduler (``core.delay``) and the transaction service (``core.txn``) re-put messages
through the broker's send pipeline and read the store, but they are built by the ``Broker`` and
must not reach into it: they get exactly these ports, and ``core.broker`` is the only module that
imports them (no import loop; a service is testable with any store and put function).

``put_prepared`` stores messages that already went through ``prepare`` (the broker's send rules)
and honours the flush policy; ``wait_durable(offset)`` returns once the CommitLog is on disk up to
``offset``, whatever the flush policy (and whether or not the broker's flush service runs).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rokka.core.arrivals import ArrivalHub
    from rokka.core.model import Message
    from rokka.core.offsets import OffsetStore
    from rokka.core.storage import MessageStore, PutResult


@dataclass(frozen=True, slots=True)
class ServicePorts:
    store: MessageStore
    offsets: OffsetStore
    arrivals: ArrivalHub
    prepare: Callable[[Message], Message]
    put_prepared: Callable[[Sequence[Message]], Awaitable[PutResult]]
    wait_durable: Callable[[int], Awaitable[None]]
    store_host: tuple[str, int]
