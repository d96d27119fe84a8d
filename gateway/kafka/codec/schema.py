"""Declarative Kafka message schemas: one declaration drives encode and decode.

Theory of operation
-------------------
A message is declared once (``gateway/kafka/codec/messages*.py``) as an
``Api`` holding a request and a response ``StructType``.  A ``StructType`` is
a tuple of ``Field``; each field has a wire type, the versions in which it
exists, the versions in which it may be null, an optional tag (tagged fields
live only in the tagged-field section of flexible versions) and a default.

Decoded values are ``Struct`` objects: a ``SimpleNamespace`` with one
attribute per declared field (snake_case), *including* fields absent at the
decoded version, which hold their default.  Handlers therefore read
``req.topics`` etc. without caring which version arrived; type checkers see
attributes as ``Any`` (no metaclass or generated stubs involved).

Encoding takes a ``Struct``, any ``Mapping`` or any object with attributes;
missing attributes take their default, so a handler builds a response with
only the fields it cares about and the encoder writes what the version needs.
Fields that do not exist at the encoded version are silently dropped.

For each (struct, version) a *plan* is compiled once and cached: the ordered
list of (name, reader, writer) for regular fields plus a tag -> field table.
Decoding runs a function generated from the plan (``_compile_decoder``): the
fields read in a straight line, fixed-width integers unpacked in place, and
the empty tagged-field section (the usual case) taken as one byte; it builds
exactly the ``Struct`` the plan-walking ``decode_generic`` builds and raises
the same errors (a test compares them on every API and version).  Encoding a
``Struct`` runs a generated function too (``_compile_encoder``: the same bytes
and errors as ``encode_generic``, which takes every other kind of value).
Flexible versions (>= the API's first flexible version) switch strings,
bytes and arrays to compact encodings and append a tagged-field section to
every struct (kafka-wire.md §1.5).  Unknown tags are skipped on read; tagged
fields are written in tag order and only when they differ from the default.

Version ranges use Kafka's notation: "3+", "1-7", "4", "" (none).
"""

from __future__ import annotations

import functools
import struct as _struct
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from rokka.gateway.kafka.codec import primitives as p
from rokka.gateway.kafka.codec.primitives import DecodeError, EncodeError, Reader

__all__ = [
    "Api",
    "Array",
    "Field",
    "Primitive",
    "Struct",
    "StructType",
    "arr",
    "f",
    "struct",
    "versions",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "UINT16",
    "FLOAT64",
    "BOOL",
    "STRING",
    "BYTES",
    "RECORDS",
    "UUID",
]

MAX_VERSION = 0x7FFF
VersionRange = tuple[int, int]  # inclusive; (1, 0) = empty
NO_VERSIONS: VersionRange = (1, 0)


def versions(spec: str) -> VersionRange:
    """Parse "3+", "1-7", "4" or "" (none) into an inclusive range."""
    spec = spec.strip()
    if not spec or spec == "none":
        return NO_VERSIONS
    if spec.endswith("+"):
        return (int(spec[:-1]), MAX_VERSION)
    if "-" in spec:
        lo, hi = spec.split("-")
        return (int(lo), int(hi))
    return (int(spec), int(spec))


def _in(r: VersionRange, v: int) -> bool:
    return r[0] <= v <= r[1]


class Struct(SimpleNamespace):
    """A decoded (or to-be-encoded) struct: attribute access, equality, repr."""


@dataclass(frozen=True)
class Primitive:
    name: str  # Kafka type name: int8, int16, ..., string, bytes, records, uuid


INT8 = Primitive("int8")
INT16 = Primitive("int16")
INT32 = Primitive("int32")
INT64 = Primitive("int64")
UINT16 = Primitive("uint16")
FLOAT64 = Primitive("float64")
BOOL = Primitive("bool")
STRING = Primitive("string")
BYTES = Primitive("bytes")
RECORDS = Primitive("records")
UUID = Primitive("uuid")


@dataclass(frozen=True)
class Array:
    elem: Primitive | StructType


_MISSING: Any = object()


