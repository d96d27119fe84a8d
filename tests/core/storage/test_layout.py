"""Golden bytes and round trips for core.storage.layout (facts from the RocketMQ 4.9 reference)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rokka.core.model import Message, java_string_hash
from rokka.core.storage import layout


def _msg(**kw: object) -> Message:
    base: dict[str, object] = dict(topic="TopicTest", queue_id=3, body=b"hello",
                                   properties={"TAGS": "TagA", "KEYS": "k1 k2"}, flag=7,
                                   born_timestamp=1_700_000_000_000, born_host=("10.0.0.2", 50000),
                                   reconsume_times=2, prepared_transaction_offset=0)
    base.update(kw)
    return Message(**base)  # type: ignore[arg-type]


def test_golden_ipv4_record_bytes() -> None:
    rec = layout.encode_record(_msg(), queue_offset=5, commitlog_offset=4096,
                               store_timestamp=1_700_000_000_123, store_host=("127.0.0.1", 10911))
    props = b"TAGS\x01TagA\x02KEYS\x01k1 k2"
    # Built field by field from the reference table (section 5.1), not from layout.
    expected = (struct.pack(">i", 91 + 5 + 9 + len(props)) + bytes.fromhex("DAA320A7")
                + struct.pack(">i", 907060870) + struct.pack(">i", 3) + struct.pack(">i", 7)
                + struct.pack(">q", 5) + struct.pack(">q", 4096) + struct.pack(">i", 0)
                + struct.pack(">q", 1_700_000_000_000) + bytes([10, 0, 0, 2]) + struct.pack(">i", 50000)
                + struct.pack(">q", 1_700_000_000_123) + bytes([127, 0, 0, 1]) + struct.pack(">i", 10911)
                + struct.pack(">i", 2) + struct.pack(">q", 0) + struct.pack(">i", 5) + b"hello"
                + bytes([9]) + b"TopicTest" + struct.pack(">h", len(props)) + props)
    assert rec == expected
    assert rec[56:64] == struct.pack(">q", 1_700_000_000_123)  # STORETIMESTAMP @56 for IPv4
    assert layout.peek_total_size(rec) == len(rec)
    assert layout.store_timestamp_of(rec) == 1_700_000_000_123


def test_ipv6_hosts_set_sysflag_and_grow_record() -> None:
    m = _msg(born_host=("::1", 1), sysflag=0x4)
    rec = layout.encode_record(m, queue_offset=0, commitlog_offset=0, store_timestamp=9,
                               store_host=("fe80::1", 10911))
    v4 = layout.encode_record(_msg(sysflag=0x4), queue_offset=0, commitlog_offset=0,
                              store_timestamp=9, store_host=("127.0.0.1", 10911))
    assert len(rec) == len(v4) + 24
    got = layout.decode_record(rec)
    assert got.sysflag == 0x4 | 0x10 | 0x20
    assert got.born_host == ("::1", 1) and got.store_host == ("fe80::1", 10911)
    assert got.store_timestamp == 9 and layout.store_timestamp_of(rec) == 9
    assert rec[48 + 20:48 + 28] == struct.pack(">q", 9)


def test_body_crc_vector() -> None:
    assert layout.body_crc(b"hello") == 907060870


def test_magic_codes() -> None:
    assert struct.unpack(">i", struct.pack(">I", layout.MESSAGE_MAGIC))[0] == -626843481
    assert struct.unpack(">i", struct.pack(">I", layout.BLANK_MAGIC))[0] == -875286124
    blank = layout.encode_blank(64)
    assert len(blank) == 64 and blank[:8] == struct.pack(">i", 64) + bytes.fromhex("CBD43194")


def test_offset_msg_id_vectors() -> None:
    mid = layout.encode_offset_msg_id(("127.0.0.1", 10911), 0)
    assert mid == "7F00000100002A9F0000000000000000"
    assert layout.decode_offset_msg_id(mid) == ("127.0.0.1", 10911, 0)
    mid6 = layout.encode_offset_msg_id(("::1", 10911), 1 << 40)
    assert len(mid6) == 56 and mid6 == mid6.upper()
    assert layout.decode_offset_msg_id(mid6) == ("::1", 10911, 1 << 40)
    with pytest.raises(ValueError):
        layout.decode_offset_msg_id("ABCD")


@pytest.mark.parametrize(("tag", "code"), [("TagA", 2598919), ("TagB", 2598920), ("*", 42),
                                           ("tag1", 3552215), ("中文", 646394),
                                           ("TagOrderCreated", -2082041772),
                                           ("payment_success", -374754614)])
def test_tag_hash_vectors(tag: str, code: int) -> None:
    assert layout.java_hash(tag) == code == layout.tags_hash(tag)


def _reference_java_hash(s: str) -> int:
    """Java String.hashCode written the obvious way: 31*h + c over UTF-16 code units, int32 wrap."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


