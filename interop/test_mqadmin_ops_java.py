"""The Java ``mqadmin`` operations commands (rocketmq-tools 4.9.8 and 5.3.1) against one ``rokka serve``.

Per tools line, one server prepared by ``mqadmin_shapes.workload`` (topic ``O_T`` with keyed messages, a
live C++ push consumer of ``O_CG``, a live producer of ``O_PG``), then the commands of
``mqadmin_shapes.commands`` in two phases (one ``MQAdminStartup`` JVM per command, three at a time):
getBrokerConfig / updateBrokerConfig (a runtime key, read back), getNamesrvConfig / updateNamesrvConfig
(read back), wipeWritePerm / addWritePerm, cloneGroupOffset, cleanExpiredCQ, cleanUnusedTopic,
consumerStatus, brokerConsumeStats, queryCq, producer, statsAll, updateKvConfig / deleteKvConfig,
getConsumerConfig, brokerStatus.  mqadmin exits 0 even when a command fails (it prints the SubCommandException), so each
test checks the exit code, that no exception was printed, and the lines/columns mqadmin prints (the
shapes Apache RocketMQ 4.9.7 gives for the same commands: ``make conformance`` compares them).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from typing import Any

import harness
import pytest
import rmq_java

sys.path.insert(0, str(harness.INTEROP / "conformance"))
import mqadmin_shapes as ops  # noqa: E402

pytestmark = pytest.mark.usefixtures("need_cpp")


@pytest.fixture(scope="module", params=sorted(rmq_java.LINES), ids=lambda v: f"mqadmin-{v}")
def admin(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    line = rmq_java.LINES[request.param]
    if (why := rmq_java.missing(line)) is not None:
        pytest.skip(why)
    if (why := harness.cpp_available()) is not None:
        pytest.skip(why)
    base = tmp_path_factory.mktemp(f"mqadmin-ops-{line}")
    (base / "server").mkdir()
    srv = harness.start_serve(base / "server")
    try:
        home = base / "home"
        home.mkdir()
        with ops.workload(srv.namesrv, base / "clients") as live:
            out = ops.run_commands(line, home, srv.namesrv, ops.commands(srv.broker))
        yield {"out": out, "srv": srv, "live": live, "line": line}
    finally:
        print(f"--- rokka stderr tail ---\n{srv.stderr_tail(40)}")
        srv.stop_clean()


def ok(admin: dict[str, Any], name: str) -> str:
    r = admin["out"][name]
    why = ops.failed(r)
    assert why is None, f"{name}: {why}\n{(r.stdout + r.stderr)[-3000:]}"
    return r.stdout


def kv(out: str, sep: str = "=") -> dict[str, str]:
    return {m[0]: m[1].strip() for m in re.findall(rf"^([\w./\-]+)\s*{sep}\s+(.*)$", out, re.M)}


def table(out: str, header: str) -> tuple[list[str], list[list[str]]]:
    """The columns of the ``#...`` header line starting with ``header`` and the rows under it."""
    lines = out.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith(header))
    cols = [c.strip() for c in lines[at].split("#") if c.strip()]
    rows = []
    for ln in lines[at + 1:]:
        if not ln.strip():
            break
        rows.append(ln.split())
    return cols, rows


def test_update_then_get_broker_config(admin: dict[str, Any]) -> None:
    broker = admin["srv"].broker
    assert f"update broker config success, {broker}" in ok(admin, "updateBrokerConfig")
    out = ok(admin, "getBrokerConfig")
    assert re.search(rf"^=+{re.escape(broker)}=+$", out, re.M), out[:500]
    conf = kv(out)
    assert conf[ops.RUNTIME_KEY] == ops.RUNTIME_VALUE, out      # the runtime key, read back
    assert conf["brokerName"] == "broker-a" and conf["brokerClusterName"] == "DefaultCluster"
    assert len(conf) > 40


def test_update_then_get_namesrv_config(admin: dict[str, Any]) -> None:
    namesrv = admin["srv"].namesrv
    out = ok(admin, "updateNamesrvConfig")
    assert f"update name server config success![{namesrv}]" in out and \
        f"{ops.NAMESRV_KEY} : {ops.NAMESRV_VALUE}" in out, out
    for name in ("getNamesrvConfig", "getNamesrvConfig2"):
        out = ok(admin, name)
        assert re.search(rf"^=+{re.escape(namesrv)}=+$", out, re.M), out
        assert {"kvConfigPath", "configStorePath", "orderMessageEnable", "listenPort"} <= set(kv(out)), out
    conf = kv(ok(admin, "getNamesrvConfig2"))
    assert conf[ops.NAMESRV_KEY] == ops.NAMESRV_VALUE
    assert conf["listenPort"] == namesrv.rsplit(":", 1)[1]      # the port in use, as Java's name server


