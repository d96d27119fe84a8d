"""TLS on the RocketMQ ports (broker, VIP, name server) with RocketMQ's ``tls.server.mode``.

Theory of operation
-------------------
RocketMQ 4.9 reads its TLS settings from JVM system properties (``TlsSystemConfig``) and, for the
certificate keys, from ``tls.config.file``.  rokka takes the same dotted keys from ``broker.conf``
(``rokka serve`` / ``rokka broker``; the name server of ``rokka serve`` shares them) or from
``namesrv.properties`` (``rokka namesrv -c``), and from the file named by ``tls.config.file``:

* ``tls.server.mode``: ``disabled`` (plaintext only), ``permissive`` (Java's default: TLS and
  plaintext on one port) or ``enforcing`` (TLS only).
* ``tls.test.mode.enable`` (Java's default ``true``): the server uses a self-signed certificate
  made at the first TLS connection (Java: netty's ``SelfSignedCertificate``) and asks for no
  client certificate; the certificate keys below are ignored (as in Java -- set it to ``false``
  to use them).
* ``tls.server.certPath`` (PEM chain), ``tls.server.keyPath`` (PEM key),
  ``tls.server.keyPassword``, ``tls.server.need.client.auth`` (``none`` | ``optional`` |
  ``require``), ``tls.server.authClient`` and ``tls.server.trustCertPath`` (CA file for client
  certificates).  rokka always verifies a client certificate it asks for, so ``optional`` /
  ``require`` need ``tls.server.trustCertPath`` (Java's ``authClient=false`` accepting any client
  certificate is not offered).

As Java's ``HandshakeHandler``, each accepted connection (modes permissive and enforcing) is
classified by its first byte, peeked without consuming it: ``0x16`` (a TLS handshake record) gets a
TLS handshake (bounded by ``HANDSHAKE_TIMEOUT_S``), anything else is plaintext -- served in
permissive mode, closed with one ``rocketmq.tls_plaintext_refused`` log line in enforcing mode.  A
remoting frame cannot start with ``0x16``: its length prefix would be over 350 MiB.  In disabled
mode nothing is peeked (a TLS client then fails on the frame length, as a bad frame).

``TlsSocketStream`` is a ``trio.SSLStream`` with the ``socket`` attribute ``Channel`` reads peer
addresses from; trio's stream allows one reader and one writer at once, as the channel needs.  The
client side (``client_context``) is Java's ``tls.enable=true`` with ``tls.test.mode.enable``: no
server check unless a CA file is given.
"""

from __future__ import annotations

import datetime
import socket
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import structlog
import trio
from rokka.gateway.kafka.tls import TlsConfigError as _StartupTlsError
from rokka.net.remoting.tls_stream import TlsSocketStream

__all__ = ["HANDSHAKE_TIMEOUT_S", "MODES", "RemotingTls", "TlsConfigError", "TlsSettings", "TlsSocketStream",
           "client_context", "client_context_from", "read_tls_config_file", "settings_from"]

log = structlog.get_logger(__name__)

HANDSHAKE_TIMEOUT_S = 10.0
TLS_HANDSHAKE_BYTE = 0x16
MODES = ("disabled", "permissive", "enforcing")
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "require": ssl.CERT_REQUIRED}
#: Keys a ``tls.config.file`` may set (Java: all but the mode and tls.enable).
FILE_KEYS = ("tls.test.mode.enable", "tls.server.need.client.auth", "tls.server.keyPath", "tls.server.keyPassword",
             "tls.server.certPath", "tls.server.authClient", "tls.server.trustCertPath", "tls.client.authServer",
             "tls.client.trustCertPath", "tls.client.certPath", "tls.client.keyPath")


class TlsConfigError(_StartupTlsError):
    """The ``tls.*`` settings cannot be used (rokka refuses to start, as for the Kafka TLS files)."""


@dataclass(frozen=True)
class TlsSettings:
    mode: str = "permissive"
    test_mode: bool = True
    cert_path: str = ""
    key_path: str = ""
    key_password: str = ""
    need_client_auth: str = "none"
    auth_client: bool = False
    trust_cert_path: str = ""


