"""The classic group membership protocol as a state machine with trio waits.

Theory of operation
-------------------
``GroupMembership`` holds every Kafka consumer group of this broker and
implements JoinGroup, SyncGroup, Heartbeat and LeaveGroup (wire sheet §4).
``GroupCoordinator`` (coordinator.py) extends it with persistence, offsets
and the admin queries; callers use that class.

The protocol is driven by requests and by timers kept as deadlines on the
group (join deadline + initial delay, sync deadline) and on members
(session deadline, pending-member expiry); ``fire_timers`` applies the
expired ones and ``next_deadline`` tells the coordinator's task when to
call it next.

* State changes go through ``Group.fire`` and the table in ``state.py``.
  Which handler runs in which state is the dispatch tables ``_JOIN_KNOWN``
  (JoinGroup of a known member) and ``_SYNC``; Heartbeat and LeaveGroup
  answer the same in every state but for an error code.
* JoinGroup and SyncGroup may *park*: the handler leaves a ``Waiter`` on
  the member and awaits it.  Whoever completes the step (the last member to
  rejoin, the leader's SyncGroup, or a timer) fires every waiter.  A parked
  request cancelled by its connection leaves its waiter behind, as Kafka
  leaves the callback of a dead connection: the answer is dropped and the
  member expires by session timeout later.
* All mutations are synchronous and happen between checkpoints, so no
  locks are needed; the only awaits are on waiters.

Rule 1: never set ``group.state`` outside ``Group.fire`` (loading excepted).
Rule 2: after removing members call ``_after_removal``; after adding or
rejoining call ``_maybe_complete_join``; after any mutation call
``_changed`` so timers are recomputed and the snapshot rewritten.

Static membership (KIP-345, ``group.instance.id``, JoinGroup v5+), as
Kafka's coordinator does it:

* A static member joins without MEMBER_ID_REQUIRED.  ``Group.static`` maps
  its instance id to its current member id.
* A restarted static member joins with an empty member id and a known
  instance id: it takes over the old member (new member id, same
  assignment); the old id is fenced (its parked requests, and any later
  request naming the instance id with the old member id, get
  FENCED_INSTANCE_ID).  In Stable, when the assignor the group would pick
  is unchanged, the group does *not* rebalance: the member is answered at
  once with the current generation and the *old* leader id (a restarted
  leader thus acts as a follower and does not run the assignor, Kafka's
  answer before JoinGroup v9's skip_assignment), then SyncGroup gives it
  its old assignment.  In CompletingRebalance the group rebalances (the
  leader may have assigned the old id); in PreparingRebalance it just
  counts as rejoined.
* A rebalance completes without static members that did not rejoin: they
  stay members (their old subscription goes to the leader) until their
  session times out; dynamic ones are evicted.  If no member at all
  rejoined, completion waits another rebalance timeout.  A static member
  leaves for good by session timeout or by LeaveGroup v3+ naming its
  instance id (clients do not send LeaveGroup for a static member on
  close).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence

import structlog
import trio
from rokka.gateway.kafka.errors import ErrorCode
from rokka.gateway.kafka.groups.group import Group, Member, Waiter
from rokka.gateway.kafka.groups.state import GroupEvent, GroupState
from rokka.gateway.kafka.groups.types import (
    GroupConfig,
    JoinedMember,
    JoinRequest,
    JoinResult,
    LeaveResult,
    LeavingMember,
    LeftMember,
    SyncRequest,
    SyncResult,
)

log = structlog.get_logger(__name__)


def _allow_all(group_id: str) -> int:
    return 0


def new_member_id(prefix: str) -> str:
    """Kafka's member id format: ``<client_id or group_instance_id>-<uuid4>``."""
    return f"{prefix}-{uuid.uuid4()}"


