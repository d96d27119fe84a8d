"""INVOKE_BROKER_TO_RESET_OFFSET: offsets move by time, and live consumers are told (RESET_CONSUMER_CLIENT_OFFSET)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import trio
from rokka.net.remoting.client import Admin, MessageQueue, NamesrvClient, Producer, PullConsumer, RemotingClient
from rokka.net.remoting.codec.codes import RequestCode, ResponseCode
from rokka.net.remoting.codec.remoting import RemotingCommand

from tests.gateway.rocketmq.test_client import start_stack


async def test_reset_by_time_notifies_live_consumer(tmp_path: Path) -> None:
    received: list[RemotingCommand] = []

    async def on_reset(channel: object, cmd: RemotingCommand) -> None:
        received.append(cmd)

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            ns_addr, broker_addr, role = await start_stack(nursery, tmp_path)
            async with RemotingClient(handlers={RequestCode.RESET_CONSUMER_CLIENT_OFFSET: on_reset}) as rc:
                ns = NamesrvClient(rc, [ns_addr])
                await Admin(rc, ns).create_topic(broker_addr, "R1", read_queue_nums=1, write_queue_nums=1)
                with trio.fail_after(5):
                    while await ns.get_route("R1") is None:
                        await trio.sleep(0.05)
                producer = Producer(rc, ns, "pg")
                for i in range(3):
                    await producer.send("R1", b"early-%d" % i, queue=0)
                await trio.sleep(0.05)
                cut = int(time.time() * 1000)
                await trio.sleep(0.05)
                for i in range(2):
                    await producer.send("R1", b"late-%d" % i, queue=0)
                consumer = PullConsumer(rc, ns, "rg")
                await consumer.heartbeat({"R1": "*"})
                mq = MessageQueue("R1", role.cfg.broker_name, 0)
                await consumer.update_offset(mq, 5)
                req = RemotingCommand(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, language="CPP",
                                      ext_fields={"topic": "R1", "group": "rg", "timestamp": str(cut),
                                                  "isForce": "true"})
                resp = await rc.invoke(broker_addr, req)
                assert resp.code == ResponseCode.SUCCESS
                table = json.loads(resp.body)["offsetTable"]    # Java's ResetOffsetBody: MessageQueue-keyed
                assert [(json.loads(k)["queueId"], v) for k, v in table.items()] == [(0, 3)]
                assert await consumer.query_offset(mq) == 3
                with trio.fail_after(5):
                    while not received:
                        await trio.sleep(0.02)
                note = received[0]
                assert note.ext_fields["group"] == "rg" and note.ext_fields["topic"] == "R1"
                body = json.loads(note.body)["offsetTable"]
                assert list(body.values()) == [3]  # a Java-language client gets the MessageQueue-keyed map
                # without isForce an offset never moves forward
                req.ext_fields.update(timestamp="-1", isForce="false")
                resp = await rc.invoke(broker_addr, req)
                assert list(json.loads(resp.body)["offsetTable"].values()) == [3]
            await role.shutdown()
            nursery.cancel_scope.cancel()
