"""The five leader selectors (seeds 002, 003), as pure functions."""
import pytest

from kreplica import errors
from kreplica.controller import leader_selectors as ls
from kreplica.controller.context import ControllerContext, ReassignmentContext
from kreplica.protocol import LeaderAndIsr, TopicPartition


def state(leader, isr, epoch=5, version=7):
    return LeaderAndIsr(leader, epoch, tuple(isr), version, 1)


# -- offline ---------------------------------------------------------------------

def test_offline_seed003_scenario2_p1():
    # Replicas 1002,1001,1003; ISR 1002,1003,1001; 1002 killed.
    e = ls.offline([1002, 1001, 1003], state(1002, [1002, 1003, 1001], epoch=2), {1001, 1003}, False)
    assert e.leader_and_isr.leader == 1001          # first live AR replica in the live ISR
    assert e.leader_and_isr.isr == (1003, 1001)     # live ISR, ISR order
    assert e.leader_and_isr.leader_epoch == 3
    assert e.receivers == (1001, 1003)              # live assigned replicas


def test_offline_keeps_version_for_the_conditional_write():
    e = ls.offline([1, 2, 3], state(1, [1, 2, 3], version=11), {2, 3}, False)
    assert e.leader_and_isr.zk_version == 11
    assert e.leader_and_isr.leader == 2 and e.leader_and_isr.isr == (2, 3)


def test_offline_no_live_isr_unclean_disabled_raises():
    with pytest.raises(errors.NoReplicaOnline):
        ls.offline([1, 2, 3], state(1, [1]), {2, 3}, False)


def test_offline_no_live_isr_unclean_enabled_picks_first_live_assigned():
    e = ls.offline([1, 2, 3], state(1, [1]), {3, 2}, True)
    assert e.leader_and_isr.leader == 2
    assert e.leader_and_isr.isr == (2,)
    assert e.receivers == (2, 3)


def test_offline_nothing_alive_raises_even_when_unclean():
    with pytest.raises(errors.NoReplicaOnline):
        ls.offline([1, 2, 3], state(1, [1, 2]), set(), True)


def test_offline_live_isr_without_assigned_member_raises():
    with pytest.raises(errors.NoReplicaOnline):
        ls.offline([1, 2], state(3, [3, 4]), {4}, False)


# -- reassigned ------------------------------------------------------------------

def test_reassigned_first_live_rar_in_isr_keeps_isr():
    e = ls.reassigned([4, 5, 6], state(1, [1, 2, 3, 4, 5, 6]), {1, 2, 3, 4, 5, 6})
    assert e.leader_and_isr.leader == 4
    assert e.leader_and_isr.isr == (1, 2, 3, 4, 5, 6)
    assert e.receivers == (4, 5, 6)


def test_reassigned_skips_dead_and_out_of_sync():
    e = ls.reassigned([4, 5, 6], state(1, [1, 5, 6]), {1, 5, 6})
    assert e.leader_and_isr.leader == 5


def test_reassigned_raises_when_none_eligible():
    with pytest.raises(errors.NoReplicaOnline):
        ls.reassigned([4, 5], state(1, [1, 4]), {5})
    with pytest.raises(errors.NoReplicaOnline):
        ls.reassigned([], state(1, [1]), {1})


# -- preferred -------------------------------------------------------------------

def test_preferred_moves_leadership_to_first_assigned():
    e = ls.preferred([2, 1, 3], state(1, [1, 2, 3]), {1, 2, 3})
    assert e.leader_and_isr.leader == 2
    assert e.leader_and_isr.isr == (1, 2, 3)
    assert e.receivers == (2, 1, 3)


def test_preferred_not_needed_and_not_available():
    with pytest.raises(errors.ElectionNotNeeded):
        ls.preferred([1, 2], state(1, [1, 2]), {1, 2})
    with pytest.raises(errors.PreferredLeaderNotAvailable):
        ls.preferred([2, 1], state(1, [1]), {1, 2})          # not in ISR
    with pytest.raises(errors.PreferredLeaderNotAvailable):
        ls.preferred([2, 1], state(1, [1, 2]), {1})          # not alive


# -- controlled shutdown -----------------------------------------------------------

def test_controlled_shutdown_seed003_scenario1_p0():
    # Replicas 1001,1003,1002; ISR 1003,1002,1001; 1001 shutting down.
    e = ls.controlled_shutdown([1001, 1003, 1002], state(1001, [1003, 1002, 1001]),
                               {1001, 1002, 1003}, {1001})
    assert e.leader_and_isr.leader == 1003
    assert e.leader_and_isr.isr == (1003, 1002)
    assert e.receivers == (1001, 1003, 1002)   # the shutting-down broker learns it follows


