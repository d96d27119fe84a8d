"""SASL PLAIN and SCRAM on the sans-IO authenticator, with kafka-python's SCRAM client as the other
side (an implementation that is not ours), plus the configuration rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rokka.gateway.filewatch import watch_files
from rokka.gateway.kafka.sasl import (
    MECHANISMS,
    SaslAuthenticator,
    SaslConfigError,
    SaslError,
    UserStore,
    configure,
)

scram = pytest.importorskip("kafka.net.sasl.scram", reason="kafka-python is not installed (make test installs it)")

USERS = UserStore({"alice": "alice-secret", "bob": "b,o=b"})


def authenticator(mechanism: str) -> SaslAuthenticator:
    a = SaslAuthenticator(MECHANISMS, USERS)
    assert a.handshake(mechanism)
    return a


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_with_kafka_pythons_client(mechanism: str) -> None:
    client = scram.ScramClient("alice", "alice-secret", mechanism)
    server = authenticator(mechanism)
    client.process_server_first_message(server.step(client.first_message()))
    assert server.principal is None
    client.process_server_final_message(server.step(client.final_message()))   # checks our signature
    assert server.principal == "User:alice"


@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("mallory", "alice-secret")])
def test_scram_refuses_wrong_password_and_unknown_user_alike(user: str, password: str) -> None:
    client = scram.ScramClient(user, password, "SCRAM-SHA-256")
    server = authenticator("SCRAM-SHA-256")
    first = server.step(client.first_message())           # an unknown user gets a challenge as well
    assert first.startswith(b"r=")
    client.process_server_first_message(first)
    with pytest.raises(SaslError, match="invalid credentials with SASL mechanism SCRAM-SHA-256"):
        server.step(client.final_message())
    assert server.principal is None


def test_scram_refuses_a_tampered_nonce_and_channel_binding() -> None:
    client = scram.ScramClient("alice", "alice-secret", "SCRAM-SHA-256")
    server = authenticator("SCRAM-SHA-256")
    client.process_server_first_message(server.step(client.first_message()))
    final = client.final_message()
    with pytest.raises(SaslError):
        authenticator("SCRAM-SHA-256").step(b"y,,n=alice,r=abc")       # only the "n" GS2 header
    with pytest.raises(SaslError):
        server.step(final.replace(b"c=biws", b"c=eSws"))


def test_plain() -> None:
    a = authenticator("PLAIN")
    assert a.step(b"\0bob\0b,o=b") == b"" and a.principal == "User:bob"
    assert authenticator("PLAIN").step(b"alice\0alice\0alice-secret") == b""     # authzid = user
    for bad in (b"\0alice\0nope", b"\0nobody\0alice-secret", b"bob\0alice\0alice-secret", b"alice-secret",
                b"\0\xff\0x"):
        with pytest.raises(SaslError):
            authenticator("PLAIN").step(bad)


def test_handshake_and_order() -> None:
    a = SaslAuthenticator(("PLAIN",), USERS)
    assert not a.handshake("SCRAM-SHA-256") and not a.handshake("GSSAPI")
    with pytest.raises(SaslError, match="before a successful SaslHandshake"):
        a.step(b"\0alice\0alice-secret")


def test_configuration(tmp_path: Path) -> None:
    users = tmp_path / "users.json"
    users.write_text(json.dumps({"users": {"alice": "alice-secret"}}))
    assert configure("", "") is None
    mechs, store = configure("plain, SCRAM-SHA-512", str(users))  # type: ignore[misc]
    assert mechs == ("PLAIN", "SCRAM-SHA-512") and store.check_password("alice", "alice-secret")
    assert not store.check_password("alice", "alice-secret ")
    (tmp_path / "bad.json").write_text('{"users": ["alice"]}')
    for mechanisms, path in (("PLAIN", ""), ("", str(users)), ("OAUTHBEARER", str(users)),
                             ("PLAIN", str(tmp_path / "bad.json")), ("PLAIN", str(tmp_path / "missing.json"))):
        with pytest.raises(SaslConfigError):
            configure(mechanisms, path)


async def test_users_file_is_reloaded_when_it_changes(tmp_path: Path) -> None:
    import trio

    users = tmp_path / "users.json"
    users.write_text(json.dumps({"users": {"alice": "one"}}))
    applied: list[UserStore] = []
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: watch_files([users], lambda: UserStore.load(users), applied.append,
                                                   what="kafka SASL users", errors=(SaslConfigError,),
                                                   interval_s=0.02))
            await trio.sleep(0.1)
            assert applied == []                                    # unchanged: nothing reloaded
            users.write_text(json.dumps({"users": {"alice": "two", "carol": "three"}}))
            while not applied:  # noqa: ASYNC110 - polling what the watcher applied
                await trio.sleep(0.02)
            assert applied[-1].check_password("alice", "two") and applied[-1].check_password("carol", "three")
            users.write_text("{not json")                           # a broken edit is ignored
            await trio.sleep(0.3)
            assert len(applied) == 1
            nursery.cancel_scope.cancel()


def test_scram_accepts_old_librdkafkas_doubled_nonce() -> None:
    """librdkafka < 2.6.1 puts its own nonce in front of the combined one in client-final (Kafka 3.x
    accepts it; Debian's kcat links such a librdkafka).  The proof is over what was sent."""
    import base64
    import hashlib
    import hmac

    first_bare = "n=alice,r=clientnonce"
    for prefix, ok in (("clientnonce", True), ("", True), ("x", False), ("clientnonceclientnonce", False)):
        server = authenticator("SCRAM-SHA-256")
        server_first = server.step(b"n,," + first_bare.encode()).decode()
        attrs = dict(kv.split("=", 1) for kv in server_first.split(","))
        salted = hashlib.pbkdf2_hmac("sha256", b"alice-secret", base64.b64decode(attrs["s"]), int(attrs["i"]))
        client_key = hmac.digest(salted, b"Client Key", "sha256")
        without_proof = f"c=biws,r={prefix}{attrs['r']}"
        signature = hmac.digest(hashlib.sha256(client_key).digest(),
                                f"{first_bare},{server_first},{without_proof}".encode(), "sha256")
        proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
        final = f"{without_proof},p={proof}".encode()
        if ok:
            assert server.step(final).startswith(b"v=") and server.principal == "User:alice"
        else:
            with pytest.raises(SaslError):
                server.step(final)