class GroupMembership:
    """Membership state of all groups; see the module docstring.

    Args:
        config: timeouts (session bounds, initial rebalance delay).
        admit_group: cross-protocol hook called on JoinGroup with the group
            id; returns 0 to allow or the Kafka error code to answer.
    """

    def __init__(self, config: GroupConfig, *, admit_group: Callable[[str], int] = _allow_all) -> None:
        self._config = config
        self._admit_group = admit_group
        self._groups: dict[str, Group] = {}
        self._dirty = False
        self._wakeup = trio.Event()
        self._restored = False

    # ------------------------------------------------------------------ timers

    @staticmethod
    def _now() -> float:
        return trio.current_time()

    def _changed(self) -> None:
        self._dirty = True
        self._wakeup.set()

    def _restore_timers(self) -> None:
        """Start the timers of groups loaded from disk (their members must rejoin)."""
        if self._restored:
            return
        self._restored = True
        now = self._now()
        for g in self._groups.values():
            for m in g.members.values():
                m.touch(now)
            if g.state is GroupState.PREPARING_REBALANCE:
                g.join_deadline = now + g.max_rebalance_timeout_ms() / 1000

    def next_deadline(self) -> float:
        """The earliest pending timer (trio clock), ``inf`` when none."""
        times = [float("inf")]
        for g in self._groups.values():
            timers = (g.join_deadline, g.initial_delay_until, g.sync_deadline)
            times.extend(t for t in timers if t is not None)
            times.extend(g.pending.values())
            times.extend(m.session_deadline for m in g.members.values() if not m.parked)
        return min(times)

    def fire_timers(self) -> None:
        """Apply every timer that has expired (the coordinator's task calls it; safe any time)."""
        now = self._now()
        for g in list(self._groups.values()):
            self._expire_pending(g, now)
            self._expire_sessions(g, now)
            self._check_sync_deadline(g, now)
            self._check_join_timers(g, now)

    def _expire_pending(self, g: Group, now: float) -> None:
        expired = [mid for mid, t in g.pending.items() if t <= now]
        for mid in expired:
            del g.pending[mid]
            log.info("kafka.group.pending_member_expired", group=g.group_id, member=mid)
        if expired:
            self._maybe_complete_join(g)

    def _expire_sessions(self, g: Group, now: float) -> None:
        expired = [m for m in g.members.values() if not m.parked and m.session_deadline <= now]
        for m in expired:
            log.info("kafka.group.member_session_expired", group=g.group_id, member=m.member_id,
                     generation=g.generation)
            self._remove_member(g, m.member_id, ErrorCode.UNKNOWN_MEMBER_ID)
        if expired:
            self._after_removal(g)

    def _check_sync_deadline(self, g: Group, now: float) -> None:
        if g.sync_deadline is None or g.sync_deadline > now:
            return
        g.sync_deadline = None
        missing = [mid for mid in g.members if mid not in g.synced]
        for mid in missing:
            log.info("kafka.group.member_missed_sync_group", group=g.group_id, member=mid, generation=g.generation)
            self._remove_member(g, mid, ErrorCode.REBALANCE_IN_PROGRESS)
        if missing:
            self._after_removal(g)

    def _check_join_timers(self, g: Group, now: float) -> None:
        if g.state is not GroupState.PREPARING_REBALANCE:
            return
        if g.initial_delay_until is not None and g.initial_delay_until <= now:
            g.initial_delay_until = None
            self._maybe_complete_join(g)
        deadline = g.join_deadline
        if g.state is GroupState.PREPARING_REBALANCE and deadline is not None and deadline <= now:
            self._complete_join(g)

    # ------------------------------------------------------------------ membership helpers

    def _group(self, group_id: str) -> Group:
        g = self._groups.get(group_id)
        if g is None:
            g = self._groups[group_id] = Group(group_id=group_id)
        return g

    def _remove_member(self, g: Group, member_id: str, error: ErrorCode) -> None:
        """Drop a member; its parked requests get ``error``.  Caller runs ``_after_removal``."""
        m = g.members.pop(member_id)
        if m.group_instance_id is not None and g.static.get(m.group_instance_id) == member_id:
            del g.static[m.group_instance_id]
        if m.join_waiter is not None:
            m.join_waiter.fire(JoinResult(error, member_id))
        if m.sync_waiter is not None:
            m.sync_waiter.fire(SyncResult(error))
        m.join_waiter = m.sync_waiter = None
        g.synced.discard(member_id)
        if g.leader == member_id:
            g.leader = next(iter(g.members), None)
        self._changed()

    def _after_removal(self, g: Group) -> None:
        if g.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(g, "member left")
        self._maybe_complete_join(g)

    def _prepare_rebalance(self, g: Group, reason: str) -> None:
        if g.state is GroupState.PREPARING_REBALANCE:
            return
        was_empty = g.state is GroupState.EMPTY
        for m in g.members.values():
            m.assignment = b""
            if m.sync_waiter is not None:
                m.sync_waiter.fire(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
                m.sync_waiter = None
        g.fire(GroupEvent.REBALANCE)
        g.sync_deadline = None
        g.synced.clear()
        now = self._now()
        g.join_deadline = now + g.max_rebalance_timeout_ms() / 1000
        delay = self._config.initial_rebalance_delay_ms / 1000
        if was_empty and delay > 0:
            g.initial_delay_until = min(now + delay, g.join_deadline)
        log.info("kafka.group.rebalancing", group=g.group_id, reason=reason, generation=g.generation,
                 members=len(g.members))
        self._changed()

    def _maybe_complete_join(self, g: Group) -> None:
        if g.state is not GroupState.PREPARING_REBALANCE:
            return
        if g.initial_delay_until is not None and g.initial_delay_until > self._now():
            return
        if g.all_joined():
            self._complete_join(g)

    def _complete_join(self, g: Group) -> None:
        for mid in [mid for mid, m in g.members.items() if m.join_waiter is None and m.group_instance_id is None]:
            log.info("kafka.group.member_missed_rebalance", group=g.group_id, member=mid, generation=g.generation)
            self._remove_member(g, mid, ErrorCode.UNKNOWN_MEMBER_ID)
        g.initial_delay_until = None
        leader = g.joined_leader()
        if g.members and leader is None:   # only absent static members: wait for them or their expiry
            g.join_deadline = self._now() + g.max_rebalance_timeout_ms() / 1000
            log.warning("kafka.rebalance_postponed", group=g.group_id, reason="no member rejoined",
                        members=len(g.members))
            self._changed()
            return
        g.join_deadline = None
        g.leader = leader
        g.generation += 1
        if not g.members:
            g.protocol_name = None
            g.leader = None
            g.fire(GroupEvent.ALL_MEMBERS_GONE)
            log.info("kafka.group.empty", group=g.group_id, generation=g.generation)
            self._changed()
            return
        g.protocol_name = g.select_protocol()
        g.fire(GroupEvent.JOIN_COMPLETE)
        now = self._now()
        g.sync_deadline = now + g.max_rebalance_timeout_ms() / 1000
        g.synced.clear()
        log.info("kafka group generation", group=g.group_id, generation=g.generation,
                 protocol=g.protocol_name, leader=g.leader, members=len(g.members))
        for m in g.members.values():
            waiter, m.join_waiter = m.join_waiter, None
            m.touch(now)
            if waiter is not None:
                waiter.fire(self._join_answer(g, m))
        self._changed()

    def _join_answer(self, g: Group, m: Member) -> JoinResult:
        members: tuple[JoinedMember, ...] = ()
        if m.member_id == g.leader:
            members = tuple(JoinedMember(x.member_id, x.group_instance_id, x.metadata_for(g.protocol_name))
                            for x in g.members.values())
        return JoinResult(ErrorCode.NONE, m.member_id, g.generation, g.protocol_type, g.protocol_name,
                          g.leader or "", members)

    # ------------------------------------------------------------------ JoinGroup

    async def join(self, req: JoinRequest) -> JoinResult:
        """JoinGroup: returns once this member's rebalance is decided.

        Returns:
            A JoinResult; errors are codes (INVALID_GROUP_ID, INVALID_SESSION_TIMEOUT,
            INCONSISTENT_GROUP_PROTOCOL, MEMBER_ID_REQUIRED, UNKNOWN_MEMBER_ID,
            FENCED_INSTANCE_ID, COORDINATOR_NOT_AVAILABLE or the admission hook's code).
        """
        outcome = self._join_now(req)
        if isinstance(outcome, JoinResult):
            if outcome.error_code not in (ErrorCode.NONE, ErrorCode.MEMBER_ID_REQUIRED):
                log.info("kafka.group.join_refused", group=req.group_id, member=req.member_id,
                         error=int(outcome.error_code))
            return outcome
        return await outcome.wait()

    def _join_now(self, req: JoinRequest) -> JoinResult | Waiter[JoinResult]:
        error = self._validate_join(req)
        if error != ErrorCode.NONE:
            return JoinResult(error, req.member_id)
        g = self._group(req.group_id)
        if g.state is GroupState.DEAD:
            return JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, req.member_id)
        if not g.supports(req.protocol_type, req.protocols):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id)
        if req.member_id == "":
            return self._join_new(g, req)
        return self._join_known(g, req, req.member_id)

    def _validate_join(self, req: JoinRequest) -> int:
        if not req.group_id:
            return ErrorCode.INVALID_GROUP_ID
        cfg = self._config
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            return ErrorCode.INVALID_SESSION_TIMEOUT
        return self._admit_group(req.group_id)

    def _join_new(self, g: Group, req: JoinRequest) -> JoinResult | Waiter[JoinResult]:
        iid = req.group_instance_id
        if iid is not None:
            member_id = new_member_id(iid)
            old_id = g.static.get(iid)
            if old_id is not None:
                return self._rejoin_static(g, req, old_id, member_id)
            return self._add_member(g, member_id, req)
        member_id = new_member_id(req.client_id or "member")
        if req.require_known_member_id:
            g.pending[member_id] = self._now() + req.session_timeout_ms / 1000
            self._changed()
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        return self._add_member(g, member_id, req)

    def _rejoin_static(self, g: Group, req: JoinRequest, old_id: str,
                       new_id: str) -> JoinResult | Waiter[JoinResult]:
        """A known instance id with an empty member id (Kafka ``updateStaticMemberAndRebalance``)."""
        old_leader = g.leader
        self._replace_static_member(g, old_id, new_id)
        m = g.members[new_id]
        if g.state is GroupState.STABLE:
            self._update_member(m, req)
            if g.select_protocol() == g.protocol_name:
                log.info("kafka.group.static_member_rejoined", group=g.group_id,
                         member=new_id, generation=g.generation)
                self._changed()
                return JoinResult(ErrorCode.NONE, new_id, g.generation, g.protocol_type, g.protocol_name,
                                  old_leader or "", ())
        return self._update_and_park(g, m, req, f"static member rejoined in {g.state.value}")

    def _replace_static_member(self, g: Group, old_id: str, new_id: str) -> None:
        old = g.members.pop(old_id)
        if old.join_waiter is not None:
            old.join_waiter.fire(JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_id))
        if old.sync_waiter is not None:
            old.sync_waiter.fire(SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        old.join_waiter = old.sync_waiter = None
        old.member_id = new_id
        g.members[new_id] = old
        assert old.group_instance_id is not None
        g.static[old.group_instance_id] = new_id
        if g.leader == old_id:
            g.leader = new_id
        if old_id in g.synced:
            g.synced.discard(old_id)
            g.synced.add(new_id)
        log.info("kafka.group.static_member_replaced", group=g.group_id, old=old_id, new=new_id)

    def _add_member(self, g: Group, member_id: str, req: JoinRequest) -> Waiter[JoinResult]:
        if not g.members:
            g.protocol_type = req.protocol_type
        m = Member(member_id=member_id, group_instance_id=req.group_instance_id, client_id=req.client_id,
                   client_host=req.client_host, session_timeout_ms=req.session_timeout_ms,
                   rebalance_timeout_ms=self._rebalance_timeout(req), protocol_type=req.protocol_type,
                   protocols=[(n, bytes(meta)) for n, meta in req.protocols])
        m.touch(self._now())
        g.members[member_id] = m
        if req.group_instance_id is not None:
            g.static[req.group_instance_id] = member_id
        if g.leader is None:
            g.leader = member_id
        waiter: Waiter[JoinResult] = Waiter()
        m.join_waiter = waiter
        if g.state is GroupState.PREPARING_REBALANCE and g.initial_delay_until is not None:
            delay = self._config.initial_rebalance_delay_ms / 1000
            cap = g.join_deadline if g.join_deadline is not None else self._now() + delay
            g.initial_delay_until = min(self._now() + delay, cap)
        self._prepare_rebalance(g, "new member")
        self._maybe_complete_join(g)
        self._changed()
        return waiter

    @staticmethod
    def _rebalance_timeout(req: JoinRequest) -> int:
        return req.rebalance_timeout_ms if req.rebalance_timeout_ms > 0 else req.session_timeout_ms

    def _join_known(self, g: Group, req: JoinRequest, member_id: str) -> JoinResult | Waiter[JoinResult]:
        if member_id in g.pending:
            del g.pending[member_id]
            return self._add_member(g, member_id, req)
        error = g.check_member(member_id, req.group_instance_id)
        if error != ErrorCode.NONE:
            return JoinResult(error, member_id)
        handler = self._JOIN_KNOWN.get(g.state)
        if handler is None:
            return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
        return handler(self, g, g.members[member_id], req)

    def _update_member(self, m: Member, req: JoinRequest) -> None:
        m.protocols = [(n, bytes(meta)) for n, meta in req.protocols]
        m.session_timeout_ms = req.session_timeout_ms
        m.rebalance_timeout_ms = self._rebalance_timeout(req)
        m.client_id, m.client_host = req.client_id, req.client_host
        m.touch(self._now())

    def _update_and_park(self, g: Group, m: Member, req: JoinRequest, reason: str) -> Waiter[JoinResult]:
        self._update_member(m, req)
        if m.join_waiter is not None:   # a duplicate JoinGroup replaces the older one
            m.join_waiter.fire(JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, m.member_id))
        waiter: Waiter[JoinResult] = Waiter()
        m.join_waiter = waiter
        self._prepare_rebalance(g, reason)
        self._maybe_complete_join(g)
        self._changed()
        return waiter

    def _join_preparing(self, g: Group, m: Member, req: JoinRequest) -> JoinResult | Waiter[JoinResult]:
        return self._update_and_park(g, m, req, "rejoin")

    def _join_completing(self, g: Group, m: Member, req: JoinRequest) -> JoinResult | Waiter[JoinResult]:
        if m.same_protocols(req.protocols):
            m.touch(self._now())
            return self._join_answer(g, m)
        return self._update_and_park(g, m, req, "member metadata changed")

    def _join_stable(self, g: Group, m: Member, req: JoinRequest) -> JoinResult | Waiter[JoinResult]:
        if m.member_id == g.leader:
            return self._update_and_park(g, m, req, "leader rejoined")
        if not m.same_protocols(req.protocols):
            return self._update_and_park(g, m, req, "member metadata changed")
        m.touch(self._now())
        return self._join_answer(g, m)

    _JOIN_KNOWN: dict[GroupState, Callable[[GroupMembership, Group, Member, JoinRequest],
                                           JoinResult | Waiter[JoinResult]]] = {
        GroupState.PREPARING_REBALANCE: _join_preparing,
        GroupState.COMPLETING_REBALANCE: _join_completing,
        GroupState.STABLE: _join_stable,
    }

    # ------------------------------------------------------------------ SyncGroup

    async def sync(self, req: SyncRequest) -> SyncResult:
        """SyncGroup: the leader's call distributes assignments; followers wait for it.

        Returns:
            The member's assignment, or UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
            INCONSISTENT_GROUP_PROTOCOL, REBALANCE_IN_PROGRESS, FENCED_INSTANCE_ID,
            COORDINATOR_NOT_AVAILABLE, INVALID_GROUP_ID.
        """
        outcome = self._sync_now(req)
        if isinstance(outcome, SyncResult):
            return outcome
        return await outcome.wait()

    def _sync_now(self, req: SyncRequest) -> SyncResult | Waiter[SyncResult]:
        if not req.group_id:
            return SyncResult(ErrorCode.INVALID_GROUP_ID)
        g = self._groups.get(req.group_id)
        if g is None:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if g.state is GroupState.DEAD:
            return SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        error = g.check_member(req.member_id, req.group_instance_id)
        if error == ErrorCode.NONE and req.generation_id != g.generation:
            error = ErrorCode.ILLEGAL_GENERATION
        if error == ErrorCode.NONE and (
                (req.protocol_type is not None and req.protocol_type != g.protocol_type)
                or (req.protocol_name is not None and req.protocol_name != g.protocol_name)):
            error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if error != ErrorCode.NONE:
            return SyncResult(error)
        return self._SYNC[g.state](self, g, g.members[req.member_id], req)

    def _sync_refuse_empty(self, g: Group, m: Member, req: SyncRequest) -> SyncResult:
        return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)

    def _sync_refuse_rebalancing(self, g: Group, m: Member, req: SyncRequest) -> SyncResult:
        return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)

    def _sync_completing(self, g: Group, m: Member, req: SyncRequest) -> Waiter[SyncResult]:
        m.touch(self._now())
        g.synced.add(m.member_id)
        if m.sync_waiter is not None:
            m.sync_waiter.fire(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        waiter: Waiter[SyncResult] = Waiter()
        m.sync_waiter = waiter
        if m.member_id == g.leader:
            given = {mid: bytes(a) for mid, a in req.assignments}
            for x in g.members.values():
                x.assignment = given.get(x.member_id, b"")
            g.fire(GroupEvent.LEADER_SYNCED)
            log.info("kafka.group.stable", group=g.group_id, generation=g.generation)
            for x in g.members.values():
                w, x.sync_waiter = x.sync_waiter, None
                if w is not None:
                    w.fire(self._sync_answer(g, x))
            self._sync_done_check(g)
            self._changed()
        return waiter

    def _sync_stable(self, g: Group, m: Member, req: SyncRequest) -> SyncResult:
        m.touch(self._now())
        g.synced.add(m.member_id)
        self._sync_done_check(g)
        return self._sync_answer(g, m)

    @staticmethod
    def _sync_done_check(g: Group) -> None:
        if all(mid in g.synced for mid in g.members):
            g.sync_deadline = None

    @staticmethod
    def _sync_answer(g: Group, m: Member) -> SyncResult:
        return SyncResult(ErrorCode.NONE, m.assignment, g.protocol_type, g.protocol_name)

    _SYNC: dict[GroupState, Callable[[GroupMembership, Group, Member, SyncRequest],
                                     SyncResult | Waiter[SyncResult]]] = {
        GroupState.EMPTY: _sync_refuse_empty,
        GroupState.PREPARING_REBALANCE: _sync_refuse_rebalancing,
        GroupState.COMPLETING_REBALANCE: _sync_completing,
        GroupState.STABLE: _sync_stable,
    }

    # ------------------------------------------------------------------ Heartbeat / LeaveGroup

    def heartbeat(self, group_id: str, generation_id: int, member_id: str,
                  group_instance_id: str | None = None) -> ErrorCode:
        """Heartbeat: resets the session timer; REBALANCE_IN_PROGRESS asks the member to rejoin."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        g = self._groups.get(group_id)
        if g is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if g.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = g.check_member(member_id, group_instance_id)
        if error != ErrorCode.NONE:
            return error
        if generation_id != g.generation:
            return ErrorCode.ILLEGAL_GENERATION
        g.members[member_id].touch(self._now())
        if g.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave(self, group_id: str, members: Sequence[LeavingMember]) -> LeaveResult:
        """LeaveGroup (v0-v2: one member; v3+: a batch); the rest of the group rebalances."""
        if not group_id:
            return LeaveResult(ErrorCode.INVALID_GROUP_ID)
        g = self._groups.get(group_id)
        if g is not None and g.state is GroupState.DEAD:
            return LeaveResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        out: list[LeftMember] = []
        removed = False
        for lm in members:
            code = ErrorCode.UNKNOWN_MEMBER_ID if g is None else self._leave_one(g, lm)
            removed = removed or code == ErrorCode.NONE
            out.append(LeftMember(lm.member_id, lm.group_instance_id, code))
        if g is not None and removed:
            self._after_removal(g)
        return LeaveResult(ErrorCode.NONE, tuple(out))

    def _leave_one(self, g: Group, lm: LeavingMember) -> ErrorCode:
        member_id = lm.member_id
        if member_id == "" and lm.group_instance_id is not None:
            member_id = g.static.get(lm.group_instance_id, "")
        if member_id in g.pending and lm.group_instance_id is None:
            del g.pending[member_id]
            self._changed()
            return ErrorCode.NONE
        error = g.check_member(member_id, lm.group_instance_id)
        if error == ErrorCode.NONE:
            log.info("kafka.group.member_left", group=g.group_id, member=member_id)
            self._remove_member(g, member_id, ErrorCode.UNKNOWN_MEMBER_ID)
        return error
