"""``rokka admin``: RocketMQ ``mqadmin``-style administration over the remoting protocol.

Theory of operation
-------------------
``rokka admin -n H:P[;H:P] <command> [options] [--json]``.  Every command is a thin click
wrapper: it parses options, runs one ``admin_ops.op_*`` coroutine under ``trio.run`` inside a
fresh ``RemotingClient`` (so nothing outlives the command), and prints the returned dict either as
one JSON document (``--json``, before or after the command name) or through the matching
``admin_render`` function.

Errors: anything the user can cause or the network can do (unknown topic, name server or broker
unreachable, timeouts, a broker's error response, a malformed id) becomes ONE line on stderr,
``error: ...``, and exit code 1 - never a traceback.  Usage errors are click's (exit code 2).
Logging goes to stderr at ``--log-level`` (default ``error``) so stdout holds only the output.

Timestamps on the command line are milliseconds since the epoch, ``now``, or ISO 8601
(``2024-05-01T12:00:00``; without a zone it means local time).
"""

from __future__ import annotations

import click
from rokka.gateway.cli import admin_ops as ops
from rokka.gateway.cli import admin_render as render
from rokka.gateway.cli.admin_group import TIMESTAMP, AdminContext, _json_option, admin, run

__all__ = ["TIMESTAMP", "AdminContext", "admin", "run"]


# -- topics -------------------------------------------------------------------------------------

@admin.command("updateTopic")
@click.option("-t", "--topic", required=True)
@click.option("-r", "--read-queues", "read", type=click.IntRange(1, 1024), default=8, show_default=True)
@click.option("-w", "--write-queues", "write", type=click.IntRange(1, 1024), default=8, show_default=True)
@click.option("-p", "--perm", type=click.IntRange(0, 7), default=6, show_default=True,
              help="2 write, 4 read, 6 read+write")
@click.option("-o", "--order", is_flag=True, help="Ordered topic.")
@click.option("-b", "--broker", help="Broker address H:P.")
@click.option("-c", "--cluster", help="Create on every master of this cluster.")
@_json_option
def update_topic(topic: str, read: int, write: int, perm: int, order: bool, broker: str | None,
                 cluster: str | None, as_json: bool) -> None:
    """Create or update a topic on one broker (-b) or a whole cluster (-c)."""
    if bool(broker) == bool(cluster):
        raise click.UsageError("give exactly one of -b broker address or -c cluster")
    run(ops.op_update_topic, render.render_update_topic, as_json, topic=topic, read=read, write=write,
        perm=perm, broker=broker, cluster=cluster, order=order)


@admin.command("deleteTopic")
@click.option("-t", "--topic", required=True)
@click.option("-c", "--cluster", help="Only this cluster's brokers (default: every broker).")
@_json_option
def delete_topic(topic: str, cluster: str | None, as_json: bool) -> None:
    """Delete a topic from the brokers and the name servers."""
    run(ops.op_delete_topic, render.render_delete_topic, as_json, topic=topic, cluster=cluster)


@admin.command("deleteSubGroup")
@click.option("-g", "--group", required=True)
@click.option("-b", "--broker", help="Broker address H:P.")
@click.option("-c", "--cluster", help="Every master of this cluster.")
@click.option("-r", "--remove-offset", is_flag=True, help="Also delete the group's committed offsets.")
@_json_option
def delete_sub_group(group: str, broker: str | None, cluster: str | None, remove_offset: bool,
                     as_json: bool) -> None:
    """Delete a consumer (subscription) group from one broker (-b) or a whole cluster (-c)."""
    if bool(broker) == bool(cluster):
        raise click.UsageError("give exactly one of -b broker address or -c cluster")
    run(ops.op_delete_sub_group, render.render_delete_sub_group, as_json, group=group, broker=broker,
        cluster=cluster, remove_offset=remove_offset)


@admin.command("topicList")
@click.option("-c", "--cluster", help="Only topics of this cluster.")
@_json_option
def topic_list(cluster: str | None, as_json: bool) -> None:
    """List the topics the name servers know."""
    run(ops.op_topic_list, render.render_topic_list, as_json, cluster=cluster)


@admin.command("topicRoute")
@click.option("-t", "--topic", required=True)
@_json_option
def topic_route(topic: str, as_json: bool) -> None:
    """Show a topic's route (brokers and queues)."""
    run(ops.op_topic_route, render.render_topic_route, as_json, topic=topic)


