"""Hostile values shared by the Kafka and RocketMQ frame generators: names, numbers, JSON, bombs.

Theory of operation
-------------------
Everything here is driven by one seeded ``random.Random`` (the generators pass theirs in), so a run is
reproducible from its seed.  Families (each can be switched off by the driver, see ``FAMILIES``):

* ``names``: topic / group / transactional-id candidates: valid ones from a small pool (so later requests
  hit what earlier ones created), the longest legal ones, over-long ones, reserved system names, odd bytes
  (control characters, lone surrogates, invalid UTF-8, separators used by the wire formats) and ``.``/``..``.
* ``traversal``: names that walk out of the store: ``..``, ``../commitlog``, ``g/../../../X``, and an
  absolute path.  The server under test runs as this user (often root), so every such name is vetted by
  ``Jail.safe``: it must resolve, whatever store subfolder it is joined to, inside the fuzz run's own
  jail directory, and an absolute path may only name the jail's canary.  No other frame may carry a ``/``
  (``frame_is_slash_free``): byte mutations never write one, so a flipped byte cannot make ``/`` of ``.``.
* ``numbers``: boundary integers (0, -1, int32/int64 limits, 2**64) and, for JSON, ``1e400``, ``-0``,
  ``NaN``, 10,000-digit literals.
* ``json``: whole remoting headers that are nested 10,000 deep, overflow, repeat keys, carry lone
  surrogates, a BOM, trailing garbage, or the wrong types.
* ``bombs``: zeros (or one huge record) compressed with gzip, zlib, lz4 frame, zstd and xerial snappy,
  built with streaming compressors so the generator never holds the inflated size itself; cached per
  (codec, size) because building one takes a second.
"""

from __future__ import annotations

import os
import random
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import cramjam

FAMILIES = ("valid", "names", "traversal", "numbers", "json", "bombs", "lengths", "mutate")
STORE_PREFIXES = ("", "%RETRY%", "%DLQ%", "consumequeue/", "index/", "config/", "consumequeue/x/")
INT32_MAX, INT32_MIN = 2**31 - 1, -(2**31)
INT64_MAX, INT64_MIN = 2**63 - 1, -(2**63)
BOUNDARY_INTS = (0, -1, 1, 2, 255, 256, 65535, 65536, INT32_MAX, INT32_MIN, INT32_MAX + 1, INT64_MAX, INT64_MIN,
                 2**64, -(2**64), 10**30)
JSON_NUMBERS = ("1e400", "-1e400", "-0", "0.5", "1E+2", "NaN", "Infinity", "-Infinity", "1" * 10_000,
                "-" + "9" * 5000, "0x10", "00012", "1.7976931348623157e309", '"10"', "null", "true", "[]", "{}")
ODD_PIECES = ("\x00", "\x01", "\x02", "\n", "\r\n", "\t", " ", "\x7f", "\u200b", "\ufeff", "\ud800", "\udfff",
              "é", "𝕏", "🙂", "\u202e", "%", ":", ";", ",", "|", "*", "?", "<", ">", '"', "'", "\\", "$", "{", "}",
              "#", "&", "=", "+", "@", "~", "`", "\u0301" * 50)
