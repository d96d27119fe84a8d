"""``rokka admin`` operations commands (issue 27) against a real ``rokka serve -c broker.conf`` process,
and ``rokka namesrv -c namesrv.properties``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from rokka.net.remoting.client import MessageQueue, NamesrvClient, Producer, PullConsumer, RemotingClient
from rokka.net.remoting.codec.codes import RequestCode, ResponseCode

from interop import harness
from tests.gateway.cli.conftest import AdminFn, create_topic, run_admin, wait_for


@pytest.fixture(scope="module")
def conf_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    conf = tmp_path_factory.mktemp("rokka-ops-conf") / "broker.conf"
    conf.write_text("# written by the operator\nbrokerClusterName=DefaultCluster\nmaxMessageSize=4194304\n")
    return conf


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, conf_file: Path) -> Iterator[harness.ServerProcess]:
    srv = harness.start_serve(tmp_path_factory.mktemp("rokka-ops"), log_format="plain", conf=conf_file)
    try:
        yield srv
    finally:
        srv.stop_clean()


def test_broker_config_commands(admin: AdminFn, server: harness.ServerProcess, conf_file: Path) -> None:
    doc = admin("getBrokerConfig", "-b", server.broker, "--json").json()
    props = doc["configs"][server.broker]
    assert props["brokerClusterName"] == "DefaultCluster" and props["maxMessageSize"] == "4194304"
    text = admin("getBrokerConfig", "-c", "DefaultCluster").stdout
    assert f"============Master: {server.broker}============" in text and "maxMessageSize" in text
    assert admin("getBrokerConfig", "-b", server.broker).stdout.startswith(f"============{server.broker}====")
    out = admin("updateBrokerConfig", "-b", server.broker, "-k", "maxMessageSize", "-v", "1048576")
    assert out.exit_code == 0 and out.stdout.strip() == f"update broker config success, {server.broker}"
    assert admin("getBrokerConfig", "-b", server.broker, "--json").json()["configs"][server.broker][
        "maxMessageSize"] == "1048576"
    assert "maxMessageSize=1048576" in conf_file.read_text() and "# written by the operator" in conf_file.read_text()
    refused = admin("updateBrokerConfig", "-b", server.broker, "-k", "brokerConfigPath", "-v", "/tmp/x")
    assert refused.exit_code == 1 and "Can not update config in black list." in refused.stderr
    assert admin("updateBrokerConfig", "-b", server.broker, "-c", "DefaultCluster", "-k", "a", "-v", "b"
                 ).exit_code == 2


def test_namesrv_config_and_write_perm_commands(admin: AdminFn, server: harness.ServerProcess) -> None:
    create_topic(admin, "OpsPerm", queues=2)
    configs = admin("getNamesrvConfig", "--json").json()["configs"]
    assert configs[server.namesrv]["productEnvName"] == "center"
    assert "============" in admin("getNamesrvConfig").stdout
    assert admin("updateNamesrvConfig", "-k", "clusterTest", "-v", "true").exit_code == 0
    assert admin("getNamesrvConfig", "--json").json()["configs"][server.namesrv]["clusterTest"] == "true"
    bad = admin("updateNamesrvConfig", "-k", "kvConfigPath", "-v", "/tmp/kv.json")
    assert bad.exit_code == 1 and "Can not update config path" in bad.stderr

    wiped = admin("wipeWritePerm", "-b", "broker-a", "--json").json()
    assert wiped["topicCounts"][server.namesrv] >= 1
    perm = admin("topicRoute", "-t", "OpsPerm", "--json").json()["route"]["queueDatas"][0]["perm"]
    assert perm == 4
    text = admin("addWritePerm", "-b", "broker-a").stdout
    assert text.startswith(f"add write perm of broker[broker-a] in name server[{server.namesrv}] OK, ")
    assert admin("topicRoute", "-t", "OpsPerm", "--json").json()["route"]["queueDatas"][0]["perm"] == 6


async def _commit_and_heartbeat(namesrv: str, live: trio.Event, done: trio.Event) -> None:
    async def running_info(channel: object, cmd: object) -> object:
        return cmd.make_response(ResponseCode.SUCCESS,  # type: ignore[attr-defined]
                                 body=b'{"properties":{"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY"},"mqTable":{}}')

    async with RemotingClient(handlers={RequestCode.GET_CONSUMER_RUNNING_INFO: running_info}) as rc:
        ns = NamesrvClient(rc, [namesrv])
        producer = Producer(rc, ns, "OpsProducers")
        await producer.send("OpsClone", b"one", queue=0)
        await producer.heartbeat("ops-producer-1")
        consumer = PullConsumer(rc, ns, "OpsSrc", client_id="ops-client-1")
        await consumer.update_offset(MessageQueue("OpsClone", "broker-a", 0), 1)
        await consumer.heartbeat({"OpsClone": "*"})
        live.set()
        await done.wait()


def test_clone_clean_consumer_status_and_broker_consume_stats(admin: AdminFn, server: harness.ServerProcess) -> None:
    create_topic(admin, "OpsClone", queues=1)

    async def scenario() -> dict[str, object]:
        live, done = trio.Event(), trio.Event()
        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_commit_and_heartbeat, server.namesrv, live, done)
                await live.wait()
                results = {
                    "status": await trio.to_thread.run_sync(
                        lambda: admin("consumerStatus", "-g", "OpsSrc", "--json").json()),
                    "text": await trio.to_thread.run_sync(lambda: admin("consumerStatus", "-g", "OpsSrc").stdout),
                    "stats": await trio.to_thread.run_sync(
                        lambda: admin("brokerConsumeStats", "-b", server.broker, "--json").json()),
                    "producer": await trio.to_thread.run_sync(
                        lambda: admin("producer", "-b", server.broker).stdout),
                    "clone": await trio.to_thread.run_sync(lambda: admin(
                        "cloneGroupOffset", "-s", "OpsSrc", "-d", "OpsDest", "-t", "OpsClone")),
                }
                done.set()
        return results

    r = trio.run(scenario)
    status = r["status"]["clients"]["ops-client-1"]   # type: ignore[index]
    assert status["runningInfo"]["properties"]["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
    assert "ops-client-1" in r["text"]                 # type: ignore[operator]
    rows = [q for q in r["stats"]["queues"] if q["group"] == "OpsSrc"]   # type: ignore[index]
    assert [(q["topic"], q["brokerOffset"], q["consumerOffset"]) for q in rows] == [("OpsClone", 1, 1)]
    assert "producer group (OpsProducers) instance : clientId=ops-producer-1,remoteIP=127.0.0.1:" in \
        r["producer"]   # type: ignore[operator]
    clone = r["clone"]
    assert clone.exit_code == 0 and "clone group offset success" in clone.stdout  # type: ignore[attr-defined]

    async def dest_offset() -> int | None:
        async with RemotingClient() as rc:
            return await PullConsumer(rc, NamesrvClient(rc, [server.namesrv]), "OpsDest").query_offset(
                MessageQueue("OpsClone", "broker-a", 0))
    assert trio.run(dest_offset) == 1
    cq = admin("queryCq", "-t", "OpsClone", "-q", "0", "-i", "0", "-c", "5", "--json").json()
    assert (cq["broker"], cq["maxQueueIndex"], cq["minQueueIndex"], len(cq["queueData"])) == (server.broker, 1, 0, 1)
    text = admin("queryCq", "-t", "OpsClone", "-q", "0", "-i", "0").stdout
    assert "Queue data: \nmax: 1, min: 0" in text and "idx: 0\nConsumeQueueData{physicOffset=" in text
    past = admin("queryCq", "-t", "OpsClone", "-q", "0", "-i", "9")
    assert past.exit_code == 1 and "Index 9 of 0@OpsClone is not exist!" in past.stderr
    rows = admin("statsAll", "-t", "OpsClone", "--json").json()["rows"]
    by_group = {r["group"]: r for r in rows}
    assert by_group["OpsSrc"]["inMsg24Hour"] == 1 and by_group["OpsSrc"]["accumulation"] == 0
    assert "#InMsg24Hour" in admin("statsAll", "-a").stdout
    config = admin("getConsumerConfig", "-g", "OpsSrc", "--json").json()["configs"]
    assert [(c["clusterName"], c["brokerName"], c["config"]["groupName"]) for c in config] == [
        ("DefaultCluster", "broker-a", "OpsSrc")]
    text = admin("getConsumerConfig", "-g", "OpsSrc").stdout
    assert text.startswith("=============================DefaultCluster:broker-a====") and "consumeEnable" in text
    for cmd in ("cleanExpiredCQ", "cleanUnusedTopic"):
        out = admin(cmd, "-b", server.broker, "--json").json()
        assert out == {"command": cmd, "brokers": [server.broker], "result": True}
    assert admin("cleanUnusedTopic").stdout.strip() == "success"        # every master
    assert admin("topicStatus", "-t", "OpsClone", "--json").json()["queues"][0]["maxOffset"] == 1


def test_namesrv_reads_its_properties_and_persists_kv(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.properties"
    kv = tmp_path / "home" / "kvConfig.json"
    conf.write_text(f"kvConfigPath={kv}\nproductEnvName=ops-test\n")

    def argv(ports: dict[str, int]) -> list[str]:
        return [*harness.namesrv_argv("plain")(ports), "-c", str(conf)]

    for round_ in range(2):
        ns = harness.ServerProcess(f"rokka-namesrv-{round_}", argv, tmp_path).start()
        try:
            got = run_admin(ns.namesrv, "getNamesrvConfig", "--json").json()["configs"][ns.namesrv]
            assert got["productEnvName"] == "ops-test" and got["configStorePath"] == str(conf.resolve())

            async def kv_round(addr: str = ns.namesrv, first: bool = round_ == 0) -> str | None:
                async with RemotingClient() as rc:
                    client = NamesrvClient(rc, [addr])
                    if first:
                        await client.put_kv("ORDER_TOPIC_CONFIG", "OpsOrder", "broker-a:8")
                    return await client.get_kv("ORDER_TOPIC_CONFIG", "OpsOrder")
            assert trio.run(kv_round) == "broker-a:8"      # the second process read kvConfig.json
            if round_ == 0:
                put = run_admin(ns.namesrv, "updateKvConfig", "-s", "OPS_NS", "-k", "k1", "-v", "v1")
                assert put.stdout.strip() == "create or update kv config to namespace success."
            else:
                assert '"k1": "v1"' in kv.read_text()
                gone = run_admin(ns.namesrv, "deleteKvConfig", "-s", "OPS_NS", "-k", "k1")
                assert gone.stdout.strip() == "delete kv config from namespace success."
                assert "OPS_NS" not in kv.read_text()
        finally:
            ns.stop_clean()
    wait_for(kv.exists, "kvConfig.json written")
