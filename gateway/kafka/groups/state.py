"""Group states and the transition table of the classic group protocol.

Theory of operation
-------------------
A Kafka consumer group moves through five states (wire sheet §4.2)::

    Empty --REBALANCE--> PreparingRebalance --JOIN_COMPLETE--> CompletingRebalance
      ^                      |      ^                               |        |
      |                      |      +-----------REBALANCE-----------+        |
      +---ALL_MEMBERS_GONE---+      +-----------REBALANCE------ Stable <-LEADER_SYNCED

Rule 1: the coordinator never assigns ``group.state`` directly; it calls
``next_state(state, event)`` (through ``Group.fire``), and a pair missing from ``TRANSITIONS`` is a
bug in the coordinator (``IllegalTransition``), never a client error: client
requests that do not fit the state are answered with an error code before
any event is fired.  The one exception is loading from disk
(``persist.decode_groups``), which sets the initial state of a restored
group: PreparingRebalance if it has members, else Empty.

Rule 2: every way a group loses members ends in PreparingRebalance; whether
it then goes back to Empty (nobody left) or to CompletingRebalance is
decided by the join completion, so "last member left" is the pair
(PreparingRebalance, ALL_MEMBERS_GONE).

Rule 3: Dead is terminal.  A group is Dead only while it is being dropped
from the coordinator (``UNLOAD``); requests that still hold it get
COORDINATOR_NOT_AVAILABLE.

To add a state or an event, add the enum member and its rows here; the
coordinator's request handlers decide *when* events fire.
"""

from __future__ import annotations

import enum


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


class GroupEvent(enum.Enum):
    REBALANCE = enum.auto()         # new member, changed metadata, leader rejoin, leave, expiry, sync timeout
    JOIN_COMPLETE = enum.auto()     # every member rejoined, or the join deadline passed, and members remain
    ALL_MEMBERS_GONE = enum.auto()  # the join completed with nobody in the group
    LEADER_SYNCED = enum.auto()     # the leader's SyncGroup delivered the assignment
    UNLOAD = enum.auto()            # the group is dropped from the coordinator


class IllegalTransition(Exception):
    """The coordinator fired an event the current state does not accept (a bug)."""


_S = GroupState
_E = GroupEvent

TRANSITIONS: dict[tuple[GroupState, GroupEvent], GroupState] = {
    (_S.EMPTY, _E.REBALANCE): _S.PREPARING_REBALANCE,
    (_S.EMPTY, _E.UNLOAD): _S.DEAD,
    (_S.PREPARING_REBALANCE, _E.REBALANCE): _S.PREPARING_REBALANCE,
    (_S.PREPARING_REBALANCE, _E.JOIN_COMPLETE): _S.COMPLETING_REBALANCE,
    (_S.PREPARING_REBALANCE, _E.ALL_MEMBERS_GONE): _S.EMPTY,
    (_S.PREPARING_REBALANCE, _E.UNLOAD): _S.DEAD,
    (_S.COMPLETING_REBALANCE, _E.REBALANCE): _S.PREPARING_REBALANCE,
    (_S.COMPLETING_REBALANCE, _E.LEADER_SYNCED): _S.STABLE,
    (_S.COMPLETING_REBALANCE, _E.UNLOAD): _S.DEAD,
    (_S.STABLE, _E.REBALANCE): _S.PREPARING_REBALANCE,
    (_S.STABLE, _E.UNLOAD): _S.DEAD,
}


def next_state(state: GroupState, event: GroupEvent) -> GroupState:
    """Look up the state ``event`` leads to from ``state``.

    Raises:
        IllegalTransition: the pair is not in ``TRANSITIONS`` (a coordinator bug).
    """
    try:
        return TRANSITIONS[(state, event)]
    except KeyError:
        raise IllegalTransition(f"{event.name} is not allowed in {state.value}") from None
