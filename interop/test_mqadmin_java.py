"""The Java ``mqadmin`` (rocketmq-tools 4.9.8 and 5.3.1, ``MQAdminStartup``) against ``rokka serve``.

Per tools line, one broker seeded by the Java client driver (topic ``M_Seed`` with 10 keyed messages,
consumed by group ``M_CG_seed``; an empty ``M_Doomed``), then every command as its own
``java -cp ... MQAdminStartup`` process, as an operator runs it.  mqadmin exits 0 even when a
command fails (it prints the SubCommandException), so each test checks the exit code AND that no
exception was printed AND what the command should print.  A command takes ~4 s (most of it the
admin client's shutdown), so independent commands run concurrently, in two phases (phase 2 needs
phase 1's topic and group, or changes what phase 1 reads).
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import harness
import pytest
import rmq_java


def run_all(line: str, home: Path, namesrv: str, commands: dict[str, list[str]]) -> dict[str, Any]:
    def one(args: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(rmq_java.mqadmin_argv(line, home, *args, "-n", namesrv), capture_output=True,
                              text=True, timeout=90, env=rmq_java.mqadmin_env(home), check=False)

    # Three at a time: more JVMs starting at once on two cores push the admin client past its own
    # request timeouts (3 s, counted from the first byte it sends).
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = {name: pool.submit(one, args) for name, args in commands.items()}
        return {name: f.result() for name, f in futures.items()}


@pytest.fixture(scope="module", params=sorted(rmq_java.LINES), ids=lambda v: f"mqadmin-{v}")
def admin(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    line = rmq_java.LINES[request.param]
    if (why := rmq_java.missing(line)) is not None:
        pytest.skip(why)
    base = tmp_path_factory.mktemp(f"mqadmin-{line}")
    (base / "server").mkdir()
    srv = harness.start_serve(base / "server")
    try:
        seed = rmq_java.run_scenarios(line, ["seed"], namesrv=srv.namesrv, workdir=base / "seed", prefix="M")["seed"]
        assert "error" not in seed, seed
        home = base / "home"
        home.mkdir()
        by_key = {s["key"]: s for s in seed["sent"]}
        out = run_all(line, home, srv.namesrv, {
            "clusterList": ["clusterList"],
            "brokerStatus": ["brokerStatus", "-b", srv.broker],
            "updateTopic": ["updateTopic", "-c", "DefaultCluster", "-t", "M_Adm", "-r", "3", "-w", "3"],
            "updateSubGroup": ["updateSubGroup", "-c", "DefaultCluster", "-g", "M_AdmGroup"],
            "consumerProgress": ["consumerProgress", "-g", "M_CG_seed"],
            # 5.x's queryMsgById requires the topic (-t), 4.9's has no such option
            "queryMsgById": ["queryMsgById", "-i", by_key["key-3"]["offset_msg_id"],
                             *(["-t", "M_Seed"] if line == "v5" else [])],
            "queryMsgByKey": ["queryMsgByKey", "-t", "M_Seed", "-k", "key-3"],
            "topicStatus": ["topicStatus", "-t", "M_Seed"],
            "deleteTopic": ["deleteTopic", "-c", "DefaultCluster", "-t", "M_Doomed"],
        })
        out.update(run_all(line, home, srv.namesrv, {
            "topicList": ["topicList"],
            "topicRoute": ["topicRoute", "-t", "M_Adm"],
            "resetOffsetByTime": ["resetOffsetByTime", "-g", "M_CG_seed", "-t", "M_Seed", "-s", "0"],
        }))
        yield {"out": out, "seed": seed, "srv": srv, "by_key": by_key}
    finally:
        print(f"--- rokka stderr tail ---\n{srv.stderr_tail(40)}")
        srv.stop_clean()


def ok(admin: dict[str, Any], name: str) -> str:
    r = admin["out"][name]
    text = r.stdout + r.stderr
    assert r.returncode == 0, f"{name} exit {r.returncode}\n{text[-3000:]}"
    assert "Exception" not in text, f"{name} printed an exception:\n{text[-3000:]}"
    return r.stdout


def test_cluster_list(admin: dict[str, Any]) -> None:
    out = ok(admin, "clusterList")
    row = [ln for ln in out.splitlines() if "broker-a" in ln]
    assert len(row) == 1 and row[0].split()[:4] == ["DefaultCluster", "broker-a", "0", admin["srv"].broker], out


def test_broker_status(admin: dict[str, Any]) -> None:
    out = ok(admin, "brokerStatus")
    table = dict(re.findall(r"^(\w+)\s*: (.*)$", out, re.M))
    assert table["brokerVersionDesc"] == "V4_9_7" and table["putTps"].count(" ") == 2
    assert int(table["commitLogMaxOffset"]) > 0 and int(table["earliestMessageTimeStamp"]) > 0


def test_update_topic_then_list_and_route(admin: dict[str, Any]) -> None:
    assert f"create topic to {admin['srv'].broker} success." in ok(admin, "updateTopic")
    assert "M_Adm" in ok(admin, "topicList").split()
    route = json.loads(re.sub(r"\{(\d+):", r'{"\1":', ok(admin, "topicRoute")))   # fastjson's bare int keys
    assert [(q["brokerName"], q["readQueueNums"], q["writeQueueNums"]) for q in route["queueDatas"]] == \
        [("broker-a", 3, 3)]
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": admin["srv"].broker}


def test_topic_status(admin: dict[str, Any]) -> None:
    rows = [ln.split() for ln in ok(admin, "topicStatus").splitlines() if ln.startswith("broker-a")]
    assert sorted(int(r[1]) for r in rows) == [0, 1, 2, 3]
    assert sum(int(r[3]) for r in rows) == 10 and all(r[2] == "0" for r in rows)


def test_update_sub_group(admin: dict[str, Any]) -> None:
    assert f"create subscription group to {admin['srv'].broker} success." in ok(admin, "updateSubGroup")


def test_consumer_progress(admin: dict[str, Any]) -> None:
    out = ok(admin, "consumerProgress")
    rows = [ln.split() for ln in out.splitlines() if ln.startswith("M_Seed ")]
    assert len(rows) == 4 and all(r[3] == r[4] and r[5] == "0" for r in rows), out   # all consumed
    assert sum(int(r[3]) for r in rows) == 10 and "Diff Total: 0" in out


def test_query_msg_by_id_and_key(admin: dict[str, Any]) -> None:
    out = ok(admin, "queryMsgById")
    fields = dict(re.findall(r"^([A-Za-z ]+):\s+(.*)$", out, re.M))
    assert fields["Topic"] == "M_Seed" and fields["Keys"] == "[key-3]" and fields["Tags"] == "[s]"
    assert fields["OffsetID"] == admin["by_key"]["key-3"]["offset_msg_id"]
    rows = [ln.split() for ln in ok(admin, "queryMsgByKey").splitlines() if ln and not ln.startswith("#")]
    assert [r[0] for r in rows] == [admin["by_key"]["key-3"]["msg_id"]]


def test_delete_topic(admin: dict[str, Any]) -> None:
    out = ok(admin, "deleteTopic")
    assert "delete topic [M_Doomed] from cluster [DefaultCluster] success." in out
    assert "delete topic [M_Doomed] from NameServer success." in out
    assert "M_Doomed" not in ok(admin, "topicList").split()


def test_reset_offset_by_time(admin: dict[str, Any]) -> None:
    out = ok(admin, "resetOffsetByTime")
    rows = [ln.split() for ln in out.splitlines() if ln.startswith("broker-a")]
    assert sorted((int(r[1]), int(r[2])) for r in rows) == [(q, 0) for q in range(4)], out
