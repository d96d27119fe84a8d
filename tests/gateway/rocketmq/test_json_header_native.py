"""The native JSON remoting header (``_cjsonhdr``) against its Python twin: for any header text -- the shapes
clients send, any JSON value types, escapes, surrogates, whitespace, repeated keys, and broken bytes -- the
decoder gives the same command or the same protocol error; the encoder gives the same bytes (or error)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rokka.net.remoting.codec import remoting
from rokka.net.remoting.codec.errors import RemoteProtocolError
from rokka.net.remoting.codec.remoting import RemotingCommand

pytestmark = pytest.mark.skipif(remoting._cjsonhdr is None, reason="the _cjsonhdr extension is not built")

_ints = st.one_of(st.integers(-5, 400), st.integers(-(1 << 31), (1 << 31) - 1), st.integers(-(1 << 70), 1 << 70))
_texts = st.one_of(st.text(max_size=12), st.sampled_from(["", "JAVA", "CPP", "\ud800", "a\"b\\c\n\x01", "é😀"]))
_scalars = st.one_of(_texts, _ints, st.booleans(), st.none(), st.floats(allow_nan=False, allow_infinity=False),
                     st.just(1.0))
_values = st.one_of(_scalars, st.lists(_scalars, max_size=2),
                    st.dictionaries(st.text(max_size=3), _scalars, max_size=2))
_ext = st.one_of(st.none(), st.dictionaries(st.one_of(st.text(max_size=8), st.sampled_from(["topic", "a", "b"])),
                                            _values, max_size=6))
_top_keys = ["code", "extFields", "flag", "language", "opaque", "remark", "serializeTypeCurrentRPC", "version"]


@st.composite
def headers(draw: st.DrawFn) -> bytes:
    """A header as a peer could write it: the known keys in any order (some repeated or missing, now
    and then another key), values of the usual or any type, then dumped with random options."""
    keys = draw(st.lists(st.sampled_from([*_top_keys, "code", "other"]), max_size=9))
    pairs: list[tuple[str, Any]] = []
    for key in keys:
        if key == "extFields":
            value = draw(st.one_of(_ext, _values))
        elif key in ("code", "flag", "opaque", "version"):
            value = draw(st.one_of(_ints, _ints, _scalars))
        else:
            value = draw(st.one_of(_texts, _texts, _scalars))
        pairs.append((key, value))
    ascii_only = draw(st.booleans())
    sep = draw(st.sampled_from([(",", ":"), (", ", ": "), (" ,\n", "\t:\r ")]))
    body = "{" + sep[0].join(json.dumps(k) + sep[1] + json.dumps(v, ensure_ascii=ascii_only, separators=sep)
                             for k, v in pairs) + "}"
    text = draw(st.sampled_from(["", " ", "\n"])) + body + draw(st.sampled_from(["", "\n", " \t"]))
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:      # a lone surrogate written raw: what a peer would send instead
        data = text.encode("utf-8", "surrogatepass")
    if draw(st.integers(0, 4)) == 0 and data:       # and now and then a broken frame
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + draw(st.binary(max_size=3)) + data[at + draw(st.integers(0, 3)):]
    return data


_int32 = st.integers(-(1 << 31), (1 << 31) - 1)
_clean_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


@st.composite
def clean_headers(draw: st.DrawFn) -> bytes:
    """A header inside the native shape: each known key at most once (code always), Java ints, string
    language and remark (or a null remark), extFields values of string, integer, boolean or null."""
    keys = draw(st.permutations(_top_keys))
    keys = [k for k in keys if k == "code" or draw(st.booleans())]
    ext_values = st.one_of(_clean_text, _clean_text, st.integers(-(10 ** 17), 10 ** 17), st.booleans(), st.none())
    pairs: list[tuple[str, Any]] = []
    for key in keys:
        if key == "extFields":
            value: Any = draw(st.one_of(st.none(), st.dictionaries(_clean_text, ext_values, max_size=6)))
        elif key in ("code", "flag", "opaque", "version"):
            value = draw(_int32)
        elif key == "remark":
            value = draw(st.one_of(st.none(), _clean_text))
        else:
            value = draw(_clean_text)
        pairs.append((key, value))
    ascii_only = draw(st.booleans())
    sep = draw(st.sampled_from([(",", ":"), (", ", ": "), (" ,\n", "\t:\r ")]))
    body = "{" + sep[0].join(json.dumps(k) + sep[1] + json.dumps(v, ensure_ascii=ascii_only, separators=sep)
                             for k, v in pairs) + "}"
    return (draw(st.sampled_from(["", " "])) + body + draw(st.sampled_from(["", "\n"]))).encode("utf-8")


def _outcome(fn: Any, data: bytes) -> Any:
    try:
        cmd = fn(data)
    except RemoteProtocolError as exc:
        return ("error", str(exc))
    return (cmd, list(cmd.ext_fields.items()))


@settings(max_examples=3000, deadline=None)
@given(data=headers())
def test_decode_matches_python(data: bytes) -> None:
    assert _outcome(remoting.decode_json_header, data) == _outcome(remoting._decode_json_header, data)


@settings(max_examples=2000, deadline=None)
@given(data=clean_headers())
def test_clean_headers_decode_natively_as_python(data: bytes) -> None:
    assert remoting._cjsonhdr.decode(data) is not None      # the shape real clients send stays native
    assert _outcome(remoting.decode_json_header, data) == _outcome(remoting._decode_json_header, data)


@settings(max_examples=500, deadline=None)
@given(data=st.binary(max_size=80))
def test_decode_of_any_bytes_matches_python(data: bytes) -> None:
    assert _outcome(remoting.decode_json_header, data) == _outcome(remoting._decode_json_header, data)


def test_client_shapes_take_the_native_path() -> None:
    cpp = (b'{"code":10,"extFields":{"AccessKey":"","batch":"0","defaultTopicQueueNums":4,"flag":0,'
           b'"properties":"TAGS\\u0001bench\\u0002WAIT\\u0001true\\u0002","queueId":1,"sysFlag":0},'
           b'"flag":0,"language":"CPP","opaque":3,"remark":"","version":63}\n')
    java = (b'{"code":310,"extFields":{"a":"PG","b":"T","e":"1","i":"WAIT\\u0001true\\u0002"},"flag":0,'
            b'"language":"JAVA","opaque":7,"serializeTypeCurrentRPC":"JSON","version":405}')
    for data in (cpp, java):
        assert remoting._cjsonhdr.decode(data) is not None
        assert _outcome(remoting.decode_json_header, data) == _outcome(remoting._decode_json_header, data)


def _encoded(fn: Any, cmd: RemotingCommand) -> Any:
    try:
        return fn(cmd)
    except (UnicodeEncodeError, TypeError, ValueError) as exc:
        return ("error", type(exc).__name__)


@settings(max_examples=1500, deadline=None)
@given(code=_ints, flag=_ints, opaque=_ints, version=_ints, language=st.one_of(_texts, st.integers()),
       remark=st.one_of(st.none(), _texts, st.integers()),
       ext=st.dictionaries(st.one_of(_texts, st.integers()), st.one_of(_texts, _texts, st.none(), _ints), max_size=5))
def test_encode_matches_python(code: int, flag: int, opaque: int, version: int, language: Any, remark: Any,
                               ext: dict[Any, Any]) -> None:
    cmd = RemotingCommand(code, language, version, opaque, flag, remark, ext)
    assert _encoded(remoting.encode_json_header, cmd) == _encoded(remoting._encode_json_header, cmd)
