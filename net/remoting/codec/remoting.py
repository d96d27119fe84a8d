"""RocketMQ remoting frames: ``RemotingCommand`` <-> bytes (sans-IO).

Theory of operation
-------------------
Frame layout (reference section 1.1; Java ``RemotingCommand.encode`` /
``NettyDecoder``)::

    +--------+----------------------+-----------+--------+
    | length | serType<<24 | hdrLen | header    | body   |
    | int32  | int32                | hdrLen B  | rest   |
    +--------+----------------------+-----------+--------+
    length = 4 + hdrLen + len(body)   (everything after the length word)

The high byte of the second word is the serialize type: 0 = JSON header,
1 = ROCKETMQ binary header.  C++ 1.2.x and ali-ons do not mask it, so a reply
must always use the type of the request (``make_response`` copies it).

JSON header: keys ``code, extFields, flag, language, opaque, remark,
serializeTypeCurrentRPC, version`` (fastjson writes them sorted, omits null).
Peers send extFields values of any JSON type (C++: numbers; ali-ons:
booleans), so decoding coerces every scalar to the Java string form;
code/flag/opaque/version must fit a Java ``int`` and ``NaN``/``Infinity`` or
nesting beyond the parser's depth are refused (``RemoteProtocolError``), as
fastjson refuses them;
encoding writes them all as JSON strings and code/flag/opaque/version as
numbers (jsoncpp's ``asInt`` on a string throws).

The JSON header of the shape real clients send is decoded and encoded by ``_cjsonhdr`` (C, one pass, no
``json`` objects); anything outside that shape -- and every header when the extension is not built -- takes
the Python twins here (``_decode_json_header`` / ``_encode_json_header``), the reference hypothesis holds
the C code to (tests/gateway/rocketmq/test_json_header_native.py).

ROCKETMQ header (section 1.3, Java ``RocketMQSerializable``)::

    code int16 | language int8 | version int16 | opaque int32 | flag int32 |
    remarkLen int32 + utf8 | extLen int32 + { keyLen int16 + key, valLen int32 + val }*

``FrameDecoder`` is an iterator over a buffer: it checks the length prefix
against ``max_frame_bytes`` before buffering the body (Netty's
``LengthFieldBasedFrameDecoder`` does the same with 16 MiB).

Editing rule: this module knows nothing about sockets, trio or handlers.
"""

from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass, field, replace

from rokka.net.remoting.codec.codes import (
    DEFAULT_VERSION,
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    SERIALIZE_JSON,
    SERIALIZE_ROCKETMQ,
    LanguageCode,
)
from rokka.net.remoting.codec.errors import LocalProtocolError, RemoteProtocolError

try:        # the JSON header of the common shape in C; the Python twin below is the reference
    import rokka.net.remoting.codec._cjsonhdr as _cjsonhdr
except ImportError:     # pragma: no cover - the extension is optional (setup.py)
    _cjsonhdr = None  # type: ignore[assignment]

DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024
_MAX_HEADER_BYTES = 0xFFFFFF
_LANG_BY_CODE = {lc.value: lc.name for lc in LanguageCode}


@dataclass(slots=True)
class RemotingCommand:
    """One remoting frame, request or response.

    ``ext_fields`` values are always ``str`` after decoding.  ``remark`` is
    ``None`` when absent.  ``serialize_type`` is 0 (JSON) or 1 (ROCKETMQ).
    """

    code: int
    language: str = "JAVA"
    version: int = DEFAULT_VERSION
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    serialize_type: int = SERIALIZE_JSON
    #: ``time.monotonic()`` when the frame was read (``RemotingConnection``; 0.0 = not read from a peer)
    received_at: float = field(default=0.0, compare=False, repr=False)
    #: True when the channel's reader held the request behind others before dispatching it (``channel.py``)
    held: bool = field(default=False, compare=False, repr=False)

    @property
    def is_response(self) -> bool:
        """Bit 0 only: C++ answers broker requests with flag 3."""
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY) and not self.flag & FLAG_RESPONSE

    def make_response(self, code: int, remark: str | None = None,
                      ext_fields: dict[str, str] | None = None, body: bytes = b"", *,
                      own: bool = False) -> RemotingCommand:
        """A response to this request: same opaque and serialize type, flag bit 0 set.  ``ext_fields`` is
        copied unless ``own`` (the caller built it for this response alone)."""
        return RemotingCommand(
            code=int(code), opaque=self.opaque, flag=FLAG_RESPONSE, remark=remark,
            ext_fields=(ext_fields if own else dict(ext_fields)) if ext_fields else {}, body=body,
            serialize_type=self.serialize_type,
        )

    def as_oneway(self) -> RemotingCommand:
        return replace(self, flag=self.flag | FLAG_ONEWAY)