@dataclass(frozen=True)
class Field:
    name: str
    type: Primitive | Array | StructType
    versions: VersionRange
    nullable: VersionRange = NO_VERSIONS
    tag: int | None = None
    tagged: VersionRange = NO_VERSIONS
    default: Any = _MISSING

    def __post_init__(self) -> None:
        # make_default without the type dispatch: every struct decode fills its absent fields.
        if self.default is not _MISSING:
            const = self.default
            maker: Callable[[], Any] = lambda: const  # noqa: E731
        elif isinstance(self.type, Array):
            maker = list
        elif isinstance(self.type, StructType):
            maker = self.type.defaults
        else:
            const = _PRIMITIVE_DEFAULTS[self.type.name]
            maker = lambda: const  # noqa: E731
        object.__setattr__(self, "make_default", maker)

    def make_default(self) -> Any:  # replaced per instance in __post_init__
        """A fresh default value (new list/Struct each call)."""
        raise AssertionError("unreachable")


_PRIMITIVE_DEFAULTS: dict[str, Any] = {
    "int8": 0,
    "int16": 0,
    "int32": 0,
    "int64": 0,
    "uint16": 0,
    "float64": 0.0,
    "bool": False,
    "string": "",
    "bytes": b"",
    "records": None,
    "uuid": p.ZERO_UUID,
}


Reader_ = Callable[[Reader], Any]
Writer_ = Callable[[bytearray, Any], None]


@dataclass
class _Plan:
    regular: list[tuple[Field, Reader_, Writer_]]
    tagged: dict[int, tuple[Field, Reader_, Writer_]]
    absent: list[Field]
    flexible: bool


@dataclass(eq=False)
class StructType:
    """An ordered group of fields; also the type of struct-array elements."""

    fields: tuple[Field, ...]
    _plans: dict[tuple[int, bool], _Plan] = field(default_factory=dict, repr=False)
    _decoders: dict[tuple[int, bool], Callable[[Reader], Struct]] = field(default_factory=dict, repr=False)
    _encoders: dict[tuple[int, bool], Callable[[bytearray, Any], None]] = field(default_factory=dict, repr=False)

    def defaults(self) -> Struct:
        return Struct(**{fl.name: fl.make_default() for fl in self.fields})

    def make(self, **values: Any) -> Struct:
        """A Struct with the given fields and defaults for the rest."""
        names = {fl.name for fl in self.fields}
        unknown = set(values) - names
        if unknown:
            raise TypeError(f"unknown fields {sorted(unknown)}")
        s = self.defaults()
        s.__dict__.update(values)
        return s

    def plan(self, version: int, flexible: bool) -> _Plan:
        key = (version, flexible)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = self._compile(version, flexible)
        return plan

    def _compile(self, version: int, flexible: bool) -> _Plan:
        regular, tagged, absent = [], {}, []
        for fl in self.fields:
            if not _in(fl.versions, version):
                absent.append(fl)
                continue
            nullable = _in(fl.nullable, version)
            codec = _codec(fl.type, version, flexible, nullable, fl.name)
            if fl.tag is not None and _in(fl.tagged, version):
                if not flexible:
                    raise ValueError(f"tagged field {fl.name} in non-flexible version {version}")
                tagged[fl.tag] = (fl, *codec)
            else:
                regular.append((fl, *codec))
        return _Plan(regular, dict(sorted(tagged.items())), absent, flexible)

    def decode(self, r: Reader, version: int, flexible: bool) -> Struct:
        fn = self._decoders.get((version, flexible))
        if fn is None:
            fn = self._decoders[(version, flexible)] = _compile_decoder(self.plan(version, flexible))
        return fn(r)

    def decode_generic(self, r: Reader, version: int, flexible: bool) -> Struct:
        """``decode`` by walking the plan (the reference the generated decoders are held to)."""
        plan = self.plan(version, flexible)
        values: dict[str, Any] = {fl.name: fl.make_default() for fl in plan.absent}
        for fl, read, _ in plan.regular:
            values[fl.name] = read(r)
        for fl, _, _ in plan.tagged.values():
            values[fl.name] = fl.make_default()
        if flexible:
            values.update(_read_tags(r, plan.tagged))
        return Struct(**values)

    def encode(self, out: bytearray, value: Any, version: int, flexible: bool) -> None:
        fn = self._encoders.get((version, flexible))
        if fn is None:
            generic = functools.partial(self.encode_generic, version=version, flexible=flexible)
            fn = self._encoders[(version, flexible)] = _compile_encoder(self.plan(version, flexible), generic)
        fn(out, value)

    def encode_generic(self, out: bytearray, value: Any, version: int, flexible: bool) -> None:
        """``encode`` by walking the plan (the reference the generated encoders are held to; they hand any
        value that is not a ``Struct`` to it)."""
        plan = self.plan(version, flexible)
        if type(value) is Struct:   # the usual case: one dict lookup per field
            d = value.__dict__
            for fl, _, write in plan.regular:
                v = d.get(fl.name, _MISSING)
                write(out, fl.make_default() if v is _MISSING else v)
        else:
            for fl, _, write in plan.regular:
                write(out, _get(value, fl))
        if flexible:
            _encode_tags(plan, out, value)


