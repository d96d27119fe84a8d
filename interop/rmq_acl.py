"""``plain_acl.yml`` texts for the RocketMQ ACL scenarios (``aclEnable`` + ``plainAclFile``).

Every scenario has the same two accounts: ``ops-key`` (admin) and ``app-key`` (not admin, every topic
denied by default); what differs is the app's group default and its per-topic / per-group grants.
``acl_conf(text)`` is the ``configured_rokka`` argument pair that turns ACL on with that file.
"""

from __future__ import annotations

from collections.abc import Sequence

OPS, APP = ("ops-key", "ops-secret-1234"), ("app-key", "app-secret-1234")


def plain_acl(topic_perms: Sequence[str], group_perms: Sequence[str] = (), default_group_perm: str = "SUB") -> str:
    """The ops (admin) and app accounts; the app gets ``topic_perms`` / ``group_perms`` (``Name=PUB|SUB``)."""
    lines = ["accounts:",
             f"  - accessKey: {OPS[0]}", f"    secretKey: {OPS[1]}", "    admin: true",
             f"  - accessKey: {APP[0]}", f"    secretKey: {APP[1]}", "    admin: false",
             "    defaultTopicPerm: DENY", f"    defaultGroupPerm: {default_group_perm}",
             f"    topicPerms: [{', '.join(topic_perms)}]"]
    if group_perms:
        lines.append(f"    groupPerms: [{', '.join(group_perms)}]")
    return "\n".join(lines) + "\n"


def acl_conf(text: str) -> tuple[dict[str, str], dict[str, str]]:
    """(broker.conf keys, files) for ``configured_rokka``: ACL on, ``plain_acl.yml`` = ``text``."""
    return {"aclEnable": "true", "plainAclFile": "{dir}/plain_acl.yml"}, {"plain_acl.yml": text}
