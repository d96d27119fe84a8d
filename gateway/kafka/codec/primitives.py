"""Kafka wire primitives: fixed-width ints, varints, strings, bytes, uuids.

Theory of operation
-------------------
``Reader`` walks an immutable ``bytes`` buffer with an explicit position; every
read checks that enough bytes remain and raises ``DecodeError`` otherwise, so a
truncated or garbage frame can never index past its end or allocate a length
it read from the wire without first checking that the bytes exist.

Writers are plain functions appending to a ``bytearray``; they raise
``EncodeError`` when a value does not fit its wire type (a bug on our side).

Two varint families exist (kafka-wire.md §1.2):

* unsigned varints (7 bits per byte, LSB group first) are used by flexible
  protocol messages for lengths, counts and tags;
* zig-zag signed varint/varlong are used only inside v2 record batches.

Compact strings/bytes/arrays encode ``length + 1`` as an unsigned varint, with
0 meaning null; classic ones use an int16 (strings) or int32 (bytes, arrays)
length with -1 meaning null.

Gathered output: a ``Gather`` is a ``bytearray`` that ``write_bytes`` does not
copy large values into: it notes (position, buffer) and ``parts()`` hands the
bytes back as a list of buffers in order, for one ``sendmsg`` (scatter/gather)
instead of a copy of every record batch into the frame.  A bytes value may also
be ``Pieces`` (buffers that form one value back to back: a batch header and the
records it wraps).  Into a plain ``bytearray`` both are copied as usual.
"""

from __future__ import annotations

import struct
import uuid

__all__ = [
    "DecodeError",
    "EncodeError",
    "Reader",
    "ZERO_UUID",
    "write_int8",
    "write_int16",
    "write_int32",
    "write_int64",
    "write_uint16",
    "write_uint32",
    "write_float64",
    "write_bool",
    "write_uvarint",
    "write_varint",
    "write_varlong",
    "uvarint_size",
    "varint_size",
    "zigzag32",
    "zigzag64",
    "write_string",
    "write_bytes",
    "write_uuid",
    "Gather",
    "Pieces",
]

#: Values at least this long are referenced by a ``Gather``, not copied into it.
GATHER_MIN = 8192


class Pieces:
    """Buffers that form one bytes value back to back; ``len`` is their total length."""

    __slots__ = ("parts", "nbytes")

    def __init__(self, parts: list[bytes | memoryview]) -> None:
        self.parts = parts
        self.nbytes = sum(len(x) for x in parts)

    def __len__(self) -> int:
        return self.nbytes

    def __bytes__(self) -> bytes:
        return b"".join(self.parts)


class Gather(bytearray):
    """An output buffer that keeps large values by reference (see the module doc).

    ``nbytes()`` is the length of the whole output; ``parts()`` the output as buffers, in order.
    Nothing may be written into it once ``parts()`` was taken (the views pin its size)."""

    def __init__(self, initial: bytes = b"") -> None:
        super().__init__(initial)
        self.spliced: list[tuple[int, bytes | memoryview]] = []
        self.spliced_bytes = 0

    def splice(self, v: bytes | memoryview) -> None:
        self.spliced.append((len(self), v))
        self.spliced_bytes += len(v)

    def nbytes(self) -> int:
        return len(self) + self.spliced_bytes

    def parts(self) -> list[bytes | memoryview]:
        if not self.spliced:
            return [self]
        out: list[bytes | memoryview] = []
        view, pos = memoryview(self), 0
        for at, v in self.spliced:
            if at > pos:
                out.append(view[pos:at])
                pos = at
            out.append(v)
        if pos < len(self):
            out.append(view[pos:])
        return out

ZERO_UUID = uuid.UUID(int=0)

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")


class DecodeError(ValueError):
    """The bytes do not form a valid value of the expected type (peer's fault)."""


class EncodeError(ValueError):
    """A value cannot be written as the requested wire type (our bug)."""


