"""Gathered response encoding: large record batches referenced, not copied, and the same bytes on the wire."""

from __future__ import annotations

import os

from rokka.gateway.kafka.codec import APIS, Struct, decode_response_frame, encode_response_frame
from rokka.gateway.kafka.codec import primitives as p
from rokka.gateway.kafka.codec.framing import encode_response_frame_parts

FETCH = APIS[1]


def _fetch_body(records: object) -> Struct:
    part = Struct(partition_index=0, error_code=0, high_watermark=9, last_stable_offset=9, log_start_offset=0,
                  aborted_transactions=None, preferred_read_replica=-1, records=records)
    small = Struct(partition_index=1, error_code=0, high_watermark=1, last_stable_offset=1, log_start_offset=0,
                   aborted_transactions=None, preferred_read_replica=-1, records=b"tiny")
    return Struct(throttle_time_ms=0, error_code=0, session_id=0,
                  responses=[Struct(topic="t", partitions=[part, small])])


def test_large_values_are_referenced_small_ones_copied() -> None:
    big, small = os.urandom(p.GATHER_MIN), os.urandom(p.GATHER_MIN - 1)
    out = p.Gather(b"hd")
    p.write_bytes(out, p.Pieces([small, big, b"x"]), compact=True)
    p.write_bytes(out, big, compact=False)
    plain = bytearray(b"hd")
    p.write_bytes(plain, p.Pieces([small, big, b"x"]), compact=True)
    p.write_bytes(plain, big, compact=False)
    parts = out.parts()
    assert [x is big for x in parts].count(True) == 2          # both copies of `big` by reference
    assert b"".join(parts) == bytes(plain) and out.nbytes() == len(plain)
    assert len(out) == len(plain) - 2 * len(big)


def test_a_gather_without_large_values_is_one_buffer() -> None:
    out = p.Gather()
    p.write_bytes(out, b"abc", compact=True)
    assert out.parts() == [out] and out.nbytes() == 4


def test_fetch_frame_parts_equal_the_joined_frame_and_decode_back() -> None:
    batches = [os.urandom(n) for n in (61, 70_000, 61, 12_345)]
    for version in (4, 11, 12):     # classic and flexible (compact bytes, tagged fields)
        parts = encode_response_frame_parts(FETCH, version, 77, _fetch_body(p.Pieces(batches)))
        assert sum(x is b for x in parts for b in batches) == 2         # the two large batches go by reference
        frame = encode_response_frame(FETCH, version, 77, _fetch_body(b"".join(batches)))
        assert b"".join(parts) == frame
        assert int.from_bytes(frame[:4], "big") == len(frame) - 4
        corr, body = decode_response_frame(FETCH, version, frame[4:])
        recs = [q.records for q in body.responses[0].partitions]
        assert (corr, recs) == (77, [b"".join(batches), b"tiny"])
