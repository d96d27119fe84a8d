"""Kafka SASL authentication (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), sans-IO.

Theory of operation
-------------------
With ``kafkaSaslMechanisms`` set, the Kafka listener is a SASL_PLAINTEXT one:
a connection may send only ApiVersions, SaslHandshake and SaslAuthenticate
until it has authenticated (anything else closes it, as Kafka does), and its
frames may not exceed ``MAX_UNAUTHENTICATED_FRAME`` bytes meanwhile (Kafka's
sasl.server.max.receive.size).  SaslHandshake v1 picks the mechanism; the
tokens travel in SaslAuthenticate requests (the v0 handshake's raw-token
framing is not offered: clients since Kafka 1.0 use SaslAuthenticate).

* PLAIN (RFC 4616): one token ``authzid NUL user NUL password``; an authzid
  other than empty or the user is refused, as in Kafka.
* SCRAM-SHA-256/512 (RFC 5802 / 7677, Kafka's 4096 iterations): two rounds,
  client-first -> server-first (nonce, salt, iterations), client-final ->
  server-final (server signature).  Only the "n" (no channel binding) GS2
  header is accepted.  The proof is checked against the stored key in
  constant time (``hmac.compare_digest``).  The client-final nonce must be
  the combined one, or -- librdkafka < 2.6.1 -- the client nonce followed by
  it, as Kafka 3.x accepts.

Users come from a JSON file (``kafkaSaslUsers``): ``{"users": {"alice":
"secret"}}``.  At load every password is turned into SCRAM credentials
(random salt, 4096 iterations) for both hashes and dropped; PLAIN checks a
password by deriving it with the user's SCRAM credential's salt.  The file's
``"scram"`` section holds stored credentials instead of passwords (salt,
iterations, stored and server keys, as Kafka keeps them): Kafka's
AlterUserScramCredentials writes there (``rokka.gateway.kafka.scram_admin``).
The file is re-read when it changes (``rokka.gateway.filewatch``, checked every few
seconds): new connections authenticate against the new users, established
ones keep their session (as in Kafka), and a file that no longer parses is
logged and ignored (the last good users stay).  A failed
authentication is answered with SASL_AUTHENTICATION_FAILED (58) and a
message that does not tell a wrong user from a wrong password, and the
connection is then closed.

The protocol side (``handle_sasl_handshake``, ``handle_sasl_authenticate``, ``new_session``, at the
end) is the connection's SASL layer, beside ``rokka.gateway.kafka.authz``: the registry
(``rokka.gateway.kafka.apis``) routes the two SASL APIs here, the trio server only keeps the session
and enforces "nothing else before authentication".
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from pathlib import Path

import structlog
from rokka.gateway.kafka.codec.schema import Struct
from rokka.gateway.kafka.context import KafkaRequestContext
from rokka.gateway.kafka.errors import ErrorCode, KafkaProtocolError
from rokka.net.logs import limited

log = structlog.get_logger(__name__)

__all__ = ["MECHANISMS", "SESSION", "SaslAuthenticator", "handle_sasl_authenticate", "handle_sasl_handshake",
           "new_session", "SaslConfigError", "SaslError", "ScramCredential", "UserStore",
           "parse_stored", "stored_credential",
           "configure", "parse_mechanisms", "scram_credential"]

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
ITERATIONS = 4096
MAX_UNAUTHENTICATED_FRAME = 524288
_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


class SaslError(Exception):
    """Authentication failed; ``str(exc)`` is the message sent to the client."""


class SaslConfigError(ValueError):
    """``kafkaSaslMechanisms`` / ``kafkaSaslUsers`` cannot be used (rokka refuses to start)."""


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


def _keys(hash_name: str, salted: bytes) -> tuple[bytes, bytes]:
    client_key = hmac.digest(salted, b"Client Key", hash_name)
    return hashlib.new(hash_name, client_key).digest(), hmac.digest(salted, b"Server Key", hash_name)


def scram_credential(password: str, mechanism: str, salt: bytes | None = None,
                     iterations: int = ITERATIONS) -> ScramCredential:
    hash_name = _HASHES[mechanism]
    salt = secrets.token_bytes(32) if salt is None else salt
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)
    stored, server = _keys(hash_name, salted)
    return ScramCredential(salt, iterations, stored, server)


def parse_mechanisms(spec: str) -> tuple[str, ...]:
    """``kafkaSaslMechanisms`` ("PLAIN,SCRAM-SHA-256"): the enabled mechanisms, validated."""
    mechs = tuple(m.strip().upper() for m in spec.split(",") if m.strip())
    unknown = [m for m in mechs if m not in MECHANISMS]
    if unknown:
        raise SaslConfigError(f"kafkaSaslMechanisms: unknown mechanism(s) {unknown}; "
                              f"known: {', '.join(MECHANISMS)}")
    return mechs


def configure(mechanisms: str, users_file: str) -> tuple[tuple[str, ...], UserStore] | None:
    """The listener's SASL setting from the two config keys; None = no SASL (PLAINTEXT)."""
    mechs = parse_mechanisms(mechanisms)
    if not mechs:
        if users_file:
            raise SaslConfigError("kafkaSaslUsers is set but kafkaSaslMechanisms is empty")
        return None
    if not users_file:
        raise SaslConfigError("kafkaSaslMechanisms needs kafkaSaslUsers (a JSON file of users)")
    return mechs, UserStore.load(Path(users_file))


