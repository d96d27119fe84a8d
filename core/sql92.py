"""RocketMQ's SQL92 message selector: parse once, evaluate many times.

Theory of operation
-------------------
RocketMQ 4.9 filters by SQL92 with a JavaCC grammar taken from ActiveMQ's
JMS selector (``filter/.../SelectorParser.jj``) and ActiveMQ-derived
expression classes.  We reproduce that language with a ``lark`` LALR grammar
(``_GRAMMAR``) and the same tree-building checks, then compile the tree into
nested Python closures ``dict[str, str] -> bool`` (``compile_sql92``).

Language (keywords case-insensitive):

* ``OR`` < ``AND`` < ``=``, ``<>``, ``IS [NOT] NULL`` < ``>``, ``>=``, ``<``,
  ``<=``, ``[NOT] BETWEEN x AND y``, ``[NOT] IN ('a', ...)``,
  ``[NOT] CONTAINS|STARTSWITH|ENDSWITH 'a'`` < unary ``+``, ``-``, ``NOT`` <
  literals, identifiers (property names, TAGS included) and parentheses.
  As in the JavaCC grammar, unary ``NOT`` binds tightest: ``NOT a = 'x'``
  means ``(NOT a) = 'x'``; write ``NOT (a = 'x')``.
* Literals: ``'str'`` (``''`` escapes a quote), decimal integers with an
  optional ``L`` (Integer when they fit 32 bits, else Long), floats (Double;
  RocketMQ rejects a float literal that is 0 or overflows), TRUE, FALSE, NULL.
* ``--`` line comments (newline-terminated) and ``/* */`` block comments.

Evaluation follows the Java classes, three-valued:

* A property value is always a string.  A missing property is NULL; a
  comparison with NULL is UNKNOWN (``None``), and only TRUE matches.  ``=``
  with NULL on the left is UNKNOWN, with NULL only on the right FALSE, with
  both NULL TRUE (Java's quirk).  AND/OR/NOT are Kleene logic.
* Mixed types are converted the way ``ComparisonExpression.__compare`` does
  with string conversion on: a string meeting a number is parsed as that
  number's type (Integer/Long/Double, Java's parsing rules), a string meeting
  a boolean is ``equalsIgnoreCase("true")``; ``>``-family operators on two
  strings (two properties) parse both as doubles.  A conversion failure is a
  Java exception, which makes the *whole* expression not match (the broker
  catches it), so it aborts evaluation here too (``_EvalError``).
* Compile-time checks (parse errors): ``>``-family operands cannot be string,
  boolean or NULL literals nor boolean expressions; ``=`` operands cannot be
  NULL; a boolean literal cannot be ``=`` to another kind of literal;
  ``BETWEEN`` bounds must be non-NULL and ordered; ``IN`` needs a property on
  the left; the whole expression must be boolean (a bare property is a
  boolean cast, never TRUE for string values).

Differences from Java, on purpose: hexadecimal float strings in properties
are not parsed (Java accepts ``0x1p3``); nesting deeper than ``MAX_DEPTH`` is
a parse error instead of a possible StackOverflowError.

``compile_sql92``'s predicate carries ``property_names`` (the identifiers of
the expression): the store's native read (``_cqscan``) parses only those
properties of each candidate record.

Editing rule: keep the grammar and the builder checks in step with the
JavaCC grammar; every evaluation path returns True/False/None or raises
``_EvalError``, which ``compile_sql92``'s wrapper turns into "no match".
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

from lark import Lark, Token, Transformer
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, VisitError


class SubscriptionParseError(ValueError):
    """The expression cannot be parsed (SUBSCRIPTION_PARSE_FAILED); ``rokka.core.filter`` raises it
    for TAG expressions too (it is defined here, the lower module, so the two do not import each other)."""


MAX_DEPTH = 100
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
DOUBLE_MIN_POSITIVE = 5e-324
_JAVA_TRIM = "".join(chr(c) for c in range(33))

_KW = "(?![a-zA-Z0-9_$])"
_GRAMMAR = rf"""
start: or_expr
?or_expr: and_expr | or_expr OR and_expr -> or_
?and_expr: eq_expr | and_expr AND eq_expr -> and_
?eq_expr: cmp_expr
    | eq_expr "=" cmp_expr -> eq
    | eq_expr "<>" cmp_expr -> ne
    | eq_expr IS NULL -> is_null
    | eq_expr IS NOT NULL -> is_not_null
