"""The C index writer (``_cstore.index_insert``) writes the same IndexFile bytes as the Python one."""

from __future__ import annotations

import struct
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from rokka.core.storage import index as I
from rokka.core.storage.layout import NATIVE


def test_native_index_writer_is_built() -> None:
    assert NATIVE and I._cstore is not None


def _files(directory: Path) -> list[bytes]:
    return [p.read_bytes() for p in sorted(directory.iterdir())]


@settings(max_examples=40, deadline=None)
@given(keys=st.lists(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20), min_size=1,
                     max_size=60),
       topic=st.sampled_from(["T", "TopicTest", "话题"]), slots=st.integers(1, 16), entries=st.integers(2, 25),
       ts=st.integers(0, 1 << 42), as_units=st.booleans())
def test_put_keys_matches_put_batch(tmp_path_factory, keys: list[str], topic: str, slots: int,  # type: ignore[no-untyped-def]
                                    entries: int, ts: int, as_units: bool) -> None:
    """``as_units``: the offsets handed over as the run's raw ConsumeQueue units (what ``dispatch_run``
    passes), read natively instead of from a list of int."""
    base = tmp_path_factory.mktemp("idx")
    phys = [1000 + 97 * i + (i << 33) for i in range(len(keys))]
    units = b"".join(struct.pack(">qiq", p, 7, -3) for p in phys)
    native = I.IndexService(base / "n", slots, entries)
    python = I.IndexService(base / "p", slots, entries)
    try:
        for lo, hi in ((0, len(keys) // 2), (len(keys) // 2, len(keys))):   # two batches: state carries over
            native.put_keys(topic, keys[lo:hi], units[lo * 20:hi * 20] if as_units else phys[lo:hi], ts + lo)
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