# --------------------------------------------------------------------------
# extFields value coercion
# --------------------------------------------------------------------------

def coerce_ext_value(value: object) -> str | None:
    """Java string form of a JSON scalar; ``None`` means "absent" (JSON null)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    # Objects/arrays never appear in real clients; keep them as compact JSON.
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


_INT32 = range(-(1 << 31), 1 << 31)


def _as_int(value: object, what: str) -> int:
    """A Java ``int`` header field: fastjson refuses what does not fit (``1e400``, ``2**40``)."""
    if isinstance(value, bool) or value is None:
        raise RemoteProtocolError(f"header field {what} is not a number: {_short(value)}")
    try:
        out = int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError, OverflowError):
        raise RemoteProtocolError(f"header field {what} is not a number: {_short(value)}") from None
    if out not in _INT32 or (isinstance(value, float) and not value.is_integer()):
        raise RemoteProtocolError(f"header field {what} is not a 32-bit integer: {_short(value)}")
    return out


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _refuse_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


# --------------------------------------------------------------------------
# JSON header
# --------------------------------------------------------------------------

# json.dumps / json.loads with non-default options build a new coder per call; shared instances are cheaper.
_JSON_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
_JSON_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)
#: A ``\\uD800``-``\\uDFFF`` escape: only such a header can hold a lone surrogate.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")


def encode_json_header(cmd: RemotingCommand) -> bytes:
    if _cjsonhdr is not None and (native := _cjsonhdr.encode(cmd.code, cmd.ext_fields, cmd.flag, cmd.language,
                                                             cmd.opaque, cmd.remark, cmd.version)) is not None:
        return native       # the common shape, the same bytes (_cjsonhdr.c)
    return _encode_json_header(cmd)


def _encode_json_header(cmd: RemotingCommand) -> bytes:
    obj: dict[str, object] = {"code": cmd.code}
    if ext := cmd.ext_fields:
        for v in ext.values():
            if type(v) is not str:      # values are strings on the hot path; anything else is made one
                ext = {k: str(v) for k, v in ext.items() if v is not None}
                break
        obj["extFields"] = ext
    obj["flag"] = cmd.flag
    obj["language"] = cmd.language
    obj["opaque"] = cmd.opaque
    if cmd.remark is not None:
        obj["remark"] = cmd.remark
    obj["serializeTypeCurrentRPC"] = "JSON"
    obj["version"] = cmd.version
    return _JSON_ENCODER.encode(obj).encode("utf-8")


_SCAN = _JSON_DECODER.scan_once


def _parse_json(text: str) -> object:
    """``json.loads`` with the shared decoder; one document that fills ``text`` is scanned directly
    (no whitespace regexes), anything else takes the full path for its exact error."""
    try:
        obj, end = _SCAN(text, 0)
    except (StopIteration, ValueError):
        end = -1
    return obj if end == len(text) else _JSON_DECODER.decode(text)


def decode_json_header(data: bytes) -> RemotingCommand:
    if _cjsonhdr is not None and (fields := _cjsonhdr.decode(data)) is not None:
        code, lang, version, opaque, flag, remark, ext = fields     # the common shape (_cjsonhdr.c)
        return RemotingCommand(code, lang, version, opaque, flag, remark, ext, b"", SERIALIZE_JSON)
    return _decode_json_header(data)


def _decode_json_header(data: bytes) -> RemotingCommand:
    try:
        obj = _parse_json(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise RemoteProtocolError(f"JSON header does not parse: {exc}") from None
    except RecursionError:
        raise RemoteProtocolError("JSON header nested too deeply") from None
    if type(obj) is not dict:
        raise RemoteProtocolError("JSON header is not an object")
    if "code" not in obj:
        raise RemoteProtocolError("JSON header has no code")
    lang = obj.get("language", "JAVA")
    if type(lang) is not str:
        lang = _LANG_BY_CODE.get(lang, "OTHER") if type(lang) is int else "OTHER"
    remark = obj.get("remark")
    ext_raw = obj.get("extFields")
    if ext_raw is not None and type(ext_raw) is not dict:
        raise RemoteProtocolError("extFields is not an object")
    ext: dict[str, str] = {}
    if ext_raw:
        ext = ext_raw
        for value in ext_raw.values():
            if type(value) is not str:     # C++ sends numbers, ali-ons booleans: Java string forms
                ext = _coerced(ext_raw)
                break
    cmd = RemotingCommand(
        _int_field(obj["code"], "code"), lang, _int_field(obj.get("version", 0), "version"),
        _int_field(obj.get("opaque", 0), "opaque"), _int_field(obj.get("flag", 0), "flag"),
        None if remark is None else coerce_ext_value(remark), ext, b"", SERIALIZE_JSON,
    )
    if b"\\u" in data and _SURROGATE_ESCAPE.search(data):
        _refuse_lone_surrogates(cmd)
    return cmd


def _coerced(ext_raw: dict[str, object]) -> dict[str, str]:
    ext: dict[str, str] = {}
    for key, value in ext_raw.items():
        if type(value) is str:
            ext[key] = value
        elif type(value) is int:
            ext[key] = str(value)
        elif (sval := coerce_ext_value(value)) is not None:
            ext[str(key)] = sval
    return ext


def _int_field(value: object, what: str) -> int:
    if type(value) is int and -0x80000000 <= value <= 0x7FFFFFFF:   # the common case, checked inline
        return value
    return _as_int(value, what)


def _refuse_lone_surrogates(cmd: RemotingCommand) -> None:
    """A ``\\ud800`` escape decodes to a string that cannot be written as UTF-8 (a name stored with
    it would make every later save of the offset table or KV config fail): refuse the frame."""
    try:
        for key, value in cmd.ext_fields.items():
            key.encode("utf-8")
            value.encode("utf-8")
        if cmd.remark is not None:
            cmd.remark.encode("utf-8")
    except UnicodeEncodeError:
        raise RemoteProtocolError("JSON header holds a lone UTF-16 surrogate") from None


# --------------------------------------------------------------------------
# ROCKETMQ binary header
# --------------------------------------------------------------------------

_FIXED = struct.Struct(">hbhii")  # code, language, version, opaque, flag
_LENGTH = struct.Struct(">i")


def encode_binary_header(cmd: RemotingCommand) -> bytes:
    try:
        lang = LanguageCode[cmd.language].value
    except KeyError:
        lang = LanguageCode.OTHER.value
    try:
        parts = [_FIXED.pack(cmd.code, lang, cmd.version, cmd.opaque, cmd.flag)]
    except struct.error as exc:
        raise LocalProtocolError(f"field does not fit the ROCKETMQ header: {exc}") from None
    remark = (cmd.remark or "").encode("utf-8")
    parts += [struct.pack(">i", len(remark)), remark]
    pairs = []
    for key, value in cmd.ext_fields.items():
        if value is None:
            continue
        kb, vb = key.encode("utf-8"), str(value).encode("utf-8")
        pairs += [struct.pack(">h", len(kb)), kb, struct.pack(">i", len(vb)), vb]
    ext = b"".join(pairs)
    parts += [struct.pack(">i", len(ext)), ext]
    return b"".join(parts)


def decode_binary_header(data: bytes) -> RemotingCommand:
    try:
        code, lang, version, opaque, flag = _FIXED.unpack_from(data, 0)
        pos = _FIXED.size
        remark_len = struct.unpack_from(">i", data, pos)[0]
        pos += 4
        if remark_len < 0 or pos + remark_len > len(data):
            raise RemoteProtocolError(f"remark length {remark_len} exceeds header")
        remark = data[pos:pos + remark_len].decode("utf-8") if remark_len else None
        pos += remark_len
        ext_len = struct.unpack_from(">i", data, pos)[0]
        pos += 4
        if ext_len < 0 or pos + ext_len > len(data):
            raise RemoteProtocolError(f"extFields length {ext_len} exceeds header")
        ext = _decode_binary_ext(data[pos:pos + ext_len])
    except struct.error as exc:
        raise RemoteProtocolError(f"truncated ROCKETMQ header: {exc}") from None
    except UnicodeDecodeError as exc:
        raise RemoteProtocolError(f"ROCKETMQ header text is not UTF-8: {exc}") from None
    return RemotingCommand(
        code=code, language=_LANG_BY_CODE.get(lang, "OTHER"), version=version, opaque=opaque,
        flag=flag, remark=remark, ext_fields=ext, serialize_type=SERIALIZE_ROCKETMQ,
    )


def _decode_binary_ext(area: bytes) -> dict[str, str]:
    ext: dict[str, str] = {}
    pos = 0
    while pos < len(area):
        klen = struct.unpack_from(">h", area, pos)[0]
        pos += 2
        if klen < 0 or pos + klen > len(area):
            raise RemoteProtocolError(f"extFields key length {klen} exceeds header")
        key = area[pos:pos + klen].decode("utf-8")
        pos += klen
        vlen = struct.unpack_from(">i", area, pos)[0]
        pos += 4
        if vlen < 0 or pos + vlen > len(area):
            raise RemoteProtocolError(f"extFields value length {vlen} exceeds header")
        ext[key] = area[pos:pos + vlen].decode("utf-8")
        pos += vlen
    return ext


# --------------------------------------------------------------------------
# Whole frames
# --------------------------------------------------------------------------

def encode_command(cmd: RemotingCommand) -> bytes:
    """Full frame bytes (length prefix included) in ``cmd.serialize_type``."""
    if cmd.serialize_type == SERIALIZE_ROCKETMQ:
        header = encode_binary_header(cmd)
    elif cmd.serialize_type == SERIALIZE_JSON:
        header = encode_json_header(cmd)
    else:
        raise LocalProtocolError(f"unknown serialize type {cmd.serialize_type}")
    if len(header) > _MAX_HEADER_BYTES:
        raise LocalProtocolError(f"header of {len(header)} bytes does not fit 24 bits")
    length = 4 + len(header) + len(cmd.body)
    if length > 0x7FFFFFFF:
        raise LocalProtocolError(f"frame of {length} bytes does not fit int32")
    word = (cmd.serialize_type << 24) | len(header)
    return b"".join((struct.pack(">ii", length, word), header, cmd.body))


def decode_frame(payload: bytes) -> RemotingCommand:
    """Decode one frame *without* its 4-byte length prefix."""
    if len(payload) < 4:
        raise RemoteProtocolError(f"frame of {len(payload)} bytes has no header-length word")
    word = struct.unpack_from(">I", payload, 0)[0]
    ser_type, hlen = word >> 24, word & 0xFFFFFF
    if hlen > len(payload) - 4:
        raise RemoteProtocolError(f"header length {hlen} exceeds frame length {len(payload)}")
    header = payload[4:4 + hlen]
    if ser_type == SERIALIZE_JSON:
        cmd = decode_json_header(header)
    elif ser_type == SERIALIZE_ROCKETMQ:
        cmd = decode_binary_header(header)
    else:
        raise RemoteProtocolError(f"unknown serialize type {ser_type}")
    cmd.body = payload[4 + hlen:]
    return cmd


class FrameDecoder:
    """Splits a byte stream into frame payloads, enforcing ``max_frame_bytes``.

    ``max_frame_bytes`` bounds the value of the length prefix (the bytes after
    it), like Java's ``frameMaxLength``.  It is checked as soon as the prefix
    is readable, before the body is buffered.
    """

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes) -> None:
        self._buf += data

    def clear(self) -> None:
        """Drop what is buffered (the connection ended): its memory goes back at once."""
        self._buf = bytearray()

    def split(self, data: bytes) -> list[bytes]:
        """Feed ``data``; return the payloads of every frame it completes, in order (the rest stays
        buffered).  With nothing buffered before, frames are cut straight out of ``data`` (one copy each).

        Raises:
            RemoteProtocolError: a length prefix out of bounds (as ``next_payload``).
        """
        if self._buf:
            self._buf += data
            out = []
            while (payload := self.next_payload()) is not None:
                out.append(payload)
            return out
        out = []
        pos, size, limit = 0, len(data), self.max_frame_bytes
        while size - pos >= 4:
            length = _LENGTH.unpack_from(data, pos)[0]
            if length < 4:
                raise RemoteProtocolError(f"frame length {length} is smaller than 4")
            if length > limit:
                raise RemoteProtocolError(f"frame length {length} exceeds the limit of {limit} bytes")
            end = pos + 4 + length
            if end > size:
                break
            out.append(data[pos + 4:end])
            pos = end
        if pos < size:
            self._buf += data[pos:] if pos else data
        return out

    def next_payload(self) -> bytes | None:
        """The next complete frame payload, or ``None`` if more bytes are needed."""
        if len(self._buf) < 4:
            return None
        length = struct.unpack_from(">i", self._buf, 0)[0]
        if length < 4:
            raise RemoteProtocolError(f"frame length {length} is smaller than 4")
        if length > self.max_frame_bytes:
            raise RemoteProtocolError(
                f"frame length {length} exceeds the limit of {self.max_frame_bytes} bytes")
        if len(self._buf) < 4 + length:
            return None
        payload = bytes(self._buf[4:4 + length])
        del self._buf[:4 + length]
        return payload
