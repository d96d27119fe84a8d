"""The slave's native scan (``_cstore.scan_runs`` + ``Dispatcher.dispatch_runs``) against recovery's
Python scan: for any records -- tags (ASCII and not), keys, unique keys, duplicate and empty properties,
IPv6 hosts, transaction halves, the schedule topic, queues that start on the slave -- both leave the
same ConsumeQueue units and the same index answers; damaged bytes stop both at the same record with the
same damage."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rokka.core.model import TOPIC_SCHEDULE, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE, Message
from rokka.core.storage import layout, recovery, replica
from rokka.core.storage.engine import DiskStore
from rokka.core.storage.replica import ReplicaAppender, ReplicaError, read_transfer
from storage_helpers import small_config

pytestmark = pytest.mark.skipif(layout._cstore is None, reason="the native extension is not built")

_text = st.text(st.characters(blacklist_characters="\x00\x01\x02", blacklist_categories=("Cs",)), max_size=12)
_props = st.fixed_dictionaries({}, optional={
    "TAGS": st.one_of(_text, st.sampled_from(["TagA", "TagB", "标签"])),
    "KEYS": st.lists(st.text("abc xyz", max_size=6), max_size=3).map(" ".join),
    "UNIQ_KEY": st.text("0123456789ABCDEF", min_size=1, max_size=8),
    "DELAY": st.sampled_from(["1", "2", "0", "x"]),
    "a": _text,
})
_record = st.tuples(st.sampled_from(["T", "U", TOPIC_SCHEDULE]), st.integers(0, 2), _props,
                    st.sampled_from([0, 0, 0, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE]),
                    st.booleans(), st.binary(max_size=40))


def _store(records: list[tuple[str, int, dict[str, str], int, bool, bytes]], root: Path) -> DiskStore:
    master = DiskStore(small_config(root)).open()
    for i, (topic, qid, props, txn, v6, body) in enumerate(records):
        host = ("::1", 4000 + i) if v6 else ("10.0.0.1", 4000 + i)
        m = Message(topic=topic, queue_id=qid, body=body, properties=dict(props), born_timestamp=1000 + i,
                    born_host=host, sysflag=txn)
        assert master.put_messages([m]).status.name == "PUT_OK"
    return master


def _replicate(master: DiskStore, root: Path, native: bool, monkeypatch: pytest.MonkeyPatch) -> DiskStore:
    slave = DiskStore(small_config(root)).open()
    with monkeypatch.context() as m:
        if not native:
            m.setattr(replica.layout, "_cstore", None)
        app = ReplicaAppender(slave)
        offset = master.clog.files.segments[0].base
        while (data := read_transfer(master, offset, 700)):
            app.append(offset, bytes(data))
            offset += len(data)
    return slave


def _state(store: DiskStore, keys: list[str]) -> tuple[object, ...]:
    queues = {k: (q.min_offset, q.max_offset, q.units(q.min_offset, q.max_offset - q.min_offset))
              for k, q in sorted(store.cqs.items())}
    found = {(t, k): sorted(store.query_by_key(t, k, 64, 0, 1 << 62)) for t in ("T", "U") for k in keys}
    return queues, found


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_record, min_size=1, max_size=40))
def test_native_and_python_scans_dispatch_the_same(tmp_path_factory: pytest.TempPathFactory,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     records: list[tuple[str, int, dict[str, str], int, bool, bytes]]
                                                     ) -> None:
    root = tmp_path_factory.mktemp("r")
    master = _store(records, root / "m")
    try:
        native = _replicate(master, root / "n", True, monkeypatch)
        python = _replicate(master, root / "p", False, monkeypatch)
        keys = sorted({k for _, _, p, _, _, _ in records for k in (p.get("KEYS", "").split() + [p.get("UNIQ_KEY", "")])
                       if k})
        assert _state(native, keys) == _state(python, keys) == _state(master, keys)
        native.close()
        python.close()
    finally:
        master.close()


@pytest.mark.parametrize("damage", ["magic", "crc", "phys"])
def test_damaged_bytes_stop_both_scans_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str) -> None:
    master = _store([("T", 0, {"KEYS": f"k{i}"}, 0, False, b"x" * 50) for i in range(6)], tmp_path / "m")
    data = bytearray(read_transfer(master, 0, 1 << 20) or b"")
    size = layout.SIZE_MAGIC.unpack_from(data, 0)[0]
    at = 3 * size       # the fourth record
    if damage == "magic":
        data[at + 4] ^= 0xFF
    elif damage == "crc":
        data[at + layout.OFF_BODY_CRC] ^= 0x01
    else:
        data[at + layout.OFF_PHYSICAL_OFFSET + 7] ^= 0x01
    errors, kept = [], []
    for native in (True, False):
        slave = DiskStore(small_config(tmp_path / f"s{native}")).open()
        with monkeypatch.context() as m:
            if not native:
                m.setattr(replica.layout, "_cstore", None)
            with pytest.raises(ReplicaError) as exc:
                ReplicaAppender(slave).append(0, bytes(data))
        errors.append(str(exc.value))
        kept.append((slave.clog.write_offset, slave.max_offset("T", 0), _state(slave, [f"k{i}" for i in range(6)])))
        slave.close()
    assert errors[0] == errors[1]
    assert kept[0] == kept[1]
    assert kept[0][1] == (0 if damage == "magic" else 3)     # the records before the damaged one stay
    master.close()


def test_bad_magic_inside_a_range_stops_both_scans_alike(tmp_path: Path) -> None:
    """A record whose MAGIC is damaged after the whole-record check (the scan reports it)."""
    master = _store([("T", 0, {"KEYS": f"k{i}"}, 0, False, b"x" * 50) for i in range(4)], tmp_path / "m")
    data = bytearray(read_transfer(master, 0, 1 << 20) or b"")
    size = layout.SIZE_MAGIC.unpack_from(data, 0)[0]
    spec = (layout.SCAN_LAYOUTS, (layout.MESSAGE_MAGIC, layout.BLANK_MAGIC), recovery._NAMES, recovery._PLAIN)
    data[2 * size + 4] ^= 0xFF
    magic = f"0x{int.from_bytes(data[2 * size + 4:2 * size + 8], 'big'):08X}"
    native = layout._cstore.scan_runs(bytes(data), 0, len(data), 0, *spec)
    assert native[:3] == (2 * size, f"bad magic {magic}", False)
    pos, problem = layout._cstore.record_prefix(bytes(data), 0, 1 << 20, spec[1])
    assert (pos, problem) == (2 * size, f"no record at {2 * size} (magic {magic}, size {size})")
    master.close()


def test_many_interleaved_topics_and_queues(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """More topics than the scan's topic cache and more queues than its open runs, interleaved record by
    record: the same units and index answers as the Python scan."""
    records = [(f"T{i % 20}", i % 3, {"KEYS": f"k{i}", "TAGS": f"t{i % 5}", "UNIQ_KEY": f"U{i:06d}"}, 0, False,
                b"v%d" % i) for i in range(400)]
    master = _store(records, tmp_path / "m")
    native = _replicate(master, tmp_path / "n", True, monkeypatch)
    python = _replicate(master, tmp_path / "p", False, monkeypatch)
    keys = [f"k{i}" for i in range(0, 400, 7)] + [f"U{i:06d}" for i in range(0, 400, 11)]

    def state(store: DiskStore) -> tuple[object, ...]:
        queues = {k: q.units(q.min_offset, q.max_offset - q.min_offset) for k, q in sorted(store.cqs.items())}
        found = {(f"T{t}", k): sorted(store.query_by_key(f"T{t}", k, 64, 0, 1 << 62)) for t in range(20) for k in keys}
        return queues, found

    assert state(native) == state(python) == state(master)
    assert len(native.cqs) == 60
    for s in (native, python, master):
        s.close()