def _get(value: Any, fl: Field) -> Any:
    if type(value) is dict or isinstance(value, Mapping):
        v = value.get(fl.name, _MISSING)
    else:
        v = getattr(value, fl.name, _MISSING)
    return fl.make_default() if v is _MISSING else v


# Fixed-width integers the generated decoders unpack in place: kind -> (struct format, size).
_INLINE: dict[str, tuple[str, int]] = {"int8": (">b", 1), "int16": (">h", 2), "int32": (">i", 4),
                                       "int64": (">q", 8), "uint16": (">H", 2), "float64": (">d", 8)}
_IMMUTABLE = (int, float, str, bytes, bool, type(None))


def _read_tags(r: Reader, tagged: dict[int, tuple[Field, Reader_, Writer_]]) -> dict[str, Any]:
    """A struct's tagged-field section: {field name: value} of the known tags present (unknown skipped)."""
    found: dict[str, Any] = {}
    for _ in range(r.uvarint()):
        tag = r.uvarint()
        size = r.uvarint()
        end = r.pos + size
        if end > r.end:
            raise DecodeError(f"tagged field {tag} overruns its struct")
        entry = tagged.get(tag)
        if entry is not None:
            sub = Reader(r.buf, r.pos, end)
            found[entry[0].name] = entry[1](sub)
            if sub.pos != end:
                raise DecodeError(f"tagged field {tag} has {end - sub.pos} trailing bytes")
        r.pos = end
    return found


def _compile_decoder(plan: _Plan) -> Callable[[Reader], Struct]:
    """A decode function for one plan, generated as straight-line Python (module doc); the fields
    come out in ``decode_generic``'s order: absent, regular, tagged."""
    ns: dict[str, Any] = {"Struct": Struct, "read_tags": _read_tags, "TAGGED": plan.tagged}
    body = ["def decode(r):", "    buf = r.buf"]
    out: list[tuple[str, str]] = []

    def default(key: str, fl: Field) -> str:
        value = fl.make_default()
        if isinstance(value, _IMMUTABLE):
            ns[key] = value
            return key
        ns[key] = fl.make_default
        return f"{key}()"

    for i, fl in enumerate(plan.absent):
        out.append((fl.name, default(f"A{i}", fl)))
    for i, (fl, read, _) in enumerate(plan.regular):
        inline = _INLINE.get(fl.type.name) if isinstance(fl.type, Primitive) else None
        if inline is not None:
            fmt, size = inline
            ns[f"U{i}"] = _struct.Struct(fmt).unpack_from
            body += ["    p = r.pos", f"    if p + {size} > r.end:", f"        r._need({size})",
                     f"    v{i} = U{i}(buf, p)[0]", f"    r.pos = p + {size}"]
        else:
            ns[f"R{i}"] = read
            body.append(f"    v{i} = R{i}(r)")
        out.append((fl.name, f"v{i}"))
    if plan.flexible:
        tagged = [fl for fl, _, _ in plan.tagged.values()]
        for k, fl in enumerate(tagged):
            body.append(f"    t{k} = {default(f'T{k}', fl)}")
            out.append((fl.name, f"t{k}"))
        body += ["    p = r.pos", "    if p < r.end and buf[p] == 0:", "        r.pos = p + 1", "    else:",
                 "        found = read_tags(r, TAGGED)"]
        for k, fl in enumerate(tagged):
            body.append(f"        t{k} = found.get({fl.name!r}, t{k})")
    if any(not name.isidentifier() or name in ns or name in ("r", "buf", "p", "found")
           or (name[:1] in "vt" and name[1:].isdigit()) for name, _ in out):
        ns["NAMES"] = tuple(name for name, _ in out)
        body.append(f"    return Struct(**dict(zip(NAMES, ({', '.join(e for _, e in out)},))))")
    else:
        body.append(f"    return Struct({', '.join(f'{name}={e}' for name, e in out)})")
    exec(compile("\n".join(body), "<kafka-decoder>", "exec"), ns)  # noqa: S102 - generated from declarations
    return ns["decode"]  # type: ignore[no-any-return]