def _bool(raw: str, key: str) -> bool:
    low = raw.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    raise TlsConfigError(f"{key}: expected true or false, got {raw!r}")


def read_tls_config_file(path: str) -> dict[str, str]:
    """The ``tls.*`` keys of a ``tls.config.file`` (Java properties); {} when it does not exist
    (Java skips a missing file too)."""
    from jproperties import Properties

    props = Properties()
    try:
        with open(path, "rb") as f:
            props.load(f, "utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise TlsConfigError(f"tls.config.file {path}: {exc}") from exc
    return {str(k): str(v.data).strip() for k, v in props.items() if str(k) in FILE_KEYS}


def _merged(props: Mapping[str, str]) -> dict[str, str]:
    merged = {k: str(v).strip() for k, v in props.items()}
    if merged.get("tls.config.file"):
        merged.update(read_tls_config_file(merged["tls.config.file"]))
    return merged


def client_context_from(props: Mapping[str, str]) -> ssl.SSLContext | None:
    """The context of a broker's own connections (to name servers and brokers) from ``tls.enable``
    and ``tls.client.*`` (Java's client side of ``TlsHelper``); None: plaintext."""
    merged = _merged(props)
    if not _bool(merged.get("tls.enable") or "false", "tls.enable"):
        return None
    if _bool(merged.get("tls.test.mode.enable") or "true", "tls.test.mode.enable"):
        return client_context()
    trust = merged.get("tls.client.trustCertPath", "")
    if _bool(merged.get("tls.client.authServer") or "false", "tls.client.authServer") and not trust:
        raise TlsConfigError("tls.client.authServer=true needs tls.client.trustCertPath")
    auth_server = _bool(merged.get("tls.client.authServer") or "false", "tls.client.authServer")
    try:
        return client_context(trust if auth_server else None, merged.get("tls.client.certPath") or None,
                              merged.get("tls.client.keyPath") or None)
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"tls.client.* files: {exc}") from exc


def settings_from(props: Mapping[str, str]) -> TlsSettings:
    """Settings from dotted keys (``tls.server.mode`` ...); missing keys take Java's defaults.
    A ``tls.config.file`` named there is read and overrides the certificate keys."""
    merged = _merged(props)
    mode = (merged.get("tls.server.mode") or "permissive").lower()
    if mode not in MODES:
        raise TlsConfigError(f"tls.server.mode={mode!r}: one of {', '.join(MODES)}")
    need = (merged.get("tls.server.need.client.auth") or "none").lower()
    if need not in _CLIENT_AUTH:
        raise TlsConfigError(f"tls.server.need.client.auth={need!r}: one of {', '.join(_CLIENT_AUTH)}")
    s = TlsSettings(mode=mode, test_mode=_bool(merged.get("tls.test.mode.enable") or "true", "tls.test.mode.enable"),
                    cert_path=merged.get("tls.server.certPath", ""), key_path=merged.get("tls.server.keyPath", ""),
                    key_password=merged.get("tls.server.keyPassword", ""), need_client_auth=need,
                    auth_client=_bool(merged.get("tls.server.authClient") or "false", "tls.server.authClient"),
                    trust_cert_path=merged.get("tls.server.trustCertPath", ""))
    if mode != "disabled" and not s.test_mode:
        if not s.cert_path:
            raise TlsConfigError("tls.test.mode.enable=false needs tls.server.certPath (and tls.server.keyPath "
                                 "unless the key is in the certificate file)")
        if need != "none" and not s.trust_cert_path:
            raise TlsConfigError(f"tls.server.need.client.auth={need} needs tls.server.trustCertPath "
                                 "(the CA that signs client certificates)")
    return s