@given(st.text(max_size=60))
def test_java_hash_matches_reference_impl(s: str) -> None:
    assert layout.java_hash(s) == java_string_hash(s) == _reference_java_hash(s)


def test_properties_java_rules() -> None:
    assert layout.encode_properties({"a": "1", "b": "2"}) == b"a\x011\x02b\x012"
    assert layout.decode_properties(b"a\x011\x02b\x012\x02") == {"a": "1", "b": "2"}
    assert layout.decode_properties(b"a\x01\x02\x01x\x02b\x012") == {"b": "2"}
    assert layout.decode_properties(b"") == {}


_key = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)),
               min_size=1, max_size=20)


@given(st.dictionaries(_key, _key, max_size=8))
def test_properties_round_trip(props: dict[str, str]) -> None:
    raw = layout.encode_properties(props)
    assert layout.decode_properties(raw) == props
    assert layout.decode_properties(raw + b"\x02") == props


_ipv4 = st.ip_addresses(v=4).map(str)
_ipv6 = st.ip_addresses(v=6).map(str)


@settings(max_examples=200)
@given(topic=st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=127),
       queue_id=st.integers(0, 2**31 - 1), body=st.binary(max_size=300),
       props=st.dictionaries(_key, _key, max_size=5), flag=st.integers(-2**31, 2**31 - 1),
       sysflag=st.sampled_from([0, 1, 2, 4, 8, 0xC]), born=st.one_of(_ipv4, _ipv6),
       store=st.one_of(_ipv4, _ipv6), port=st.integers(0, 65535),
       ts=st.integers(0, 2**62), qoff=st.integers(0, 2**62), phys=st.integers(0, 2**62))
def test_record_round_trip(topic: str, queue_id: int, body: bytes, props: dict[str, str], flag: int,
                           sysflag: int, born: str, store: str, port: int, ts: int, qoff: int,
                           phys: int) -> None:
    m = Message(topic=topic, queue_id=queue_id, body=body, properties=props, flag=flag,
                sysflag=sysflag, born_timestamp=ts, born_host=(born, port), reconsume_times=1,
                prepared_transaction_offset=phys)
    rec = layout.encode_record(m, queue_offset=qoff, commitlog_offset=phys, store_timestamp=ts + 1,
                               store_host=(store, port))
    pl = len(layout.encode_properties(props))
    assert len(rec) == layout.record_size(len(body), len(topic), pl,
                                          layout.decode_record(rec).sysflag)
    got = layout.decode_record(rec)
    head = layout.check_record(rec)
    assert head.total_size == len(rec) == got.size and head.topic == topic.encode()
    assert (got.topic, got.queue_id, got.body, got.properties, got.flag) == (
        topic, queue_id, body, props, flag)
    assert got.sysflag & 0xF == sysflag
    assert got.born_host[1] == got.store_host[1] == port
    assert (got.queue_offset, got.commitlog_offset, got.store_timestamp) == (qoff, phys, ts + 1)
    buf = bytearray(rec)
    layout.rewrite_offsets(buf, 0, 11, 22)
    again = layout.decode_record(buf)
    assert (again.queue_offset, again.commitlog_offset) == (11, 22)


def test_check_record_rejects_damage() -> None:
    rec = bytearray(layout.encode_record(_msg(), queue_offset=0, commitlog_offset=0,
                                         store_timestamp=1, store_host=("127.0.0.1", 1)))
    layout.check_record(rec)
    body_at = layout.HEADER_V4.size
    rec[body_at] ^= 0xFF
    with pytest.raises(layout.RecordError, match="CRC"):
        layout.check_record(rec)
    with pytest.raises(layout.RecordError):
        layout.check_record(rec[:50])
    with pytest.raises(layout.RecordError, match="magic"):
        layout.check_record(bytes(8) + rec[8:])


def test_limits() -> None:
    with pytest.raises(layout.RecordError):
        layout.encode_record(_msg(topic="t" * 128), queue_offset=0, commitlog_offset=0,
                             store_timestamp=0, store_host=("127.0.0.1", 1))
    with pytest.raises(layout.RecordError):
        layout.encode_record(_msg(properties={"k": "v" * 40000}), queue_offset=0,
                             commitlog_offset=0, store_timestamp=0, store_host=("127.0.0.1", 1))


def test_iter_records() -> None:
    recs = [layout.encode_record(_msg(body=bytes([i])), queue_offset=i, commitlog_offset=0,
                                 store_timestamp=0, store_host=("127.0.0.1", 1)) for i in range(3)]
    assert [m.queue_offset for m in layout.iter_records(b"".join(recs))] == [0, 1, 2]
