"""TLS on the RocketMQ ports (``tls.server.mode``): a name server and a broker on 127.0.0.1 port 0,
rokka's own client with and without TLS (certificates from trustme), raw TLS / plaintext peers.
Every test is bounded by ``trio.fail_after``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import structlog
import trio
import trustme
from rokka.core.config import BrokerConfig, apply_settings, load_broker_conf
from rokka.core.namesrv.config import load_namesrv_conf
from rokka.gateway import runtime
from rokka.gateway.namesrv.server import NamesrvServer
from rokka.net.remoting.client import (
    Admin,
    ConnectError,
    NamesrvClient,
    Producer,
    PullConsumer,
    RemotingClient,
    ResponseError,
)
from rokka.net.remoting.codec import RemotingCommand
from rokka.net.remoting.codec.codes import RequestCode, ResponseCode
from rokka.gateway.rocketmq.tls import RemotingTls, TlsConfigError, client_context, settings_from

LIMIT_S = 60


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def pki(ca: trustme.CA, tmp_path: Path) -> dict[str, str]:
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert("client@example", common_name="client")
    out = {"ca": tmp_path / "ca.pem", "cert": tmp_path / "server.pem", "key": tmp_path / "server.key",
           "client": tmp_path / "client.pem"}
    ca.cert_pem.write_to_path(str(out["ca"]))
    server.cert_chain_pems[0].write_to_path(str(out["cert"]))
    server.private_key_pem.write_to_path(str(out["key"]))
    client.private_key_and_cert_chain_pem.write_to_path(str(out["client"]))
    return {k: str(v) for k, v in out.items()}


def tls_keys(pki: dict[str, str], mode: str, **more: str) -> dict[str, str]:
    return {"tls.server.mode": mode, "tls.test.mode.enable": "false", "tls.server.certPath": pki["cert"],
            "tls.server.keyPath": pki["key"], **more}


@asynccontextmanager
async def stack(root: Path, keys: dict[str, str]) -> AsyncIterator[tuple[str, str]]:
    """Name server + broker with the same tls.* keys; the broker registers over TLS (tls.enable)."""
    async with trio.open_nursery() as nursery:
        ns = NamesrvServer(tls=RemotingTls(settings_from(keys)))
        host, port = await nursery.start(ns.serve, "127.0.0.1", 0)
        cfg = BrokerConfig(listen_port=0, kafka_listen_port=0, store_path_root_dir=str(root / "store"),
                           namesrv_addr=f"{host}:{port}")
        apply_settings(cfg, {**keys, "tls.enable": "true"})
        role = runtime.BrokerRole(cfg)
        await nursery.start(role.run)
        yield f"{host}:{port}", f"{role.broker_addr[0]}:{role.broker_addr[1]}"
        await role.shutdown()
        nursery.cancel_scope.cancel()


async def round_trip(rc: RemotingClient, namesrv: str, broker: str, topic: str) -> bytes:
    nsc = NamesrvClient(rc, [namesrv])
    await Admin(rc, nsc).create_topic(broker, topic, read_queue_nums=1, write_queue_nums=1)
    sent = await Producer(rc, nsc, "pg").send(topic, b"over tls")
    pulled = await PullConsumer(rc, nsc, "cg").pull(sent.queue, sent.queue_offset)
    return pulled.messages[0].body


async def test_enforcing_serves_tls_and_closes_plaintext(pki: dict[str, str], tmp_path: Path) -> None:
    with trio.fail_after(LIMIT_S):
        async with stack(tmp_path, tls_keys(pki, "enforcing")) as (namesrv, broker):
            async with RemotingClient(tls=client_context(pki["ca"]), timeout_s=20) as rc:
                assert await round_trip(rc, namesrv, broker, "TlsT") == b"over tls"
                nsc = NamesrvClient(rc, [namesrv])
                big = bytes(range(256)) * 12288      # 3 MiB: many TLS records each way
                sent = await Producer(rc, nsc, "pg").send("TlsT", big)
                pulled = await PullConsumer(rc, nsc, "cg").pull(sent.queue, sent.queue_offset, max_nums=1)
                assert pulled.messages[0].body == big
            with structlog.testing.capture_logs() as logs:
                async with RemotingClient(timeout_s=10) as plain:
                    with pytest.raises(Exception, match="closed|Closed|connect"):
                        await plain.invoke_ok(broker, _heartbeat_cmd())
            refused = [e for e in logs if e["event"] == "rocketmq.tls_plaintext_refused"]
            assert len(refused) == 1 and refused[0]["log_level"] == "warning"


async def test_permissive_serves_both_on_one_port(tmp_path: Path) -> None:
    keys = {"tls.server.mode": "permissive"}    # tls.test.mode.enable defaults to true: self-signed
    with trio.fail_after(LIMIT_S):
        async with stack(tmp_path, keys) as (namesrv, broker):
            async with RemotingClient(tls=client_context()) as rc:
                assert await round_trip(rc, namesrv, broker, "TlsA") == b"over tls"
                channel = await rc.channel(broker)
                assert type(channel._stream).__name__ == "TlsSocketStream"
            async with RemotingClient() as plain:
                assert await round_trip(plain, namesrv, broker, "TlsB") == b"over tls"
                admin = Admin(plain, NamesrvClient(plain, [namesrv]))
                for key in ("tls.server.mode", "tlsServerMode", "tls.enable"):   # no TLS change over the wire
                    with pytest.raises(ResponseError) as refused:
                        await admin.update_broker_config(broker, {key: "disabled"})
                    assert refused.value.code == ResponseCode.NO_PERMISSION
                shown = await admin.get_broker_config(broker)
                assert shown["tlsServerMode"] == "permissive" and shown["tlsServerKeyPassword"] == ""


async def test_disabled_refuses_tls(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT_S):
        async with trio.open_nursery() as nursery:
            ns = NamesrvServer(tls=RemotingTls(settings_from({"tls.server.mode": "disabled"})))
            host, port = await nursery.start(ns.serve, "127.0.0.1", 0)
            async with RemotingClient(tls=client_context(), connect_timeout_s=10) as rc:
                with pytest.raises(ConnectError):
                    await rc.channel(f"{host}:{port}")
            nursery.cancel_scope.cancel()


async def test_client_certificate_required(pki: dict[str, str], tmp_path: Path) -> None:
    keys = tls_keys(pki, "enforcing", **{"tls.server.need.client.auth": "require",
                                         "tls.server.trustCertPath": pki["ca"]})
    with trio.fail_after(LIMIT_S):
        async with trio.open_nursery() as nursery:
            ns = NamesrvServer(tls=RemotingTls(settings_from(keys)))
            host, port = await nursery.start(ns.serve, "127.0.0.1", 0)
            addr = f"{host}:{port}"
            with structlog.testing.capture_logs() as logs:
                async with RemotingClient(tls=client_context(pki["ca"]), timeout_s=10) as rc:
                    with pytest.raises(Exception):  # noqa: B017,PT011 - TLS 1.3: refused after the handshake
                        await NamesrvClient(rc, [addr]).cluster_info()
            assert any(e["event"] == "rocketmq.tls_failed" for e in logs)
            with_cert = client_context(pki["ca"], cert_path=pki["client"])
            async with RemotingClient(tls=with_cert, timeout_s=10) as rc:
                await NamesrvClient(rc, [addr]).cluster_info()
            nursery.cancel_scope.cancel()


def test_settings_and_config_files(pki: dict[str, str], tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(f"tls.server.mode=enforcing\ntls.test.mode.enable=false\ntls.server.certPath={pki['cert']}\n"
                    f"tls.server.keyPath={pki['key']}\n")
    cfg, unknown = load_broker_conf(conf)
    assert unknown == [] and cfg.tls_server_mode == "enforcing"
    s = settings_from(cfg.tls_properties())
    assert (s.mode, s.test_mode, s.cert_path) == ("enforcing", False, pki["cert"])
    ns_conf = tmp_path / "namesrv.properties"
    ns_conf.write_text(f"listenPort=9877\ntls.server.mode=disabled\ntls.config.file={tmp_path / 'tls.properties'}\n")
    (tmp_path / "tls.properties").write_text("tls.test.mode.enable=false\ntls.server.certPath=/nope.pem\n")
    ns_cfg = load_namesrv_conf(ns_conf)
    assert "tlsSettings" not in ns_cfg.to_properties() and ns_cfg.listen_port == 9877
    s = settings_from(ns_cfg.tls_settings)
    assert (s.mode, s.test_mode, s.cert_path) == ("disabled", False, "/nope.pem")
    assert settings_from({}).mode == "permissive"   # Java's default
    with pytest.raises(TlsConfigError, match="tls.server.mode"):
        settings_from({"tls.server.mode": "sometimes"})
    with pytest.raises(TlsConfigError, match="certPath"):
        settings_from({"tls.server.mode": "enforcing", "tls.test.mode.enable": "false"})
    with pytest.raises(TlsConfigError, match="trustCertPath"):
        settings_from(tls_keys(pki, "enforcing", **{"tls.server.need.client.auth": "require"}))
    with pytest.raises(TlsConfigError, match="/nope.pem"):
        RemotingTls(settings_from({**tls_keys(pki, "enforcing"), "tls.server.certPath": "/nope.pem"}))
    with pytest.raises(ValueError, match="tls.server.mode"):
        BrokerConfig(tls_server_mode="on").validate()


def _heartbeat_cmd() -> RemotingCommand:
    return RemotingCommand(code=RequestCode.GET_BROKER_RUNTIME_INFO)
