"""The C index writer (``_cstore.index_insert``) writes the same IndexFile bytes as the Python one."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rokka.core.model import KeySpans
from rokka.core.storage import index as I
from rokka.core.storage.layout import NATIVE


def test_native_index_writer_is_built() -> None:
    assert NATIVE and I._cstore is not None


def _files(directory: Path) -> list[bytes]:
    return [p.read_bytes() for p in sorted(directory.iterdir())]


def _key_spans(keys: list[str], junk: bytes) -> KeySpans:
    """``keys`` as UTF-8 spans of one buffer, ``junk`` before each (as the Kafka mapper's properties)."""
    blob, spans = b"", b""
    for k in keys:
        raw = k.encode("utf-8")
        spans += struct.pack("=ii", len(blob) + len(junk), len(raw))
        blob += junk + raw
    return KeySpans(blob, spans)


@settings(max_examples=40, deadline=None)
@given(keys=st.lists(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20), min_size=1,
                     max_size=60),
       topic=st.sampled_from(["T", "TopicTest", "话题"]), slots=st.integers(1, 16), entries=st.integers(2, 25),
       ts=st.integers(0, 1 << 42), as_units=st.booleans(), as_spans=st.booleans(), junk=st.binary(max_size=3))
def test_put_keys_matches_put_batch(tmp_path_factory, keys: list[str], topic: str, slots: int,  # type: ignore[no-untyped-def]
                                    entries: int, ts: int, as_units: bool, as_spans: bool, junk: bytes) -> None:
    """``as_units``: the offsets handed over as the run's raw ConsumeQueue units (what ``dispatch_run``
    passes), read natively instead of from a list of int; ``as_spans``: the keys as UTF-8 spans of one
    buffer (``KeySpans``, what the Kafka mapper gives), hashed natively from the UTF-8."""
    base = tmp_path_factory.mktemp("idx")
    phys = [1000 + 97 * i + (i << 33) for i in range(len(keys))]
    units = b"".join(struct.pack(">qiq", p, 7, -3) for p in phys)
    native = I.IndexService(base / "n", slots, entries)
    python = I.IndexService(base / "p", slots, entries)
    try:
        for lo, hi in ((0, len(keys) // 2), (len(keys) // 2, len(keys))):   # two batches: state carries over
            given_keys: Sequence[str] = _key_spans(keys[lo:hi], junk) if as_spans else keys[lo:hi]
            assert list(given_keys) == keys[lo:hi]
            native.put_keys(topic, given_keys, units[lo * 20:hi * 20] if as_units else phys[lo:hi], ts + lo)
            python._put_batch_py([(topic, (k,), p, ts + lo) for k, p in zip(keys[lo:hi], phys[lo:hi], strict=True)])
        native.sync()
        python.sync()
        assert [(f.count, f.used_slots, f.begin_ts, f.end_ts, f.begin_phy, f.end_phy) for f in native.files] == \
            [(f.count, f.used_slots, f.begin_ts, f.end_ts, f.begin_phy, f.end_phy) for f in python.files]
        assert [bytes(f.mm) for f in native.files] == [bytes(f.mm) for f in python.files]
        for k in set(keys):
            assert native.lookup(topic, k, 1000, 0, 1 << 62) == python.lookup(topic, k, 1000, 0, 1 << 62)
    finally:
        native.close()
        python.close()


def test_put_keys_refuses_units_that_do_not_match_the_keys(tmp_path: Path) -> None:
    idx = I.IndexService(tmp_path / "i", 8, 16)
    try:
        for bad in (b"\0" * 19, b"\0" * 40):      # not whole units; one unit short
            try:
                idx.put_keys("T", ["a", "b", "c"], bad, 1)
            except ValueError:
                continue
            raise AssertionError(f"{len(bad)} bytes of units accepted for 3 keys")
    finally:
        idx.close()


def test_key_spans_outside_their_buffer_or_not_utf8_are_refused(tmp_path: Path) -> None:
    idx = I.IndexService(tmp_path / "i", 8, 16)
    try:
        cases = [(b"abc", struct.pack("=ii", 1, 3)), (b"abc", struct.pack("=ii", -1, 1)),
                 (b"abc", struct.pack("=ii", 4, 0)), (b"a\xff", struct.pack("=ii", 0, 2)),
                 (b"\xed\xa0\x80", struct.pack("=ii", 0, 3)), (b"\xc0\xaf", struct.pack("=ii", 0, 2)),
                 (b"\xe2\x82", struct.pack("=ii", 0, 2))]
        for blob, spans in cases:
            with pytest.raises(ValueError):
                idx.put_keys("T", KeySpans(blob, spans), [7], 1)
    finally:
        idx.close()


def test_a_bad_key_late_in_the_call_leaves_the_file_untouched(tmp_path: Path) -> None:
    """A bad key after 40 good ones (past the first prefetch window): refused before anything is written."""
    idx = I.IndexService(tmp_path / "i", 8, 64)
    try:
        idx.put_keys("T", ["first"], [1], 1)
        good = _key_spans([f"k{i}" for i in range(40)], b"")
        blob = bytes(good.raw.buffer) + b"\xff"
        spans = bytes(good.raw.spans) + struct.pack("=ii", len(blob) - 1, 1)
        before = bytes(idx.files[-1].mm)
        with pytest.raises(ValueError):
            idx.put_keys("T", KeySpans(blob, spans), list(range(41)), 1)
        assert idx.files[-1].count == 2 and bytes(idx.files[-1].mm) == before
    finally:
        idx.close()