def _compile_encoder(plan: _Plan, generic: Callable[[bytearray, Any], None]) -> Callable[[bytearray, Any], None]:
    """An encode function for one plan, generated as straight-line Python (as ``_compile_decoder``): a
    ``Struct``'s fields looked up in its ``__dict__`` in plan order (a missing one takes its default),
    fixed-width integers packed in place, and an empty tagged-field section as one byte when the plan has
    no tagged fields; the same bytes and errors as ``encode_generic``, which any other value goes to."""
    ns: dict[str, Any] = {"Struct": Struct, "MISSING": _MISSING, "generic": generic}
    body = ["def encode(out, value):", "    if type(value) is not Struct:", "        return generic(out, value)",
            "    get = value.__dict__.get"]
    for i, (fl, _, write) in enumerate(plan.regular):
        ns[f"N{i}"] = fl.name
        ns[f"D{i}"] = fl.make_default
        body += [f"    v = get(N{i}, MISSING)", "    if v is MISSING:", f"        v = D{i}()"]
        inline = _INLINE.get(fl.type.name) if isinstance(fl.type, Primitive) else None
        if inline is not None:
            ns[f"P{i}"] = _struct.Struct(inline[0]).pack
            body.append(f"    out += P{i}(v)")
        else:
            ns[f"W{i}"] = write
            body.append(f"    W{i}(out, v)")
    if plan.flexible:
        if plan.tagged:
            body.append("    return generic_tags(out, value)")
            ns["generic_tags"] = functools.partial(_encode_tags, plan)
        else:
            body.append("    out.append(0)")      # an empty tagged-field section: uvarint 0
    exec(compile("\n".join(body), "<kafka-encoder>", "exec"), ns)  # noqa: S102 - generated from declarations
    return ns["encode"]  # type: ignore[no-any-return]


def _encode_tags(plan: _Plan, out: bytearray, value: Any) -> None:
    """A struct's tagged-field section (the fields that differ from their defaults, in tag order)."""
    present = []
    for tag, (fl, _, write) in plan.tagged.items():
        v = _get(value, fl)
        if v != fl.make_default():
            buf = bytearray()
            write(buf, v)
            present.append((tag, buf))
    p.write_uvarint(out, len(present))
    for tag, buf in present:
        p.write_uvarint(out, tag)
        p.write_uvarint(out, len(buf))
        out += buf


def _codec(
    t: Primitive | Array | StructType, version: int, flexible: bool, nullable: bool, name: str
) -> tuple[Reader_, Writer_]:
    if isinstance(t, Primitive):
        return _primitive_codec(t.name, flexible, nullable, name)
    if isinstance(t, StructType):
        return _struct_codec(t, version, flexible, nullable, name)
    elem_read, elem_write = _codec(t.elem, version, flexible, False, name)

    def read(r: Reader) -> list[Any] | None:
        n = r.array_len(flexible)
        if n == -1:
            if not nullable:
                raise DecodeError(f"null array {name} is not nullable")
            return None
        if n > r.remaining():
            raise DecodeError(f"array {name} claims {n} elements, only {r.remaining()} bytes left")
        return [elem_read(r) for _ in range(n)]

    def write(out: bytearray, v: Sequence[Any] | None) -> None:
        if v is None:
            if not nullable:
                raise EncodeError(f"array {name} is not nullable")
            p.write_array_len(out, -1, flexible)
            return
        p.write_array_len(out, len(v), flexible)
        for item in v:
            elem_write(out, item)

    return read, write


def _struct_codec(
    t: StructType, version: int, flexible: bool, nullable: bool, name: str
) -> tuple[Reader_, Writer_]:
    if nullable:  # Kafka marks nullable structs with an int8 presence byte; none of ours are.
        raise ValueError(f"nullable struct {name} is not supported")

    decoders, encoders = t._decoders, t._encoders

    def read(r: Reader) -> Struct:
        fn = decoders.get((version, flexible))
        return fn(r) if fn is not None else t.decode(r, version, flexible)

    def write(out: bytearray, v: Any) -> None:
        fn = encoders.get((version, flexible))
        if fn is not None:
            fn(out, v)
        else:
            t.encode(out, v, version, flexible)

    return read, write


def _primitive_codec(kind: str, flexible: bool, nullable: bool, name: str) -> tuple[Reader_, Writer_]:
    fixed = _FIXED.get(kind)
    if fixed is not None:
        return fixed
    if kind == "string":
        return _nullable_wrap(lambda r: r.string(flexible), lambda o, v: p.write_string(o, v, flexible),
                              nullable, name)
    if kind in ("bytes", "records"):
        return _nullable_wrap(lambda r: r.bytes_(flexible), lambda o, v: p.write_bytes(o, v, flexible),
                              nullable, name)
    raise ValueError(f"unknown type {kind}")