@admin.command("topicStatus")
@click.option("-t", "--topic", required=True)
@_json_option
def topic_status(topic: str, as_json: bool) -> None:
    """Per-queue min/max offset and last update time."""
    run(ops.op_topic_status, render.render_topic_status, as_json, topic=topic)


# -- cluster and brokers ------------------------------------------------------------------------

@admin.command("clusterList")
@_json_option
def cluster_list(as_json: bool) -> None:
    """Clusters, brokers and their addresses."""
    run(ops.op_cluster_list, render.render_cluster_list, as_json)


@admin.command("brokerStatus")
@click.option("-b", "--broker", required=True, help="Broker address H:P.")
@_json_option
def broker_status(broker: str, as_json: bool) -> None:
    """A broker's runtime statistics (GET_BROKER_RUNTIME_INFO)."""
    run(ops.op_broker_status, render.render_broker_status, as_json, broker=broker)


# -- consumer groups ----------------------------------------------------------------------------

@admin.command("consumerProgress")
@click.option("-g", "--group", help="Consumer group (omit to list every group with its lag).")
@click.option("-t", "--topic", help="Only this topic.")
@_json_option
def consumer_progress(group: str | None, topic: str | None, as_json: bool) -> None:
    """Per-queue broker offset, consumer offset and lag of a group."""
    run(ops.op_consumer_progress, render.render_consumer_progress, as_json, group=group, topic=topic)


@admin.command("consumerConnection")
@click.option("-g", "--group", required=True)
@_json_option
def consumer_connection(group: str, as_json: bool) -> None:
    """Live clients and subscriptions of a consumer group."""
    run(ops.op_connections, render.render_connections, as_json, group=group, producer=False)


@admin.command("producerConnection")
@click.option("-g", "--group", required=True)
@_json_option
def producer_connection(group: str, as_json: bool) -> None:
    """Live clients of a producer group."""
    run(ops.op_connections, render.render_connections, as_json, group=group, producer=True)


@admin.command("resetOffsetByTime")
@click.option("-g", "--group", required=True)
@click.option("-t", "--topic", required=True)
@click.option("-s", "--timestamp", type=TIMESTAMP, required=True, help="ms, 'now' or ISO 8601.")
@click.option("-f", "--force/--no-force", default=True, show_default=True,
              help="Live clients reset even if they are behind the new offset.")
@_json_option
def reset_offset_by_time(group: str, topic: str, timestamp: int, force: bool, as_json: bool) -> None:
    """Set the group's offsets to the first message stored at or after the timestamp."""
    run(ops.op_reset_offset, render.render_reset, as_json, group=group, topic=topic, timestamp=timestamp,
        force=force)


@admin.command("resendDlq")
@click.option("-g", "--group", required=True, help="Consumer group whose %DLQ% topic is read.")
@click.option("--to", "target", type=click.Choice(["original", "retry"]), default="original",
              show_default=True,
              help="Send to the original topic (RETRY_TOPIC property) or to %RETRY%<group>.")
@click.option("--dry-run", is_flag=True, help="List the dead letters without sending.")
@click.option("--from-start", is_flag=True, help="Ignore the resend cursor, start at the oldest message.")
@click.option("-c", "--count", "max_count", type=click.IntRange(1), default=None, help="At most this many.")
@_json_option
def resend_dlq(group: str, target: str, dry_run: bool, from_start: bool, max_count: int | None,
               as_json: bool) -> None:
    """Re-send the dead letters of a group to their original topic."""
    run(ops.op_resend_dlq, render.render_resend_dlq, as_json, group=group, target=target, dry_run=dry_run,
        from_start=from_start, max_count=max_count)


# -- messages -----------------------------------------------------------------------------------

@admin.command("queryMsgById")
@click.option("-i", "--msg-id", required=True, help="offsetMsgId (the broker's id).")
@_json_option
def query_msg_by_id(msg_id: str, as_json: bool) -> None:
    """Fetch one message from the broker encoded in its offsetMsgId."""
    run(ops.op_query_by_id, render.render_one_message, as_json, msg_id=msg_id)


@admin.command("queryMsgByKey")
@click.option("-t", "--topic", required=True)
@click.option("-k", "--key", required=True)
@click.option("--begin", type=TIMESTAMP, default=0, help="Store time from (ms, now, ISO).")
@click.option("--end", type=TIMESTAMP, default=None, help="Store time to (default: now).")
@_json_option
def query_msg_by_key(topic: str, key: str, begin: int, end: int | None, as_json: bool) -> None:
    """Messages whose KEYS contain the key (through the index)."""
    run(ops.op_query_by_key, render.render_messages, as_json, topic=topic, key=key, begin=begin, end=end)


