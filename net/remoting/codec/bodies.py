"""JSON / binary bodies shared by the name server, the broker and the client.

Theory of operation
-------------------
Bodies here are the ones two of our own components exchange and must agree
on byte for byte:

* ``RegisterBrokerBody`` (REGISTER_BROKER, reference section 4.16), in both
  forms a Java broker sends:

  - plain JSON ``{"filterServerList":[...],"topicConfigSerializeWrapper":
    {"dataVersion":{...},"topicConfigTable":{...}}}`` (very old brokers send
    the wrapper itself);
  - compressed (``compressed=true`` header): a zlib stream of::

        int32 len + DataVersion JSON
        int32 topicCount, then per topic: int32 len + "name read write perm FILTERTYPE"
        int32 len + filterServerList JSON

* ``TopicConfig`` JSON with fastjson's key order.

Decoders accept fastjson's bare-numeric-key output (``lenient_json``) and
raise ``BodyFormatError`` (a ``HeaderFieldError`` -> SYSTEM_ERROR) on junk.
``body_crc32`` is the REGISTER_BROKER ``bodyCrc32`` (CRC32 & 0x7FFFFFFF).
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rokka.core.inflate import inflate_zlib
from rokka.net.remoting.codec.errors import HeaderFieldError
from rokka.net.remoting.codec.lenient_json import loads_lenient

_I32 = struct.Struct(">i")
#: Most bytes a compressed REGISTER_BROKER body may inflate to: the frame limit an uncompressed one
#: has to fit (RocketMQ's 16 MiB); past it the body is refused (a decompression bomb).
MAX_REGISTER_BODY = 16 * 1024 * 1024


class BodyFormatError(HeaderFieldError):
    """A request body does not have the expected format."""


def dumps(obj: Any) -> bytes:
    """Compact UTF-8 JSON (what fastjson writes, minus its quirks)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def loads_body(body: bytes) -> Any:
    """Parse a JSON body leniently (fastjson bare keys allowed)."""
    try:
        obj = loads_lenient(body)
        if b"\\u" in body:
            dumps(obj)      # a lone-surrogate escape (\\ud800) cannot be stored as UTF-8: refuse it here
        return obj
    except (ValueError, UnicodeDecodeError, UnicodeEncodeError) as exc:
        raise BodyFormatError(f"body is not JSON: {exc}") from None


def body_crc32(body: bytes) -> int:
    return zlib.crc32(body) & 0x7FFFFFFF


def topic_config_json(name: str, read: int, write: int, perm: int = 6, filter_type: str = "SINGLE_TAG",
                      sys_flag: int = 0, order: bool = False) -> dict[str, Any]:
    return {"order": order, "perm": perm, "readQueueNums": read, "topicFilterType": filter_type,
            "topicName": name, "topicSysFlag": sys_flag, "writeQueueNums": write}


@dataclass
class RegisterBrokerBody:
    """Decoded REGISTER_BROKER body: topic table + data version + filter servers."""

    data_version: dict[str, Any] = field(default_factory=dict)
    topic_config_table: dict[str, dict[str, Any]] = field(default_factory=dict)
    filter_server_list: list[str] = field(default_factory=list)

    def encode(self, *, compressed: bool = False) -> bytes:
        if not compressed:
            return dumps({"filterServerList": self.filter_server_list,
                          "topicConfigSerializeWrapper": {"dataVersion": self.data_version,
                                                          "topicConfigTable": self.topic_config_table}})
        parts = [_blob(dumps(self.data_version)), _I32.pack(len(self.topic_config_table))]
        for name, tc in self.topic_config_table.items():
            text = (f"{name} {tc.get('readQueueNums', 16)} {tc.get('writeQueueNums', 16)} "
                    f"{tc.get('perm', 6)} {tc.get('topicFilterType', 'SINGLE_TAG')}")
            parts.append(_blob(text.encode("utf-8")))
        parts.append(_blob(dumps(self.filter_server_list)))
        return zlib.compress(b"".join(parts), 9)

    @classmethod
    def decode(cls, body: bytes, *, compressed: bool = False) -> RegisterBrokerBody:
        """Raises ``BodyFormatError`` when the body is malformed."""
        if not body:
            return cls()
        if compressed:
            return cls._decode_compressed(body)
        obj = loads_body(body)
        if not isinstance(obj, dict):
            raise BodyFormatError("register body is not a JSON object")
        wrapper = obj.get("topicConfigSerializeWrapper", obj)
        if not isinstance(wrapper, dict):
            raise BodyFormatError("topicConfigSerializeWrapper is not an object")
        table = wrapper.get("topicConfigTable") or {}
        version = wrapper.get("dataVersion") or {}
        filters = obj.get("filterServerList") or []
        if not isinstance(table, dict) or not isinstance(version, dict) or not isinstance(filters, list):
            raise BodyFormatError("register body has fields of the wrong type")
        for name, tc in table.items():
            if not isinstance(tc, dict):
                raise BodyFormatError(f"topic config of {name!r} is not an object")
        return cls(version, table, [str(f) for f in filters])

    @classmethod
    def _decode_compressed(cls, body: bytes) -> RegisterBrokerBody:
        try:
            raw = inflate_zlib(body, MAX_REGISTER_BODY)
            if raw is None:
                raise BodyFormatError(f"compressed register body inflates past {MAX_REGISTER_BODY} bytes")
            pos, version_raw = _read_blob(raw, 0)
            version = loads_body(version_raw)
            count = _I32.unpack_from(raw, pos)[0]
            pos += 4
            if count < 0 or count > len(raw):
                raise BodyFormatError(f"bad topic count {count}")
            table: dict[str, dict[str, Any]] = {}
            for _ in range(count):
                pos, text = _read_blob(raw, pos)
                parts = text.decode("utf-8").split(" ")
                if len(parts) < 5:
                    raise BodyFormatError(f"bad topic config entry {text!r}")
                name = parts[0]
                table[name] = topic_config_json(name, int(parts[1]), int(parts[2]), int(parts[3]), parts[4])
            filters: list[str] = []
            if pos < len(raw):
                pos, filters_raw = _read_blob(raw, pos)
                filters = [str(f) for f in loads_body(filters_raw) or []]
        except (zlib.error, struct.error, ValueError, UnicodeDecodeError) as exc:
            raise BodyFormatError(f"compressed register body is malformed: {exc}") from None
        if not isinstance(version, dict):
            raise BodyFormatError("dataVersion is not an object")
        return cls(version, table, filters)


def _blob(data: bytes) -> bytes:
    return _I32.pack(len(data)) + data


def _read_blob(raw: bytes, pos: int) -> tuple[int, bytes]:
    length = _I32.unpack_from(raw, pos)[0]
    pos += 4
    if length < 0 or pos + length > len(raw):
        raise BodyFormatError(f"length {length} exceeds the body")
    return pos + length, raw[pos:pos + length]


def kv_table_json(table: Mapping[str, str]) -> bytes:
    return dumps({"table": dict(table)})
