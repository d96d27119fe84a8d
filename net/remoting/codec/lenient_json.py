"""A lenient JSON reader for bodies written by Java's fastjson.

Theory of operation
-------------------
fastjson writes map keys that are not strings without quotes (reference
section 4.16): ``{"brokerAddrs":{0:"10.0.0.5:10911"}}`` for ``Map<Long,..>``
and even object keys, ``{{"brokerName":"b","queueId":0,"topic":"t"}:{...}}``
for ``Map<MessageQueue,..>`` (ConsumeStats, TopicStatsTable, ResetOffsetBody).
The standard ``json`` module rejects both.

``loads_lenient`` is a small recursive-descent parser over the text:

* bare number / ``true`` / ``false`` / ``null`` keys become their text
  (``0`` -> ``"0"``), i.e. the key a standard-JSON writer would have quoted;
* object or array keys become their canonical compact JSON text
  (``json.dumps(key, sort_keys=True, separators=(",", ":"))``); callers that
  need the structure back call ``json.loads`` on the key (see ``object_key``);
* strings are decoded with the standard library's scanner, so escapes are
  exactly JSON's.

Standard JSON parses to the same result as ``json.loads``.  Errors raise
``ValueError`` with a position.  Hostile bodies are refused the same way:
nesting deeper than ``MAX_DEPTH`` (counted, never left to the interpreter's
recursion limit) and numbers that overflow a double (``1e400``), which
fastjson would not turn into a value either.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?")
_decoder = json.JSONDecoder()
#: Deepest nesting of objects/arrays accepted (real bodies nest a handful of levels).
MAX_DEPTH = 200


def object_key(value: Any) -> str:
    """Canonical text used for an object-typed key."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def loads_lenient(text: str | bytes) -> Any:
    """Parse fastjson output (bare numeric keys, object keys allowed).

    Raises:
        ValueError: the text is not JSON even by fastjson's relaxed rules.
    """
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8")
    parser = _Parser(text)
    try:
        value = parser.value()
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    parser.skip_ws()
    if parser.pos != len(text):
        raise ValueError(f"extra data at position {parser.pos}")
    return value


class _Parser:
    __slots__ = ("text", "pos", "depth")

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.depth = 0

    def skip_ws(self) -> None:
        m = _WS.match(self.text, self.pos)
        assert m is not None
        self.pos = m.end()

    def error(self, what: str) -> ValueError:
        return ValueError(f"{what} at position {self.pos}")

    def value(self) -> Any:
        self.skip_ws()
        if self.pos >= len(self.text):
            raise self.error("unexpected end of input")
        ch = self.text[self.pos]
        if ch in "{[":
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise self.error(f"JSON nested deeper than {MAX_DEPTH} levels")
            out = self.obj() if ch == "{" else self.arr()
            self.depth -= 1
            return out
        if ch == '"':
            return self.string()
        for word, val in (("true", True), ("false", False), ("null", None)):
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return val
        m = _NUMBER.match(self.text, self.pos)
        if not m:
            raise self.error(f"unexpected character {ch!r}")
        self.pos = m.end()
        if not (m.group(1) or m.group(2)):
            return int(m.group())       # ValueError beyond 4300 digits (Python's own limit)
        out = float(m.group())
        if math.isinf(out):
            raise self.error(f"number {m.group()[:20]} overflows a double")
        return out

    def string(self) -> str:
        try:
            value, end = _decoder.raw_decode(self.text, self.pos)
        except json.JSONDecodeError as exc:
            raise self.error(f"bad string ({exc.msg})") from None
        self.pos = end
        return value

    def key(self) -> str:
        self.skip_ws()
        if self.pos < len(self.text) and self.text[self.pos] == '"':
            return self.string()
        start = self.pos
        val = self.value()
        if isinstance(val, dict | list):
            return object_key(val)
        return self.text[start:self.pos]

    def obj(self) -> dict[str, Any]:
        self.pos += 1
        out: dict[str, Any] = {}
        self.skip_ws()
        if self.text.startswith("}", self.pos):
            self.pos += 1
            return out
        while True:
            k = self.key()
            self.skip_ws()
            if not self.text.startswith(":", self.pos):
                raise self.error("expected ':'")
            self.pos += 1
            out[k] = self.value()
            self.skip_ws()
            if self.text.startswith(",", self.pos):
                self.pos += 1
                continue
            if self.text.startswith("}", self.pos):
                self.pos += 1
                return out
            raise self.error("expected ',' or '}'")

    def arr(self) -> list[Any]:
        self.pos += 1
        out: list[Any] = []
        self.skip_ws()
        if self.text.startswith("]", self.pos):
            self.pos += 1
            return out
        while True:
            out.append(self.value())
            self.skip_ws()
            if self.text.startswith(",", self.pos):
                self.pos += 1
                continue
            if self.text.startswith("]", self.pos):
                self.pos += 1
                return out
            raise self.error("expected ',' or ']'")