RESERVED = ("TBW102", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC",
            "RMQ_SYS_TRACE_TOPIC", "OFFSET_MOVED_EVENT", "SELF_TEST_TOPIC", "BenchmarkTest", "DefaultCluster",
            "__consumer_offsets", "__transaction_state", "%RETRY%", "%DLQ%", "%RETRY%fz-g", "%DLQ%fz-g",
            "rmq_sys_x", "CID_RMQ_SYS_TRANS", "TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "CON", "NUL", "lost+found")


@dataclass
class Jail:
    """The fuzz run's own directory tree: the server's data dir sits ``depth`` levels below ``root``.

    ``safe(name)`` is True when ``name`` joined to the data dir, or to any store subfolder (with the
    ``%RETRY%``/``%DLQ%`` prefixes the broker adds), stays inside ``root``; absolute names must be the
    canary.  Traversal names are built from ``max_up`` so they reach, at most, ``root``."""

    root: Path
    data_dir: Path
    canary: Path
    abs_canary: Path

    @property
    def max_up(self) -> int:
        return len(self.data_dir.relative_to(self.root).parts)

    def safe(self, name: str) -> bool:
        if "\x00" in name:
            return "/" not in name  # not a path at all (the OS refuses it)
        if name.startswith("/"):
            return os.path.normpath(name) in (str(self.abs_canary), str(self.canary))
        root = str(self.root)
        for prefix in STORE_PREFIXES:
            p = os.path.normpath(os.path.join(str(self.data_dir), prefix + name))
            if p != root and not p.startswith(root + os.sep):
                return False
        return True

    def traversal_names(self) -> list[str]:
        up = self.max_up  # from consumequeue/ (one below the data dir) this reaches the canaries' folder
        names = ["..", ".", "../commitlog", "../config", "../consumequeue", "./x", "../index", "a/../..",
                 "fz-t/../../commitlog", "g/" + "../" * (up + 1) + "escaped", "../" * up + "canary",
                 "../" * up + "abs-canary/keep", "../" * (up - 1) + "outside-x", str(self.abs_canary),
                 str(self.canary), "x/./y", "a//b", ".../x", "../" * up]
        return [n for n in names if self.safe(n)]


def make_jail(base: Path, depth: int = 6) -> Jail:
    """``base`` (empty, ours) becomes the jail: ``base/j1/../j{depth}/srv/data`` is the data dir; two canary
    directories (each with a file) sit in ``base/j1`` (where ``../`` x ``max_up`` from ``consumequeue/`` lands)."""
    srv = base.joinpath(*[f"j{i}" for i in range(1, depth + 1)], "srv")
    data = srv / "data"
    data.mkdir(parents=True)
    canary, abs_canary = base / "j1" / "canary", base / "j1" / "abs-canary"
    for d in (canary, abs_canary):
        d.mkdir()
        (d / "keep").write_text("canary\n")
    return Jail(root=base, data_dir=data, canary=canary, abs_canary=abs_canary)


def jail_intact(jail: Jail) -> list[str]:
    """What the server did outside its data dir: missing canaries, new entries anywhere in the jail."""
    problems = [f"canary {d} gone" for d in (jail.canary, jail.abs_canary) if not (d / "keep").exists()]
    expected = {jail.canary, jail.abs_canary, jail.canary / "keep", jail.abs_canary / "keep"}
    srv = jail.data_dir.parent
    expected.update(srv.parents)
    for dirpath, dirnames, filenames in os.walk(jail.root):
        here = Path(dirpath)
        if here == srv or srv in here.parents:
            dirnames[:] = []
            continue
        for n in dirnames + filenames:
            p = here / n
            if p not in expected and p != srv:
                problems.append(f"created outside the store: {p}")
    return problems[:50]


def frame_is_slash_free(frame: bytes) -> bool:
    low = frame.lower()
    return b"/" not in frame and b"u002f" not in low and b"\\x2f" not in low


def _surrogate(text: str) -> bool:
    return any(0xD800 <= ord(c) <= 0xDFFF for c in text)


@dataclass
class Hostile:
    rng: random.Random
    jail: Jail | None = None
    families: frozenset[str] = frozenset(FAMILIES)
    avoid: frozenset[str] = frozenset()  # known bugs not to trigger: "lone-surrogates"
    pool: list[str] = field(default_factory=lambda: [f"fz-t-{i}" for i in range(8)])
    groups: list[str] = field(default_factory=lambda: [f"fz-g-{i}" for i in range(4)])

    calm: bool = False  # set per frame by the generators: a calm frame is a valid request
    focus: str | None = None  # set per frame: the one hostile family of an otherwise valid frame

    def on(self, family: str) -> bool:
        if self.calm or family not in self.families:
            return False
        return self.focus is None or family == self.focus

    def new_frame(self, calm_share: float = 0.4, focus_share: float = 0.6) -> None:
        """Called by the generators before each frame: about ``calm_share`` of the frames are valid (so a
        connection gets past its first frame and deeper request paths are reached), most others carry
        one hostile family in an otherwise valid request (a bomb in a well-formed Produce, a traversal
        name in a well-formed delete), the rest mix every family."""
        r = self.rng
        self.calm = r.random() < calm_share
        hostile_families = sorted(self.families - {"valid"})
        self.focus = r.choice(hostile_families) if hostile_families and r.random() < focus_share else None

    # ----- names
    def name(self, kind: str = "topic", max_len: int = 249) -> str:
        """A name for a topic / group / id: mostly valid, else hostile (when the families are on)."""
        r = self.rng
        pool = self.groups if kind == "group" else self.pool
        roll = r.random()
        if self.on("traversal") and self.jail is not None and (self.focus == "traversal" or roll < 0.07):
            return r.choice(self.jail.traversal_names())
        if roll < 0.55 or not self.on("names"):
            return r.choice(pool)
        choice = r.randrange(9)
        if choice == 0:
            return "x" * r.choice((max_len, max_len + 1, 127, 128, 255, 256, 1000, 70_000))
        if choice == 1:
            return r.choice(RESERVED)
        if choice == 2:
            return r.choice(("", " ", ".", "..", "...", "....", ". .", "-", "_", "a" * 3 + "."))
        odd = ODD_PIECES if "lone-surrogates" not in self.avoid else [x for x in ODD_PIECES if not _surrogate(x)]
        if choice == 3:
            return "fz" + "".join(r.choice(odd) for _ in range(r.randrange(1, 6)))
        if choice == 4:
            return r.choice(pool) + r.choice(odd)
        if choice == 5:
            text = "".join(chr(r.randrange(0x20, 0x2FFFF)) for _ in range(r.randrange(1, 40))).replace("/", "_")
            return "".join("_" if _surrogate(c) else c for c in text) if "lone-surrogates" in self.avoid else text
        if choice == 6:
            return r.choice(("%RETRY%", "%DLQ%", "rmq_sys_", "__")) + r.choice(pool)
        if choice == 7:
            return r.choice(pool).upper()
        return r.choice(pool) + "-" + str(r.randrange(1000))

    def safe_name(self, kind: str = "topic", max_len: int = 249) -> str:
        for _ in range(20):
            n = self.name(kind, max_len)
            if "/" not in n and "\\u002f" not in n.lower() or (self.jail is not None and self.jail.safe(n)):
                return n
        return self.rng.choice(self.pool)

    # ----- numbers
    def int_value(self, normal: int, lo: int, hi: int) -> int:
        """``normal`` mostly; else a boundary (clamped to [lo, hi] so it still encodes)."""
        r = self.rng
        if not self.on("numbers") or r.random() < 0.7:
            return normal
        v = r.choice(BOUNDARY_INTS) if r.random() < 0.8 else r.randrange(lo, hi + 1)
        return max(lo, min(hi, v))

    def json_number(self) -> str:
        return self.rng.choice(JSON_NUMBERS)


# --------------------------------------------------------------------------- decompression bombs

def compress(codec: str, data: bytes) -> bytes:
    """A small ``data`` compressed with ``codec`` (not cached)."""
    if codec in ("gzip", "zlib"):
        c = zlib.compressobj(6, zlib.DEFLATED, 31 if codec == "gzip" else 15)
        return c.compress(data) + c.flush()
    if codec == "lz4":
        comp = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
        comp.compress(data)
        return bytes(comp.finish())
    if codec == "zstd":
        return bytes(cramjam.zstd.compress(data))
    raw = bytes(cramjam.snappy.compress_raw(data))
    return b"\x82SNAPPY\x00" + (1).to_bytes(4, "big") * 2 + len(raw).to_bytes(4, "big") + raw


_BOMB_CACHE: dict[tuple[str, int, bytes], bytes] = {}
_CHUNK = 1 << 20


def bomb(codec: str, inflated: int, prefix: bytes = b"") -> bytes:
    """``prefix`` then ``inflated`` zero bytes, compressed with ``codec`` (gzip, zlib, lz4, zstd, snappy:
    xerial framing as Kafka's Java client writes, snappy-raw), streaming (never ``inflated`` in memory)."""
    key = (codec, inflated, prefix)
    if key in _BOMB_CACHE:
        return _BOMB_CACHE[key]
    zeros = bytes(_CHUNK)
    chunks = [prefix] + [zeros] * (inflated // _CHUNK) + [bytes(inflated % _CHUNK)]
    if codec in ("gzip", "zlib"):
        c = zlib.compressobj(9, zlib.DEFLATED, 31 if codec == "gzip" else 15)
        out = b"".join(c.compress(ch) for ch in chunks) + c.flush()
    elif codec in ("lz4", "zstd"):
        comp = (cramjam.lz4.Compressor(content_checksum=False, block_linked=False) if codec == "lz4"
                else cramjam.zstd.Compressor(level=3))
        for ch in chunks:
            comp.compress(ch)
        out = bytes(comp.finish())
    elif codec == "snappy":
        block = bytes(cramjam.snappy.compress_raw(bytes(32 * 1024)))
        body = bytearray(b"\x82SNAPPY\x00" + (1).to_bytes(4, "big") * 2)
        first = bytes(cramjam.snappy.compress_raw(prefix)) if prefix else b""
        if first:
            body += len(first).to_bytes(4, "big") + first
        for _ in range(inflated // (32 * 1024)):
            body += len(block).to_bytes(4, "big") + block
        out = bytes(body)
    elif codec == "snappy-raw":
        out = bytes(cramjam.snappy.compress_raw(prefix + bytes(min(inflated, 64 << 20))))
    else:
        raise ValueError(codec)
    _BOMB_CACHE[key] = out
    return out


class FrameSource:
    """What both frame generators share: the run's ``Hostile`` (field ``h``), its random source, and
    the start of every frame (``new_frame``, then about 4 % of the frames with the lengths family on
    lie about their own length)."""

    h: Hostile

    @property
    def rng(self) -> random.Random:
        return self.h.rng

    def start_frame(self) -> bool:
        """Starts a frame; True when this one is to be a length lie."""
        self.h.new_frame()
        return self.h.on("lengths") and self.rng.random() < 0.04