?cmp_expr: unary
    | cmp_expr ">" unary -> gt
    | cmp_expr ">=" unary -> ge
    | cmp_expr "<" unary -> lt
    | cmp_expr "<=" unary -> le
    | cmp_expr BETWEEN unary AND unary -> between
    | cmp_expr NOT BETWEEN unary AND unary -> not_between
    | cmp_expr IN "(" string_list ")" -> in_
    | cmp_expr NOT IN "(" string_list ")" -> not_in
    | cmp_expr TEXT_OP string -> text_op
    | cmp_expr NOT TEXT_OP string -> not_text_op
?unary: primary
    | "+" unary
    | "-" unary -> neg
    | NOT unary -> not_
?primary: literal | ID -> prop | "(" or_expr ")"
literal: string | DECIMAL -> decimal | FLOAT -> float_ | TRUE -> true | FALSE -> false | NULL -> null
string_list: string ("," string)*
string: STRING

OR.3: /or{_KW}/i
AND.3: /and{_KW}/i
NOT.3: /not{_KW}/i
IS.3: /is{_KW}/i
IN.3: /in{_KW}/i
BETWEEN.3: /between{_KW}/i
TEXT_OP.3: /(contains|startswith|endswith){_KW}/i
TRUE.3: /true{_KW}/i
FALSE.3: /false{_KW}/i
NULL.3: /null{_KW}/i
FLOAT.2: /([0-9]+\.[0-9]*(e[+-]?[0-9]+)?|\.[0-9]+(e[+-]?[0-9]+)?|[0-9]+e[+-]?[0-9]+)/i
DECIMAL.1: /(0|[1-9][0-9]*l?)(?![0-9])/i
STRING: /'(''|[^'])*'/
ID: /[a-z_$][a-z0-9_$]*/i
LINE_COMMENT: /--[^\n\r]*(\r\n|\n|\r)/
BLOCK_COMMENT: /\/\*(.|\n|\r)*?\*\//
%ignore /[ \t\n\r\f]+/
%ignore LINE_COMMENT
%ignore BLOCK_COMMENT
"""


class _EvalError(Exception):
    """A Java runtime exception during evaluation: the message does not match."""


class _BuildError(Exception):
    """A check the Java expression factories make while building the tree."""


class _Int32(int):
    """A Java Integer (plain ``int`` stands for Long)."""


Value = Any  # None | bool | _Int32 | int | float | str
Fn = Callable[[dict[str, str]], Value]

CONST, BOOLCONST, PROP, BOOL, VALUE = "const", "boolconst", "prop", "bool", "value"


@dataclass(frozen=True, slots=True)
class _Node:
    fn: Fn
    kind: str           # CONST, BOOLCONST, PROP, BOOL (boolean expression), VALUE (e.g. negation)
    depth: int = 1
    value: Value = None  # for constants
    text: str = ""       # for messages
    chain: tuple[str, tuple[Fn, ...]] | None = None  # ("AND"|"OR", operands) of a flattened chain

    @property
    def is_const(self) -> bool:
        return self.kind in (CONST, BOOLCONST)


# -- Java conversions --------------------------------------------------------------
_INT_RE = re.compile(r"[+-]?\d+")
_DOUBLE_RE = re.compile(r"[+-]?(NaN|Infinity|(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?))[fFdD]?",
                        re.ASCII)


def _parse_integral(s: str, long: bool) -> int:
    """Java Integer.valueOf / Long.valueOf (NumberFormatException -> _EvalError)."""
    if not _INT_RE.fullmatch(s):
        raise _EvalError(f"For input string: {s!r}")
    v = int(s)
    lo, hi = (INT64_MIN, INT64_MAX) if long else (INT32_MIN, INT32_MAX)
    if not lo <= v <= hi:
        raise _EvalError(f"For input string: {s!r} (out of range)")
    return v if long else _Int32(v)


def _parse_double(s: str) -> float:
    """Java Double.valueOf for decimal forms (leading/trailing control chars and spaces trimmed)."""
    t = s.strip(_JAVA_TRIM)
    if not _DOUBLE_RE.fullmatch(t):
        raise _EvalError(f"For input string: {s!r}")
    if t[-1] in "fFdD" and not t.endswith("Infinity") and not t.endswith("NaN"):
        t = t[:-1]
    return float(t)


def _is_num(v: Value) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _convert_str(s: str, like: Value) -> Value:
    if isinstance(like, float):
        return _parse_double(s)
    return _parse_integral(s, long=not isinstance(like, _Int32))


def _cmp_double(a: float, b: float) -> int:
    """Java Double.compareTo: -0.0 < 0.0, NaN equals NaN and is above everything."""
    if a < b:
        return -1
    if a > b:
        return 1
    an, bn = math.isnan(a), math.isnan(b)
    if an or bn:
        return (an > bn) - (an < bn)
    if a == 0.0:
        sa, sb = math.copysign(1, a), math.copysign(1, b)
        return (sa > sb) - (sa < sb)
    return 0


def _cmp_num(a: int | float, b: int | float) -> int:
    if isinstance(a, float) or isinstance(b, float):
        return _cmp_double(float(a), float(b))
    return (a > b) - (a < b)


def _jcompare(lv: Value, rv: Value) -> int:
    """``ComparisonExpression.__compare`` with string conversion on."""
    if isinstance(lv, bool):
        if isinstance(rv, bool):
            return (lv > rv) - (lv < rv)
        if isinstance(rv, str):
            raise _EvalError("Boolean cannot be compared with String")  # Java ClassCastException
        return -1
    if _is_num(lv):
        if _is_num(rv):
            return _cmp_num(lv, rv)
        if isinstance(rv, str):
            return _cmp_num(lv, _convert_str(rv, lv))
        return -1
    if isinstance(lv, str):
        if isinstance(rv, bool):
            lb = lv.lower() == "true"
            return (lb > rv) - (lb < rv)
        if _is_num(rv):
            return _cmp_num(_convert_str(lv, rv), rv)
        if isinstance(rv, str):
            return 0 if lv == rv else (1 if lv > rv else -1)
    return -1


def _negate(v: Value) -> Value:
    if isinstance(v, bool) or not _is_num(v):
        return None
    if isinstance(v, float):
        return -v
    if isinstance(v, _Int32):
        return _Int32(((-v - INT32_MIN) % (1 << 32)) + INT32_MIN)
    return ((-v - INT64_MIN) % (1 << 64)) + INT64_MIN


# -- the tree builder (Java factory methods and their checks) ------------------------
def _as_boolean(n: _Node) -> _Node:
    if n.kind in (BOOL, BOOLCONST):
        return n
    if n.kind == PROP:
        f = n.fn

        def cast(p: dict[str, str]) -> Value:
            v = f(p)
            if v is None:
                return None
            return v if isinstance(v, bool) else False
        return _Node(cast, BOOL, n.depth + 1, text=n.text)
    raise _BuildError(f"Expression will not result in a boolean value: {n.text}")


def _check_equal_operand(n: _Node) -> None:
    if n.is_const and n.value is None:
        raise _BuildError(f"'{n.text}' cannot be compared.")


def _check_less_than_operand(n: _Node) -> None:
    if n.is_const:
        if _is_num(n.value):
            return
        raise _BuildError(f"Value '{n.text}' cannot be compared.")
    if n.kind == BOOL:
        raise _BuildError(f"Value '{n.text}' cannot be compared.")


def _bool(fn: Fn, depth: int, text: str) -> _Node:
    if depth > MAX_DEPTH:
        raise _BuildError(f"expression nested deeper than {MAX_DEPTH} levels")
    return _Node(fn, BOOL, depth, text=text)


def _equal(a: _Node, b: _Node) -> _Node:
    """doCreateEqual (no operand checks: IS NULL uses it with the NULL constant)."""
    lf, rf = a.fn, b.fn

    def eq(p: dict[str, str]) -> Value:
        lv, rv = lf(p), rf(p)
        if (lv is None) != (rv is None):
            return None if lv is None else False
        if lv is None:
            return True
        return _jcompare(lv, rv) == 0
    return _bool(eq, max(a.depth, b.depth) + 1, f"({a.text} = {b.text})")


def _not(a: _Node) -> _Node:
    f = a.fn

    def neg(p: dict[str, str]) -> Value:
        v = f(p)
        return None if v is None else not v
    return _bool(neg, a.depth + 1, f"NOT {a.text}")


def _ordering(a: _Node, b: _Node, op: str) -> _Node:
    _check_less_than_operand(a)
    _check_less_than_operand(b)
    test: Callable[[int], bool] = {">": lambda c: c > 0, ">=": lambda c: c >= 0,
                                    "<": lambda c: c < 0, "<=": lambda c: c <= 0}[op]
    lf, rf = a.fn, b.fn

    def cmp(p: dict[str, str]) -> Value:
        lv = lf(p)
        if lv is None:
            return None
        rv = rf(p)
        if rv is None:
            return None
        if isinstance(lv, str) and isinstance(rv, str):
            lv, rv = _parse_double(lv), _parse_double(rv)
        return test(_jcompare(lv, rv))
    return _bool(cmp, max(a.depth, b.depth) + 1, f"({a.text} {op} {b.text})")


def _logic(a: _Node, b: _Node, is_and: bool) -> _Node:
    """Java's binary AND/OR, flattened: ``(x AND y) AND z`` evaluates exactly like ``AND(x, y, z)``."""
    a, b = _as_boolean(a), _as_boolean(b)
    op = "AND" if is_and else "OR"
    fns = (a.chain[1] if a.chain and a.chain[0] == op else (a.fn,)) + (b.fn,)
    stop = not is_and  # AND stops on FALSE, OR stops on TRUE

    def logic(p: dict[str, str]) -> Value:
        unknown = False
        for f in fns:
            v = f(p)
            if v is None:
                unknown = True
            elif v is stop:
                return stop
        return None if unknown else not stop
    depth = max(a.depth if a.chain and a.chain[0] == op else a.depth + 1, b.depth + 1)
    if depth > MAX_DEPTH:
        raise _BuildError(f"expression nested deeper than {MAX_DEPTH} levels")
    return _Node(logic, BOOL, depth, text=f"({a.text} {op} {b.text})", chain=(op, fns))


