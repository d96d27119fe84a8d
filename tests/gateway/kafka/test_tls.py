"""TLS on the Kafka listener: settings, the SSL context, principals, and a live KafkaServer on
127.0.0.1 port 0 behind TLS (certificates from trustme, peers are trio's TLS client speaking our
codec and raw TCP sockets).  Every live test is bounded by trio.fail_after; no timing assertions.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
import rokka.gateway.kafka.server as server_mod
import trio
import trustme
from rokka.gateway.kafka import KafkaServer
from rokka.gateway.kafka.codec import APIS, Struct, decode_response_frame, encode_request_frame
from rokka.gateway.kafka.tls import TlsConfigError, principal, server_context, settings_from

API_VERSIONS = APIS[18]


@pytest.fixture
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def server_pem(ca: trustme.CA, tmp_path: Path) -> Path:
    path = tmp_path / "server.pem"
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(str(path))
    return path


@pytest.fixture
def ca_pem(ca: trustme.CA, tmp_path: Path) -> Path:
    path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return path


def test_settings_validation(server_pem: Path, ca_pem: Path) -> None:
    assert settings_from("") is None
    with pytest.raises(TlsConfigError, match="need kafkaSslCertFile"):
        settings_from("", ca_file=str(ca_pem))
    with pytest.raises(TlsConfigError, match="need kafkaSslCertFile"):
        settings_from("", client_auth="required")
    with pytest.raises(TlsConfigError, match="kafkaSslClientAuth: 'always'"):
        settings_from(str(server_pem), client_auth="always")
    with pytest.raises(TlsConfigError, match="needs kafkaSslCaFile"):
        settings_from(str(server_pem), client_auth="required")
    s = settings_from(str(server_pem), ca_file=str(ca_pem), client_auth="Required")
    assert s is not None and s.client_auth == "required" and s.files == (server_pem, ca_pem)
    assert server_context(s).verify_mode == ssl.CERT_REQUIRED


def test_unusable_files_name_the_key(server_pem: Path, ca_pem: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nope.pem"
    with pytest.raises(TlsConfigError, match="kafkaSslCertFile .*nope.pem"):
        server_context(settings_from(str(missing)))  # type: ignore[arg-type]
    with pytest.raises(TlsConfigError, match="kafkaSslCertFile"):      # a CA certificate without its key
        server_context(settings_from(str(ca_pem)))  # type: ignore[arg-type]
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
    with pytest.raises(TlsConfigError, match="kafkaSslCaFile .*garbage.pem"):
        server_context(settings_from(str(server_pem), ca_file=str(garbage)))  # type: ignore[arg-type]


def test_principal_is_the_rfc4514_subject() -> None:
    cert = {"subject": ((("countryName", "SE"),), (("organizationName", "Example, Inc"),),
                        (("commonName", "alice"), ("organizationalUnitName", "ops")))}
    assert principal(cert) == "CN=alice+OU=ops,O=Example\\, Inc,C=SE"
    assert principal({}) is None and principal(None) is None
    assert principal({"subject": ((("commonName", " lead#"),),)}) == "CN=\\ lead#"


def _client_context(ca: trustme.CA, cert: trustme.LeafCert | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ca.configure_trust(ctx)
    if cert is not None:
        cert.configure_cert(ctx)
    return ctx


def _api_versions_frame(correlation_id: int) -> bytes:
    return encode_request_frame(API_VERSIONS, 3, correlation_id,
                                Struct(client_software_name="t", client_software_version="1"), "tls-test")


async def _read_frames(stream: trio.abc.Stream, n: int) -> list[bytes]:
    buf, out = b"", []
    while len(out) < n:
        while len(buf) >= 4 and len(buf) >= 4 + int.from_bytes(buf[:4], "big"):
            size = int.from_bytes(buf[:4], "big")
            out.append(buf[4:4 + size])
            buf = buf[4 + size:]
        if len(out) >= n:
            break
        chunk = await stream.receive_some(65536)
        if not chunk:
            raise EOFError(f"closed after {len(out)} frames")
        buf += chunk
    return out


async def _closed(stream: trio.abc.Stream) -> bool:
    try:
        while await stream.receive_some(65536):
            pass
        return True
    except trio.BrokenResourceError:
        return True


async def test_requests_over_tls_and_plaintext_turned_away(ca: trustme.CA, server_pem: Path) -> None:
    s = settings_from(str(server_pem))
    assert s is not None
    server = KafkaServer({}, max_frame_bytes=1 << 20, tls=server_context(s))
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            host, port = await nursery.start(server.serve, "127.0.0.1", 0)
            # a plaintext Kafka client: closed at the handshake, the server goes on
            plain = await trio.open_tcp_stream(host, port)
            await plain.send_all(_api_versions_frame(1))
            assert await _closed(plain)
            secure = await trio.open_ssl_over_tcp_stream(host, port, ssl_context=_client_context(ca),
                                                         https_compatible=False)
            # two requests in one write: both answers leave together (the joined-buffers path)
            await secure.send_all(_api_versions_frame(7) + _api_versions_frame(8))
            frames = await _read_frames(secure, 2)
            for cid, frame in zip((7, 8), frames, strict=True):
                got_cid, body = decode_response_frame(API_VERSIONS, 3, frame)
                assert got_cid == cid and body.error_code == 0
                assert {k.api_key for k in body.api_keys} == {18}
            await secure.aclose()
            nursery.cancel_scope.cancel()
    assert server.stats.protocol_errors == 0 and server.stats.requests == 2


async def test_required_client_certificate(ca: trustme.CA, server_pem: Path, ca_pem: Path) -> None:
    s = settings_from(str(server_pem), ca_file=str(ca_pem), client_auth="required")
    assert s is not None
    server = KafkaServer({}, max_frame_bytes=1 << 20, tls=server_context(s))
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            host, port = await nursery.start(server.serve, "127.0.0.1", 0)
            # TLS 1.3: the client learns of the refusal only when it reads
            anonymous = await trio.open_ssl_over_tcp_stream(host, port, ssl_context=_client_context(ca))
            with pytest.raises((trio.BrokenResourceError, EOFError)):
                await anonymous.send_all(_api_versions_frame(1))
                await _read_frames(anonymous, 1)
            leaf = ca.issue_cert("alice@example.com", common_name="alice")
            secure = await trio.open_ssl_over_tcp_stream(host, port, ssl_context=_client_context(ca, leaf))
            await secure.send_all(_api_versions_frame(2))
            (frame,) = await _read_frames(secure, 1)
            assert decode_response_frame(API_VERSIONS, 3, frame)[0] == 2
            await secure.aclose()
            nursery.cancel_scope.cancel()
    assert server.stats.requests == 1


async def test_handshake_is_bounded(server_pem: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server_mod, "HANDSHAKE_TIMEOUT_S", 0.3)
    s = settings_from(str(server_pem))
    assert s is not None
    server = KafkaServer({}, max_frame_bytes=1 << 20, tls=server_context(s))
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            host, port = await nursery.start(server.serve, "127.0.0.1", 0)
            silent = await trio.open_tcp_stream(host, port)       # connects, never says hello
            assert await _closed(silent)
            nursery.cancel_scope.cancel()
