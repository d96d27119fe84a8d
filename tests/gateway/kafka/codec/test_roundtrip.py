"""Hypothesis round-trips: every declared message, request and response, at every version.

encode -> decode must give back an equal Struct, and re-encoding must give the same bytes.
Fields absent at a version are generated as their default (that is what decode yields).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rokka.gateway.kafka.codec import APIS, Struct
from rokka.gateway.kafka.codec.primitives import DecodeError, Reader
from rokka.gateway.kafka.codec.schema import Field, Primitive, StructType

_INTS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


def _prim(t: Primitive) -> st.SearchStrategy[Any]:
    if t.name in _INTS:
        bits = _INTS[t.name]
        return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    return {
        "uint16": st.integers(0, 0xFFFF),
        "float64": st.floats(allow_nan=False),
        "bool": st.booleans(),
        "string": st.text(max_size=20),
        "bytes": st.binary(max_size=20),
        "records": st.binary(max_size=40),
        "uuid": st.uuids(),
    }[t.name]


def _field(fl: Field, v: int) -> st.SearchStrategy[Any]:
    t = fl.type
    if isinstance(t, Primitive):
        s = _prim(t)
    elif isinstance(t, StructType):
        s = _struct(t, v)
    else:
        elem = _struct(t.elem, v) if isinstance(t.elem, StructType) else _prim(t.elem)
        s = st.lists(elem, max_size=3)
    if fl.nullable[0] <= v <= fl.nullable[1]:
        s = st.none() | s
    return s


def _struct(t: StructType, v: int) -> st.SearchStrategy[Struct]:
    parts: dict[str, st.SearchStrategy[Any]] = {}
    for fl in t.fields:
        if fl.versions[0] <= v <= fl.versions[1]:
            parts[fl.name] = _field(fl, v)
        else:
            parts[fl.name] = st.builds(fl.make_default)
    return st.fixed_dictionaries(parts).map(lambda d: Struct(**d))


CASES = [
    (key, kind, v)
    for key, api in sorted(APIS.items())
    for kind in ("request", "response")
    for v in range(api.min_version, api.max_version + 1)
]


@pytest.mark.parametrize(("key", "kind", "v"), CASES, ids=[f"{APIS[k].name}-{kd}-v{v}" for k, kd, v in CASES])
def test_roundtrip(key: int, kind: str, v: int) -> None:
    api = APIS[key]
    schema = api.request if kind == "request" else api.response
    enc = api.encode_request if kind == "request" else api.encode_response
    dec = api.decode_request if kind == "request" else api.decode_response

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_struct(schema, v))
    def check(value: Struct) -> None:
        data = enc(v, value)
        back = dec(v, data)
        assert back == value
        assert enc(v, back) == data

    check()



def _decode_both(schema: StructType, data: bytes, v: int, flexible: bool) -> tuple[Any, Any]:
    """(generated decode, plan-walking decode) of ``data``: a Struct or the DecodeError's text."""
    out = []
    for decode in (schema.decode, schema.decode_generic):
        try:
            out.append(decode(Reader(data), v, flexible))
        except DecodeError as exc:
            out.append(f"DecodeError: {exc}")
    return out[0], out[1]


@pytest.mark.parametrize(("key", "kind", "v"), CASES, ids=[f"{APIS[k].name}-{kd}-v{v}" for k, kd, v in CASES])
def test_generated_decoder_is_the_plan_walk(key: int, kind: str, v: int) -> None:
    """The generated decoders (schema._compile_decoder) give the Struct the plan walk gives, in the same
    field order, and fail where it fails with the same error, on every cut of a valid encoding."""
    api = APIS[key]
    schema = api.request if kind == "request" else api.response
    enc = api.encode_request if kind == "request" else api.encode_response
    flexible = api.is_flexible(v)

    @settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_struct(schema, v))
    def check(value: Struct) -> None:
        data = enc(v, value)
        fast, walked = _decode_both(schema, data, v, flexible)
        assert fast == walked and list(vars(fast)) == list(vars(walked))
        for cut in range(len(data)):
            fast, walked = _decode_both(schema, data[:cut], v, flexible)
            assert fast == walked

    check()


def _encode_both(schema: StructType, value: Any, v: int, flexible: bool) -> tuple[Any, Any]:
    """(generated encode, plan-walking encode) of ``value``: the bytes or the exception's type and text."""
    out = []
    for encode in (schema.encode, schema.encode_generic):
        buf = bytearray()
        try:
            encode(buf, value, v, flexible)
            out.append(bytes(buf))
        except Exception as exc:  # noqa: BLE001 - the two must fail alike, whatever the failure
            out.append(f"{type(exc).__name__}: {exc}")
    return out[0], out[1]


def _spoiled(value: Struct, data: st.DataObject) -> Struct:
    """``value`` with one field removed or set to a value of another type (None, a string, an int too large)."""
    fields = list(vars(value))
    if not fields:
        return value
    name = data.draw(st.sampled_from(fields))
    spoiled = Struct(**vars(value))
    how = data.draw(st.sampled_from(["drop", "none", "text", "huge"]))
    if how == "drop":
        delattr(spoiled, name)
    else:
        setattr(spoiled, name, {"none": None, "text": "x", "huge": 1 << 70}[how])
    return spoiled


@pytest.mark.parametrize(("key", "kind", "v"), CASES, ids=[f"{APIS[k].name}-{kd}-v{v}" for k, kd, v in CASES])
def test_generated_encoder_is_the_plan_walk(key: int, kind: str, v: int) -> None:
    """The generated encoders (schema._compile_encoder) write the bytes the plan walk writes, and fail where
    it fails with the same error: for valid Structs, Structs missing a field or holding a value of the wrong
    type, and the same values as plain dicts (which the generated encoder hands to the plan walk)."""
    api = APIS[key]
    schema = api.request if kind == "request" else api.response
    flexible = api.is_flexible(v)

    @settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_struct(schema, v), st.data())
    def check(value: Struct, data: st.DataObject) -> None:
        fast, walked = _encode_both(schema, value, v, flexible)
        assert fast == walked and isinstance(fast, bytes)
        assert _encode_both(schema, dict(vars(value)), v, flexible) == (fast, fast)
        fast, walked = _encode_both(schema, _spoiled(value, data), v, flexible)
        assert fast == walked

    check()
