"""RocketMQ C++ pull consumer (the wheel's PullConsumer.pull): drains every queue of a topic once.

params: namesrv, group, topic, expression?, offsets? ({"topic@queueId": offset} to resume from),
props?, max_num?, credentials? ([accessKey, secretKey]: RocketMQ ACL signing)
events: started, msg {...}, offsets {table}, done.
"""

from __future__ import annotations

from _common import describe, emit, finish, read_params, set_log


def main() -> None:
    params = read_params()
    from rocketmq.client import PullConsumer

    consumer = PullConsumer(params["group"])
    set_log("pull", consumer._handle)
    consumer.set_namesrv_addr(params["namesrv"])
    if params.get("credentials"):
        consumer.set_session_credentials(*params["credentials"], "")
    # The wheel keeps its offsets in a class-level dict keyed "topic@queueId".
    PullConsumer.offset_table.clear()
    PullConsumer.offset_table.update({k: int(v) for k, v in (params.get("offsets") or {}).items()})
    consumer.start()
    emit("started")
    props = list(params.get("props") or [])
    for msg in consumer.pull(params["topic"], params.get("expression") or "*", int(params.get("max_num", 32))):
        emit("msg", **describe(msg, props))
    emit("offsets", table=dict(PullConsumer.offset_table))
    consumer.shutdown()
    emit("done")
    finish(0)


if __name__ == "__main__":
    main()
