"""The Produce response writer (``framing._produce_response``) writes the same frame as the schema codec
(``messages_data.PRODUCE``) for every version, and leaves to it what it does not handle."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from rokka.gateway.kafka.codec import APIS, Struct, framing
from rokka.gateway.kafka.codec import primitives as p

PRODUCE = APIS[0]


def generic(version: int, correlation_id: int, body: Struct) -> bytes:
    """The schema codec's frame (what ``encode_response_frame_parts`` wrote before the fast writer)."""
    out = p.Gather(bytes(4))
    p.write_int32(out, correlation_id)
    if PRODUCE.is_flexible(version):
        out.append(0)
    PRODUCE.encode_response_into(out, version, body)
    out[0:4] = (out.nbytes() - 4).to_bytes(4, "big", signed=True)
    return b"".join(bytes(part) for part in out.parts())


i16, i32, i64 = (st.integers(-(1 << (n - 1)), (1 << (n - 1)) - 1) for n in (16, 32, 64))
text = st.text(max_size=40)
record_error = st.builds(lambda i, m: Struct(batch_index=i, batch_index_error_message=m), i32, st.none() | text)
partition = st.builds(lambda i, e, b, t, s, r, m: Struct(index=i, error_code=e, base_offset=b, log_append_time_ms=t,
                                                          log_start_offset=s, record_errors=r, error_message=m),
                      i32, i16, i64, i64, i64, st.lists(record_error, max_size=3), st.none() | text)
topic = st.builds(lambda n, ps: Struct(name=n, partition_responses=ps), text, st.lists(partition, max_size=4))
body = st.builds(lambda ts, th: Struct(responses=ts, throttle_time_ms=th), st.lists(topic, max_size=3), i32)


@settings(max_examples=300, deadline=None)
@given(version=st.integers(0, 9), correlation_id=i32, body=body)
def test_fast_produce_response_matches_the_schema_codec(version: int, correlation_id: int, body: Struct) -> None:
    fast = framing._produce_response(version, correlation_id, body)
    assert fast is not None
    assert fast == generic(version, correlation_id, body)
    assert b"".join(framing.encode_response_frame_parts(PRODUCE, version, correlation_id, body)) == fast


def test_struct_lacking_fields_is_left_to_the_schema_codec() -> None:
    """The invalid-acks answer holds index, error_code and base_offset only: the defaults are the codec's."""
    body = Struct(responses=[Struct(name="t", partition_responses=[Struct(index=0, error_code=21, base_offset=-1)])],
                  throttle_time_ms=0)
    for version in (3, 7, 8, 9):
        assert framing._produce_response(version, 5, body) is None
        frame: Any = b"".join(framing.encode_response_frame_parts(PRODUCE, version, 5, body))
        assert frame == generic(version, 5, body)
        assert framing.decode_response_frame(PRODUCE, version, frame[4:])[0] == 5


def test_unwritable_values_are_left_to_the_schema_codec() -> None:
    """A null topic name or an out-of-range integer: the schema codec decides (it raises)."""
    ok = Struct(index=0, error_code=0, base_offset=1, log_append_time_ms=-1, log_start_offset=0, record_errors=[],
                error_message=None)
    for bad in (Struct(responses=[Struct(name=None, partition_responses=[ok])], throttle_time_ms=0),
                Struct(responses=[Struct(name="t", partition_responses=[ok])], throttle_time_ms=1 << 40)):
        assert framing._produce_response(9, 1, bad) is None
