"""``rokka admin`` ACL and maintenance commands: mqadmin's updateAclConfig, deleteAclConfig,
updateGlobalWhiteAddr, clusterAclConfigVersion and deleteExpiredCommitLog, plus getAclConfig and
queryCorrectionOffset (request codes mqadmin 4.9 has no command for).

Theory of operation
-------------------
Click commands on the ``admin`` group (imported at the end of ``admin.py``), each running one ``op_*``
coroutine of ``admin_ops`` (``--json`` prints its dict) with a renderer printing mqadmin's lines.
Brokers: ``-b`` address or ``-c`` cluster (every master), or neither: every master the name server
knows.  The brokers must run with ``aclEnable`` for the ACL commands, and the request must be signed
by an admin account (``rokka admin --access-key/--secret-key``) or come from a globally white-listed
address.
"""

from __future__ import annotations

import time
from typing import Any

import click
from rokka.gateway.cli.admin_group import _json_option, admin, run
from rokka.gateway.cli.admin_ops import (
    op_acl_config,
    op_acl_versions,
    op_correction_offset,
    op_delete_acl,
    op_delete_expired_commitlog,
    op_update_acl,
    op_update_global_white,
)


def _at_most_one(broker: str | None, cluster: str | None) -> None:
    if broker and cluster:
        raise click.UsageError("give -b broker address, -c cluster, or neither (every master)")


def _brokers(f: Any) -> Any:
    f = click.option("-c", "--cluster", help="Every master of this cluster.")(f)
    return click.option("-b", "--broker", help="Broker address H:P.")(f)


@admin.command("updateAclConfig")
@_brokers
@click.option("-a", "--access-key", "access_key", required=True, help="The account's accessKey (> 6 chars).")
@click.option("-s", "--secret-key", "secret_key", required=True, help="Its secretKey (> 6 chars).")
@click.option("-w", "--white-remote-address", "white", help="The account's white remote address.")
@click.option("-i", "--default-topic-perm", "topic_perm", help="DENY, PUB, SUB or PUB|SUB.")
@click.option("-u", "--default-group-perm", "group_perm", help="DENY, PUB, SUB or PUB|SUB.")
@click.option("-t", "--topic-perms", "topic_perms", help="topicA=DENY,topicB=PUB|SUB")
@click.option("-g", "--group-perms", "group_perms", help="groupA=DENY,groupB=SUB")
@click.option("-m", "--admin", "is_admin", type=click.BOOL, default=False, show_default=True, help="Admin account.")
@_json_option
def update_acl_config(broker: str | None, cluster: str | None, access_key: str, secret_key: str, white: str | None,
                      topic_perm: str | None, group_perm: str | None, topic_perms: str | None,
                      group_perms: str | None, is_admin: bool, as_json: bool) -> None:
    """Create or update an account in the brokers' plain_acl.yml (UPDATE_AND_CREATE_ACL_CONFIG)."""
    _at_most_one(broker, cluster)
    run(op_update_acl,
        lambda d: "\n".join(f"create or update plain access config to {a} success." for a in d["brokers"]),
        as_json, broker=broker, cluster=cluster, access_key=access_key, secret_key=secret_key, white=white,
        topic_perm=topic_perm, group_perm=group_perm, topic_perms=topic_perms, group_perms=group_perms,
        admin=is_admin)


@admin.command("deleteAclConfig")
@_brokers
@click.option("-a", "--access-key", "access_key", required=True)
@_json_option
def delete_acl_config(broker: str | None, cluster: str | None, access_key: str, as_json: bool) -> None:
    """Delete an account from the brokers' plain_acl.yml (DELETE_ACL_CONFIG)."""
    _at_most_one(broker, cluster)
    run(op_delete_acl,
        lambda d: "\n".join(f"delete plain access config account from {a} success.\n"
                            f"account's accesskey is:{d['accessKey']}" for a in d["brokers"]),
        as_json, broker=broker, cluster=cluster, access_key=access_key)


@admin.command("updateGlobalWhiteAddr")
@_brokers
@click.option("-g", "--global-white-remote-addresses", "addresses", required=True,
              help="Comma-separated patterns, e.g. 10.10.103.*,192.168.0.* (replaces the list).")
