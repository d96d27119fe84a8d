"""The ``checkpoint`` file (RocketMQ StoreCheckpoint layout, plus our offsets).

Theory of operation
-------------------
A 4 KiB file.  Bytes 0/8/16 are RocketMQ's physicMsgTimestamp,
logicsMsgTimestamp and indexMsgTimestamp (int64, big-endian), so a Java
tool reading it sees sensible values.  We add, after them::

    @24 physic_offset   int64  CommitLog bytes below this were fdatasync'ed
    @32 dispatch_offset int64  ConsumeQueue + index entries of every record
                               below this were fdatasync'ed
    @40 crc32 of bytes [0, 40)  (a torn checkpoint is detected, not trusted)

Written after the data it describes is durable ("append, fsync, then move
the checkpoint"), through a uniquely named temp file + rename, so the file is
never rewritten in place and two writers never share a temp file.  An unreadable checkpoint is reported and ignored:
recovery then scans the whole CommitLog, which is slower but safe.
"""

from __future__ import annotations

import os
import struct
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

FILE_SIZE = 4096
BODY = struct.Struct(">qqqqq")
CRC = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class Checkpoint:
    physic_msg_timestamp: int = 0
    logics_msg_timestamp: int = 0
    index_msg_timestamp: int = 0
    physic_offset: int = 0
    dispatch_offset: int = 0


def read_checkpoint(path: Path) -> Checkpoint | None:
    """The checkpoint, or None when missing or damaged (a damaged one is logged)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    if len(raw) < BODY.size + CRC.size or CRC.unpack_from(raw, BODY.size)[0] != zlib.crc32(raw[:BODY.size]):
        log.error("store.checkpoint_damaged_full_scan", path=str(path))
        return None
    return Checkpoint(*BODY.unpack_from(raw, 0))


def write_checkpoint(path: Path, cp: Checkpoint) -> None:
    body = BODY.pack(cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp,
                     cp.physic_offset, cp.dispatch_offset)
    data = body + CRC.pack(zlib.crc32(body))
    data += bytes(FILE_SIZE - len(data))
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".tmp.", dir=path.parent)
    try:
        try:
            os.fchmod(fd, 0o644)
            os.write(fd, data)
            os.fdatasync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
