"""Protocol errors of the remoting codec.

Theory of operation
-------------------
As in h11, errors are split by who broke the protocol:

* ``RemoteProtocolError``: the peer sent bytes we cannot accept (garbage
  frame, oversized length prefix, bad header).  The connection that raised it
  is in the ERROR state and must be closed; ``hint`` says whether a response
  could still be answered (``None`` = just close, which is what RocketMQ's
  Netty decoder does).
* ``LocalProtocolError``: we tried to encode something the wire cannot carry
  (header over 16 MiB, frame too long).  A bug on our side.
* ``HeaderFieldError``: a request decoded fine but a typed header field is
  missing or malformed.  Handlers let it escape; the server answers
  ``hint`` (SYSTEM_ERROR) with ``str(exc)`` as the remark, the same shape as
  Java's RemotingCommandException.
"""

from __future__ import annotations

from rokka.net.remoting.codec.codes import ResponseCode


class RemotingProtocolError(Exception):
    """Base of all codec errors."""

    hint: ResponseCode | None = None


class RemoteProtocolError(RemotingProtocolError):
    """The peer violated the framing or header format; close the connection."""

    def __init__(self, msg: str, *, hint: ResponseCode | None = None) -> None:
        super().__init__(msg)
        self.hint = hint


class LocalProtocolError(RemotingProtocolError):
    """We were asked to encode something the protocol cannot carry."""


class HeaderFieldError(RemotingProtocolError):
    """A required extField is missing, or a typed field does not parse."""

    hint = ResponseCode.SYSTEM_ERROR
