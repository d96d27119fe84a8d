"""Message trace against ``rokka serve`` with ``traceTopicEnable=true`` and no topic auto-creation:
the broker creates the trace topic (here a custom name, ``msgTraceTopicName``), the Java client
4.9.8 with ``enableMsgTrace`` and ``customizedTraceTopic`` (driver flag ``--trace-topic``) records
Pub / SubBefore / SubAfter there, and Java mqadmin's ``queryMsgTraceById`` and rokka's print the
same trace of one message."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import harness
import pytest
import rmq_java

LINE = "v4"
TRACE_TOPIC = "RokkaTraceTopic"


def rokka_admin(namesrv: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([harness.rokka_executable(), "admin", "-n", namesrv, *args], capture_output=True,
                          text=True, timeout=60, check=False)


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    if (why := rmq_java.missing(LINE)) is not None:
        pytest.skip(why)
    base = tmp_path_factory.mktemp("rmq-trace")
    (base / "server").mkdir()
    conf = base / "server" / "broker.conf"
    conf.write_text(f"traceTopicEnable=true\nmsgTraceTopicName={TRACE_TOPIC}\nautoCreateTopicEnable=false\n")
    srv = harness.start_serve(base / "server", conf=conf)
    try:
        res = rmq_java.run_scenarios(LINE, ["trace"], namesrv=srv.namesrv, workdir=base / "client", prefix="TR",
                                     extra={"trace-topic": TRACE_TOPIC}, timeout_s=90)["trace"]
        yield {"srv": srv, "res": res, "home": base / "home"}
    finally:
        print(f"--- rokka stderr tail ---\n{srv.stderr_tail(40)}")
        srv.stop_clean()


def test_trace_records_reach_the_custom_trace_topic(traced: dict[str, Any]) -> None:
    res = traced["res"]
    assert "error" not in res, res["error"]
    assert sorted(res["consumed"]) == ["traced-0", "traced-1", "traced-2"]
    assert {"Pub", "SubBefore", "SubAfter"} <= set(res["trace_types"]), res


def test_query_msg_trace_by_id_rokka_and_mqadmin(traced: dict[str, Any]) -> None:
    srv = traced["srv"]
    assert "error" not in traced["res"], traced["res"]["error"]
    found = rokka_admin(srv.namesrv, "queryMsgByKey", "-t", "TR_Traced", "-k", "TR_tk-0", "--json")
    assert found.returncode == 0, found.stderr
    msg_id = json.loads(found.stdout)["messages"][0]["msgId"]
    ours = rokka_admin(srv.namesrv, "queryMsgTraceById", "-i", msg_id, "-t", TRACE_TOPIC)
    assert ours.returncode == 0, ours.stderr
    doc = json.loads(rokka_admin(srv.namesrv, "queryMsgTraceById", "-i", msg_id, "-t", TRACE_TOPIC, "--json").stdout)
    pub = [r for r in doc["records"] if r["type"] == "Pub"]
    sub = [r for r in doc["records"] if r["type"] == "SubAfter"]
    assert [(r["group"], r["status"], r["topic"], r["keys"]) for r in pub] == [
        ("TR_PG_trace", "success", "TR_Traced", "TR_tk-0")]
    assert [(r["group"], r["status"]) for r in sub] == [("TR_CG_trace", "success")]
    home = traced["home"]
    home.mkdir(exist_ok=True)
    java = subprocess.run(rmq_java.mqadmin_argv(LINE, home, "queryMsgTraceById", "-i", msg_id, "-t", TRACE_TOPIC,
                                                "-n", srv.namesrv),
                          capture_output=True, text=True, timeout=90, env=rmq_java.mqadmin_env(home), check=False)
    assert java.returncode == 0, java.stdout + java.stderr

    def rows(text: str) -> list[str]:
        return [line.rstrip() for line in text.splitlines() if line.strip().startswith(("#Type", "Pub", "Sub"))]

    print(f"rokka:\n{ours.stdout}\nmqadmin:\n{java.stdout}")
    assert rows(ours.stdout) == rows(java.stdout), f"rokka:\n{ours.stdout}\nmqadmin:\n{java.stdout}"
    assert any(r.startswith("Pub ") for r in rows(ours.stdout)) and any(r.startswith("Sub ") for r in rows(ours.stdout))
