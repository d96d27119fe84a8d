"""slaveReadEnable: a PULL's ``suggestWhichBrokerId`` (issue 24), as Java's PullMessageProcessor sets it.

Without slaveReadEnable the answer always names the master (0).  With it, a read still "in memory"
(within accessMessageInMemoryMaxRatio % of RAM of the CommitLog's end) names the group's ``brokerId``
and a read farther back its ``whichBrokerWhenConsumeSlowly`` (default 1, the first slave).

Rules: ports 0 on 127.0.0.1, a tmp_path store, the project's own client library as the peer, every
test bounded by ``trio.fail_after`` (``routed_stack``).
"""

from __future__ import annotations

from pathlib import Path

from rokka.net.remoting.client import MessageQueue, Producer, PullConsumer

from tests.gateway.rocketmq.test_txn_handlers import routed_stack


async def test_pull_suggests_a_slave_only_under_slave_read_enable_when_the_read_is_far_behind(
        tmp_path: Path) -> None:
    async with routed_stack(tmp_path, "SR") as (_ns_addr, _broker, role, rc, ns):
        producer = Producer(rc, ns, "sr-pg")
        for i in range(3):
            await producer.send("SR", b"m%d" % i, queue=0)
        mq = MessageQueue("SR", role.cfg.broker_name, 0)
        consumer = PullConsumer(rc, ns, "sr-g")

        async def suggestion() -> int:
            res = await consumer.pull(mq, 0)
            assert [m.body for m in res.messages] == [b"m0", b"m1", b"m2"]
            return res.suggest_which_broker_id

        cfg = role.cfg
        cfg.access_message_in_memory_max_ratio = 0      # every read but one at the very end is "on disk"
        assert await suggestion() == 0                  # slaveReadEnable off: the master, always
        cfg.slave_read_enable = True
        assert await suggestion() == 1                  # far behind: whichBrokerWhenConsumeSlowly
        cfg.access_message_in_memory_max_ratio = 40
        assert await suggestion() == 0                  # in memory: the group's brokerId
        role.broker.sub_groups.get("sr-g").which_broker_when_consume_slowly = 2
        cfg.access_message_in_memory_max_ratio = 0
        assert await suggestion() == 2
