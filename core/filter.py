"""Subscriptions and message filters shared by both protocols.

Theory of operation
-------------------
A ``Subscription`` is RocketMQ's SubscriptionData: topic, expression type
(TAG or SQL92), the expression string, the tag set and its hash codes, and a
version.  Tag hash codes are always recomputed here from the expression (the
C++ client sends wrong ``codeSet`` values).

``ExpressionFilter`` implements the store's two-stage ``MessageFilter``:
``match_tags_code`` on ConsumeQueue units (TAG: code in the set; SQL92: pass)
and ``match_properties`` on the record's properties (TAG: its TAGS string is
one of the set; SQL92: evaluate the compiled expression).  The Java broker
stops at the hash and leaves the string to the client (PullAPIWrapper);
we check it too, so hash collisions ("Aa" and "BB" share one) never reach
a client that does not re-check (ours, the Spark source), and Java clients
see the same messages either way.  ``tag_codes``, ``property_names`` and
``answers`` hand both stages to the store's native walk (``_cqscan``).
SQL92 expressions are compiled by ``rokka.core.sql92`` (imported directly; it builds its
parser on first use), which also defines ``SubscriptionParseError``.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

from rokka.core.model import PROP_TAGS, tags_code
from rokka.core.sql92 import SubscriptionParseError, compile_sql92

SUB_ALL = "*"
EXPR_TAG = "TAG"
EXPR_SQL92 = "SQL92"
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
__all__ = ["EXPR_SQL92", "EXPR_TAG", "SUB_ALL", "ExpressionFilter", "Subscription", "SubscriptionParseError",
           "build_subscription", "compile_sql92"]


@dataclass
class Subscription:
    topic: str
    sub_string: str = SUB_ALL
    expression_type: str = EXPR_TAG
    tags_set: list[str] = field(default_factory=list)
    code_set: list[int] = field(default_factory=list)
    sub_version: int = 0
    class_filter_mode: bool = False

    def to_json(self) -> dict[str, object]:
        return {"classFilterMode": self.class_filter_mode, "codeSet": self.code_set,
                "expressionType": self.expression_type, "subString": self.sub_string,
                "subVersion": self.sub_version, "tagsSet": self.tags_set, "topic": self.topic}


def build_subscription(topic: str, expression: str | None, expression_type: str | None = None,
                       sub_version: int = 0) -> Subscription:
    """Parse a subscription expression the way RocketMQ's FilterAPI does.

    Raises:
        SubscriptionParseError: empty tag split or an invalid SQL92 expression.
    """
    etype = (expression_type or EXPR_TAG).upper()
    if etype == EXPR_SQL92:
        if not expression or not expression.strip():
            raise SubscriptionParseError("SQL92 expression is empty")
        compile_sql92(expression)  # validate now; raises SubscriptionParseError
        return Subscription(topic, expression.strip(), EXPR_SQL92, sub_version=sub_version)
    if etype != EXPR_TAG:
        raise SubscriptionParseError(f"unknown expression type {expression_type!r}")
    if expression is None or expression.strip() in ("", SUB_ALL):
        return Subscription(topic, SUB_ALL, EXPR_TAG, sub_version=sub_version)
    tags = [t.strip() for t in expression.split("||") if t.strip()]
    if not tags:
        raise SubscriptionParseError("subString split error")
    return Subscription(topic, expression, EXPR_TAG, tags, [tags_code(t) for t in tags], sub_version)


class ExpressionFilter:
    """MessageFilter for one subscription."""

    def __init__(self, sub: Subscription) -> None:
        self.sub = sub
        self._codes = frozenset(sub.code_set)
        self._match_all = sub.expression_type == EXPR_TAG and sub.sub_string == SUB_ALL
        self._sql = compile_sql92(sub.sub_string) if sub.expression_type == EXPR_SQL92 else None
        in_range = sorted(c for c in self._codes if _INT32_MIN <= c <= _INT32_MAX)   # others never match
        self._tag_codes = (None if self._match_all or self._sql is not None
                           else array("i", in_range).tobytes())
        self._tags = None if self._match_all or self._sql is not None else frozenset(sub.tags_set)
        names = getattr(self._sql, "property_names", None) if self._tags is None else {PROP_TAGS}
        self._names = None if names is None else tuple(sorted(n.encode("utf-8") for n in names))
        self._answers: dict[bytes, bool] = {}

    @property
    def answers(self) -> dict[bytes, bool]:
        """The store's native read keeps ``match_properties``' answers here, by the values of
        ``property_names`` (the selector reads nothing else): this filter's own memo."""
        return self._answers

    @property
    def property_names(self) -> tuple[bytes, ...] | None:
        """The property names (UTF-8) ``match_properties`` reads (TAG: TAGS; SQL92: the selector's
        identifiers), None when not known (all)."""
        return self._names

    @property
    def tag_codes(self) -> bytes | None:
        """The codes a ConsumeQueue unit's tags code (as int32) must be one of, sorted native int32s
        (what ``_cqscan.tag_filter`` takes); None when every unit passes that stage ("*", SQL92)."""
        return self._tag_codes

    @property
    def needs_properties(self) -> bool:
        return self._sql is not None or self._tags is not None

    @property
    def matches_all(self) -> bool:
        """True for the subscription "*": every message matches (reads need no filtering)."""
        return self._match_all

    def match_tags_code(self, code: int) -> bool:
        if self._match_all or self._sql is not None:
            return True
        # ConsumeQueue stores int64; RocketMQ compares (int) tagsCode.
        code32 = ((code + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
        return code32 in self._codes

    def match_properties(self, properties: dict[str, str]) -> bool:
        if self._tags is not None:
            return properties.get(PROP_TAGS) in self._tags
        if self._sql is None:
            return True
        try:
            return bool(self._sql(properties))
        except Exception:  # noqa: BLE001 - a bad evaluation never matches, as in RocketMQ
            return False