@click.option("-p", "--acl-file-full-path", "file", help="Must be the broker's plainAclFile.")
@_json_option
def update_global_white_addr(broker: str | None, cluster: str | None, addresses: str, file: str | None,
                             as_json: bool) -> None:
    """Replace globalWhiteRemoteAddresses in the brokers' plain_acl.yml (UPDATE_GLOBAL_WHITE_ADDRS_CONFIG)."""
    _at_most_one(broker, cluster)
    run(op_update_global_white,
        lambda d: "\n".join(f"update global white remote addresses to {a} success." for a in d["brokers"]),
        as_json, broker=broker, cluster=cluster, addresses=addresses, file=file)


def _render_versions(d: dict[str, Any]) -> str:
    fmt = "{:<16s}  {:<22s}  {:<22s}  {:<20s}  {:<22s}  {:<22s}"
    out = [fmt.format("#Cluster Name", "#Broker Name", "#Broker Addr", "#AclFilePath", "#AclConfigVersionNum",
                      "#AclLastUpdateTime")]
    for r in d["versions"]:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["timestamp"] / 1000))
        out.append(fmt.format(str(r["cluster"]), str(r["brokerName"]), str(r["brokerAddr"]), r["aclFile"],
                              str(r["counter"]), when))
    return "\n".join(out)


@admin.command("clusterAclConfigVersion")
@_brokers
@_json_option
def cluster_acl_config_version(broker: str | None, cluster: str | None, as_json: bool) -> None:
    """The ACL file version of each broker (GET_BROKER_CLUSTER_ACL_INFO)."""
    _at_most_one(broker, cluster)
    run(op_acl_versions, _render_versions, as_json, broker=broker, cluster=cluster)


def _render_config(d: dict[str, Any]) -> str:
    out = []
    for addr, cfg in d["configs"].items():
        out.append(f"============{addr}============")
        out.append(f"globalWhiteRemoteAddresses: {', '.join(cfg.get('globalWhiteAddrs') or [])}")
        for a in cfg.get("plainAccessConfigs") or []:
            out.append(f"accessKey={a['accessKey']} admin={a['admin']} white={a['whiteRemoteAddress'] or '-'} "
                       f"defaultTopicPerm={a['defaultTopicPerm']} defaultGroupPerm={a['defaultGroupPerm']} "
                       f"topicPerms=[{','.join(a['topicPerms'])}] groupPerms=[{','.join(a['groupPerms'])}]")
    return "\n".join(out)


@admin.command("getAclConfig")
@_brokers
@_json_option
def get_acl_config(broker: str | None, cluster: str | None, as_json: bool) -> None:
    """The brokers' ACL accounts and white list (GET_BROKER_CLUSTER_ACL_CONFIG; --json includes secret keys)."""
    _at_most_one(broker, cluster)
    run(op_acl_config, _render_config, as_json, broker=broker, cluster=cluster)


@admin.command("deleteExpiredCommitLog")
@_brokers
@_json_option
def delete_expired_commitlog(broker: str | None, cluster: str | None, as_json: bool) -> None:
    """Delete expired CommitLog files now, whatever deleteWhen says (DELETE_EXPIRED_COMMITLOG)."""
    _at_most_one(broker, cluster)
    run(op_delete_expired_commitlog, lambda d: "success", as_json, broker=broker, cluster=cluster)


@admin.command("queryCorrectionOffset")
@click.option("-b", "--broker", required=True, help="Broker address H:P.")
@click.option("-t", "--topic", required=True)
@click.option("-g", "--compare-group", "compare_group", required=True)
@click.option("-f", "--filter-groups", "filter_groups", help="Comma-separated groups to leave out.")
@_json_option
def query_correction_offset(broker: str, topic: str, compare_group: str, filter_groups: str | None,
                            as_json: bool) -> None:
    """Per queue, the smallest offset the topic's other groups committed (QUERY_CORRECTION_OFFSET)."""
    run(op_correction_offset,
        lambda d: "\n".join(f"queue {q}: {off}" for q, off in d["correctionOffsets"].items()) or "no offsets",
        as_json, broker=broker, topic=topic, compare_group=compare_group, filter_groups=filter_groups)
