"""Auto leader rebalance's choice (Kafka 0.10 checkAndTriggerPartitionRebalance), as a pure function."""
import pytest

from kreplica.controller.leader_imbalance import partitions_to_rebalance
from kreplica.protocol import LeaderAndIsr, TopicPartition


def tps(n, topic="t"):
    return [TopicPartition(topic, p) for p in range(n)]


def led(leader, isr=(1, 2, 3)):
    return LeaderAndIsr(leader, 1, tuple(isr), 0, 1)


@pytest.mark.parametrize("percentage,expected", [(9, {0}), (10, set()), (0, {0})])
def test_moves_only_beyond_the_percentage(percentage, expected):
    parts = tps(10)
    assignment = {tp: [1, 2, 3] for tp in parts}
    leadership = {tp: led(2 if tp.partition == 0 else 1) for tp in parts}  # 1 of 10 led elsewhere: 10%
    got = partitions_to_rebalance(assignment, leadership, {1, 2, 3}, percentage)
    assert got == {parts[p] for p in expected}


def test_each_broker_is_judged_on_its_own_preferred_partitions():
    a, b = tps(2)
    assignment = {a: [1, 2], b: [2, 1]}
    leadership = {a: led(2, (1, 2)), b: led(2, (1, 2))}  # 1 leads none of its 1; 2 leads its 1 of 1
    assert partitions_to_rebalance(assignment, leadership, {1, 2}, 10) == {a}


def test_a_dead_or_out_of_sync_preferred_replica_is_left_alone():
    a, b, c = tps(3)
    assignment = {a: [1, 2], b: [1, 2], c: [3, 2]}
    leadership = {a: led(2, (2,)), b: led(2, (1, 2)), c: led(2, (3, 2))}
    assert partitions_to_rebalance(assignment, leadership, {1, 2}, 10) == {b}  # a: 1 not in ISR; c: 3 dead


def test_excluded_topics_and_partitions_without_state_do_not_count():
    a, = tps(1, "gone")
    b, c = tps(2, "t")
    assignment = {a: [1, 2], b: [1, 2], c: [1, 2]}
    leadership = {a: led(2), b: led(2)}  # c has no state yet
    assert partitions_to_rebalance(assignment, leadership, {1, 2}, 10, lambda t: t == "gone") == {b}


def test_a_brokers_share_is_of_its_own_preferred_partitions_not_of_all():
    """Kafka's ratio is per broker: led elsewhere / the partitions that broker prefers.
    Broker 1 prefers 10 partitions and leads 8 (20% led elsewhere, over the 10% limit);
    broker 2's 10 partitions are balanced.  Over all 20 partitions the share would be
    10%, at the limit, and broker 1 would never get its two back."""
    parts = tps(20)
    assignment = {tp: ([1, 2, 3] if tp.partition < 10 else [2, 1, 3]) for tp in parts}
    leadership = {tp: led(3 if tp.partition in (0, 1) else (1 if tp.partition < 10 else 2)) for tp in parts}
    assert partitions_to_rebalance(assignment, leadership, {1, 2, 3}, 10) == {parts[0], parts[1]}


def test_a_leaderless_partition_counts_as_led_elsewhere():
    """Kafka counts every preferred partition whose leader is not the broker, a leaderless
    one (-1) too: here 2 of broker 1's 10 (20%) are not led by it, so the one it can take
    back moves; counting the leaderless one as led by 1 would make it 10%, and nothing moves."""
    parts = tps(10)
    assignment = {tp: [1, 2, 3] for tp in parts}
    leadership = {tp: led(1) for tp in parts}
    leadership[parts[0]] = led(2)
    leadership[parts[1]] = led(-1, (3,))   # its only ISR member, 3, is dead
    assert partitions_to_rebalance(assignment, leadership, {1, 2}, 10) == {parts[0]}



def test_a_queued_topics_partitions_do_not_count_in_a_brokers_share():
    """Kafka 0.10 filters the topics queued for deletion out of the assignment before
    grouping by preferred replica, so they weigh neither way in a broker's share.
    Broker 1 prefers t-0..t-9 and leads all but t-0 (10%, at the limit: nothing moves);
    the ten partitions of the queued topic "gone" it prefers, all led by 2, must not
    push its share to 55%.  Broker 2 prefers u-0, which 1 leads (100%): the ten "gone"
    partitions it prefers and leads must not thin that to 9%."""
    t = tps(10)
    gone = tps(20, "gone")
    u, = tps(1, "u")
    assignment = {tp: [1, 2, 3] for tp in t}
    assignment.update({tp: ([1, 2, 3] if tp.partition < 10 else [2, 1, 3]) for tp in gone})
    assignment[u] = [2, 1, 3]
    leadership = {tp: led(2 if tp.partition == 0 else 1) for tp in t}
    leadership.update({tp: led(2) for tp in gone})
    leadership[u] = led(1)
    got = partitions_to_rebalance(assignment, leadership, {1, 2, 3}, 10, lambda topic: topic == "gone")
    assert got == {u}
