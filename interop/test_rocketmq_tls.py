"""TLS on the RocketMQ ports of ``rokka serve`` (``tls.server.mode=enforcing`` in broker.conf, the
name server of ``serve`` shares it): the Java RocketMQ client with ``tls.enable=true`` (driver flag
``--tls true``; its ``tls.test.mode.enable`` default trusts the server) sends and consumes, rokka's
own client speaks TLS with the CA checked, and a plaintext client is closed with one log line.
Certificates: trustme, made at test time."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import harness
import pytest
import rmq_java
import trio
import trustme
from rokka.net.remoting.client import Admin, NamesrvClient, Producer, PullConsumer, RemotingClient
from rokka.net.remoting.client.remoting import ChannelClosedError
from rokka.net.remoting.codec import RemotingCommand
from rokka.net.remoting.codec.codes import RequestCode
from rokka.gateway.rocketmq.tls import client_context


@pytest.fixture(scope="module")
def tls_serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[harness.ServerProcess, str]]:
    base = tmp_path_factory.mktemp("rmq-tls")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    ca.cert_pem.write_to_path(str(base / "ca.pem"))
    cert.cert_chain_pems[0].write_to_path(str(base / "server.pem"))
    cert.private_key_pem.write_to_path(str(base / "server.key"))
    (base / "server").mkdir()
    conf = base / "server" / "broker.conf"
    conf.write_text("tls.server.mode=enforcing\ntls.test.mode.enable=false\n"
                    f"tls.server.certPath={base / 'server.pem'}\ntls.server.keyPath={base / 'server.key'}\n"
                    "tls.enable=true\n")
    srv = harness.start_serve(base / "server", conf=conf)
    try:
        yield srv, str(base / "ca.pem")
    finally:
        print(f"--- rokka stderr tail ---\n{srv.stderr_tail(40)}")
        srv.stop_clean()


async def test_rokka_client_over_tls_and_plaintext_refused(tls_serve: tuple[harness.ServerProcess, str]) -> None:
    srv, ca = tls_serve
    with trio.fail_after(60):
        async with RemotingClient(tls=client_context(ca), timeout_s=10) as rc:
            nsc = NamesrvClient(rc, [srv.namesrv])
            await Admin(rc, nsc).create_topic(srv.broker, "TlsRokka", read_queue_nums=1, write_queue_nums=1)
            sent = await Producer(rc, nsc, "pg_tls").send("TlsRokka", b"secret")
            pulled = await PullConsumer(rc, nsc, "cg_tls").pull(sent.queue, sent.queue_offset)
            assert [m.body for m in pulled.messages] == [b"secret"]
        before = srv.stderr_tail(100000).count("rocketmq.tls_plaintext_refused")
        async with RemotingClient(timeout_s=10) as plain:
            with pytest.raises(ChannelClosedError):
                await plain.invoke(srv.broker, RemotingCommand(code=RequestCode.GET_BROKER_RUNTIME_INFO))
        while srv.stderr_tail(100000).count("rocketmq.tls_plaintext_refused") == before:  # noqa: ASYNC110
            await trio.sleep(0.05)      # the log line is written by the server process


def test_rokka_admin_tls(tls_serve: tuple[harness.ServerProcess, str]) -> None:
    srv, ca = tls_serve

    def admin(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([harness.rokka_executable(), "admin", "-n", srv.namesrv, *args], capture_output=True,
                              text=True, timeout=60, check=False)

    ok = admin("--tls-trust-cert", ca, "clusterList")
    assert ok.returncode == 0 and "DefaultCluster" in ok.stdout, ok.stdout + ok.stderr
    assert admin("--tls", "clusterList").returncode == 0             # trusting any certificate (test mode)
    plain = admin("--timeout", "5", "clusterList")
    assert plain.returncode == 1 and plain.stderr.startswith("error:"), plain.stdout + plain.stderr


async def test_rokka_namesrv_properties_enforcing(tmp_path: Path) -> None:
    """``rokka namesrv -c namesrv.properties`` with tls.server.mode=enforcing (test mode: self-signed)."""
    props = tmp_path / "namesrv.properties"
    props.write_text(f"kvConfigPath={tmp_path / 'kvConfig.json'}\ntls.server.mode=enforcing\n")
    base = harness.namesrv_argv("json")
    srv = harness.ServerProcess("rokka-namesrv", lambda ports: [*base(ports), "-c", str(props)], tmp_path).start()
    try:
        with trio.fail_after(60):
            async with RemotingClient(tls=client_context(), timeout_s=10) as rc:
                assert "brokerAddrTable" in await NamesrvClient(rc, [srv.namesrv]).cluster_info()
            async with RemotingClient(timeout_s=10) as plain:
                with pytest.raises(ChannelClosedError):
                    await NamesrvClient(plain, [srv.namesrv]).cluster_info()
    finally:
        srv.stop_clean()


def test_java_mqadmin_tls_enable(tls_serve: tuple[harness.ServerProcess, str], tmp_path: Path) -> None:
    line = "v4"
    if (why := rmq_java.missing(line)) is not None:
        pytest.skip(why)
    srv, _ = tls_serve
    argv = rmq_java.mqadmin_argv(line, tmp_path, "clusterList", "-n", srv.namesrv)
    argv.insert(1, "-Dtls.enable=true")          # mqadmin's own TLS switch (a JVM system property)
    r = subprocess.run(argv, capture_output=True, text=True, timeout=90, env=rmq_java.mqadmin_env(tmp_path),
                       check=False)
    assert r.returncode == 0 and "DefaultCluster" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("line", sorted(rmq_java.LINES.values()))
def test_java_client_tls_enable(line: str, tls_serve: tuple[harness.ServerProcess, str], tmp_path: Path) -> None:
    if (why := rmq_java.missing(line)) is not None:
        pytest.skip(why)
    srv, _ = tls_serve
    results: dict[str, dict[str, Any]] = rmq_java.run_scenarios(
        line, ["send"], namesrv=srv.namesrv, workdir=tmp_path, prefix=f"TLS{line}", extra={"tls": "true"},
        timeout_s=90)
    res = results["send"]
    assert "error" not in res, res["error"]
    assert [r["status"] for r in res["sync"]] == ["SEND_OK"] * 5
    assert {f"sync-{i}" for i in range(5)} <= {m["body"] for m in res["received"]}