def _between(v: _Node, lo: _Node, hi: _Node) -> _Node:
    if lo.is_const and hi.is_const:
        if lo.value is None or hi.value is None:
            raise _BuildError("Illegal values of between, values can not be null!")
        try:
            bad = _jcompare(hi.value, lo.value) < 0
        except _EvalError as exc:
            raise _BuildError(f"Illegal values of between: {exc}") from None
        if bad:
            raise _BuildError(f"Illegal values of between, left value({lo.text}) must less than or "
                              f"equal to right value({hi.text})")
    return _logic(_ordering(v, lo, ">="), _ordering(v, hi, "<="), True)


def _in(v: _Node, items: list[str], negated: bool) -> _Node:
    if v.kind != PROP:
        raise _BuildError(f"Expected a property for In expression, got: {v.text}")
    f, members = v.fn, frozenset(items)

    def contains(p: dict[str, str]) -> Value:
        x = f(p)
        if not isinstance(x, str):
            return None
        return (x in members) != negated
    return _bool(contains, v.depth + 1, f"{v.text} {'NOT IN' if negated else 'IN'} {sorted(members)}")


def _text_op(v: _Node, op: str, search: str, negated: bool) -> _Node:
    f = v.fn
    test: Callable[[str, str], bool] = {"contains": lambda s, t: t in s,
                                         "startswith": str.startswith, "endswith": str.endswith}[op]

    def text(p: dict[str, str]) -> Value:
        if not search:
            return False
        x = f(p)
        if not isinstance(x, str):
            return False
        return test(x, search) != negated
    return _bool(text, v.depth + 1, f"{v.text} {op.upper()} '{search}'")