def test_controlled_shutdown_leader_is_first_assigned_in_new_isr():
    e = ls.controlled_shutdown([1, 3, 2], state(1, [2, 3, 1]), {1, 2, 3}, {1})
    assert e.leader_and_isr.leader == 3 and e.leader_and_isr.isr == (2, 3)


def test_controlled_shutdown_drops_every_shutting_down_member_not_just_the_leader():
    """Two brokers shutting down at once: the follower among them (back in the ISR, its
    leader grew it) must neither stay in the new ISR nor be elected."""
    e = ls.controlled_shutdown([1, 2, 3], state(1, [1, 2, 3]), {1, 2, 3}, {1, 2})
    assert e.leader_and_isr.leader == 3 and e.leader_and_isr.isr == (3,)


def test_controlled_shutdown_no_other_isr_member_raises():
    with pytest.raises(errors.EligibleLeadersNotAvailable):
        ls.controlled_shutdown([1, 2], state(1, [1]), {1, 2}, {1})


# -- noop ------------------------------------------------------------------------

def test_noop_keeps_state_and_tells_all_assigned():
    cur = state(2, [2, 3])
    e = ls.noop([1, 2, 3], cur)
    assert e.leader_and_isr == cur and e.receivers == (1, 2, 3)


# -- bound to a context ------------------------------------------------------------

def test_bound_selectors_read_the_context():
    ctx = ControllerContext()
    tp = TopicPartition("t", 0)
    ctx.set_assignment(tp, [1, 2, 3])
    ctx.set_live_brokers([1, 2, 3])
    ctx.shutting_down_broker_ids.add(1)
    unclean = {"t": True}
    b = ls.BoundSelectors(ctx, lambda topic: unclean[topic])
    # Offline: the shutting-down broker is not electable.
    assert b.offline(tp, state(9, [1])).leader_and_isr.leader == 2
    assert b.controlled_shutdown(tp, state(1, [1, 3])).leader_and_isr.leader == 3
    ctx.partitions_being_reassigned[tp] = ReassignmentContext((3, 2))
    assert b.reassigned(tp, state(1, [1, 2, 3])).leader_and_isr.leader == 3
    assert b.noop(tp, state(1, [1])).receivers == (1, 2, 3)
    # After an unclean restart too: 3 (back from one) keeps leading rather than 1.
    assert b.after_unclean_restart(frozenset({3}))(tp, state(3, [1, 3])).leader_and_isr.leader == 3
    unclean["t"] = False
    with pytest.raises(errors.NoReplicaOnline):
        b.offline(tp, state(9, [1]))


def test_a_new_leaders_state_holds_its_isr_as_a_tuple_whatever_it_was_handed():
    """An election's state is compared with what the store holds and kept in dicts; an ISR
    handed over as a list would make it unhashable and unequal to the same state read back."""
    new = state(1, [1, 2]).with_leader(2, [2])
    assert new == LeaderAndIsr(2, 6, (2,), 7, 1)
    assert hash(new) == hash(LeaderAndIsr(2, 6, (2,), 7, 1))


def test_an_isr_change_keeps_the_rest_of_the_state_and_the_isr_as_handed():
    """with_isr changes the ISR alone: the leader, its epoch, the version the conditional
    write is made at and the controller epoch stay, and the ISR is a tuple in the order
    given, as with_leader keeps it."""
    new = state(1, [1, 2, 3]).with_isr([3, 1])
    assert new == LeaderAndIsr(1, 5, (3, 1), 7, 1)
    assert hash(new) == hash(LeaderAndIsr(1, 5, (3, 1), 7, 1))


def test_an_election_that_keeps_the_leader_still_bumps_the_leader_epoch():
    """Every election is a new leader epoch, the same broker elected again included (its
    last leader came back and is the first live replica in the ISR): followers and the
    restarted leader learn from the bump that the log they had may have changed."""
    e = ls.offline([1, 2, 3], state(1, [1, 2]), {1, 2, 3}, False)
    assert (e.leader_and_isr.leader, e.leader_and_isr.leader_epoch) == (1, 6)
    assert state(1, [1, 2]).with_leader(1, (1,)).leader_epoch == 6


def test_after_unclean_restart_falls_back_on_another_member_back_from_an_unclean_shutdown():
    """The last choice, but a choice: with the restarted leader gone again and no clean
    member in the live ISR, another member back from an unclean shutdown leads (never an
    unclean election); the restarted leader still comes before it while alive."""
    e = ls.after_unclean_restart([1, 2, 3], state(1, [1, 2]), {2, 3}, {1, 2})
    assert (e.leader_and_isr.leader, e.leader_and_isr.isr, e.leader_and_isr.leader_epoch) == (2, (2,), 6)
    assert set(e.receivers) == {2, 3}
    e = ls.after_unclean_restart([2, 1, 3], state(1, [1, 2]), {1, 2, 3}, {1, 2})
    assert (e.leader_and_isr.leader, e.leader_and_isr.isr) == (1, (1, 2))
