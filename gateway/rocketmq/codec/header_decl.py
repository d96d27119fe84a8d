"""Declaring a RocketMQ request header once: decode from and encode to ``extFields``.

Theory of operation
-------------------
Java declares each request's custom header as a class (``CommandCustomHeader``)
whose fields are ``String`` / ``Integer`` / ``Long`` / ``Boolean``, required ones
marked ``@CFNotNull``; ``RemotingCommand.decodeCommandCustomHeader`` fills it from
``extFields`` by reflection.  Here a header is a frozen, slotted dataclass whose
base is ``RequestHeader``; ``@declare`` reads its annotations once and builds a
field table, from which both directions derive:

* ``decode(cmd_or_ext)``: strict, for handlers.  A missing required field or a
  value that does not parse raises ``HeaderFieldError`` (the server answers
  SYSTEM_ERROR with the message as remark, as before).
* ``peek(cmd_or_ext)``: lenient, for the ACL, which must name the resources of
  a request before its handler has judged it: a missing or malformed field is
  ``None`` there, never an error.
* ``encode()``: for clients; ``None`` fields are dropped, booleans are Java's
  ``true``/``false``, numbers decimal.

Declaring::

    @declare
    class QueryConsumerOffsetRequestHeader(RequestHeader):
        consumer_group: str                 # required (no default): consumerGroup
        topic: str
        queue_id: I32                       # Java Integer: int32 range
        set_zero_if_not_found: bool | None = None   # optional

The Java name is the attribute in camelCase (``consumer_group`` -> ``consumerGroup``);
``java("clientID")`` overrides it.  Types: ``str``, ``I32`` (Integer), ``I64``
(Long), ``bool``; ``| None`` with a default makes a field optional.
``java(..., empty_is_none=True)`` folds "" to the default (C++ sends "" for unused
optional fields).

Quirks, as ``headers.py`` parses them: booleans accept true/false/1/0 in any case
(C++ 1.2.x sends 0/1), numbers are decimal, int32 / int64 range checked.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Self, TypeVar

from rokka.gateway.rocketmq.codec.errors import HeaderFieldError
from rokka.gateway.rocketmq.codec.headers import INT32_MAX, INT32_MIN, parse_bool, parse_int
from rokka.gateway.rocketmq.codec.remoting import RemotingCommand

__all__ = ["I32", "I64", "FieldSpec", "RequestHeader", "declare", "java"]

I32 = Annotated[int, "int32"]
I64 = Annotated[int, "int64"]
_STR, _I32, _I64, _BOOL = "str", "int32", "int64", "bool"
_MISSING = dataclasses.MISSING


@dataclasses.dataclass(frozen=True, slots=True)
class FieldSpec:
    """One declared field: Python attribute, Java (wire) name, kind, required, default."""

    attr: str
    name: str
    kind: str
    required: bool
    default: Any
    empty_is_none: bool


def java(name: str | None = None, *, default: Any = None, empty_is_none: bool = False,
         required: bool = False) -> Any:
    """A field whose wire name or empty-string handling differs from the default rule."""
    meta = {"java": name, "empty_is_none": empty_is_none}
    if required:
        return dataclasses.field(metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def _camel(attr: str) -> str:
    head, *rest = attr.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _kind(hint: Any) -> str:
    args = typing.get_args(hint)
    if typing.get_origin(hint) is Annotated:
        return str(hint.__metadata__[0])
    if args and type(None) in args:                       # X | None
        inner = [a for a in args if a is not type(None)]
        return _kind(inner[0])
    if hint is str:
        return _STR
    if hint is bool:
        return _BOOL
    raise TypeError(f"unsupported header field type {hint!r}")


class RequestHeader:
    """Base of declared request headers (see the module docstring)."""

    __slots__ = ()
    FIELDS: ClassVar[tuple[FieldSpec, ...]] = ()

    @classmethod
    def decode(cls, source: Any) -> Self:
        """Strict decode from a RemotingCommand or an extFields mapping (HeaderFieldError on bad input)."""
        ext: Mapping[str, str] = source if isinstance(source, Mapping) else (source.ext_fields or {})
        values = {}
        for f in cls.FIELDS:
            values[f.attr] = _value(f, ext.get(f.name))
        return cls(**values)

    @classmethod
    def peek(cls, source: Any) -> Self:
        """Lenient decode: every missing or malformed field is None (for the ACL's resource names)."""
        ext: Mapping[str, str] = source if isinstance(source, Mapping) else (source.ext_fields or {})
        values = {}
        for f in cls.FIELDS:
            try:
                values[f.attr] = _value(f, ext.get(f.name), lenient=True)
            except HeaderFieldError:
                values[f.attr] = None
        return cls(**values)

    def command(self, code: int, body: bytes = b"") -> RemotingCommand:
        """A request ``code`` carrying this header (and ``body``)."""
        return RemotingCommand(code, ext_fields=self.encode(), body=body)

    def encode(self) -> dict[str, str]:
        """extFields for a request carrying this header (None dropped, booleans Java-style)."""
        out: dict[str, str] = {}
        for f in self.FIELDS:
            value = getattr(self, f.attr)
            if value is None:
                continue
            if f.kind == _BOOL:
                out[f.name] = "true" if value else "false"
            else:
                out[f.name] = str(value)
        return out


def _value(f: FieldSpec, raw: str | None, lenient: bool = False) -> Any:
    if raw is None or (f.empty_is_none and raw == ""):
        if f.required and not lenient:
            raise HeaderFieldError(f"the custom field <{f.name}> is null")
        return None if lenient else f.default
    kind = f.kind
    if kind == _STR:
        return raw
    if kind == _I32:
        if len(raw) < 10 and raw.isdecimal():             # the common case: up to 9 digits
            return int(raw)
        return parse_int(raw, f.name, INT32_MIN, INT32_MAX)
    if kind == _I64:
        if len(raw) < 19 and raw.isdecimal():             # up to 18 digits
            return int(raw)
        return parse_int(raw, f.name)
    return parse_bool(raw, f.name)


H = TypeVar("H", bound=type[RequestHeader])


def declare(cls: H) -> H:
    """Class decorator: make ``cls`` a frozen slotted dataclass and build its ``FIELDS`` table."""
    dc = dataclasses.dataclass(frozen=True, slots=True, kw_only=True)(cls)
    hints = typing.get_type_hints(dc, include_extras=True)
    specs = []
    for f in dataclasses.fields(dc):
        name = f.metadata.get("java") or _camel(f.name)
        required = f.default is _MISSING and f.default_factory is _MISSING
        specs.append(FieldSpec(f.name, name, _kind(hints[f.name]), required,
                               None if required else f.default, bool(f.metadata.get("empty_is_none"))))
    dc.FIELDS = tuple(specs)
    return dc
