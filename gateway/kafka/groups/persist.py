"""Group metadata on disk: ``<config_dir>/kafkaGroups.msgpack``.

Theory of operation
-------------------
What survives a restart is what Kafka keeps in ``__consumer_offsets`` group
records: protocol type and name, generation, leader, and each member's id,
instance id, client id/host, timeouts, subscriptions and assignment.
Committed offsets are *not* here; they live in the shared offset table
(``config/consumerOffset.json``).  Timers, parked requests and
MEMBER_ID_REQUIRED pending ids are not persisted.

On load a group with members comes back in PreparingRebalance, keeping its
generation and members: their next heartbeat gets REBALANCE_IN_PROGRESS,
they rejoin with their old member ids and the generation continues from
the stored one; members that do not rejoin before the rebalance timeout are
evicted as usual.  A group without members comes back Empty.

Layout (msgpack map, version 1)::

    {"version": 1, "groups": [
        {"id": str, "type": str|None, "protocol": str|None, "generation": int,
         "leader": str|None,
         "members": [{"id", "instance", "client_id", "client_host",
                      "session_ms", "rebalance_ms", "type",
                      "protocols": [[name, bytes], ...], "assignment": bytes}]}]}

Files are written atomically by ``rokka.core.storage.packfile``; an unknown
version is refused (``MetadataCorrupt``) rather than misread.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rokka.core.storage.metafile import MetadataCorrupt
from rokka.core.storage.packfile import pack, read_msgpack
from rokka.gateway.kafka.groups.group import Group, Member
from rokka.gateway.kafka.groups.state import GroupState

FILE_NAME = "kafkaGroups.msgpack"
VERSION = 1


def groups_path(config_dir: Path) -> Path:
    return config_dir / FILE_NAME


def _member_record(m: Member) -> dict[str, Any]:
    return {
        "id": m.member_id, "instance": m.group_instance_id, "client_id": m.client_id,
        "client_host": m.client_host, "session_ms": m.session_timeout_ms,
        "rebalance_ms": m.rebalance_timeout_ms, "type": m.protocol_type,
        "protocols": [[n, meta] for n, meta in m.protocols], "assignment": m.assignment,
    }


def encode_groups(groups: Iterable[Group]) -> bytes:
    """Serialise every group worth keeping (one that ever had a protocol type or a generation)."""
    records = []
    for g in groups:
        if g.state is GroupState.DEAD or (g.protocol_type is None and g.generation == 0 and not g.members):
            continue
        records.append({
            "id": g.group_id, "type": g.protocol_type, "protocol": g.protocol_name,
            "generation": g.generation, "leader": g.leader,
            "members": [_member_record(m) for m in g.members.values()],
        })
    return pack({"version": VERSION, "groups": records})


def _decode_member(r: dict[str, Any]) -> Member:
    return Member(
        member_id=str(r["id"]), group_instance_id=r.get("instance"),
        client_id=str(r.get("client_id", "")), client_host=str(r.get("client_host", "")),
        session_timeout_ms=int(r["session_ms"]), rebalance_timeout_ms=int(r["rebalance_ms"]),
        protocol_type=str(r.get("type", "")),
        protocols=[(str(n), bytes(meta)) for n, meta in r.get("protocols", [])],
        assignment=bytes(r.get("assignment", b"")),
    )


def decode_groups(data: Any) -> list[Group]:
    """Rebuild groups from a decoded file (see the module docstring for their state).

    Raises:
        MetadataCorrupt: unknown version or a malformed record.
    """
    if not isinstance(data, dict) or data.get("version") != VERSION:
        raise MetadataCorrupt(f"{FILE_NAME}: unsupported layout")
    out = []
    try:
        for r in data["groups"]:
            members = [_decode_member(m) for m in r["members"]]
            g = Group(group_id=str(r["id"]), protocol_type=r["type"], protocol_name=r["protocol"],
                      generation=int(r["generation"]), leader=r["leader"])
            for m in members:
                g.members[m.member_id] = m
                if m.group_instance_id is not None:
                    g.static[m.group_instance_id] = m.member_id
            if g.members:
                g.state = GroupState.PREPARING_REBALANCE
                if g.leader not in g.members:
                    g.leader = members[0].member_id
            else:
                g.leader = None
            out.append(g)
    except (KeyError, TypeError, ValueError) as exc:
        raise MetadataCorrupt(f"{FILE_NAME}: malformed group record: {exc}") from exc
    return out


def load_groups(config_dir: Path) -> list[Group]:
    data = read_msgpack(groups_path(config_dir))
    return [] if data is None else decode_groups(data)
