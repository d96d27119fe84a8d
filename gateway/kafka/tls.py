"""TLS on the Kafka listener: security.protocol SSL, or SASL_SSL together with ``rokka.gateway.kafka.sasl``.

Theory of operation
-------------------
With ``kafkaSslCertFile`` set the Kafka port speaks TLS only (as a Kafka ``SSL://`` listener; the
port number and what Metadata advertises do not change).  Every accepted connection first completes
a TLS handshake, bounded by ``HANDSHAKE_TIMEOUT_S``; one that fails (a plaintext client, an unknown
CA, a missing client certificate when one is required) is logged as ``kafka.tls_failed`` with the
reason and closed.  Then the connection is served exactly as a plaintext one, SASL included.

Settings (rokka's own keys, named after Kafka's ``ssl.*`` ones):

* ``kafkaSslCertFile``: PEM, the server certificate followed by its chain; may hold the key too.
* ``kafkaSslKeyFile``: PEM private key (default: in the certificate file);
  ``kafkaSslKeyPassword`` if it is encrypted.
* ``kafkaSslCaFile``: PEM CA certificates that client certificates must chain to.
* ``kafkaSslClientAuth``: ``none`` (default), ``requested`` (a client certificate is checked when
  one is sent) or ``required`` (Kafka's ``ssl.client.auth``); the last two need ``kafkaSslCaFile``.

TLS 1.2 is the minimum (Kafka's default ``ssl.enabled.protocols`` is TLSv1.2,TLSv1.3).  The
client's certificate subject, as an RFC 4514 distinguished name (Kafka's default SSL principal,
``CN=alice,O=example``), is logged with each connection and is the client's principal for Kafka
ACLs (``User:CN=alice,O=example``) when it does not authenticate with SASL.

The files are read at start (a bad file refuses the start: ``TlsConfigError``) and re-read when
one of them changes (``rokka.gateway.filewatch``): new connections get the new certificate, open ones keep theirs
-- a certificate can be rotated without a restart, as with Kafka's dynamic keystore update.  A broken
edit is logged and the previous files stay in use.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

__all__ = ["HANDSHAKE_TIMEOUT_S", "TlsConfigError", "TlsSettings", "principal", "server_context",
           "settings_from"]

log = structlog.get_logger(__name__)

#: A connection that has not completed its TLS handshake by then is closed.
HANDSHAKE_TIMEOUT_S = 10.0

CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


class TlsConfigError(Exception):
    """The ``kafkaSsl*`` settings cannot be used (rokka refuses to start)."""


@dataclass(frozen=True)
class TlsSettings:
    cert_file: Path
    key_file: Path | None
    key_password: str | None
    ca_file: Path | None
    client_auth: str

    @property
    def files(self) -> tuple[Path, ...]:
        return tuple(p for p in (self.cert_file, self.key_file, self.ca_file) if p is not None)


def settings_from(cert_file: str, key_file: str = "", key_password: str = "", ca_file: str = "",
                  client_auth: str = "") -> TlsSettings | None:
    """The listener's TLS settings from the config keys; None = plaintext (no ``kafkaSslCertFile``)."""
    mode = (client_auth or "none").strip().lower()
    if not cert_file:
        if key_file or ca_file or mode != "none":
            raise TlsConfigError("kafkaSslKeyFile / kafkaSslCaFile / kafkaSslClientAuth need kafkaSslCertFile")
        return None
    if mode not in CLIENT_AUTH:
        raise TlsConfigError(f"kafkaSslClientAuth: {client_auth!r}; one of {', '.join(CLIENT_AUTH)}")
    if mode != "none" and not ca_file:
        raise TlsConfigError(f"kafkaSslClientAuth={mode} needs kafkaSslCaFile (the CA that signs client certificates)")
    return TlsSettings(Path(cert_file), Path(key_file) if key_file else None, key_password or None,
                       Path(ca_file) if ca_file else None, mode)


def server_context(s: TlsSettings) -> ssl.SSLContext:
    """A server-side SSLContext from the files; raises TlsConfigError naming the file at fault."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(s.cert_file, s.key_file, s.key_password)
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"kafkaSslCertFile {s.cert_file}"
                             + (f" / kafkaSslKeyFile {s.key_file}" if s.key_file else "") + f": {exc}") from exc
    if s.ca_file is not None:
        try:
            ctx.load_verify_locations(cafile=s.ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise TlsConfigError(f"kafkaSslCaFile {s.ca_file}: {exc}") from exc
    ctx.verify_mode = CLIENT_AUTH[s.client_auth]
    return ctx


def principal(cert: dict[str, Any] | None) -> str | None:
    """The client certificate's subject as an RFC 4514 name (most specific first, as Kafka prints
    it: ``CN=alice,O=example``); None without a verified certificate."""
    if not cert or "subject" not in cert:
        return None
    names = {"commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU",
             "countryName": "C", "stateOrProvinceName": "ST", "localityName": "L"}
    parts = []
    for rdn in reversed(cert["subject"]):
        parts.append("+".join(f"{names.get(k, k)}={_escape(v)}" for k, v in rdn))
    return ",".join(parts)


def _escape(value: str) -> str:
    out = "".join("\\" + ch if ch in ',+"\\<>;=' else ch for ch in value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    return out[:-1] + "\\ " if out.endswith(" ") else out
