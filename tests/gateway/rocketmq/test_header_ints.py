"""``Header.int`` / ``Header.long`` (with their all-digits fast path) agree with ``parse_int`` on any text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from rokka.net.remoting.codec.errors import HeaderFieldError
from rokka.net.remoting.codec.headers import INT32_MAX, INT32_MIN, Header, parse_int

texts = st.one_of(st.text(max_size=25), st.integers(-(1 << 70), 1 << 70).map(str),
                  st.text(alphabet="0123456789²٣ -+_", max_size=21))


def outcome(fn, *args):  # noqa: ANN001, ANN201
    try:
        return fn(*args)
    except HeaderFieldError:
        return "error"


@given(texts)
def test_int_and_long_match_parse_int(raw: str) -> None:
    h = Header({"f": raw})
    assert outcome(h.int, "f") == outcome(parse_int, raw, "f", INT32_MIN, INT32_MAX)
    assert outcome(h.long, "f") == outcome(parse_int, raw, "f")
