"""SQL92 selector: grammar, RocketMQ's evaluation semantics, and fuzzing.

Expected values follow the Java classes of RocketMQ's filter module
(ComparisonExpression, LogicExpression, UnaryExpression, ConstantExpression).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rokka.core.filter import (
    EXPR_SQL92,
    ExpressionFilter,
    SubscriptionParseError,
    build_subscription,
    compile_sql92,
)
from rokka.core.sql92 import compile_sql92 as direct_compile

MATCHES = [
    # numeric comparisons: property parsed per the literal's type
    ("a > 5", {"a": "6"}, True),
    ("a > 5", {"a": "5"}, False),
    ("a >= 5", {"a": "5"}, True),
    ("a < 5", {"a": "-7"}, True),
    ("a <= 5.5", {"a": "5.5"}, True),
    ("a = 1.0", {"a": "1"}, True),
    ("a = 1", {"a": "1.0"}, False),            # Integer.valueOf("1.0") fails -> no match
    ("a = 3000000000", {"a": "3000000000"}, True),
    ("a = 5", {"a": "3000000000"}, False),      # does not fit the Integer literal's type
    ("a = 10L", {"a": "+10"}, True),
    ("a > -5", {"a": "-3"}, True),
    ("a > b", {"a": "2", "b": "1.5"}, True),   # two strings under '>' compare as doubles
    ("a > b", {"a": "x", "b": "1"}, False),
    ("a > 5", {"a": " 6"}, False),             # Integer.valueOf does not trim
    ("a > 5.0", {"a": " 6 "}, True),           # Double.valueOf does
    ("a = 2.5", {"a": "2.5f"}, True),
    # strings
    ("b = 'abc'", {"b": "abc"}, True),
    ("b <> 'abc'", {"b": "abd"}, True),
    ("b = 'it''s'", {"b": "it's"}, True),
    ("TAGS in ('TagA', 'TagB')", {"TAGS": "TagB"}, True),
    ("TAGS in ('TagA', 'TagB')", {"TAGS": "TagC"}, False),
    ("TAGS not in ('TagA')", {"TAGS": "TagC"}, True),
    ("x contains 'ab'", {"x": "cabd"}, True),
    ("x startswith 'ca'", {"x": "cabd"}, True),
    ("x endswith 'bd'", {"x": "cabd"}, True),
    ("x not endswith 'bd'", {"x": "cabd"}, False),
    # NULL (missing property) semantics
    ("a > 5", {}, False),
    ("a <> 'x'", {}, False),
    ("NOT (a = 'x')", {}, False),
    ("a is null", {}, True),
    ("a IS NOT NULL", {"a": ""}, True),
    ("TAGS not in ('TagA')", {}, False),
    ("x not contains 'ab'", {}, False),
    ("a = b", {}, True),                       # Java: both NULL compare equal
    ("a > 5 or b = 'y'", {"b": "y"}, True),
    ("a > 5 and b = 'y'", {"b": "y"}, False),
    ("NOT (a > 5 and b = 'n')", {"b": "y"}, True),   # UNKNOWN and FALSE is FALSE
    # booleans
    ("TRUE", {}, True),
    ("FALSE", {}, False),
    ("a = TRUE", {"a": "True"}, True),
    ("a = FALSE", {"a": "yes"}, True),         # Boolean.valueOf("yes") is false
    ("a", {"a": "true"}, False),               # a bare property is a boolean cast
    ("NOT a", {"a": "1"}, True),
    # between
    ("a between 0 and 3 and b = 'name2'", {"a": "2", "b": "name2"}, True),
    ("a BETWEEN 1 AND 3", {"a": "3"}, True),
    ("a not between 1 and 3", {"a": "4"}, True),
    ("a not between 1 and 3", {"a": "2"}, False),
    # a conversion error aborts the whole expression (the Java broker catches it)
    ("a = 1 or b = 'y'", {"a": "zz", "b": "y"}, False),
    ("b = 'y' or a = 1", {"a": "zz", "b": "y"}, True),
    # keywords are case-insensitive, identifiers may contain them
    ("android = 1 AnD order_id > 0", {"android": "1", "order_id": "7"}, True),
    ("/* why */ a = 1 -- done\n", {"a": "1"}, True),
    ("((a = 1))", {"a": "1"}, True),
]


@pytest.mark.parametrize(("expr", "props", "expected"), MATCHES)
def test_evaluation(expr: str, props: dict[str, str], expected: bool) -> None:
    assert compile_sql92(expr)(props) is expected


PARSE_ERRORS = [
    "", "a >", "a = NULL", "a > 'x'", "a > TRUE", "(a = 1) > 2", "1 in ('a')", "a in ()",
    "a between 3 and 1", "a between NULL and 1", "TRUE = 1", "0.0 = a", "a = 1e400",
    "a = 99999999999999999999", "in = 1", "a = 1 --no newline", "05 = a", "-a", "1", "'x'",
    "a = 1 a", "a like 'x%'", "a == 1", "a = \"x\"", "a = 'open", "a in ('x', 1)",
]


@pytest.mark.parametrize("expr", PARSE_ERRORS)
def test_parse_errors(expr: str) -> None:
    with pytest.raises(SubscriptionParseError, match="Invalid MessageSelector"):
        compile_sql92(expr)


def test_deep_nesting_is_bounded() -> None:
    with pytest.raises(SubscriptionParseError, match="nested"):
        compile_sql92("NOT " * 500 + "a = 1")
    assert compile_sql92("(" * 300 + "a = 1" + ")" * 300)({"a": "1"})
    chain = " and ".join(f"p{i} = {i}" for i in range(300))
    assert compile_sql92(chain)({f"p{i}": str(i) for i in range(300)})


def test_registered_with_filter_module() -> None:
    sub = build_subscription("T", "a > 1", EXPR_SQL92)
    flt = ExpressionFilter(sub)
    assert flt.needs_properties and flt.match_tags_code(12345)
    assert flt.match_properties({"a": "2"}) and not flt.match_properties({"a": "1"})
    with pytest.raises(SubscriptionParseError):
        build_subscription("T", "a >", "sql92")
    assert compile_sql92("a = 1")({"a": "1"}) is direct_compile("a = 1")({"a": "1"}) is True


_tokens = st.sampled_from([
    "a", "b", "TAGS", "x_1", "$y", "=", "<>", "<", "<=", ">", ">=", "(", ")", ",", "AND", "or", "NOT",
    "IS", "NULL", "BETWEEN", "IN", "TRUE", "false", "contains", "'s'", "'it''s'", "''", "0", "1", "42L",
    "-", "+", "3.5", ".5e3", "1e2", "2147483648", "9223372036854775807", "--c\n", "/*c*/", " ",
])
_fragments = st.lists(_tokens, max_size=25).map(" ".join)
_values = st.one_of(st.text(max_size=8), st.integers().map(str), st.floats().map(str),
                    st.sampled_from(["true", "TRUE", " 1", "1L", "+5", "NaN", "-0.0", "Infinity", "1e5"]))
_props = st.dictionaries(st.sampled_from(["a", "b", "TAGS", "x_1", "$y"]), _values, max_size=5)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(max_size=40), _fragments))
def test_fuzz_parse_never_crashes(expr: str) -> None:
    try:
        compile_sql92(expr)
    except SubscriptionParseError:
        pass


@settings(max_examples=400, deadline=None)
@given(_fragments, st.lists(_props, min_size=1, max_size=4))
def test_fuzz_evaluation_never_raises(expr: str, prop_sets: list[dict[str, str]]) -> None:
    try:
        fn = compile_sql92(expr)
    except SubscriptionParseError:
        return
    for props in prop_sets:
        assert fn(props) in (True, False)


_atoms = st.sampled_from([
    "a > 1", "b = 'x'", "TAGS in ('t1', 't2')", "a is null", "b is not null", "a between 1 and 2",
    "a = 1.5", "x_1 <> 'y'", "a = b", "a > b", "TRUE", "a", "a <= -2", "b not in ('x')",
    "$y contains 'e'", "a = TRUE", "a not between -1.5 and 1e2", "a = 42L",
])
_valid = st.recursive(_atoms, lambda inner: st.one_of(
    st.tuples(inner, st.sampled_from([" AND ", " OR "]), inner).map(lambda t: f"({t[0]}{t[1]}{t[2]})"),
    inner.map(lambda e: f"NOT ({e})")), max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(_valid, st.lists(_props, min_size=1, max_size=4))
def test_fuzz_valid_expressions_compile_and_evaluate(expr: str, prop_sets: list[dict[str, str]]) -> None:
    fn = compile_sql92(expr)
    for props in prop_sets:
        assert fn(props) in (True, False)
