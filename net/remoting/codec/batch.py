"""Batch message body (SEND_BATCH_MESSAGE, or SEND_MESSAGE with batch=true).

Theory of operation
-------------------
Layout of one element (reference section 5.6; Java
``MessageDecoder.encodeMessage`` / ``decodeMessages``)::

    +-----------+-------+--------+------+---------+------+---------+-------+
    | TOTALSIZE | MAGIC | BODYCRC| FLAG | BODYLEN | BODY | PROPLEN | PROPS |
    | int32     | int32 | int32  | int32| int32   | n    | int16   | p     |
    +-----------+-------+--------+------+---------+------+---------+-------+
    TOTALSIZE = 20 + n + 2 + p.  Clients write MAGIC = 0 and BODYCRC = 0.

The elements are concatenated with no count.  ``decode_batch`` checks every
length against the remaining bytes and raises ``BatchFormatError`` (a
``HeaderFieldError`` subclass, so an escaping error becomes SYSTEM_ERROR;
handlers should answer MESSAGE_ILLEGAL themselves).

Properties stay raw bytes here (``properties_raw``); the property string
format is defined once in ``rokka.core.record``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from rokka.net.remoting.codec.errors import HeaderFieldError

_HEAD = struct.Struct(">iiiii")  # totalsize, magic, bodycrc, flag, bodylen


class BatchFormatError(HeaderFieldError):
    """The batch body is malformed (answer MESSAGE_ILLEGAL)."""


@dataclass(frozen=True, slots=True)
class BatchElement:
    flag: int
    body: bytes
    properties_raw: bytes

    @property
    def properties(self) -> dict[str, str]:
        """Decoded properties (via ``rokka.core.record.decode_properties``)."""
        from rokka.core.record import decode_properties  # noqa: PLC0415

        return dict(decode_properties(self.properties_raw))


def decode_batch(body: bytes) -> list[BatchElement]:
    """Split a batch body into its elements.

    Raises:
        BatchFormatError: a length field is inconsistent with the bytes present.
    """
    out: list[BatchElement] = []
    pos, end = 0, len(body)
    while pos < end:
        if end - pos < _HEAD.size + 2:
            raise BatchFormatError(f"batch element at {pos} is truncated")
        total, _magic, _crc, flag, body_len = _HEAD.unpack_from(body, pos)
        if total < _HEAD.size + 2 or pos + total > end:
            raise BatchFormatError(f"batch element at {pos} has bad total size {total}")
        if body_len < 0 or _HEAD.size + body_len + 2 > total:
            raise BatchFormatError(f"batch element at {pos} has bad body length {body_len}")
        b0 = pos + _HEAD.size
        msg_body = body[b0:b0 + body_len]
        plen = struct.unpack_from(">h", body, b0 + body_len)[0]
        p0 = b0 + body_len + 2
        if plen < 0 or p0 + plen != pos + total:
            raise BatchFormatError(f"batch element at {pos} has bad properties length {plen}")
        out.append(BatchElement(flag=flag, body=msg_body, properties_raw=body[p0:p0 + plen]))
        pos += total
    return out


def encode_batch(elements: list[tuple[int, bytes, bytes]]) -> bytes:
    """Encode ``(flag, body, properties_raw)`` triples as a client would."""
    parts = []
    for flag, msg_body, props in elements:
        if len(props) > 0x7FFF:
            raise ValueError("properties longer than 32767 bytes")
        total = _HEAD.size + len(msg_body) + 2 + len(props)
        parts += [_HEAD.pack(total, 0, 0, flag, len(msg_body)), msg_body,
                  struct.pack(">h", len(props)), props]
    return b"".join(parts)