def _nullable_wrap(read0: Reader_, write0: Writer_, nullable: bool, name: str) -> tuple[Reader_, Writer_]:
    if nullable:
        return read0, write0

    def read(r: Reader) -> Any:
        v = read0(r)
        if v is None:
            raise DecodeError(f"null value for non-nullable field {name}")
        return v

    def write(out: bytearray, v: Any) -> None:
        if v is None:
            raise EncodeError(f"field {name} is not nullable")
        write0(out, v)

    return read, write


def _write_uuid(out: bytearray, v: uuid.UUID) -> None:
    p.write_uuid(out, v)


_FIXED: dict[str, tuple[Reader_, Writer_]] = {
    "int8": (Reader.int8, p.write_int8),
    "int16": (Reader.int16, p.write_int16),
    "int32": (Reader.int32, p.write_int32),
    "int64": (Reader.int64, p.write_int64),
    "uint16": (Reader.uint16, p.write_uint16),
    "float64": (Reader.float64, p.write_float64),
    "bool": (Reader.boolean, p.write_bool),
    "uuid": (Reader.uuid, _write_uuid),
}


# ---------------------------------------------------------------- declaration helpers


def f(
    name: str,
    type_: Primitive | Array | StructType,
    vers: str = "0+",
    *,
    null: str = "",
    tag: int | None = None,
    default: Any = _MISSING,
) -> Field:
    """Declare a field.  ``tag`` makes it a tagged field in all of ``vers``."""
    vr = versions(vers)
    return Field(
        name=name,
        type=type_,
        versions=vr,
        nullable=versions(null),
        tag=tag,
        tagged=vr if tag is not None else NO_VERSIONS,
        default=default,
    )


def struct(*fields: Field) -> StructType:
    return StructType(tuple(fields))


def arr(first: Primitive | Field, *rest: Field) -> Array:
    """``arr(INT32)`` is an array of int32; ``arr(f(...), f(...))`` an array of structs."""
    if isinstance(first, Primitive):
        if rest:
            raise TypeError("array of primitives takes one type")
        return Array(first)
    return Array(StructType((first, *rest)))


@dataclass(eq=False)
class Api:
    """One Kafka API: key, supported version range, first flexible version, schemas."""

    key: int
    name: str
    min_version: int
    max_version: int
    flexible: int | None
    request: StructType
    response: StructType

    def is_flexible(self, version: int) -> bool:
        return self.flexible is not None and version >= self.flexible

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def _check(self, version: int) -> None:
        if not self.supports(version):
            raise EncodeError(f"{self.name} v{version} outside {self.min_version}-{self.max_version}")

    def encode_request(self, version: int, body: Any) -> bytes:
        self._check(version)
        out = bytearray()
        self.request.encode(out, body, version, self.is_flexible(version))
        return bytes(out)

    def encode_response(self, version: int, body: Any) -> bytes:
        out = bytearray()
        self.encode_response_into(out, version, body)
        return bytes(out)

    def encode_response_into(self, out: bytearray, version: int, body: Any) -> None:
        """Append the encoded response body to ``out`` (a ``primitives.Gather`` keeps large bytes by reference)."""
        self._check(version)
        self.response.encode(out, body, version, self.is_flexible(version))

    def decode_request(self, version: int, data: bytes, pos: int = 0, *, strict: bool = False) -> Struct:
        """Decode a request body.  Trailing bytes are ignored unless ``strict``: the Kafka broker
        reads the declared fields and ignores the rest, and librdkafka 2.16 sends 3 extra bytes
        after a Metadata v12 body."""
        return self._decode(self.request, version, data, pos, strict)

    def decode_response(self, version: int, data: bytes, pos: int = 0) -> Struct:
        return self._decode(self.response, version, data, pos, True)

    def _decode(self, t: StructType, version: int, data: bytes, pos: int, strict: bool) -> Struct:
        if not self.supports(version):
            raise DecodeError(f"{self.name} v{version} is not supported")
        r = Reader(data, pos)
        value = t.decode(r, version, self.is_flexible(version))
        if strict and r.remaining():
            raise DecodeError(f"{self.name} v{version}: {r.remaining()} trailing bytes")
        return value
