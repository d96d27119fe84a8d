"""``rokka admin queryMsgTraceById`` against a real ``rokka serve``: a trace message in the layout of
the Java client's ``TraceDataEncoder`` (sent with ``sendMessage``, KEYS = the traced ids) is found by
the id through the index and printed as mqadmin prints it; records of other ids are left out."""

from __future__ import annotations

from rokka.core.trace import CONTENT_SPLITOR as C
from rokka.core.trace import FIELD_SPLITOR as F

from tests.gateway.cli.conftest import AdminFn, create_topic, wait_for

MSG = "7F0000011B5C18B4AAC2466DC6C10000"
OTHER = "7F0000011B5C18B4AAC2466DC6C10001"


def rec(*fields: object) -> str:
    return C.join(str(f) for f in fields) + F


def test_query_msg_trace_by_id(admin: AdminFn) -> None:
    create_topic(admin, "TraceCli", queues=1)
    body = (rec("Pub", 1700000000000, "DefaultRegion", "PG_t", "Orders", MSG, "tagA", "k1", "127.0.0.1:10911", 5, 12,
                0, "OFFID", "true", "10.1.2.3")
            + rec("SubAfter", "req-1", MSG, 3, "true", "k1", 0, 1700000000103, "CG_t")
            + rec("Pub", 1700000000000, "DefaultRegion", "PG_x", "Orders", OTHER, "", "", "h:1", 1, 2, 0, "true"))
    sent = admin("sendMessage", "-t", "TraceCli", "-p", body, "-k", f"{MSG} {OTHER}")
    assert sent.exit_code == 0, sent.stderr

    def found() -> bool:
        return bool(admin("queryMsgTraceById", "-i", MSG, "-t", "TraceCli", "--json").json()["records"])

    wait_for(found, "the trace message in the index")
    doc = admin("queryMsgTraceById", "-i", MSG, "-t", "TraceCli", "--json").json()
    assert [(r["type"], r["group"], r["costTime"], r["status"]) for r in doc["records"]] == [
        ("Pub", "PG_t", 12, "success"), ("SubAfter", "CG_t", 3, "success")]
    text = admin("queryMsgTraceById", "-i", MSG, "-t", "TraceCli").stdout.splitlines()
    assert text[0].split() == ["#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status"]
    assert text[1].split()[:3] == ["Pub", "PG_t", "127.0.0.1"] and text[1].split()[-2:] == ["12ms", "success"]
    assert text[3].split()[1] == "#ConsumerGroup" and text[4].split()[:2] == ["Sub", "CG_t"]
    assert "PG_x" not in "\n".join(text)
    none = admin("queryMsgTraceById", "-i", "NOSUCHID", "-t", "TraceCli", "--json").json()
    assert none["records"] == []
