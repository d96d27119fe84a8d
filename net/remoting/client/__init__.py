"""Trio RocketMQ client library (used by the CLI, tests and the Spark connector).

Typical use::

    async with RemotingClient() as rc:
        ns = NamesrvClient(rc, ["127.0.0.1:9876"])
        producer = Producer(rc, ns, "pg")
        result = await producer.send("T", b"hello", tags="A")
        consumer = PullConsumer(rc, ns, "cg")
        pulled = await consumer.pull(result.queue, result.queue_offset)
"""

from rokka.net.remoting.channel import ChannelClosedError, RequestTimeoutError
from rokka.net.remoting.client.admin import TRANSACTION_COMMIT, TRANSACTION_ROLLBACK, Admin
from rokka.net.remoting.client.consumer import PullConsumer, decode_messages
from rokka.net.remoting.client.namesrv import BrokerRegistrar, NamesrvClient, register_broker, unregister_broker
from rokka.net.remoting.client.producer import Producer, new_uniq_key
from rokka.net.remoting.client.remoting import (
    ClientError,
    ConnectError,
    NoRouteError,
    RemotingClient,
    ResponseError,
    split_addr,
)
from rokka.net.remoting.client.types import MessageQueue, OutMessage, PullResult, SendResult, TopicRoute
from rokka.net.remoting.codec.lenient_json import loads_lenient

__all__ = [
    "TRANSACTION_COMMIT", "TRANSACTION_ROLLBACK", "Admin", "BrokerRegistrar", "ChannelClosedError", "ClientError",
    "ConnectError", "MessageQueue", "NamesrvClient", "NoRouteError", "OutMessage", "Producer", "PullConsumer",
    "PullResult",
    "RemotingClient", "RequestTimeoutError", "ResponseError", "SendResult", "TopicRoute", "decode_messages",
    "loads_lenient", "new_uniq_key", "register_broker", "split_addr", "unregister_broker",
]
