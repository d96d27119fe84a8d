"""Sans-IO KafkaServerConnection: framing, limits, bad input, ApiVersions special cases.

No sockets: frames are built with the codec's client-side helpers and fed in
chunks of various sizes.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rokka.gateway.kafka.codec import APIS, Struct, decode_response_frame, encode_request_frame
from rokka.gateway.kafka.codec.framing import decode_api_versions_any
from rokka.gateway.kafka.connection import LARGE_FRAME, ConnectionState, KafkaServerConnection
from rokka.gateway.kafka.errors import KafkaProtocolError

META = APIS[3]
PRODUCE = APIS[0]
API_VERSIONS = APIS[18]


def conn(**kw: object) -> KafkaServerConnection:
    return KafkaServerConnection(max_frame_bytes=4096, **kw)  # type: ignore[arg-type]


def meta_frame(corr: int, version: int = 9) -> bytes:
    return encode_request_frame(META, version, corr, {"topics": [{"name": "t"}]}, client_id="cid")


@pytest.mark.parametrize("chunk", [1, 3, 7, 1000])
def test_pipelined_requests_in_chunks(chunk: int) -> None:
    c = conn()
    data = meta_frame(1) + meta_frame(2, 4) + encode_request_frame(API_VERSIONS, 3, 3, {})
    got = []
    for i in range(0, len(data), chunk):
        got += c.receive_data(data[i : i + chunk])
    assert [(r.api_key, r.api_version, r.correlation_id) for r in got] == [(3, 9, 1), (3, 4, 2), (18, 3, 3)]
    assert got[0].client_id == "cid" and got[0].body.topics[0].name == "t"
    assert c.receive_data(b"") == [] and c.state is ConnectionState.CLOSED


def test_bytes_wanted_tracks_the_frame_being_received() -> None:
    c = conn()
    frame = meta_frame(1)
    assert c.bytes_wanted() == 0                        # nothing yet: size unknown
    assert c.receive_data(frame[:3]) == [] and c.bytes_wanted() == 0
    assert c.receive_data(frame[3:10]) == [] and c.bytes_wanted() == len(frame) - 10
    got = c.receive_data(frame[10:] + frame[:6])        # one done, the next one started
    assert [r.correlation_id for r in got] == [1] and c.bytes_wanted() == len(frame) - 6


def produce_frame(corr: int, records: bytes) -> bytes:
    body = {"acks": 1, "timeout_ms": 1000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}]}
    return encode_request_frame(PRODUCE, 9, corr, body, client_id="p")


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.sampled_from([10, LARGE_FRAME - 100, LARGE_FRAME, 3 * LARGE_FRAME]), min_size=1, max_size=4),
       cuts=st.lists(st.integers(1, 4 * LARGE_FRAME), min_size=1, max_size=12))
def test_large_frames_in_any_chunks_come_out_whole(sizes: list[int], cuts: list[int]) -> None:
    """Large frames (collected as received chunks, joined once) and small ones, pipelined and cut
    anywhere: every request comes out, in order, with its bytes exactly."""
    recs = [bytes([i]) * n for i, n in enumerate(sizes)]
    data = b"".join(produce_frame(i, r) for i, r in enumerate(recs)) + meta_frame(99)
    c = KafkaServerConnection(max_frame_bytes=8 * LARGE_FRAME)
    got, pos = [], 0
    for cut in sorted(set(cuts)) + [len(data)]:
        if cut > pos:
            got += c.receive_data(data[pos:cut])
            assert 0 <= c.bytes_wanted() <= 8 * LARGE_FRAME
            pos = cut
    assert [r.correlation_id for r in got] == [*range(len(recs)), 99]
    assert [r.body.topic_data[0].partition_data[0].records for r in got[:-1]] == recs
    assert c.receive_data(b"") == [] and c.state is ConnectionState.CLOSED


def test_eof_inside_a_large_frame() -> None:
    c = KafkaServerConnection(max_frame_bytes=8 * LARGE_FRAME)
    frame = produce_frame(1, b"x" * LARGE_FRAME)
    assert c.receive_data(frame[:1000]) == [] and c.bytes_wanted() == len(frame) - 1000
    assert c.receive_data(frame[1000:-1]) == [] and c.bytes_wanted() == 1
    with pytest.raises(KafkaProtocolError, match="EOF inside a frame"):
        c.receive_data(b"")


def test_response_encoding_and_ordering_is_callers() -> None:
    c = conn()
    (req,) = c.receive_data(meta_frame(42))
    frame = c.encode_response(req, {"brokers": [], "topics": [], "controller_id": 1})
    corr, body = decode_response_frame(META, 9, frame[4:])
    assert corr == 42 and body.controller_id == 1


def test_oversized_frame_rejected_from_prefix_alone() -> None:
    c = conn()
    with pytest.raises(KafkaProtocolError, match="frame size"):
        c.receive_data(struct.pack(">i", 4097))  # no body needed to decide
    assert c.state is ConnectionState.ERROR
    with pytest.raises(KafkaProtocolError):
        c.receive_data(meta_frame(1))


@pytest.mark.parametrize("size", [-1, 0, 7])
def test_negative_or_tiny_frame(size: int) -> None:
    with pytest.raises(KafkaProtocolError):
        conn().receive_data(struct.pack(">i", size) + b"x" * 8)


def test_unknown_api_and_unadvertised_version_close() -> None:
    frame = bytearray(meta_frame(1))
    frame[4:6] = struct.pack(">h", 999)
    with pytest.raises(KafkaProtocolError, match="api_key 999"):
        conn().receive_data(bytes(frame))
    with pytest.raises(KafkaProtocolError, match="not advertised"):
        conn(advertised={3: (0, 8), 18: (0, 4)}).receive_data(meta_frame(1, 9))
    with pytest.raises(KafkaProtocolError, match="unknown or unadvertised"):
        conn(advertised={18: (0, 4)}).receive_data(meta_frame(1))


def test_truncated_body_is_malformed() -> None:
    frame = meta_frame(1)
    body_cut = struct.pack(">i", len(frame) - 6) + frame[4:-2]
    with pytest.raises(KafkaProtocolError, match="malformed Metadata"):
        conn().receive_data(body_cut)


def test_eof_inside_frame() -> None:
    c = conn()
    c.receive_data(meta_frame(1)[:10])
    with pytest.raises(KafkaProtocolError, match="EOF"):
        c.receive_data(b"")


def test_unsupported_api_versions_version_gets_v0_error_35() -> None:
    c = conn(advertised={18: (0, 4), 3: (0, 12)})
    payload = struct.pack(">hhih", 18, 7, 99, 1) + b"c" + b"\xde\xad\xbe\xef garbage body"
    (req,) = c.receive_data(struct.pack(">i", len(payload)) + payload)
    assert req.unsupported_version and req.body is None
    frame = c.encode_response(req, None)
    corr, body = decode_api_versions_any(frame[4:], 3)
    assert corr == 99 and body.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(3, 0, 12), (18, 0, 4)]


def test_api_versions_body_lists_advertised() -> None:
    c = conn(advertised={18: (0, 4), 1: (4, 12)})
    body = c.api_versions_body()
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(1, 4, 12), (18, 0, 4)]


def test_produce_acks0_expects_no_response() -> None:
    c = conn()
    body = Struct(transactional_id=None, acks=0, timeout_ms=100, topic_data=[])
    (req,) = c.receive_data(encode_request_frame(PRODUCE, 9, 5, body))
    assert not req.expects_response
    (req1,) = c.receive_data(encode_request_frame(PRODUCE, 9, 6, {**body.__dict__, "acks": -1}))
    assert req1.expects_response


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.integers(1, 50))
def test_garbage_only_ever_raises_protocol_error(data: bytes, chunk: int) -> None:
    c = conn()
    try:
        for i in range(0, len(data), chunk):
            c.receive_data(data[i : i + chunk])
    except KafkaProtocolError:
        assert c.state is ConnectionState.ERROR


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=1, max_size=60))
def test_valid_header_garbage_body(tail: bytes) -> None:
    for key, api in APIS.items():
        payload = struct.pack(">hhih", key, api.max_version, 1, -1) + tail
        try:
            conn().receive_data(struct.pack(">i", len(payload)) + payload)
        except KafkaProtocolError:
            pass
