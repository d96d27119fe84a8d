"""What a Kafka handler receives besides the request body, and what a route is.

Theory of operation
-------------------
Handlers (``rokka.gateway.kafka.handlers``), the authorizer (``authz``), the SASL layer (``sasl``)
and the registry (``apis``) all speak of one request context and one route; they live here, apart
from the trio server (``server``), so none of them imports the server module and the server is
only the glue that calls them.

* ``KafkaRequestContext`` - the request's header fields, the peer, the connection's scratch space
  (``conn_state``: the SASL session, the TLS principal, ``ON_CLOSE`` hooks) and the server.
* ``Route`` - one API as the server serves it: the bound handler, the versions it speaks, whether
  its answer is quick (held and sent with the next one, see ``server``) and whether it may be used
  before SASL authentication.  Routes are built from the registry (``apis.routes``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from rokka.gateway.kafka.codec.schema import Struct

__all__ = ["ON_CLOSE", "Handler", "KafkaRequestContext", "Route"]

#: ``conn_state`` key: callables (no arguments) run once when the connection ends.
ON_CLOSE = "on_close"


@dataclass
class KafkaRequestContext:
    """What a handler knows about the request besides its body."""

    peer: tuple[str, int]
    client_id: str
    api_key: int
    api_version: int
    correlation_id: int
    conn_state: dict[str, Any]  # per-connection scratch space (e.g. SASL state)
    server: Any                 # the KafkaServer serving the connection
    #: Called (no arguments) once this request's response has been sent, or right after the
    #: handler when there is none; an exception is logged, the connection goes on.
    after_response: list[Callable[[], None]] = field(default_factory=list)


Handler = Callable[[KafkaRequestContext, Struct], Awaitable[Any]]


@dataclass(frozen=True)
class Route:
    """One served API: ``handler`` for versions ``min_version``..``max_version`` (clipped to the
    codec's).  ``quick``: the handler answers at once (never parks), so its answer may wait for the
    next one of the same read; ``pre_auth``: allowed before SASL authentication."""

    handler: Handler
    min_version: int
    max_version: int
    quick: bool = False
    pre_auth: bool = False
