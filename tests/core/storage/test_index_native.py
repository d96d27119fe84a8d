"""The C index writer (``_cstore.index_insert``) writes the same IndexFile bytes as the Python one."""

from __future__ import annotations

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
       ts=st.integers(0, 1 << 42))
def test_put_keys_matches_put_batch(tmp_path_factory, keys: list[str], topic: str, slots: int,  # type: ignore[no-untyped-def]
                                    entries: int, ts: int) -> None:
    base = tmp_path_factory.mktemp("idx")
    phys = [1000 + 97 * i for i in range(len(keys))]
    native = I.IndexService(base / "n", slots, entries)
    python = I.IndexService(base / "p", slots, entries)
    try:
        for lo, hi in ((0, len(keys) // 2), (len(keys) // 2, len(keys))):   # two batches: state carries over
            native.put_keys(topic, keys[lo:hi], phys[lo:hi], ts + lo)
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
