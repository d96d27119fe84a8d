"""RocketMQ ACL (``aclEnable`` + ``plain_acl.yml``) against the RocketMQ C++ client's own request
signing (``set_session_credentials``): an account with rights sends and pulls; no credentials, a wrong
secret key and a topic the account may not use are refused with the reason.

Everything on 127.0.0.1 with free ports; every client run is bounded.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import harness
import pytest
import rmq_cpp
from rmq_acl import acl_conf, plain_acl

pytestmark = pytest.mark.usefixtures("need_cpp")

ACL = plain_acl(["AclTopic=PUB|SUB", "TBW102=PUB"])


@pytest.fixture
def acl_rokka(configured_rokka: Any) -> harness.ServerProcess:
    return configured_rokka(*acl_conf(ACL))


def send(srv: harness.ServerProcess, workdir: Path, topic: str, credentials: list[str] | None) -> list[dict]:
    return harness.run_cpp("producer", {"namesrv": srv.namesrv, "group": rmq_cpp.uniq("PG"), "mode": "sync",
                                        "messages": [{"topic": topic, "body": f"acl-{i}"} for i in range(3)],
                                        "credentials": credentials, "timeout_ms": 3000},
                           workdir=workdir / rmq_cpp.uniq("producer"), timeout=60)


def test_signed_requests_pass_and_the_rest_is_refused(acl_rokka: harness.ServerProcess, workdir: Path) -> None:
    good = ["app-key", "app-secret-1234"]
    events = send(acl_rokka, workdir, "AclTopic", good)          # the first send creates the topic
    assert [e["status"] for e in events if e["event"] == "sent"] == [0, 0, 0], events
    pulled = harness.run_cpp("pull_consumer", {"namesrv": acl_rokka.namesrv, "group": rmq_cpp.uniq("CG"),
                                               "topic": "AclTopic", "credentials": good},
                             workdir=workdir / "pull", timeout=60)
    assert sorted(e["body"] for e in pulled if e["event"] == "msg") == ["acl-0", "acl-1", "acl-2"], pulled

    # Refusals reach the client as SYSTEM_ERROR with the reason (its log shows the remark).
    for topic, creds, reason in (
            ("AclTopic", None, "No accessKey is configured"),
            ("AclTopic", ["app-key", "wrong-secret"], "Check signature failed for accessKey=app-key"),
            ("AclTopic", ["nobody", "x"], "No acl config for nobody"),
            ("OtherTopic", good, "No permission for topic OtherTopic (needs PUB) for accessKey=app-key")):
        with pytest.raises(harness.HarnessError) as refused:
            send(acl_rokka, workdir, topic, creds)
        assert f"AclException: {reason}" in str(refused.value), (creds, str(refused.value)[-2000:])
        assert reason in acl_rokka.stderr_tail(400)


def test_rokka_admin_signs_with_its_keys(acl_rokka: harness.ServerProcess) -> None:
    def admin(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([harness.rokka_executable(), "admin", "-n", acl_rokka.namesrv, *args,
                               "updateTopic", "-t", "AdmAcl", "-c", "DefaultCluster"],
                              capture_output=True, text=True, timeout=60, check=False)

    refused = admin()
    assert refused.returncode == 1 and "AclException: No accessKey is configured" in refused.stderr
    not_admin = admin("--access-key", "app-key", "--secret-key", "app-secret-1234")
    assert not_admin.returncode == 1 and "is not admin" in not_admin.stderr
    ok = admin("--access-key", "ops-key", "--secret-key", "ops-secret-1234")
    assert ok.returncode == 0, ok.stderr


def test_edited_acl_file_applies_without_restart(acl_rokka: harness.ServerProcess, workdir: Path) -> None:
    """RocketMQ 4.9 watches plain_acl.yml; so does rokka: a permission added to the file lets the
    C++ client send within seconds, and a broken edit keeps the accounts in force."""
    good = ["app-key", "app-secret-1234"]
    with pytest.raises(harness.HarnessError, match="No permission for topic Granted"):
        send(acl_rokka, workdir, "Granted", good)
    acl_file = acl_rokka.workdir / "plain_acl.yml"
    acl_file.write_text("accounts: [unparsable\n")
    deadline = time.monotonic() + 20
    while "plain_acl.yml not reloaded" not in acl_rokka.stderr_tail(400):
        assert time.monotonic() < deadline, "the broken edit was never noticed"
        time.sleep(0.5)
    events = send(acl_rokka, workdir, "AclTopic", good)             # the old accounts still apply
    assert [e["status"] for e in events if e["event"] == "sent"] == [0, 0, 0]
    acl_file.write_text(plain_acl(["AclTopic=PUB|SUB", "TBW102=PUB", "Granted=PUB|SUB"]))
    deadline = time.monotonic() + 30
    while True:
        try:
            events = send(acl_rokka, workdir, "Granted", good)
            break
        except harness.HarnessError:
            assert time.monotonic() < deadline, "the new permission never applied"
            time.sleep(1)
    assert [e["status"] for e in events if e["event"] == "sent"] == [0, 0, 0]
    assert "plain_acl.yml reloaded" in acl_rokka.stderr_tail(400)
