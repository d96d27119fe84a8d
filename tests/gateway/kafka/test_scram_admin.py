"""AlterUserScramCredentials / DescribeUserScramCredentials over a users file (gateway.kafka.scram_admin):
what is written (credentials, never passwords), the per-user errors, and that new logins see it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from rokka.gateway.kafka import KafkaRequestContext, KafkaServer
from rokka.gateway.kafka.codec import APIS, Struct
from rokka.gateway.kafka.sasl import UserStore
from rokka.gateway.kafka.scram_admin import ScramAdmin

SHA256, SHA512 = 1, 2


def _ctx() -> KafkaRequestContext:
    return KafkaRequestContext(("127.0.0.1", 1), "c", 51, 0, 1, {}, KafkaServer({}, max_frame_bytes=1024))


def _upsert(name: str, mech: int = SHA256, iterations: int = 4096, password: bytes = b"pw") -> Struct:
    salt = b"salt-" + name.encode()
    salted = hashlib.pbkdf2_hmac("sha256" if mech == SHA256 else "sha512", password, salt, iterations)
    return Struct(name=name, mechanism=mech, iterations=iterations, salt=salt, salted_password=salted)


async def test_alter_and_describe(tmp_path: Path) -> None:
    path = tmp_path / "users.json"
    path.write_text(json.dumps({"users": {"alice": "alice-pw"}}))
    holder = {"store": UserStore.load(path)}
    admin = ScramAdmin(path, lambda: holder["store"], lambda s: holder.update(store=s))

    async def alter(deletions: list[Struct], upsertions: list[Struct]) -> dict[str, tuple[int, str | None]]:
        out = await admin.alter(_ctx(), APIS[51].request.make(deletions=deletions, upsertions=upsertions))
        return {r.user: (r.error_code, r.error_message) for r in out.results}

    got = await alter([], [_upsert("carol"), _upsert("dave", SHA512, 8192), _upsert("", SHA256),
                           _upsert("erin", 7), _upsert("frank", iterations=100), _upsert("alice")])
    assert got["carol"] == (0, None) and got["dave"] == (0, None)
    assert {u: c for u, (c, _) in got.items() if c} == {"": 93, "erin": 33, "frank": 93, "alice": 93}
    saved = json.loads(path.read_text())
    assert saved["users"] == {"alice": "alice-pw"} and sorted(saved["scram"]) == ["carol", "dave"]
    assert "pw" not in json.dumps(saved["scram"])                      # credentials only, never the password
    assert holder["store"].check_password("carol", "pw") and not holder["store"].check_password("carol", "x")
    described = await admin.describe(_ctx(), APIS[50].request.make(users=None))
    assert {r.user: [(c.mechanism, c.iterations) for c in r.credential_infos] for r in described.results} == {
        "alice": [(SHA256, 4096), (SHA512, 4096)], "carol": [(SHA256, 4096)], "dave": [(SHA512, 8192)]}
    one = await admin.describe(_ctx(), APIS[50].request.make(users=[Struct(name="nobody")]))
    assert one.results[0].error_code == 91
    got = await alter([Struct(name="carol", mechanism=SHA256), Struct(name="carol", mechanism=SHA512)],
                      [_upsert("dave", SHA512), _upsert("dave", SHA512)])
    assert got == {"carol": (91, "Attempt to delete a user credential that does not exist"),
                   "dave": (92, "A user credential cannot be altered twice in the same request")}
    assert sorted(json.loads(path.read_text())["scram"]) == ["carol", "dave"]      # nothing applied for them
    assert await alter([Struct(name="carol", mechanism=SHA256)], []) == {"carol": (0, None)}
    assert sorted(json.loads(path.read_text())["scram"]) == ["dave"]
    assert holder["store"].credential("carol", "SCRAM-SHA-256") is None