class Reader:
    """Cursor over a bytes buffer.  All reads raise DecodeError on truncation."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: bytes, pos: int = 0, end: int | None = None) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf) if end is None else end

    def remaining(self) -> int:
        return self.end - self.pos

    def _need(self, n: int) -> int:
        p = self.pos
        if n < 0 or p + n > self.end:
            raise DecodeError(f"truncated: need {n} bytes at offset {p}, have {self.end - p}")
        self.pos = p + n
        return p

    def read_raw(self, n: int) -> bytes:
        p = self._need(n)
        return self.buf[p : p + n]

    def int8(self) -> int:
        return _I8.unpack_from(self.buf, self._need(1))[0]  # type: ignore[no-any-return]

    def int16(self) -> int:
        return _I16.unpack_from(self.buf, self._need(2))[0]  # type: ignore[no-any-return]

    def uint16(self) -> int:
        return _U16.unpack_from(self.buf, self._need(2))[0]  # type: ignore[no-any-return]

    def int32(self) -> int:
        return _I32.unpack_from(self.buf, self._need(4))[0]  # type: ignore[no-any-return]

    def uint32(self) -> int:
        return _U32.unpack_from(self.buf, self._need(4))[0]  # type: ignore[no-any-return]

    def int64(self) -> int:
        return _I64.unpack_from(self.buf, self._need(8))[0]  # type: ignore[no-any-return]

    def float64(self) -> float:
        return _F64.unpack_from(self.buf, self._need(8))[0]  # type: ignore[no-any-return]

    def boolean(self) -> bool:
        b = self.buf[self._need(1)]
        if b > 1:
            raise DecodeError(f"invalid boolean byte {b}")
        return b == 1

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.read_raw(16))

    def uvarint(self, max_bytes: int = 5) -> int:
        """Unsigned varint (up to 5 bytes = 32 bits by default, 10 for 64 bits)."""
        pos = self.pos
        if pos < self.end:         # one byte (< 128): every compact length and tag count of a usual request
            b = self.buf[pos]
            if b < 0x80:
                self.pos = pos + 1
                return b  # type: ignore[no-any-return]
        result = 0
        shift = 0
        for _ in range(max_bytes):
            b = self.buf[self._need(1)]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
        raise DecodeError("varint too long")

    def varint(self) -> int:
        """Zig-zag signed 32-bit varint."""
        n = self.uvarint(5)
        if n > 0xFFFFFFFF:
            raise DecodeError("varint out of range")
        return (n >> 1) ^ -(n & 1)

    def varlong(self) -> int:
        """Zig-zag signed 64-bit varint."""
        n = self.uvarint(10)
        if n > 0xFFFFFFFFFFFFFFFF:
            raise DecodeError("varlong out of range")
        return (n >> 1) ^ -(n & 1)

    def _length(self, compact: bool, classic16: bool) -> int:
        """Decoded length, -1 for null."""
        if compact:
            return self.uvarint() - 1
        return self.int16() if classic16 else self.int32()

    def string(self, compact: bool) -> str | None:
        n = self._length(compact, True)
        if n < -1:
            raise DecodeError(f"negative string length {n}")
        if n == -1:
            return None
        try:
            return self.read_raw(n).decode("utf-8")
        except UnicodeDecodeError as e:
            raise DecodeError(f"string is not UTF-8: {e}") from None

    def bytes_(self, compact: bool) -> bytes | None:
        n = self._length(compact, False)
        if n < -1:
            raise DecodeError(f"negative bytes length {n}")
        return None if n == -1 else self.read_raw(n)

    def array_len(self, compact: bool) -> int:
        """Element count, -1 for null.  Bounded by the bytes left (each element >= 1 byte... or 0)."""
        n = self._length(compact, False)
        if n < -1:
            raise DecodeError(f"negative array length {n}")
        return n


def write_int8(out: bytearray, v: int) -> None:
    out += _I8.pack(v)


def write_int16(out: bytearray, v: int) -> None:
    out += _I16.pack(v)


def write_uint16(out: bytearray, v: int) -> None:
    out += _U16.pack(v)


def write_int32(out: bytearray, v: int) -> None:
    out += _I32.pack(v)


def write_uint32(out: bytearray, v: int) -> None:
    out += _U32.pack(v)


def write_int64(out: bytearray, v: int) -> None:
    out += _I64.pack(v)


def write_float64(out: bytearray, v: float) -> None:
    out += _F64.pack(v)


def write_bool(out: bytearray, v: bool) -> None:
    out.append(1 if v else 0)


def write_uuid(out: bytearray, v: uuid.UUID) -> None:
    out += v.bytes


def write_uvarint(out: bytearray, n: int) -> None:
    if n < 0:
        raise EncodeError(f"unsigned varint cannot hold {n}")
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def uvarint_size(n: int) -> int:
    size = 1
    while n >= 0x80:
        n >>= 7
        size += 1
    return size


def zigzag32(v: int) -> int:
    if not -(2**31) <= v < 2**31:
        raise EncodeError(f"varint out of range: {v}")
    return ((v << 1) ^ (v >> 31)) & 0xFFFFFFFF


def zigzag64(v: int) -> int:
    if not -(2**63) <= v < 2**63:
        raise EncodeError(f"varlong out of range: {v}")
    return ((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF


def write_varint(out: bytearray, v: int) -> None:
    write_uvarint(out, zigzag32(v))


def write_varlong(out: bytearray, v: int) -> None:
    write_uvarint(out, zigzag64(v))


def varint_size(v: int) -> int:
    return uvarint_size(zigzag64(v))


def _write_length(out: bytearray, n: int, compact: bool, classic16: bool) -> None:
    if compact:
        write_uvarint(out, n + 1)
    elif classic16:
        write_int16(out, n)
    else:
        write_int32(out, n)


def write_string(out: bytearray, v: str | None, compact: bool) -> None:
    if v is None:
        _write_length(out, -1, compact, True)
        return
    data = v.encode("utf-8")
    if not compact and len(data) > 0x7FFF:
        raise EncodeError("string longer than 32767 bytes")
    _write_length(out, len(data), compact, True)
    out += data


def write_bytes(out: bytearray, v: bytes | Pieces | None, compact: bool) -> None:
    if v is None:
        _write_length(out, -1, compact, False)
        return
    _write_length(out, len(v), compact, False)
    gather = type(out) is Gather
    for x in (v.parts if type(v) is Pieces else (v,)):
        if gather and len(x) >= GATHER_MIN:
            out.splice(x)   # type: ignore[attr-defined]
        else:
            out += x


def write_array_len(out: bytearray, n: int, compact: bool) -> None:
    _write_length(out, n, compact, False)
