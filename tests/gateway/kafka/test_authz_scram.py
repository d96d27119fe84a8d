"""SCRAM user management without Kafka ACLs (``ScramAdmin`` with ``super_users``): a super user manages
everyone, another user only its own credentials; the refusals are per user (CLUSTER_AUTHORIZATION_FAILED)
and change nothing."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from rokka.gateway.kafka import KafkaRequestContext, KafkaServer
from rokka.gateway.kafka.codec import APIS, Struct
from rokka.gateway.kafka.sasl import UserStore
from rokka.gateway.kafka.scram_admin import ScramAdmin

CAF = 31


def _ctx(user: str) -> KafkaRequestContext:
    return KafkaRequestContext(("127.0.0.1", 1), "c", 51, 0, 1, {"sasl": Struct(principal=f"User:{user}")},
                               KafkaServer({}, max_frame_bytes=1024))


def _upsert(name: str, password: bytes) -> Struct:
    salt = b"salt-" + name.encode()
    return Struct(name=name, mechanism=1, iterations=4096, salt=salt,
                  salted_password=hashlib.pbkdf2_hmac("sha256", password, salt, 4096))


async def test_only_super_users_or_the_user_itself(tmp_path: Path) -> None:
    path = tmp_path / "users.json"
    path.write_text(json.dumps({"users": {"admin": "a", "bob": "b"}}))
    holder = {"store": UserStore.load(path)}
    admin = ScramAdmin(path, lambda: holder["store"], lambda s: holder.update(store=s), super_users=["User:admin"])

    async def alter(user: str, *ups: Struct) -> dict[str, int]:
        out = await admin.alter(_ctx(user), APIS[51].request.make(deletions=[], upsertions=list(ups)))
        return {r.user: r.error_code for r in out.results}

    assert await alter("admin", _upsert("carol", b"pw")) == {"carol": 0}
    assert await alter("bob", _upsert("carol", b"bob's"), _upsert("dave", b"x")) == {"carol": CAF, "dave": CAF}
    assert holder["store"].check_password("carol", "pw") and holder["store"].credential("dave", "SCRAM-SHA-256") is None
    assert await alter("carol", _upsert("carol", b"new")) == {"carol": 0}           # her own password
    assert holder["store"].check_password("carol", "new")
    bob_sees = await admin.describe(_ctx("bob"), APIS[50].request.make(users=None))
    assert [r.user for r in bob_sees.results] == ["bob"]
    named = await admin.describe(_ctx("bob"), APIS[50].request.make(users=[Struct(name="carol")]))
    assert [(r.user, r.error_code) for r in named.results] == [("carol", CAF)]
    everyone = await admin.describe(_ctx("admin"), APIS[50].request.make(users=None))
    assert [r.user for r in everyone.results] == ["admin", "bob", "carol"]
