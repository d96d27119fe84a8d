"""Typed access to ``extFields`` (the custom header of a request).

Theory of operation
-------------------
Every extFields value is a string after decoding (see ``remoting``), but the
Java side declares typed fields (``Integer``, ``Long``, ``Boolean``, with
``@CFNotNull`` for required ones).  These helpers read such a field and raise
``HeaderFieldError`` when a required field is missing or a value does not
parse; the server turns that into SYSTEM_ERROR with the message as remark,
which is what a Java broker answers when header decoding fails.

Quirks handled here:

* Booleans: Java uses ``Boolean.parseBoolean`` ("true" only), but C++ 1.2.x
  sends "0"/"1" and ali-ons sends JSON booleans (already "true"/"false").
  ``parse_bool`` accepts true/false/1/0 case-insensitively.
* Empty strings: C++ sends "" for unused optional fields (UNREGISTER_CLIENT
  groups); ``Header.str(..., empty_is_none=True)`` folds them to ``None``.
* SEND_MESSAGE_V2 uses one-letter aliases; ``V2_SEND_ALIASES`` maps them to
  the V1 names and ``normalize_send_header`` returns a V1-named dict.

Request headers are declared instead (``request_headers`` / ``namesrv_headers``,
built on ``header_decl``, which parses with ``parse_int`` / ``parse_bool`` from
here); every broker and name server handler, the client, the controller codec
and the pipeline use the declarations.  What is left here for the modules not
moved yet: ``Header`` (the controller service's CONTROLLER_GET_REPLICA_INFO
``brokerName``, tests) and ``to_ext`` (the Kafka cluster view's routed requests,
tests that build raw requests)::

    h = Header(cmd)                       # or Header(cmd.ext_fields)
    topic = h.str("topic")                # required
    queue_id = h.int("queueId")
    batch = h.bool("batch", False)        # optional with default
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from rokka.net.remoting.codec.errors import HeaderFieldError

if TYPE_CHECKING:
    from rokka.net.remoting.codec.remoting import RemotingCommand

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
_REQUIRED = object()
_builtin_int = int

V2_SEND_ALIASES: dict[str, str] = {
    "a": "producerGroup", "b": "topic", "c": "defaultTopic", "d": "defaultTopicQueueNums",
    "e": "queueId", "f": "sysFlag", "g": "bornTimestamp", "h": "flag", "i": "properties",
    "j": "reconsumeTimes", "k": "unitMode", "l": "maxReconsumeTimes", "m": "batch",
    "n": "brokerName",
}
V1_TO_V2_SEND = {v: k for k, v in V2_SEND_ALIASES.items()}


def normalize_send_header(ext: Mapping[str, str]) -> dict[str, str]:
    """SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE one-letter header -> V1 field names.

    Keys that are not aliases are kept unchanged, so a V1 header passes through.
    """
    return {V2_SEND_ALIASES.get(k, k): v for k, v in ext.items()}


def parse_bool(raw: str, name: str = "value") -> bool:
    low = raw.strip().lower()
    if low in ("true", "1"):
        return True
    if low in ("false", "0", ""):
        return False
    raise HeaderFieldError(f"the custom field <{name}> is not a boolean: {raw!r}")


def parse_int(raw: str, name: str = "value", lo: int = INT64_MIN, hi: int = INT64_MAX) -> int:
    text = raw.strip()
    try:
        value = int(text, 10)
    except ValueError:
        raise HeaderFieldError(f"the custom field <{name}> is not a number: {raw!r}") from None
    if not lo <= value <= hi:
        raise HeaderFieldError(f"the custom field <{name}> is out of range: {raw!r}")
    return value


class Header:
    """Typed reader over one request's extFields."""

    __slots__ = ("fields",)

    def __init__(self, source: RemotingCommand | Mapping[str, str]) -> None:
        self.fields: Mapping[str, str] = (
            source if isinstance(source, Mapping) else source.ext_fields)

    def _raw(self, name: str, default: object) -> str | None:
        value = self.fields.get(name)
        if value is None:
            if default is _REQUIRED:
                raise HeaderFieldError(f"the custom field <{name}> is null")
            return None
        return value

    def str(self, name: str, default: object = _REQUIRED, *, empty_is_none: bool = False):  # noqa: ANN201
        """String field; ``default`` is returned when absent (required when omitted)."""
        raw = self._raw(name, default)
        if raw is None or (empty_is_none and raw == ""):
            return default if default is not _REQUIRED else None
        return raw

    def int(self, name: str, default: object = _REQUIRED):  # noqa: ANN201
        """Java ``Integer``: int32 range."""
        raw = self.fields.get(name)
        if raw is not None and len(raw) < 10 and raw.isdecimal():    # the common case: up to 9 digits
            return _builtin_int(raw)
        raw = self._raw(name, default)
        if raw is None:
            return default
        return parse_int(raw, name, INT32_MIN, INT32_MAX)

    def long(self, name: str, default: object = _REQUIRED):  # noqa: ANN201
        """Java ``Long``: int64 range."""
        raw = self.fields.get(name)
        if raw is not None and len(raw) < 19 and raw.isdecimal():    # the common case: up to 18 digits
            return _builtin_int(raw)
        raw = self._raw(name, default)
        if raw is None:
            return default
        return parse_int(raw, name)

    def bool(self, name: str, default: object = _REQUIRED):  # noqa: ANN201
        """Boolean accepting true/false/1/0 in any case."""
        raw = self._raw(name, default)
        if raw is None:
            return default
        return parse_bool(raw, name)

    def has(self, name: str) -> bool:
        return self.fields.get(name) is not None


def to_ext(**fields: object) -> dict[str, str]:
    """Build an extFields dict from Python values (None dropped, bools Java-style)."""
    out: dict[str, str] = {}
    for key, value in fields.items():
        if value is None:
            continue
        if isinstance(value, bool):
            out[key] = "true" if value else "false"
        else:
            out[key] = str(value)
    return out