def server_context(s: TlsSettings) -> ssl.SSLContext:
    """The server SSLContext; raises TlsConfigError naming the file at fault."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if s.test_mode:
        cert_pem, key_pem = _self_signed()
        with tempfile.TemporaryDirectory() as tmp:   # load_cert_chain reads files only
            cert, key = Path(tmp) / "cert.pem", Path(tmp) / "key.pem"
            cert.write_bytes(cert_pem)
            key.write_bytes(key_pem)
            ctx.load_cert_chain(cert, key)
        return ctx
    try:
        ctx.load_cert_chain(s.cert_path, s.key_path or None, s.key_password or None)
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"tls.server.certPath {s.cert_path}"
                             + (f" / tls.server.keyPath {s.key_path}" if s.key_path else "") + f": {exc}") from exc
    if s.trust_cert_path:
        try:
            ctx.load_verify_locations(cafile=s.trust_cert_path)
        except (OSError, ssl.SSLError) as exc:
            raise TlsConfigError(f"tls.server.trustCertPath {s.trust_cert_path}: {exc}") from exc
    ctx.verify_mode = _CLIENT_AUTH[s.need_client_auth]
    return ctx


def client_context(trust_cert_path: str | None = None, cert_path: str | None = None,
                   key_path: str | None = None) -> ssl.SSLContext:
    """A client SSLContext as Java's ``tls.enable=true``: with ``trust_cert_path`` the server's
    certificate is checked against it (``tls.client.authServer``), without it anything is trusted
    (``tls.test.mode.enable``); ``cert_path`` / ``key_path``: a client certificate."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if trust_cert_path:
        ctx.load_verify_locations(cafile=trust_cert_path)
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cert_path:
        ctx.load_cert_chain(cert_path, key_path or None)
    return ctx


_SELF_SIGNED: tuple[bytes, bytes] | None = None


def _self_signed() -> tuple[bytes, bytes]:
    """One self-signed EC certificate per process (CN=rokka, a year), PEM (cert, key)."""
    global _SELF_SIGNED
    if _SELF_SIGNED is None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "rokka")])
        now = datetime.datetime.now(datetime.UTC)
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
                .not_valid_after(now + datetime.timedelta(days=365)).sign(key, hashes.SHA256()))
        _SELF_SIGNED = (cert.public_bytes(serialization.Encoding.PEM),
                        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
        log.warning("rocketmq.tls_self_signed", reason="tls.test.mode.enable=true (RocketMQ's default)")
    return _SELF_SIGNED




class RemotingTls:
    """One listener's TLS mode; ``accept`` turns an accepted socket into the stream to serve."""

    def __init__(self, settings: TlsSettings) -> None:
        self.settings = settings
        self._context: ssl.SSLContext | None = None
        if settings.mode != "disabled" and not settings.test_mode:
            self._context = server_context(settings)    # bad files refuse the start

    @property
    def mode(self) -> str:
        return self.settings.mode

    def context(self) -> ssl.SSLContext:
        if self._context is None:
            self._context = server_context(self.settings)
        return self._context

    async def accept(self, stream: trio.SocketStream, peer: str, wait_s: float | None) -> trio.abc.Stream | None:
        """The stream to serve (``stream`` itself for plaintext), or None: the connection was closed
        (refused plaintext, failed handshake, peer gone); one log line says why."""
        if self.settings.mode == "disabled":
            return stream
        try:
            with trio.fail_after(wait_s or 120.0):
                first = await stream.socket.recv(1, socket.MSG_PEEK)
        except (OSError, trio.TooSlowError) as exc:
            log.info("rocketmq.tls_no_first_byte", peer=peer, error=repr(exc))
            return None
        if not first:
            return None
        if first[0] != TLS_HANDSHAKE_BYTE:
            if self.settings.mode == "enforcing":
                log.warning("rocketmq.tls_plaintext_refused", peer=peer,
                            reason="plaintext connection while tls.server.mode=enforcing")
                return None
            return stream
        try:
            context = self.context()
        except (TlsConfigError, ImportError, OSError, ssl.SSLError) as exc:   # the self-signed certificate
            log.error("rocketmq.tls_unavailable", peer=peer, error=str(exc))
            return None
        tls = TlsSocketStream(stream, context, server_side=True)
        try:
            with trio.fail_after(HANDSHAKE_TIMEOUT_S):
                await tls.do_handshake()
        except (trio.BrokenResourceError, trio.TooSlowError, OSError) as exc:
            cause = exc.__cause__ if exc.__cause__ is not None else exc
            log.warning("rocketmq.tls_failed", peer=peer, error=str(cause) or repr(cause))
            return None
        return tls
