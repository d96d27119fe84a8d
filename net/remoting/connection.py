"""Sans-IO remoting connection: bytes in, ``RemotingCommand`` events out.

Theory of operation
-------------------
One ``RemotingConnection`` per TCP connection, used by both ends (the broker
and name server accept, the client connects; remoting is symmetric and full
duplex).  It owns:

* the frame decoder (length prefix checked against ``max_frame_bytes``
  before buffering);
* an opaque counter for requests *this side* starts (the broker's
  NOTIFY_CONSUMER_IDS_CHANGED, a client's SEND_MESSAGE ...);
* the set of opaques still awaiting a response.  ``receive_data`` returns
  every incoming request, and only those responses whose opaque is pending;
  stray responses are dropped and counted (clients do the same).

States: OPEN -> CLOSED on EOF (``receive_data(b"")``) or ``close()``;
OPEN -> ERROR when the peer breaks the protocol.  ``receive_data`` in ERROR
raises again; in CLOSED it returns ``[]``.  Callers must close the socket
after a ``RemoteProtocolError``.

Every decoded command is stamped with ``received_at`` (``time.monotonic()``
of the read that completed it): the broker measures a send's time in its
queue from there (``handlers/flow.py``).

Rules: requests are answered with ``encode_response`` (forces the request's
opaque, flag bit 0 and serialize type, and returns ``b""`` for oneway
requests, which must never be answered).
"""

from __future__ import annotations

import enum
import time

from rokka.net.remoting.codec.codes import FLAG_ONEWAY, FLAG_RESPONSE
from rokka.net.remoting.codec.errors import LocalProtocolError, RemoteProtocolError
from rokka.net.remoting.codec.remoting import (
    DEFAULT_MAX_FRAME_BYTES,
    FrameDecoder,
    RemotingCommand,
    decode_frame,
    encode_command,
)


class ConnectionState(enum.Enum):
    OPEN = "OPEN"
    CLOSED = "CLOSED"
    ERROR = "ERROR"


class RemotingConnection:
    """Sans-IO state of one remoting connection (either side)."""

    def __init__(self, *, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, first_opaque: int = 1) -> None:
        self._decoder = FrameDecoder(max_frame_bytes)
        self._next_opaque = first_opaque
        self._pending: set[int] = set()
        self.state = ConnectionState.OPEN
        self.error: RemoteProtocolError | None = None
        self.stray_responses = 0
        self.frames_in = 0
        self.frames_out = 0

    # -- incoming --------------------------------------------------------------
    def receive_data(self, data: bytes) -> list[RemotingCommand]:
        """Feed bytes; return complete requests and expected responses, in order.

        ``b""`` means EOF: the state becomes CLOSED; a partial frame left in the
        buffer is a protocol error.

        Raises:
            RemoteProtocolError: the peer broke framing or header rules.  The
                connection is now in ERROR; close it.
        """
        if self.state is ConnectionState.ERROR:
            assert self.error is not None
            raise self.error
        if self.state is ConnectionState.CLOSED:
            return []
        if not data:
            self.state = ConnectionState.CLOSED
            if self._decoder.buffered:
                return self._fail(RemoteProtocolError(
                    f"connection closed inside a frame ({self._decoder.buffered} bytes buffered)"))
            return []
        out: list[RemotingCommand] = []
        now = time.monotonic()      # when these frames were read: a send's time in the queue starts here
        try:
            payloads = self._decoder.split(data)
        except RemoteProtocolError as exc:
            return self._fail(exc)
        for payload in payloads:
            try:
                cmd = decode_frame(payload)
            except RemoteProtocolError as exc:
                return self._fail(exc)
            self.frames_in += 1
            cmd.received_at = now
            if cmd.flag & FLAG_RESPONSE:
                if cmd.opaque not in self._pending:
                    self.stray_responses += 1
                    continue
                self._pending.discard(cmd.opaque)
            out.append(cmd)
        return out

    def _fail(self, exc: RemoteProtocolError) -> list[RemotingCommand]:
        self.state = ConnectionState.ERROR
        self.error = exc
        raise exc

    @property
    def buffered(self) -> int:
        """Bytes of an unfinished frame held by the decoder."""
        return self._decoder.buffered

    # -- outgoing ----------------------------------------------------------------
    def next_opaque(self) -> int:
        opaque = self._next_opaque
        self._next_opaque = 1 if opaque >= 0x7FFFFFFF else opaque + 1
        return opaque

    def start_request(self, cmd: RemotingCommand, *, oneway: bool = False) -> bytes:
        """Assign a fresh opaque to ``cmd`` (mutated) and encode it.

        A two-way request's opaque is remembered until its response arrives or
        ``forget(opaque)`` is called (timeout).
        """
        self._check_open()
        cmd.opaque = self.next_opaque()
        cmd.flag = (cmd.flag & ~FLAG_RESPONSE & ~FLAG_ONEWAY) | (FLAG_ONEWAY if oneway else 0)
        data = encode_command(cmd)
        if not oneway:
            self._pending.add(cmd.opaque)
        self.frames_out += 1
        return data

    def forget(self, opaque: int) -> None:
        """Stop expecting a response for ``opaque`` (its waiter gave up)."""
        self._pending.discard(opaque)

    @property
    def pending(self) -> frozenset[int]:
        return frozenset(self._pending)

    def encode_response(self, request: RemotingCommand, response: RemotingCommand) -> bytes:
        """Encode ``response`` as the answer to ``request``; ``b""`` if the request was oneway."""
        if request.is_oneway:
            return b""
        response.opaque = request.opaque
        response.flag = (response.flag | FLAG_RESPONSE) & ~FLAG_ONEWAY
        response.serialize_type = request.serialize_type
        self.frames_out += 1
        return encode_command(response)

    def _check_open(self) -> None:
        if self.state is not ConnectionState.OPEN:
            raise LocalProtocolError(f"connection is {self.state.value}")

    def close(self) -> None:
        if self.state is ConnectionState.OPEN:
            self.state = ConnectionState.CLOSED
        self._pending.clear()
        self._decoder.clear()
