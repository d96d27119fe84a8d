"""Declaring a RocketMQ request or response header once: decode from and encode to ``extFields``.

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
  SYSTEM_ERROR with the message as remark, as before).  The whole header is
  decoded before the handler acts, as Java's ``decodeCommandCustomHeader`` does,
  so a junk optional field is refused whatever path the request then takes.
  ``declare`` generates each class's ``decode`` as straight-line code (as
  ``dataclasses`` writes ``__init__``): the loop in ``RequestHeader.decode`` is
  the reference semantics, and the generated one is what the hot send and pull
  paths run.  ``aliased_decoder`` does the same for a header under other wire
  names (SEND_MESSAGE_V2's one-letter ones).
* ``peek(cmd_or_ext)``: lenient, for the ACL, which must name the resources of
  a request before its handler has judged it: a missing or malformed field is
  ``None`` there, never an error.  ``pick(cmd_or_ext, "topic", ...)`` is the
  same for just the named attributes (a tuple), which is what the ACL uses on
  every request.
* ``encode()``: for clients (a request) and the broker (a response, base
  ``ResponseHeader``: ``response_headers.py``); ``None`` fields are dropped,
  booleans are Java's ``true``/``false``, numbers decimal.  Generated as
  straight-line code too (a send's response header is encoded on every send).

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
import functools
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, ClassVar, Self, TypeVar

from rokka.net.remoting.codec.errors import HeaderFieldError
from rokka.net.remoting.codec.headers import INT32_MAX, INT32_MIN, parse_bool, parse_int
from rokka.net.remoting.codec.remoting import RemotingCommand

__all__ = ["I32", "I64", "FieldSpec", "RequestHeader", "ResponseHeader", "declare", "java"]

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
    _PLAN: ClassVar[tuple[tuple[Any, ...], ...]] = ()
    _PICKS: ClassVar[dict[tuple[str, ...], tuple[tuple[Any, ...], ...]]]

    @classmethod
    def decode(cls, source: Any) -> Self:
        """Strict decode from a RemotingCommand or an extFields mapping (HeaderFieldError on bad input)."""
        ext = (source.ext_fields or {}) if isinstance(source, RemotingCommand) else source
        obj = _new(cls)
        for name, convert, required, default, empty_is_none, put in cls._PLAN:
            raw = ext.get(name)
            if raw is None or (empty_is_none and not raw):
                if required:
                    raise HeaderFieldError(f"the custom field <{name}> is null")
                put(obj, default)
            else:
                put(obj, raw if convert is None else convert(raw, name))
        return obj

    @classmethod
    def aliased_decoder(cls, aliases: Mapping[str, str]) -> Callable[[Mapping[str, str]], Self | None]:
        """``decode`` of an extFields mapping whose fields carry ``aliases`` (Java name -> wire name, e.g.
        SEND_MESSAGE_V2's one-letter names), read in place without renaming; errors still name the Java
        field.  It answers None when a field is present under its Java name (a header mixing both
        spellings): the caller then renames and decodes."""
        return functools.partial(_compile_decode(cls, cls.FIELDS, aliases), cls)

    @classmethod
    def peek(cls, source: Any) -> Self:
        """Lenient decode: every missing or malformed field is None (for the ACL's resource names)."""
        obj = _new(cls)
        for step, value in zip(cls._PLAN, cls.pick(source, *(f.attr for f in cls.FIELDS)), strict=True):
            step[-1](obj, value)
        return obj

    @classmethod
    def pick(cls, source: Any, *attrs: str) -> tuple[Any, ...]:
        """``peek``'s values of just the named attributes, in order (the ACL reads one or two fields of
        requests on every call: decoding all 11 fields of a PULL_MESSAGE header there costs several times more)."""
        plan = cls._PICKS.get(attrs)
        if plan is None:
            steps = dict(zip((f.attr for f in cls.FIELDS), cls._PLAN, strict=True))
            plan = cls._PICKS[attrs] = tuple(steps[a] for a in attrs)    # KeyError: not a declared field
        ext = (source.ext_fields or {}) if isinstance(source, RemotingCommand) else source
        out = []
        for name, convert, _required, _default, empty_is_none, _put in plan:
            raw = ext.get(name)
            if raw is None or (empty_is_none and not raw):
                out.append(None)
            elif convert is None:
                out.append(raw)
            else:
                try:
                    out.append(convert(raw, name))
                except HeaderFieldError:
                    out.append(None)
        return tuple(out)

    def command(self, code: int, body: bytes = b"") -> RemotingCommand:
        """A request ``code`` carrying this header (and ``body``)."""
        return RemotingCommand(code, ext_fields=self.encode(), body=body)

    @classmethod
    def encode_values(cls, **values: Any) -> dict[str, str]:
        """``cls(**values).encode()`` (each declaration compiles one that builds no instance)."""
        return cls(**values).encode()

    def encode(self) -> dict[str, str]:
        """extFields carrying this header (None dropped, booleans Java-style)."""
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



class ResponseHeader(RequestHeader):
    """Base of declared response headers (Java's ``*ResponseHeader``): the broker ``encode``s one into a
    response's extFields, a client ``decode``s it; the same declaration rules as a request's."""

    __slots__ = ()

def _int32(raw: str, name: str) -> int:
    if len(raw) < 10 and raw.isdecimal():                 # the common case: up to 9 digits
        return int(raw)
    return parse_int(raw, name, INT32_MIN, INT32_MAX)


def _int64(raw: str, name: str) -> int:
    if len(raw) < 19 and raw.isdecimal():                 # up to 18 digits
        return int(raw)
    return parse_int(raw, name)


_CONVERT: dict[str, Callable[[str, str], Any] | None] = {_STR: None, _I32: _int32, _I64: _int64, _BOOL: parse_bool}
_new = object.__new__


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
    # what decode / peek walk: the wire name, its parser, and the slot's setter (a frozen class's
    # __setattr__ refuses; the slot descriptor is how dataclasses' own __init__ gets past it, in effect)
    dc._PLAN = tuple((f.name, _CONVERT[f.kind], f.required, f.default, f.empty_is_none, dc.__dict__[f.attr].__set__)
                     for f in specs)
    dc._PICKS = {}
    dc.decode = classmethod(_compile_decode(dc, specs))     # type: ignore[method-assign]
    dc.encode = _compile_encode(dc, specs)                  # type: ignore[method-assign]
    dc.encode_values = staticmethod(_compile_encode(dc, specs, values=True))     # type: ignore[attr-defined]
    return dc


def _compile_encode(cls: type, specs: Sequence[FieldSpec], *, values: bool = False) -> Callable[..., dict[str, str]]:
    """``RequestHeader.encode`` unrolled for ``cls`` (a send's response header is encoded on every send);
    same semantics as the loop in the base class, which a test compares it with.

    ``values``: ``encode_values(**fields)`` instead, the extFields of ``cls(**fields)`` without building
    the frozen instance (its ``__init__`` sets each slot through ``object.__setattr__``: a send's answer
    paid that on every send); keyword-only, the declaration's defaults."""
    if values:
        params = ", ".join(f.attr if f.required else f"{f.attr}={f.attr}_default" for f in specs)
        lines = [f"def encode_values(*, {params}):" if specs else "def encode_values():", "    out = {}"]
        env: dict[str, Any] = {f"{f.attr}_default": f.default for f in specs if not f.required}
    else:
        lines = ["def encode(self):", "    out = {}"]
        env = {}
    for f in specs:
        value = ('"true" if v else "false"' if f.kind == _BOOL else "v" if f.kind == _STR else "str(v)")
        lines += [f"    v = {f.attr}" if values else f"    v = self.{f.attr}", "    if v is not None:",
                  f"        out[{f.name!r}] = {value}"]
    lines.append("    return out")
    exec("\n".join(lines), env)                     # noqa: S102 - text built above from the declaration only
    fn = env["encode_values" if values else "encode"]
    fn.__qualname__ = f"{cls.__qualname__}.{fn.__name__}"
    fn.__doc__ = (RequestHeader.encode_values if values else RequestHeader.encode).__doc__
    return fn


def _compile_decode(cls: type, specs: Sequence[FieldSpec], aliases: Mapping[str, str] | None = None
                    ) -> Callable[..., Any]:
    """``RequestHeader.decode`` unrolled for ``cls``: one straight run of look-ups with the number parse
    inlined (as ``dataclasses`` writes ``__init__``), so decoding the 11 fields of a PULL_MESSAGE header
    costs no more than the 8 untyped look-ups it replaced.  Same semantics as the loop in the base class,
    which a test compares it with."""
    env: dict[str, Any] = {"RemotingCommand": RemotingCommand, "HeaderFieldError": HeaderFieldError,
                           "new": _new, "int": int, "len": len, "parse_int": parse_int, "parse_bool": parse_bool,
                           "I32_MIN": INT32_MIN, "I32_MAX": INT32_MAX}
    lines = ["def decode(cls, source):",
             "    ext = (source.ext_fields or {}) if isinstance(source, RemotingCommand) else source",
             "    get = ext.get",
             "    obj = new(cls)"]
    for i, f in enumerate(specs):
        env[f"set{i}"] = cls.__dict__[f.attr].__set__
        env[f"default{i}"] = f.default
        name, key = repr(f.name), repr((aliases or {}).get(f.name, f.name))
        value = {_STR: "raw",
                 _I32: f"int(raw) if len(raw) < 10 and raw.isdecimal() else parse_int(raw, {name}, I32_MIN, I32_MAX)",
                 _I64: f"int(raw) if len(raw) < 19 and raw.isdecimal() else parse_int(raw, {name})",
                 _BOOL: f"parse_bool(raw, {name})"}[f.kind]
        missing = (f"raise HeaderFieldError({('the custom field <' + f.name + '> is null')!r})" if f.required
                   else f"set{i}(obj, default{i})")
        if key != name:                             # aliased: a Java name present means mixed spellings
            lines.append(f"    if {name} in ext: return None")
        lines += [f"    raw = get({key})",
                  f"    if raw is None{' or not raw' if f.empty_is_none else ''}:",
                  f"        {missing}",
                  "    else:",
                  f"        set{i}(obj, {value})"]
    lines.append("    return obj")
    exec("\n".join(lines), env)                     # noqa: S102 - text built above from the declaration only
    fn = env["decode"]
    fn.__qualname__ = f"{cls.__qualname__}.decode"
    fn.__doc__ = RequestHeader.decode.__doc__
    return fn