def _const(value: Value, kind: str, text: str) -> _Node:
    return _Node(lambda p: value, kind, 1, value, text)


class _Builder(Transformer[Token, _Node]):
    """Runs inside the LALR parser (bottom-up, no recursion)."""

    def start(self, c: list[_Node]) -> _Node:
        return _as_boolean(c[0])

    def or_(self, c: list[Any]) -> _Node:
        return _logic(c[0], c[2], False)

    def and_(self, c: list[Any]) -> _Node:
        return _logic(c[0], c[2], True)

    def eq(self, c: list[_Node]) -> _Node:
        a, b = c
        _check_equal_operand(a)
        _check_equal_operand(b)
        if a.kind == BOOLCONST and b.is_const and b.kind != BOOLCONST:
            raise _BuildError(f"'{a.text}' cannot be compared with '{b.text}'")
        return _equal(a, b)

    def ne(self, c: list[_Node]) -> _Node:
        return _not(self.eq(c))

    def is_null(self, c: list[Any]) -> _Node:
        return _equal(c[0], _const(None, BOOLCONST, "NULL"))

    def is_not_null(self, c: list[Any]) -> _Node:
        return _not(self.is_null(c))

    def gt(self, c: list[_Node]) -> _Node:
        return _ordering(c[0], c[1], ">")

    def ge(self, c: list[_Node]) -> _Node:
        return _ordering(c[0], c[1], ">=")

    def lt(self, c: list[_Node]) -> _Node:
        return _ordering(c[0], c[1], "<")

    def le(self, c: list[_Node]) -> _Node:
        return _ordering(c[0], c[1], "<=")

    def between(self, c: list[Any]) -> _Node:
        return _between(c[0], c[2], c[4])

    def not_between(self, c: list[Any]) -> _Node:
        v, lo, hi = c[0], c[3], c[5]
        return _logic(_ordering(v, lo, "<"), _ordering(v, hi, ">"), False)

    def in_(self, c: list[Any]) -> _Node:
        return _in(c[0], c[2], False)

    def not_in(self, c: list[Any]) -> _Node:
        return _in(c[0], c[3], True)

    def text_op(self, c: list[Any]) -> _Node:
        return _text_op(c[0], str(c[1]).lower(), c[2], False)

    def not_text_op(self, c: list[Any]) -> _Node:
        return _text_op(c[0], str(c[2]).lower(), c[3], True)

    def neg(self, c: list[_Node]) -> _Node:
        a = c[0]
        f = a.fn
        if a.depth + 1 > MAX_DEPTH:
            raise _BuildError(f"expression nested deeper than {MAX_DEPTH} levels")
        return _Node(lambda p: _negate(f(p)), VALUE, a.depth + 1, text=f"-{a.text}")

    def not_(self, c: list[Any]) -> _Node:
        return _not(_as_boolean(c[1]))

    def prop(self, c: list[Token]) -> _Node:
        name = str(c[0])
        return _Node(lambda p: p.get(name), PROP, 1, text=name)

    def literal(self, c: list[Any]) -> _Node:
        s: str = c[0]
        return _const(s, CONST, "'" + s.replace("'", "''") + "'")

    def decimal(self, c: list[Token]) -> _Node:
        text = str(c[0]).rstrip("lL")
        v = int(text)
        if v > INT64_MAX:
            raise _BuildError(f"number {text} does not fit a long")
        return _const(_Int32(v) if v <= INT32_MAX else v, CONST, text)

    def float_(self, c: list[Token]) -> _Node:
        text = str(c[0])
        v = float(text)
        if math.isinf(v):
            raise _BuildError(f"{text} is greater than {1.7976931348623157e308}")
        if v < DOUBLE_MIN_POSITIVE:
            raise _BuildError(f"{text} is less than {DOUBLE_MIN_POSITIVE}")
        return _const(v, CONST, text)

    def true(self, c: list[Any]) -> _Node:
        return _const(True, BOOLCONST, "TRUE")

    def false(self, c: list[Any]) -> _Node:
        return _const(False, BOOLCONST, "FALSE")

    def null(self, c: list[Any]) -> _Node:
        return _const(None, BOOLCONST, "NULL")

    def string_list(self, c: list[str]) -> list[str]:
        return list(c)

    def string(self, c: list[Token]) -> str:
        return str(c[0])[1:-1].replace("''", "'")


