"""RocketMQ C++ client: mqadmin-style consumer diagnostics reach a real push consumer through the broker
(GET_CONSUMER_RUNNING_INFO and CONSUME_MESSAGE_DIRECTLY are forwarded over the consumer's own connection)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import harness
import pytest
import trio
from rmq_cpp import send, start_push, uniq, wait_consuming
from rokka.net.remoting.client import Admin, NamesrvClient, RemotingClient
from rokka.net.remoting.client.remoting import ResponseError
from rokka.net.remoting.codec.codes import ResponseCode

pytestmark = pytest.mark.usefixtures("need_cpp")


def _admin(namesrv: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([harness.rokka_executable(), "admin", "-n", namesrv, *args], capture_output=True,
                          text=True, timeout=60, check=False)


def test_consumer_status_and_consume_directly_reach_the_cpp_consumer(rokka: harness.ServerProcess,
                                                                      workdir: Path) -> None:
    topic, group = uniq("T_status"), uniq("CG_status")
    send(rokka.namesrv, workdir, "sync", [{"topic": topic, "body": "probe-create"}])
    consumer = start_push(rokka.namesrv, workdir, group=group, topic=topic, name="status")
    try:
        wait_consuming(rokka.namesrv, workdir, topic, [consumer], timeout=90)
        out = _admin(rokka.namesrv, "consumerStatus", "-g", group, "--json")
        assert out.returncode == 0, out.stderr
        clients = json.loads(out.stdout)["clients"]
        assert len(clients) == 1
        info = next(iter(clients.values()))["runningInfo"]
        assert info.get("properties") is not None and info.get("subscriptionSet") is not None
        client_id = next(iter(clients))
        text = _admin(rokka.namesrv, "consumerStatus", "-g", group, "-i", client_id)
        assert text.returncode == 0 and client_id in text.stdout

        async def directly() -> ResponseError:
            async with RemotingClient() as rc:
                admin = Admin(rc, NamesrvClient(rc, [rokka.namesrv]), timeout_s=30)
                with pytest.raises(ResponseError) as err, trio.fail_after(40):
                    await admin.consume_message_directly(rokka.broker, group, client_id, "00" * 16)
                return err.value
        # The C++ client leaves CONSUME_MESSAGE_DIRECTLY unanswered: the broker gives up as Java does.
        err = trio.run(directly)
        assert err.code == ResponseCode.CONSUME_MSG_TIMEOUT and f"consumer <{group}> <{client_id}> Timeout" in \
            str(err.remark)
    finally:
        consumer.close()
