"""Cross-check our message declarations against the reference Kafka JSON schemas.

The reference folder (/work/shared/reference/kafka-messages, or $KAFKA_MESSAGES_DIR)
is read at test time only; the test is skipped when it is absent.  APIs beyond the issue's
(``NOT_IN_REFERENCE``) are compared with the copy of the same upstream schemas that kafka-python
ships in its package.  For every API
we declare and every version in our range it compares: field names (snake_case of
Kafka's), types, presence per version, nullability, tags, and the first flexible
version.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from rokka.gateway.kafka.codec import APIS
from rokka.gateway.kafka.codec.schema import Array, Field, Primitive, StructType, versions

_ROOT = Path(__file__).resolve().parents[4]
REF = Path(os.environ.get("KAFKA_MESSAGES_DIR", _ROOT.parent / "shared" / "reference" / "kafka-messages"))

pytestmark = pytest.mark.skipif(not REF.is_dir(), reason=f"n/a: no reference schemas at {REF}")


def _load(name: str, folder: Path = REF) -> dict[str, Any]:
    text = (folder / f"{name}.json").read_text()
    lines = [ln for ln in text.splitlines() if not ln.strip().startswith("//")]
    return json.loads("\n".join(lines))  # type: ignore[no-any-return]


def _snake(name: str) -> str:
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()


def _has(spec: str | None, v: int) -> bool:
    lo, hi = versions(spec or "")
    return lo <= v <= hi


def _type_name(t: Primitive | Array | StructType) -> str:
    if isinstance(t, Primitive):
        return t.name
    if isinstance(t, Array):
        return "[]" + ("struct" if isinstance(t.elem, StructType) else t.elem.name)
    return "struct"


def _ref_type(ref: dict[str, Any], commons: dict[str, Any]) -> tuple[str, list[Any] | None]:
    t: str = ref["type"]
    base = t[2:] if t.startswith("[]") else t
    sub = ref.get("fields") or commons.get(base)
    if sub is not None:
        return ("[]struct" if t.startswith("[]") else "struct"), sub
    return t, None


def _compare(ours: tuple[Field, ...], refs: list[Any], v: int, commons: dict[str, Any], path: str) -> None:
    ref_here = [r for r in refs if _has(r["versions"], v)]
    our_here = [fl for fl in ours if fl.versions[0] <= v <= fl.versions[1]]
    assert [_snake(r["name"]) for r in ref_here] == [fl.name for fl in our_here], f"{path} v{v} fields"
    for r, fl in zip(ref_here, our_here, strict=True):
        where = f"{path}.{fl.name} v{v}"
        rtype, sub = _ref_type(r, commons)
        assert _type_name(fl.type) == rtype, where
        assert (fl.nullable[0] <= v <= fl.nullable[1]) == _has(r.get("nullableVersions"), v), where + " nullable"
        tagged = _has(r.get("taggedVersions"), v)
        assert (fl.tag is not None and fl.tagged[0] <= v <= fl.tagged[1]) == tagged, where + " tagged"
        if tagged:
            assert fl.tag == r["tag"], where
        if sub is not None:
            inner = fl.type.elem if isinstance(fl.type, Array) else fl.type
            assert isinstance(inner, StructType)
            _compare(inner.fields, sub, v, commons, where)


#: APIs the reference folder has no schema for (it covers the APIs of the Kafka issue): these are
#: checked against the copy of the same upstream schemas that kafka-python ships (a test dependency).
NOT_IN_REFERENCE = {29: "DescribeAcls", 30: "CreateAcls", 31: "DeleteAcls", 33: "AlterConfigs", 42: "DeleteGroups",
                    44: "IncrementalAlterConfigs", 47: "OffsetDelete", 50: "DescribeUserScramCredentials",
                    51: "AlterUserScramCredentials", 61: "DescribeProducers", 65: "DescribeTransactions",
                    66: "ListTransactions", 35: "DescribeLogDirs"}


def _kafka_python_schemas() -> Path | None:
    spec = importlib.util.find_spec("kafka")
    if spec is None or spec.origin is None:
        return None
    folder = Path(spec.origin).parent / "protocol" / "schemas" / "resources"
    return folder if folder.is_dir() else None


def test_only_the_known_apis_lack_a_reference() -> None:
    missing = {k: api.name for k, api in APIS.items() if not (REF / f"{api.name}Request.json").exists()}
    assert missing == NOT_IN_REFERENCE


@pytest.mark.parametrize("key", sorted(APIS))
def test_declarations_match_reference(key: int) -> None:
    api = APIS[key]
    folder = REF
    if key in NOT_IN_REFERENCE:
        found = _kafka_python_schemas()
        assert found is not None, "kafka-python's bundled schemas are missing (make test installs it)"
        folder = found
    for kind, ours in (("Request", api.request), ("Response", api.response)):
        ref = _load(f"{api.name}{kind}", folder)
        assert ref.get("apiKey", key) == key
        lo, hi = versions(ref["validVersions"])
        assert lo <= api.min_version and api.max_version <= hi
        flex = ref["flexibleVersions"]
        expect_flex = None if flex == "none" else versions(flex)[0]
        if expect_flex is not None and expect_flex > api.max_version:
            expect_flex = None
        got_flex = api.flexible if api.flexible is not None and api.flexible <= api.max_version else None
        assert got_flex == expect_flex, f"{api.name} flexible"
        commons = {c["name"]: c["fields"] for c in ref.get("commonStructs", [])}
        for v in range(api.min_version, api.max_version + 1):
            _compare(ours.fields, ref["fields"], v, commons, f"{api.name}{kind}")