@cache
def _parser() -> Lark:
    """The LALR parser, built on first use (~0.1 s): importing the filters costs nothing until a
    SQL92 subscription arrives."""
    return Lark(_GRAMMAR, parser="lalr", lexer="basic", transformer=_Builder(), maybe_placeholders=False)


def _describe(exc: UnexpectedInput, text: str) -> str:
    where = f"line {exc.line}, column {exc.column}"
    if isinstance(exc, UnexpectedCharacters):
        return f"lexical error at {where}: unexpected character {text[exc.pos_in_stream or 0:][:1]!r}"
    if isinstance(exc, UnexpectedEOF):
        return "unexpected end of expression"
    token = getattr(exc, "token", None)
    if token is not None and token.type == "$END":
        return "unexpected end of expression"
    return f"unexpected {str(token)!r} at {where}" if token is not None else f"syntax error at {where}"


def parse(expression: str) -> _Node:
    """Parse and check an expression; raises SubscriptionParseError."""
    try:
        return _parser().parse(expression)  # type: ignore[return-value]
    except _BuildError as exc:
        raise SubscriptionParseError(f"Invalid MessageSelector. {exc}") from None
    except VisitError as exc:
        raise SubscriptionParseError(f"Invalid MessageSelector. {exc.orig_exc}") from None
    except UnexpectedInput as exc:
        raise SubscriptionParseError(f"Invalid MessageSelector. {_describe(exc, expression)}") from None
    except (LarkError, RecursionError, ValueError) as exc:
        raise SubscriptionParseError(f"Invalid MessageSelector. {exc}") from None


@lru_cache(maxsize=512)
def compile_sql92(expression: str) -> Callable[[dict[str, str]], bool]:
    """Compile a SQL92 selector to a predicate over message properties.

    Args:
        expression: the selector text, e.g. ``"TAGS in ('a','b') and price > 10.5"``.
    Returns:
        ``matches(properties) -> bool``: True only when the expression is TRUE;
        UNKNOWN (missing properties) and Java-side runtime errors are False.
        It never raises for any ``dict[str, str]``.
    Raises:
        SubscriptionParseError: the expression is not valid (the wire answer is
        SUBSCRIPTION_PARSE_FAILED).
    """
    fn = parse(expression).fn

    def matches(properties: dict[str, str]) -> bool:
        try:
            return fn(properties) is True
        except _EvalError:
            return False
    matches.property_names = property_names(expression)  # type: ignore[attr-defined]
    return matches


def property_names(expression: str) -> frozenset[str]:
    """The property names a (valid) expression reads: every identifier is one (the ``prop`` rule), and
    evaluation looks up nothing else, so a dict of only these gives the same answer as all of them."""
    return frozenset(str(tok) for tok in _parser().lex(expression) if tok.type == "ID")

