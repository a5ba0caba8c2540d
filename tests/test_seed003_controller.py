"""Seed 003's two published scenarios, on brokers 1001-1003 and topic ``bar``.

Each starts from the published "before" picture written into the store, runs
the event (controlled shutdown of 1001; kill of 1002) and compares the store's
leaders and ISRs with the published "after" picture (ISRs as sets, and the
logged JSON of bar-1 exactly).  In scenario 2 the published "after" has bar-0 back
on 1001, a leader no failure elects: 1001 is bar-0's preferred replica, and the
cluster ran with ``auto.leader.rebalance.enable`` (0.10's default), whose
imbalance check moved it.  The test compares the picture right after the
election, then runs that check and compares the published one.  Both run on MemoryStore and on a real
ZooKeeper; against ZooKeeper the znodes are also read with a raw kazoo client.
"""
from __future__ import annotations

import json

import pytest

from controller_harness import make_cluster  # noqa: F401 (fixture)
from kreplica.protocol import (
    ControlledShutdownRequest,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    TopicPartition,
)

ASSIGNMENT = {0: [1001, 1003, 1002], 1: [1002, 1001, 1003], 2: [1003, 1002, 1001]}

# (leader, isr, leader_epoch) per partition, as published.
SCENARIO1_BEFORE = {0: (1001, [1003, 1002, 1001], 0), 1: (1002, [1002, 1003, 1001], 0),
                    2: (1003, [1003, 1002, 1001], 0)}
SCENARIO1_AFTER = {0: (1003, {1003, 1002}), 1: (1002, {1002, 1003}), 2: (1003, {1003, 1002})}

SCENARIO2_BEFORE = {0: (1003, [1003, 1001], 1), 1: (1002, [1002, 1003, 1001], 2),
                    2: (1003, [1003, 1001], 1)}
# Right after 1002's death: only bar-1 lost its leader.
SCENARIO2_ELECTED = {0: (1003, {1003, 1001}), 1: (1001, {1003, 1001}), 2: (1003, {1003, 1001})}
# As published: the leader-imbalance check then gave bar-0 back to its preferred replica.
SCENARIO2_AFTER = {0: (1001, {1003, 1001}), 1: (1001, {1003, 1001}), 2: (1003, {1003, 1001})}


def with_before_state(make, before, start_order):
    c = make()
    c.admin.create_topic("bar", ASSIGNMENT)
    for p, (leader, isr, epoch) in before.items():
        c.write_state(TopicPartition("bar", p), leader, epoch, isr)
    c.start_all(start_order)
    assert c.wait_for(lambda: any(x.is_active for x in c.controllers.values()))
    return c


def picture(c):
    out = {}
    for p in ASSIGNMENT:
        st = c.state("bar", p)
        out[p] = (st.leader, set(st.isr))
    return out


def check_znodes_with_kazoo(c, expected):
    if not hasattr(c, "kazoo"):
        return
    for p, (leader, isr) in expected.items():
        data, _ = c.kazoo.get(f"{c.chroot}/brokers/topics/bar/partitions/{p}/state")
        obj = json.loads(data)
        assert obj["leader"] == leader and set(obj["isr"]) == isr
        assert set(obj) == {"controller_epoch", "leader", "version", "leader_epoch", "isr"}


@pytest.mark.parametrize("first", [1001, 1002])
def test_scenario1_controlled_shutdown_of_1001(make_cluster, first):
    order = [first] + [b for b in (1001, 1002, 1003) if b != first]
    c = with_before_state(make_cluster, SCENARIO1_BEFORE, order)
    assert picture(c) == {p: (l, set(i)) for p, (l, i, _) in SCENARIO1_BEFORE.items()}
    c.channel.clear()
    response = c.controller.handle_controlled_shutdown(ControlledShutdownRequest(1001))
    assert response.error_code == 0 and response.partitions_remaining == ()
    c.settle()
    assert picture(c) == SCENARIO1_AFTER
    # 1001 was told it follows 1003 for bar-0, and to stop fetching bar-1 and bar-2.
    lai = [ps for r in c.channel.requests(LeaderAndIsrRequest, 1001) for ps in r.partition_states]
    assert any(ps.tp == TopicPartition("bar", 0) and ps.leader == 1003 for ps in lai)
    stopped = {p.tp for r in c.channel.requests(StopReplicaRequest, 1001) for p in r.partitions
               if not p.delete}
    assert stopped == {TopicPartition("bar", 1), TopicPartition("bar", 2)}
    # The broker then stops; leaders and ISRs stay as published.
    c.stop(1001)
    assert c.wait_for(lambda: any(x.is_active for x in c.controllers.values()))
    c.settle()
    assert picture(c) == SCENARIO1_AFTER
    check_znodes_with_kazoo(c, SCENARIO1_AFTER)


@pytest.mark.parametrize("first", [1001, 1002])
def test_scenario2_kill_1002(make_cluster, first):
    order = [first] + [b for b in (1001, 1002, 1003) if b != first]
    c = with_before_state(make_cluster, SCENARIO2_BEFORE, order)
    assert picture(c) == {p: (l, set(i)) for p, (l, i, _) in SCENARIO2_BEFORE.items()}
    c.kill(1002)
    assert c.wait_for(lambda: picture(c) == SCENARIO2_ELECTED, 10_000)
    st = c.state("bar", 1)
    # seed 003's log line: Selected new leader and ISR {"leader":1001,"leader_epoch":3,"isr":[1003,1001]}
    assert {"leader": st.leader, "leader_epoch": st.leader_epoch, "isr": list(st.isr)} == \
        {"leader": 1001, "leader_epoch": 3, "isr": [1003, 1001]}
    # bar-0 and bar-2 did not lose their leader: no election, same epoch.
    assert c.state("bar", 0).leader_epoch == 1 and c.state("bar", 2).leader_epoch == 1
    # The imbalance check: 1001 prefers only bar-0 and leads none of it (100% > 10%).
    assert c.controller.check_and_trigger_partition_rebalance() == {TopicPartition("bar", 0)}
    c.settle()
    assert picture(c) == SCENARIO2_AFTER
    # A preferred election keeps the ISR as it is (published: Isr: 1003,1001) and bumps the epoch.
    st = c.state("bar", 0)
    assert (st.leader, st.leader_epoch, list(st.isr)) == (1001, 2, [1003, 1001])
    assert c.state("bar", 2).leader_epoch == 1
    check_znodes_with_kazoo(c, SCENARIO2_AFTER)
