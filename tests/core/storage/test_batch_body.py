"""put_batch_body: a RocketMQ batch stored from its wire form equals the same batch decoded and put
message by message (properties as a mapping: the raw path appends the batch's properties, as Java)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rokka.core.model import BatchBody, Message
from rokka.core.storage import layout
from rokka.core.storage.api import PutStatus
from rokka.core.storage.engine import DiskStore
from rokka.core.storage.memory import MemoryStore
from rokka.net.remoting.codec.batch import decode_batch, encode_batch
from storage_helpers import small_config


def _body(elements: list[tuple[int, bytes, dict[str, str]]], trailing_sep: bool = True) -> bytes:
    return encode_batch([(flag, body, layout.encode_properties(props) + (b"\x02" if trailing_sep and props else b""))
                         for flag, body, props in elements])


def _view(store: DiskStore, topic: str, qid: int) -> list[tuple[object, ...]]:
    res = store.get_messages(topic, qid, 0, 10_000, 1 << 30)
    out = []
    for rec in res.records:
        m = layout.decode_record(rec)
        out.append((m.queue_offset, m.body, m.properties, m.flag, m.sysflag, m.born_timestamp, m.born_host,
                    m.reconsume_times, m.body_crc))
    return out


def _reference(tmp_path: Path, batch: BatchBody) -> DiskStore:
    ref = DiskStore(small_config(tmp_path / "ref")).open()
    msgs = []
    for el in decode_batch(batch.body):
        props = {**layout.decode_properties(el.properties_raw), **batch.properties}
        msgs.append(Message(batch.topic, batch.queue_id, el.body, props, el.flag, batch.sysflag,
                            batch.born_timestamp, batch.born_host, batch.reconsume_times))
    assert ref.put_messages(msgs).ok
    return ref


_text = st.text(st.characters(blacklist_characters="\x00\x01\x02", blacklist_categories=("Cs",)), min_size=1,
                max_size=6)
_props = st.dictionaries(st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "WAIT", "a", "b"]), _text, max_size=4)


@settings(max_examples=60, deadline=None)
@given(elements=st.lists(st.tuples(st.integers(-3, 3), st.binary(max_size=120), _props), min_size=1, max_size=12),
       batch_props=_props, sep=st.booleans(), born=st.sampled_from([("10.0.0.1", 7), ("::1", 9)]))
def test_batch_body_equals_put_messages(tmp_path_factory: pytest.TempPathFactory,
                                        elements: list[tuple[int, bytes, dict[str, str]]],
                                        batch_props: dict[str, str], sep: bool, born: tuple[str, int]) -> None:
    tmp = tmp_path_factory.mktemp("b")
    batch = BatchBody("T", 2, _body(elements, sep), batch_props, 0, 1234, born, 1)
    store = DiskStore(small_config(tmp / "s")).open()
    ref = _reference(tmp, batch)
    try:
        store.put_messages([Message("T", 2, b"before")])
        ref_first = ref.cq_units("T", 2, 0, 100)
        res = store.put_batch_body(batch)
        assert res is not None and res.ok and len(res.appended) == len(elements)
        assert [a.queue_offset for a in res.appended] == list(range(1, len(elements) + 1))
        assert res.end_offset == store.commitlog_max_offset
        got = [v[1:] for v in _view(store, "T", 2)[1:]]
        assert got == [v[1:] for v in _view(ref, "T", 2)]
        assert [u.tags_code for u in store.cq_units("T", 2, 1, 100)] == [u.tags_code for u in ref_first]
        for i, (_, _, props) in enumerate(elements):
            merged = {**props, **batch_props}
            for key in [k for k in merged.get("KEYS", "").split(" ") if k] + [merged.get("UNIQ_KEY", "")]:
                if key:
                    assert res.appended[i].commitlog_offset in store.query_by_key("T", key, 1000, 0, 1 << 62)
    finally:
        store.close()
        ref.close()


def test_refusals_write_nothing(tmp_path: Path) -> None:
    store = DiskStore(small_config(tmp_path / "s", max_message_size=100)).open()
    try:
        good = _body([(0, b"ok", {"TAGS": "a"})])
        cases = [(good[:-1], PutStatus.MESSAGE_ILLEGAL, "total size"),
                 (good[:22] + b"\x00\x06" + good[24:], PutStatus.MESSAGE_ILLEGAL, "properties length"),
                 (good + b"\x00" * 5, PutStatus.MESSAGE_ILLEGAL, "truncated"),
                 (b"", PutStatus.MESSAGE_ILLEGAL, "no element"),
                 (_body([(0, b"x" * 101, {})]), PutStatus.MESSAGE_ILLEGAL, "maxMessageSize"),
                 (_body([(0, b"x", {"big": "v" * 32760})]), PutStatus.PROPERTIES_SIZE_EXCEEDED, "32767")]
        for body, status, words in cases:
            res = store.put_batch_body(BatchBody("T", 0, body, {"CLUSTER": "c"}))
            assert res is not None and res.status is status and words in res.remark, (res, words)
        res = store.put_batch_body(BatchBody("t" * 200, 0, good, {}))
        assert res is not None and res.status is PutStatus.MESSAGE_ILLEGAL
        assert store.commitlog_max_offset == 0 and store.max_offset("T", 0) == 0
    finally:
        store.close()


def test_declined_where_the_general_path_is_needed(tmp_path: Path) -> None:
    body = _body([(0, b"x" * 100, {})] * 1000)     # ~150 KB: more than a 64 KiB test segment
    store = DiskStore(small_config(tmp_path / "s")).open()
    try:
        assert store.put_batch_body(BatchBody("T", 0, body, {})) is None
        assert store.put_batch_body(BatchBody("SCHEDULE_TOPIC_XXXX", 0, _body([(0, b"x", {})]), {})) is None
        assert store.put_batch_body(BatchBody("T", 0, _body([(0, b"x", {})]), {}, sysflag=0x4)) is None
        assert store.commitlog_max_offset == 0
    finally:
        store.close()
    assert MemoryStore(small_config(tmp_path / "m")).open().put_batch_body(BatchBody("T", 0, body, {})) is None


def test_one_arrival_per_batch(tmp_path: Path) -> None:
    store = DiskStore(small_config(tmp_path / "s")).open()
    seen: list[tuple[object, ...]] = []
    store.add_arrival_listener(lambda *a: seen.append(a))  # type: ignore[arg-type]
    try:
        store.put_batch_body(BatchBody("T", 0, _body([(0, b"a", {"TAGS": "x"}), (0, b"b", {"TAGS": "y"})]), {}))
        assert seen == [("T", 0, 1, None, None)]
    finally:
        store.close()
