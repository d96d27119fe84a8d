"""``rokka.core.record``: the public face of the CommitLog record format (named header fields)."""

from __future__ import annotations

import pytest
from rokka.core import record
from rokka.core.model import BORNHOST_V6_FLAG, STOREHOST_V6_FLAG, Message


def _record(born_host: tuple[str, int] = ("10.1.2.3", 4567),
            store_host: tuple[str, int] = ("10.9.8.7", 10911)) -> bytes:
    msg = Message("RecTopic", 3, b"hello body", {"UNIQ_KEY": "ABC", "TAGS": "t"}, flag=7,
                  born_timestamp=1_700_000_000_123, born_host=born_host)
    return record.encode_record(msg, queue_offset=42, commitlog_offset=8192, store_timestamp=1_700_000_000_456,
                                store_host=store_host)


def test_the_header_by_name_matches_the_decoded_record() -> None:
    raw = b"\0" * 5 + _record()
    h = record.decode_header(raw, 5)
    full = record.decode_record(raw, 5)
    assert h.total_size == full.size == len(raw) - 5
    assert h.magic == record.MESSAGE_MAGIC
    assert (h.queue_id, h.flag, h.queue_offset, h.commitlog_offset) == (3, 7, 42, 8192)
    assert (h.born_timestamp, h.store_timestamp) == (1_700_000_000_123, 1_700_000_000_456)
    assert (record.host_str(h.born_host), h.born_port) == full.born_host == ("10.1.2.3", 4567)
    assert (record.host_str(h.store_host), h.store_port) == full.store_host
    assert h.body_length == len(b"hello body") and h.body_crc == full.body_crc
    assert record.RecordHeader._fields == record.HEADER_FIELDS and len(record.HEADER_FIELDS) == 17


def test_ipv6_hosts_are_read_by_the_sysflag() -> None:
    raw = _record(born_host=("::1", 1), store_host=("fe80::2", 2))
    h = record.decode_header(raw)
    assert h.sysflag & (BORNHOST_V6_FLAG | STOREHOST_V6_FLAG) == BORNHOST_V6_FLAG | STOREHOST_V6_FLAG
    assert len(h.born_host) == len(h.store_host) == 16 and h.store_port == 2
    assert h.body_length == len(b"hello body")
    assert record.header_size(h.sysflag) == record.header_size() + 24


def test_a_header_reader_returns_only_the_named_fields() -> None:
    raw = _record()
    read = record.header_reader("total_size", "queue_id", "sysflag", "store_timestamp", "body_length")
    h = record.decode_header(raw)
    assert read(raw, 0) == (h.total_size, h.queue_id, h.sysflag, h.store_timestamp, h.body_length)
    body_at = record.header_size()
    assert raw[body_at:body_at + h.body_length] == b"hello body"
    topic_len_at = body_at + h.body_length
    props_at = topic_len_at + record.TAIL_SIZE + raw[topic_len_at]
    assert raw[topic_len_at + 1:props_at - record.PROPS_LEN.size] == b"RecTopic"
    assert record.decode_properties(raw[props_at:]) == {"UNIQ_KEY": "ABC", "TAGS": "t"}


@pytest.mark.parametrize("names", [("queue_id", "total_size"), ("nope",), ("flag", "flag")])
def test_a_header_reader_refuses_unknown_or_unordered_names(names: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match="header fields"):
        record.header_reader(*names)


def test_a_truncated_header_is_a_record_error() -> None:
    with pytest.raises(record.RecordError):
        record.decode_header(_record()[:30])


def test_message_ids_and_properties_round_trip() -> None:
    msg_id = record.encode_offset_msg_id(("10.0.0.1", 10911), 123456)
    assert msg_id.startswith(record.msg_id_prefix(("10.0.0.1", 10911)))
    assert record.decode_offset_msg_id(msg_id) == ("10.0.0.1", 10911, 123456)
    assert record.decode_properties(record.encode_properties({"a": "1", "b": "2"})) == {"a": "1", "b": "2"}
