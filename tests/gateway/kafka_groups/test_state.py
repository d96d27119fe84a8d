"""The group transition table."""

from __future__ import annotations

import pytest
from rokka.gateway.kafka.groups import TRANSITIONS, GroupEvent, GroupState, IllegalTransition
from rokka.gateway.kafka.groups.state import next_state


def test_table_matches_the_protocol() -> None:
    S, E = GroupState, GroupEvent
    assert next_state(S.EMPTY, E.REBALANCE) is S.PREPARING_REBALANCE
    assert next_state(S.PREPARING_REBALANCE, E.JOIN_COMPLETE) is S.COMPLETING_REBALANCE
    assert next_state(S.PREPARING_REBALANCE, E.ALL_MEMBERS_GONE) is S.EMPTY
    assert next_state(S.COMPLETING_REBALANCE, E.LEADER_SYNCED) is S.STABLE
    assert next_state(S.COMPLETING_REBALANCE, E.REBALANCE) is S.PREPARING_REBALANCE
    assert next_state(S.STABLE, E.REBALANCE) is S.PREPARING_REBALANCE


def test_dead_is_terminal_and_unknown_pairs_raise() -> None:
    for event in GroupEvent:
        with pytest.raises(IllegalTransition):
            next_state(GroupState.DEAD, event)
    with pytest.raises(IllegalTransition):
        next_state(GroupState.EMPTY, GroupEvent.LEADER_SYNCED)
    with pytest.raises(IllegalTransition):
        next_state(GroupState.STABLE, GroupEvent.JOIN_COMPLETE)


def test_every_live_state_can_be_unloaded_or_rebalanced() -> None:
    for state in GroupState:
        if state is not GroupState.DEAD:
            assert TRANSITIONS.get((state, GroupEvent.UNLOAD)) is GroupState.DEAD
            assert TRANSITIONS.get((state, GroupEvent.REBALANCE)) is GroupState.PREPARING_REBALANCE