def test_wipe_and_add_write_perm(admin: dict[str, Any]) -> None:
    namesrv = admin["srv"].namesrv
    for name, verb in (("wipeWritePerm", "wipe"), ("addWritePerm", "add")):
        m = re.search(rf"^{verb} write perm of broker\[broker-a\] in name server\[{re.escape(namesrv)}\] OK, (\d+)$",
                      ok(admin, name), re.M)
        assert m is not None and int(m[1]) > 0, admin["out"][name].stdout


def test_clone_group_offset_then_stats_all(admin: dict[str, Any]) -> None:
    assert f"clone group offset success. srcGroup[{ops.GROUP}], destGroup=[{ops.CLONE}], topic[{ops.TOPIC}]" \
        in ok(admin, "cloneGroupOffset")
    cols, rows = table(ok(admin, "statsAll"), "#Topic")
    assert cols == ["Topic", "Consumer Group", "Accumulation", "InTPS", "OutTPS", "InMsg24Hour", "OutMsg24Hour"]
    groups = {r[1] for r in rows if r[0] == ops.TOPIC}
    assert {ops.GROUP, ops.CLONE} <= groups, rows


def test_clean_expired_cq_and_unused_topic(admin: dict[str, Any]) -> None:
    for name in ("cleanExpiredCQ", "cleanUnusedTopic"):
        assert ok(admin, name).strip().splitlines()[-1] == "success", admin["out"][name].stdout


def test_consumer_status(admin: dict[str, Any]) -> None:
    out = ok(admin, "consumerStatus")
    cols, rows = table(out, "#Index")
    assert cols == ["Index", "ClientId", "Version", "ConsumerRunningInfoFile"] and len(rows) == 1, out
    assert rows[0][0] == "1" and rows[0][1].endswith("@ops-consumer"), out
    assert "Same subscription in the same group of consumer" in out and "Rebalance OK" in out, out


def test_broker_consume_stats(admin: dict[str, Any]) -> None:
    out = ok(admin, "brokerConsumeStats")
    cols, rows = table(out, "#Topic")
    assert cols == ["Topic", "Group", "Broker Name", "QID", "Broker Offset", "Consumer Offset", "Diff", "LastTime"]
    mine = sorted(int(r[3]) for r in rows if r[:3] == [ops.TOPIC, ops.GROUP, "broker-a"])
    assert mine == [0, 1, 2, 3], out
    assert re.search(r"^Diff Total: \d+$", out, re.M), out


def test_query_cq(admin: dict[str, Any]) -> None:
    out = ok(admin, "queryCq")
    assert out.startswith("Queue data:") and re.search(r"^max: \d+, min: 0$", out, re.M), out
    assert re.findall(r"^idx: (\d+)$", out, re.M) == ["0", "1"], out
    assert len(re.findall(r"^ConsumeQueueData\{physicOffset=\d+, physicSize=\d+, tagsCode=-?\d+, ", out, re.M)) == 2


def test_producer(admin: dict[str, Any]) -> None:
    out = ok(admin, "producer")
    live = admin["live"].producer.client_id
    # remoteIP as Java prints a Netty channel's address: "/host:port"
    want = (rf"^producer group \({ops.PRODUCER}\) instance : clientId={re.escape(live)},"
            r"remoteIP=/127\.0\.0\.1:\d+, language=JAVA, version=\d+, lastUpdateTimestamp=\d+$")
    assert re.search(want, out, re.M), out


def test_update_and_delete_kv_config(admin: dict[str, Any]) -> None:
    assert "create or update kv config to namespace success." in ok(admin, "updateKvConfig")
    assert "delete kv config from namespace success." in ok(admin, "deleteKvConfig")


def test_get_consumer_config(admin: dict[str, Any]) -> None:
    out = ok(admin, "getConsumerConfig")
    assert re.search(r"^=+DefaultCluster:broker-a=+$", out, re.M), out
    conf = kv(out)
    assert conf["groupName"] == ops.GROUP and conf["consumeEnable"] == "true" and "retryMaxTimes" in conf, out


def test_broker_status_keys_as_java_prints_them(admin: dict[str, Any]) -> None:
    table = kv(ok(admin, "brokerStatus"), ":")
    assert re.fullmatch(r"\[ \d+ days, \d+ hours, \d+ minutes, \d+ seconds \]", table["runtime"]), table
    assert all(len(table[k].split()) == 3 for k in ("putTps", "getTotalTps", "getFoundTps", "getMissTps")), table
    assert re.fullmatch(r"Total : [\d.]+ GiB, Free : [\d.]+ GiB\.", table["commitLogDirCapacity"]), table
    assert float(table["consumeQueueDiskRatio"]) > 0 and int(table["putMessageTimesTotal"]) >= 8, table
    store = admin["srv"].data_dir / "commitlog"
    assert float(table[f"commitLogDiskRatio_{store}"]) == float(table["commitLogDiskRatio"]), table
