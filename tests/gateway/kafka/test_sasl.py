"""SASL PLAIN and SCRAM on the sans-IO authenticator, with kafka-python's SCRAM client as the other
side (an implementation that is not ours), plus the configuration rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.kafka.sasl import MECHANISMS, SaslAuthenticator, SaslConfigError, SaslError, UserStore, configure

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
