"""Byte-level mutations of an encoded frame (the last stage of the fuzzer's generators).

Theory of operation
-------------------
``mutate_bytes`` applies one to three edits from a small menu: flip a bit, set a byte to a boundary value,
overwrite a 2/4-byte window with a boundary integer (often hitting a length or count), truncate, cut a
chunk out, duplicate a chunk, insert random bytes, or rewrite the frame's own length prefix (at the given
offsets) to a lie.  Writes of ``/`` are replaced by ``_``: the server may run as root and turn a mutated
name into a path (see ``hostile.Jail``).
"""

from __future__ import annotations

import random
import struct

BOUNDARY_BYTES = (0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF, 0x22, 0x5C, 0x7B, 0x7D, 0x5B, 0x5D, 0x2C, 0x3A)
BOUNDARY_WORDS = (0, 1, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0x10000)


def _clean(data: bytes) -> bytes:
    return data.replace(b"/", b"_")


def mutate_bytes(r: random.Random, frame: bytes, length_offsets: tuple[int, ...] = ()) -> bytes:
    b = bytearray(frame)
    for _ in range(r.choice((1, 1, 2, 3))):
        if not b:
            break
        op = r.randrange(9)
        i = r.randrange(len(b))
        if op == 0:
            b[i] ^= 1 << r.randrange(8)
            if b[i] == 0x2F:
                b[i] = 0x5F
        elif op == 1:
            b[i] = r.choice(BOUNDARY_BYTES)
        elif op == 2 and len(b) >= 4:
            i = r.randrange(len(b) - 3)
            w = r.choice(BOUNDARY_WORDS)
            word = struct.pack(">I", w)
            b[i:i + 4] = _clean(word) if r.random() < 0.5 else _clean(word[2:]) + b[i + 2:i + 4]
        elif op == 3:
            del b[r.randrange(len(b)):]
        elif op == 4:
            j = min(len(b), i + r.randrange(1, 64))
            del b[i:j]
        elif op == 5:
            j = min(len(b), i + r.randrange(1, 256))
            b[i:i] = b[i:j] * r.choice((1, 2, 16))
        elif op == 6:
            b[i:i] = _clean(r.randbytes(r.randrange(1, 32)))
        elif op == 7 and length_offsets:
            off = r.choice(length_offsets)
            if off + 4 <= len(b):
                lie = r.choice((len(b) - off - 4 + r.randrange(-8, 9), 0x7FFFFFFF, 0, 2**31, 0xFFFFFFFF))
                b[off:off + 4] = _clean(struct.pack(">I", lie & 0xFFFFFFFF))
        else:
            b[i] = r.randrange(256)
            if b[i] == 0x2F:
                b[i] = 0x5F
    return bytes(b)