@admin.command("queryMsgByUniqueKey")
@click.option("-t", "--topic", required=True)
@click.option("-i", "--msg-id", "uniq", required=True, help="The client msgId (UNIQ_KEY).")
@_json_option
def query_msg_by_unique_key(topic: str, uniq: str, as_json: bool) -> None:
    """The message(s) with this client msgId (UNIQ_KEY)."""
    run(ops.op_query_by_unique_key, render.render_messages, as_json, topic=topic, uniq=uniq)


@admin.command("printMsg")
@click.option("-t", "--topic", required=True)
@click.option("-b", "--begin", type=TIMESTAMP, default=None, help="Store time from (ms, now, ISO).")
@click.option("-e", "--end", type=TIMESTAMP, default=None, help="Store time to, inclusive.")
@click.option("-s", "--subexpr", default="*", show_default=True, help="Tag expression, e.g. 'A || B'.")
@click.option("-l", "--limit", type=click.IntRange(1), default=None, help="At most this many messages.")
@_json_option
def print_msg(topic: str, begin: int | None, end: int | None, subexpr: str, limit: int | None,
              as_json: bool) -> None:
    """Every message of the topic stored in a time range."""
    run(ops.op_print_msg, render.render_messages, as_json, topic=topic, begin=begin, end=end, subexpr=subexpr,
        limit=limit)


def _parse_props(values: tuple[str, ...]) -> dict[str, str]:
    props = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not k=v", param_hint="--property")
        props[key] = value
    return props


@admin.command("sendMessage")
@click.option("-t", "--topic", required=True)
@click.option("-p", "--body", required=True, help="Message body (text; hex with --hex).")
@click.option("--hex", "body_hex", is_flag=True, help="The body is given as hex.")
@click.option("-k", "--keys", default=None, help="Keys, space separated.")
@click.option("-c", "--tags", default=None)
@click.option("-b", "--broker-name", default=None, help="Broker name of the queue.")
@click.option("-q", "--queue", "queue_id", type=click.IntRange(0), default=None, help="Queue id.")
@click.option("--property", "props", multiple=True, help="k=v, repeatable.")
@click.option("-g", "--group", default=ops.TOOLS_PRODUCER, show_default=True, help="Producer group.")
@_json_option
def send_message(topic: str, body: str, body_hex: bool, keys: str | None, tags: str | None,
                 broker_name: str | None, queue_id: int | None, props: tuple[str, ...], group: str,
                 as_json: bool) -> None:
    """Send one message."""
    try:
        raw = bytes.fromhex(body) if body_hex else body.encode("utf-8")
    except ValueError:
        raise click.BadParameter("not hex", param_hint="--body") from None
    run(ops.op_send_message, render.render_send, as_json, topic=topic, body=raw, keys=keys, tags=tags,
        queue_id=queue_id, broker_name=broker_name, properties=_parse_props(props), group=group)


@admin.command("consumeMessage")
@click.option("-t", "--topic", required=True)
@click.option("-g", "--group", default=None, help="Consumer group (default: a tools group, offsets ignored).")
@click.option("-b", "--broker-name", default=None)
@click.option("-q", "--queue", "queue_id", type=click.IntRange(0), default=None)
@click.option("-o", "--offset", type=click.IntRange(0), default=None,
              help="Start offset (default: the group's committed offset, else the minimum).")
@click.option("-c", "--count", type=click.IntRange(1), default=128, show_default=True)
@click.option("-s", "--subexpr", default="*", show_default=True)
@click.option("--commit", is_flag=True, help="Commit the group's offset past what was printed.")
@_json_option
def consume_message(topic: str, group: str | None, broker_name: str | None, queue_id: int | None,
                    offset: int | None, count: int, subexpr: str, commit: bool, as_json: bool) -> None:
    """Pull messages and print them."""
    if commit and not group:
        raise click.UsageError("--commit needs -g group")
    run(ops.op_consume_message, render.render_consume, as_json, topic=topic, group=group, queue_id=queue_id,
        broker_name=broker_name, offset=offset, count=count, subexpr=subexpr, commit=commit)


# Operations commands (config, write permission, maintenance) live beside this module.
from rokka.gateway.cli import admin_acl, admin_config, admin_trace  # noqa: E402,F401 - register their commands

admin_trace.register(admin, run, _json_option)
