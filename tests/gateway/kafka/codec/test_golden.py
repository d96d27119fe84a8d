"""Golden bytes written by hand from kafka-wire.md facts (§1.2-§1.6).

Each case spells out the frame field by field so a reader can check it against
the sheet without running anything.
"""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st
from rokka.gateway.kafka.codec import (
    APIS,
    Struct,
    decode_request_header,
    decode_response_frame,
    encode_api_versions_error,
    encode_request_frame,
    encode_response_frame,
    peek_api,
)
from rokka.gateway.kafka.codec import primitives as p
from rokka.gateway.kafka.codec.framing import read_request_header
from rokka.gateway.kafka.codec.primitives import DecodeError, Reader

API_VERSIONS = APIS[18]
METADATA = APIS[3]


def h(s: str) -> bytes:
    return bytes.fromhex(s.replace(" ", "").replace("\n", ""))


def test_api_versions_v0_request_header_v1() -> None:
    frame = encode_request_frame(API_VERSIONS, 0, 7, Struct(), client_id="ab")
    #          size      key  ver  corr      client_id
    assert frame == h("0000000c  0012 0000 00000007 0002 6162")
    hdr, body_at = decode_request_header(frame[4:], flexible=False)
    assert (hdr.api_key, hdr.api_version, hdr.correlation_id, hdr.client_id) == (18, 0, 7, "ab")
    assert body_at == 12


def test_api_versions_v3_request_header_v2_compact_body() -> None:
    body = Struct(client_software_name="x", client_software_version="1")
    frame = encode_request_frame(API_VERSIONS, 3, 1, body, client_id=None)
    # header v2: client_id stays an int16 string (null = ffff), then an empty tag section;
    # body: compact strings (len+1) and the body's own empty tag section.
    assert frame == h("00000010  0012 0003 00000001 ffff 00  02 78 02 31 00")
    assert peek_api(frame[4:]) == (18, 3, 1)
    hdr, at = decode_request_header(frame[4:], flexible=True)
    assert hdr.client_id == ""
    assert API_VERSIONS.decode_request(3, frame[4:], at) == API_VERSIONS.request.make(
        client_software_name="x", client_software_version="1"
    )


def test_api_versions_v3_response_uses_header_v0() -> None:
    body = Struct(error_code=0, api_keys=[Struct(api_key=18, min_version=0, max_version=4)], throttle_time_ms=0)
    frame = encode_response_frame(API_VERSIONS, 3, 5, body)
    #             size     corr (no tag byte!)  err  n+1  key  min  max  tags  throttle  tags
    assert frame == h("00000013 00000005            0000 02   0012 0000 0004 00    00000000  00")
    corr, back = decode_response_frame(API_VERSIONS, 3, frame[4:])
    assert corr == 5 and back.api_keys[0].max_version == 4


def test_unsupported_api_versions_answer_is_v0_body() -> None:
    frame = encode_api_versions_error(9, [(18, 0, 4), (3, 0, 12)])
    #            size     corr     err=35 count(int32) key min max   key min max  (no throttle, no tags)
    assert frame == h("00000016 00000009 0023   00000002    0012 0000 0004 0003 0000 000c")


def test_metadata_v9_response_has_flexible_header() -> None:
    body = Struct(brokers=[Struct(node_id=1, host="h", port=9092)], cluster_id="c", controller_id=1, topics=[])
    frame = encode_response_frame(METADATA, 9, 2, body)
    assert frame == h(
        "00000022"
        "00000002 00"  # correlation id + header tag section (header v1)
        "00000000"  # throttle_time_ms
        "02 00000001 0268 00002384 00 00"  # brokers: n+1, node, host "h", port 9092, rack null, tags
        "0263"  # cluster_id "c"
        "00000001"  # controller_id
        "01"  # topics: empty compact array
        "80000000"  # cluster_authorized_operations (v8-10)
        "00"  # body tags
    )


def test_tagged_field_written_only_when_not_default() -> None:
    fetch = APIS[1]
    part = Struct(partition_index=0, high_watermark=5, records=None, current_leader=Struct(leader_id=1, leader_epoch=0))
    data = fetch.encode_response(12, {"responses": [{"topic": "t", "partitions": [part]}]})
    back = fetch.decode_response(12, data)
    assert back.responses[0].partitions[0].current_leader == Struct(leader_id=1, leader_epoch=0)
    assert back.responses[0].partitions[0].diverging_epoch == Struct(epoch=-1, end_offset=-1)
    # tag 1 present: "01 01 09 00000001 00000000 00" inside the partition's tag section
    assert h("01 01 09 00000001 00000000 00") in data


def test_varints() -> None:
    for value, enc in [(0, "00"), (-1, "01"), (1, "02"), (63, "7e"), (-64, "7f"), (64, "8001")]:
        out = bytearray()
        p.write_varint(out, value)
        assert out == h(enc)
        assert Reader(bytes(out)).varint() == value
    out = bytearray()
    p.write_uvarint(out, 300)
    assert out == h("ac02")


_client_ids = st.one_of(st.binary(max_size=12), st.text(max_size=6).map(str.encode), st.sampled_from([b"", b"\xff"]))


@settings(max_examples=400, deadline=None)
@given(head=st.binary(min_size=8, max_size=8), length=st.one_of(st.integers(-3, 20), st.none()), client=_client_ids,
       tags=st.sampled_from([b"", b"\x00", b"\x01\x05\x02ab", b"\x01", b"\x80"]), rest=st.binary(max_size=6),
       flexible=st.booleans())
def test_request_header_fast_path_reads_what_the_reader_reads(head: bytes, length: int | None, client: bytes,
                                                               tags: bytes, rest: bytes, flexible: bool) -> None:
    # the one-unpack path gives the Reader's header and body offset, or the Reader's error
    payload = head + struct.pack(">h", len(client) if length is None else length) + client + tags + rest
    for cut in (len(payload), len(payload) - len(rest), 9, 10, 11):
        data = payload[:cut]
        try:
            want: object = read_request_header(data, flexible)
        except DecodeError as exc:
            want = ("error", str(exc))
        try:
            got: object = decode_request_header(data, flexible)
        except DecodeError as exc:
            got = ("error", str(exc))
        assert got == want