class UserStore:
    """SCRAM credentials per user and mechanism (see the module docstring)."""

    def __init__(self, passwords: dict[str, str],
                 stored: dict[tuple[str, str], ScramCredential] | None = None) -> None:
        self._creds = {(user, mech): scram_credential(pw, mech)
                       for user, pw in passwords.items() for mech in _HASHES}
        self._creds.update(stored or {})
        self.file_users = frozenset(passwords)        # users given by password (not by credentials)

    @classmethod
    def load(cls, path: Path) -> UserStore:
        """Raises SaslConfigError when the file is not ``{"users": {name: password}, "scram": {...}}``."""
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise SaslConfigError(f"kafkaSaslUsers {path}: {exc}") from exc
        users = data.get("users", {}) if isinstance(data, dict) else None
        if not isinstance(users, dict) or not all(
                isinstance(k, str) and k and isinstance(v, str) for k, v in users.items()):
            raise SaslConfigError(f'kafkaSaslUsers {path}: expected {{"users": {{"name": "password", ...}}}}')
        try:
            stored = parse_stored(data.get("scram") or {})
        except (ValueError, TypeError, KeyError) as exc:
            raise SaslConfigError(f'kafkaSaslUsers {path}: bad "scram" entry: {exc}') from exc
        both = sorted({u for u, _ in stored} & set(users))
        if both:
            raise SaslConfigError(f"kafkaSaslUsers {path}: {both} both have a password and stored credentials")
        return cls(users, stored)

    def mechanisms_of(self) -> dict[str, dict[str, int]]:
        """user -> {mechanism: iterations}."""
        out: dict[str, dict[str, int]] = {}
        for (user, mech), cred in sorted(self._creds.items()):
            out.setdefault(user, {})[mech] = cred.iterations
        return out

    @property
    def count(self) -> int:
        return len({user for user, _ in self._creds})

    def credential(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._creds.get((user, mechanism))

    def check_password(self, user: str, password: str) -> bool:
        mech = "SCRAM-SHA-256" if (user, "SCRAM-SHA-256") in self._creds else "SCRAM-SHA-512"
        cred = self._creds.get((user, mech))
        probe = scram_credential(password, mech, cred.salt if cred else b"\0" * 32,
                                 cred.iterations if cred else ITERATIONS)
        return cred is not None and hmac.compare_digest(probe.stored_key, cred.stored_key)


def parse_stored(raw: dict[str, dict[str, dict[str, object]]]) -> dict[tuple[str, str], ScramCredential]:
    """The users file's ``"scram"`` section: ``{user: {mechanism: {"salt", "iterations", "stored_key",
    "server_key"}}}`` (bytes in base64) -> credentials."""
    out = {}
    for user, mechs in raw.items():
        for mech, c in mechs.items():
            if mech not in _HASHES or not user:
                raise ValueError(f"unknown mechanism {mech!r} for {user!r}")
            out[(user, mech)] = ScramCredential(base64.b64decode(str(c["salt"])), int(str(c["iterations"])),
                                                base64.b64decode(str(c["stored_key"])),
                                                base64.b64decode(str(c["server_key"])))
    return out


def stored_credential(mechanism: str, salt: bytes, salted_password: bytes, iterations: int) -> ScramCredential:
    """The credential for a client-computed salted password (AlterUserScramCredentials)."""
    stored, server = _keys(_HASHES[mechanism], salted_password)
    return ScramCredential(salt, iterations, stored, server)


def _failed(mechanism: str) -> SaslError:
    return SaslError(f"Authentication failed during authentication due to invalid credentials with SASL "
                     f"mechanism {mechanism}")


def _attrs(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=":
            raise SaslError(f"malformed SCRAM message attribute {part[:20]!r}")
        out.setdefault(part[0], part[2:])
    return out


def _unescape(name: str) -> str:
    return name.replace("=2C", ",").replace("=3D", "=")


class SaslAuthenticator:
    """One connection's SASL exchange: ``handshake`` then ``step`` per SaslAuthenticate token."""

    def __init__(self, mechanisms: tuple[str, ...], users: UserStore) -> None:
        self.mechanisms = mechanisms
        self._users = users
        self.mechanism: str | None = None
        self.principal: str | None = None          # "User:<name>" once authenticated
        # user, client-first-bare, credential, server-first, GS2 header (between the two rounds)
        self._scram: tuple[str, str, ScramCredential | None, str, str] | None = None

    def handshake(self, mechanism: str) -> bool:
        """SaslHandshake: True when ``mechanism`` is enabled (it is then the one used)."""
        if mechanism not in self.mechanisms:
            return False
        self.mechanism, self._scram = mechanism, None
        return True

    def step(self, token: bytes) -> bytes:
        """One SaslAuthenticate token -> the bytes to answer with.

        Raises:
            SaslError: authentication failed (the message is for the client).
        """
        if self.mechanism == "PLAIN":
            return self._plain(token)
        if self.mechanism in _HASHES:
            return self._scram_step(token)
        raise SaslError("SaslAuthenticate before a successful SaslHandshake")

    def _plain(self, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise SaslError("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslError("Invalid SASL/PLAIN response: not UTF-8") from None
        if authzid and authzid != user:
            raise SaslError("Authentication failed: Client requested an authorization id that is "
                            "different from username")
        if not self._users.check_password(user, password):
            raise _failed("PLAIN")
        self.principal = f"User:{user}"
        return b""

    def _scram_step(self, token: bytes) -> bytes:
        assert self.mechanism is not None
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslError("Invalid SCRAM message: not UTF-8") from None
        if self._scram is None:
            return self._scram_first(text)
        return self._scram_final(text)

    def _scram_first(self, text: str) -> bytes:
        assert self.mechanism is not None
        if not text.startswith("n,") or text.count(",") < 2:
            raise SaslError("SCRAM: only the 'n' GS2 header (no channel binding) is supported")
        _, authzid, bare = text.split(",", 2)
        attrs = _attrs(bare)
        user, client_nonce = _unescape(attrs.get("n", "")), attrs.get("r", "")
        if not user or not client_nonce:
            raise SaslError("SCRAM: client-first message lacks n= or r=")
        if authzid and (not authzid.startswith("a=") or _unescape(authzid[2:]) != user):
            raise SaslError("Authentication failed: Client requested an authorization id that is "
                            "different from username")
        gs2 = f"n,{authzid},"
        cred = self._users.credential(user, self.mechanism)
        # An unknown user gets a well-formed challenge too (and fails at the proof), so the
        # answer does not reveal which user names exist.
        salt, iterations = (cred.salt, cred.iterations) if cred else (secrets.token_bytes(32), ITERATIONS)
        nonce = client_nonce + secrets.token_urlsafe(24)
        server_first = f"r={nonce},s={base64.b64encode(salt).decode()},i={iterations}"
        self._scram = (user, bare, cred, server_first, gs2)
        return server_first.encode()

    def _scram_final(self, text: str) -> bytes:
        assert self._scram is not None and self.mechanism is not None
        user, first_bare, cred, server_first, gs2 = self._scram
        without_proof, sep, proof_b64 = text.rpartition(",p=")
        if not sep:
            raise SaslError("SCRAM: client-final message lacks p=")
        attrs = _attrs(without_proof)
        nonce = _attrs(server_first)["r"]
        client_nonce = _attrs(first_bare)["r"]
        # librdkafka before 2.6.1 (Debian and Ubuntu ship such versions) sends the client nonce a
        # second time in front of the combined one; Kafka 3.x accepts that, so does rokka.  The
        # server's fresh part must be there either way (no replayed client-final).
        if attrs.get("r") not in (nonce, client_nonce + nonce) \
                or attrs.get("c") != base64.b64encode(gs2.encode()).decode():
            raise _failed(self.mechanism)
        try:
            proof = base64.b64decode(proof_b64, validate=True)
        except ValueError:
            raise SaslError("SCRAM: proof is not base64") from None
        hash_name = _HASHES[self.mechanism]
        auth_message = f"{first_bare},{server_first},{without_proof}".encode()
        if cred is None or len(proof) != len(cred.stored_key):
            raise _failed(self.mechanism)
        signature = hmac.digest(cred.stored_key, auth_message, hash_name)
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(hash_name, client_key).digest(), cred.stored_key):
            raise _failed(self.mechanism)
        self.principal, self._scram = f"User:{user}", None
        server_signature = hmac.digest(cred.server_key, auth_message, hash_name)
        return f"v={base64.b64encode(server_signature).decode()}".encode()


# -- the SASL layer of a Kafka connection ------------------------------------------------------------
# Beside ``authz``: ``apis`` registers SaslHandshake and SaslAuthenticate with the two handlers below
# (allowed before authentication); the server keeps one ``SaslAuthenticator`` per connection under
# ``conn_state[SESSION]`` (``new_session``) and closes a connection that sends any other API before
# ``session.principal`` is set.  No I/O here: a handler answers a body and marks the connection for
# closing (``conn_state["close"]``) when Kafka would close it.

#: ``conn_state`` key of the connection's ``SaslAuthenticator`` (absent when SASL is off).
SESSION = "sasl"


def new_session(config: tuple[tuple[str, ...], UserStore]) -> SaslAuthenticator:
    """A fresh exchange for a new connection (``config`` = enabled mechanisms + the current users)."""
    return SaslAuthenticator(*config)


def _session(ctx: KafkaRequestContext) -> SaslAuthenticator:
    session: SaslAuthenticator | None = ctx.conn_state.get(SESSION)
    if session is None or session.principal is not None:
        raise KafkaProtocolError("SASL request on an authenticated connection (re-authentication is not offered)")
    return session


async def handle_sasl_handshake(ctx: KafkaRequestContext, body: Struct) -> Struct:
    """SaslHandshake: v1 picks the mechanism; v0 (raw tokens afterwards) is refused and the
    connection closed (it is advertised only because librdkafka needs v0 to see SASL at all)."""
    session = _session(ctx)
    if ctx.api_version == 0:
        limited(log, "warning", "kafka.sasl_failed", ctx.peer[0], peer=ctx.peer,
                reason="SaslHandshake v0 (raw SASL tokens) is not supported; clients with "
                "SaslAuthenticate (Kafka >= 1.0) are")
        ctx.conn_state["close"] = True
        code = ErrorCode.UNSUPPORTED_VERSION
    else:
        code = ErrorCode.NONE if session.handshake(body.mechanism) else ErrorCode.UNSUPPORTED_SASL_MECHANISM
    return Struct(error_code=code, mechanisms=list(session.mechanisms))


async def handle_sasl_authenticate(ctx: KafkaRequestContext, body: Struct) -> Struct:
    """SaslAuthenticate: one token of the exchange; a failure is answered, then the connection closed."""
    session = _session(ctx)
    try:
        token = session.step(bytes(body.auth_bytes))
    except SaslError as exc:
        limited(log, "warning", "kafka.sasl_failed", ctx.peer[0], peer=ctx.peer, mechanism=session.mechanism,
                reason=str(exc))
        ctx.conn_state["close"] = True
        return Struct(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=str(exc), auth_bytes=b"",
                      session_lifetime_ms=0)
    if session.principal is not None:
        log.info("kafka.authenticated", peer=ctx.peer, principal=session.principal, mechanism=session.mechanism)
    return Struct(error_code=ErrorCode.NONE, error_message=None, auth_bytes=token, session_lifetime_ms=0)
