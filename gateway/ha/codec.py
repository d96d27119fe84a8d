"""The RocketMQ 4.9 HA wire protocol, sans-IO (``HAService`` / ``HAConnection``).

Theory of operation
-------------------
One TCP connection per slave, opened by the slave to the master's
``haListenPort``; there is no handshake and no framing beyond fixed headers.

* Slave -> master: bare 8-byte big-endian longs, the slave's CommitLog max
  offset.  The first one is the *request offset* (where the master starts);
  every later one is an *ack* (what SYNC_MASTER waits for).  The master
  reads only the last whole long of what has arrived (``SlaveReports``).
* Master -> slave: frames ``[8-byte offset][4-byte size][size bytes]`` of
  raw CommitLog bytes, never crossing a CommitLog segment, at most
  ``haTransferBatchSize`` bytes; ``size == 0`` is a heartbeat, sent when the
  master has written nothing for ``haSendHeartbeatInterval``.
* A slave whose CommitLog is not empty closes the connection when a frame's
  offset is not its own max offset (``OffsetMismatch``); an empty slave
  accepts the first frame wherever it starts, because for a request offset
  of 0 the master starts at the beginning of its *last* CommitLog segment
  (``first_transfer_offset``).
* A master closes a slave whose ack is beyond the master's max offset.

Everything here is pure: feed bytes in, get values or frames out.  The
trio glue (master listener, slave client) lives beside it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

REPORT = struct.Struct(">q")
HEADER = struct.Struct(">qi")
HEADER_SIZE = HEADER.size          # 12, Java's ``8 + 4``
# The slave's read buffer in Java is 4 MiB; a frame larger than that could
# never be dispatched there, so a bigger size is a protocol error here too.
MAX_FRAME_BODY = 4 * 1024 * 1024 - HEADER_SIZE


class HAProtocolError(Exception):
    """The peer broke the HA protocol; the connection must be closed."""


class OffsetMismatch(HAProtocolError):
    """The master pushed bytes for an offset that is not the slave's max offset."""

    def __init__(self, slave_offset: int, master_offset: int) -> None:
        super().__init__(f"master pushed offset {master_offset}, slave max offset is {slave_offset}")
        self.slave_offset = slave_offset
        self.master_offset = master_offset


def encode_report(max_offset: int) -> bytes:
    """Slave -> master: the slave's CommitLog max offset."""
    if max_offset < 0:
        raise ValueError("an HA report offset is never negative")
    return REPORT.pack(max_offset)


def encode_header(offset: int, size: int) -> bytes:
    """Master -> slave: a frame header (``size`` 0 = heartbeat)."""
    if offset < 0 or not 0 <= size <= MAX_FRAME_BODY:
        raise ValueError(f"bad HA frame header offset={offset} size={size}")
    return HEADER.pack(offset, size)


def encode_frame(offset: int, data: bytes | memoryview) -> bytes:
    return encode_header(offset, len(data)) + bytes(data)


def first_transfer_offset(request_offset: int, master_max_offset: int, segment_size: int) -> int:
    """Where the master starts streaming to a slave that asked for ``request_offset``.

    Java: a request of 0 (an empty slave) starts at the beginning of the
    master's last CommitLog segment; anything else starts where asked.
    """
    if request_offset != 0:
        return request_offset
    start = master_max_offset - master_max_offset % segment_size
    return max(start, 0)


class SlaveReports:
    """Master side: the stream of 8-byte offsets a slave sends.

    ``feed`` returns the newest whole offset that arrived (or ``None``); a
    partial long waits for its remaining bytes.  ``request_offset`` is the
    first offset ever received, ``ack_offset`` the newest.
    """

    def __init__(self) -> None:
        self._pending = b""
        self.request_offset: int | None = None
        self.ack_offset: int = -1

    def feed(self, data: bytes) -> int | None:
        buf = self._pending + data
        whole = len(buf) - len(buf) % REPORT.size
        self._pending = buf[whole:]
        if whole == 0:
            return None
        (offset,) = REPORT.unpack_from(buf, whole - REPORT.size)
        if offset < 0:
            raise HAProtocolError(f"slave reported a negative offset {offset}")
        if self.request_offset is None:
            # Java takes the newest long of the first read as the request.
            self.request_offset = offset
        self.ack_offset = offset
        return offset


@dataclass(frozen=True)
class Transfer:
    """One master -> slave frame: ``data`` belongs at CommitLog ``offset`` (empty = heartbeat)."""

    offset: int
    data: bytes

    @property
    def heartbeat(self) -> bool:
        return not self.data


class TransferReader:
    """Slave side: split the master's stream into ``Transfer`` frames.

    ``feed(data, slave_max_offset)`` returns the complete frames in order.
    The header's offset is checked against ``slave_max_offset`` as soon as
    the header is whole (as Java does), and the expected offset then moves
    on by each frame's size, so several frames in one read are checked
    against where the previous ones leave the slave's CommitLog.
    """

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes, slave_max_offset: int) -> list[Transfer]:
        self._buf += data
        out: list[Transfer] = []
        expected = slave_max_offset
        pos = 0
        while len(self._buf) - pos >= HEADER_SIZE:
            offset, size = HEADER.unpack_from(self._buf, pos)
            if size < 0 or size > MAX_FRAME_BODY or offset < 0:
                raise HAProtocolError(f"bad HA frame header offset={offset} size={size}")
            if expected != 0 and offset != expected:
                raise OffsetMismatch(expected, offset)
            end = pos + HEADER_SIZE + size
            if len(self._buf) < end:
                break
            out.append(Transfer(offset, bytes(self._buf[pos + HEADER_SIZE:end])))
            pos = end
            if size or expected:
                expected = offset + size
        del self._buf[:pos]
        return out

    @property
    def buffered(self) -> int:
        return len(self._buf)
