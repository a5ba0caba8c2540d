"""Leadership changes with truncation under both strategies: KIP-101's two scenarios.

Under ``high-watermark`` (the seeds' design: a new follower truncates to its own
HW) a follower's HW lags the leader's by a fetch, so a restart can cut off a
record the leader had already acknowledged, and after a double failure the
replicas can hold different records at the same offset.  Under ``leader-epoch``
(KIP-101/KIP-279) the follower asks the leader where its epoch ended and cuts
only there: no acknowledged record is lost to truncation and the logs agree.
"""
import pytest

from kreplica import errors
from kreplica.protocol import TopicPartition
from kreplica.replica.fetcher import FetchPhase
from replica_harness import Harness

TP = TopicPartition("kip101", 0)
A, B = 1, 2


def _harness(tmp_path, strategy):
    h = Harness(tmp_path, (A, B), config={"replica.truncation.strategy": strategy})
    h.create_partition(TP, (A, B))
    h.settle(TP)
    return h


@pytest.mark.parametrize("strategy", ["high-watermark", "leader-epoch"])
def test_scenario_1_follower_restart_then_leader_failure(tmp_path, strategy):
    """KIP-101 scenario 1: B restarts with HW behind A's, then A fails and B leads."""
    h = _harness(tmp_path, strategy)
    assert h.produce_sync(TP, [b"m0"]).error_code == errors.NONE
    h.settle(TP)
    h.brokers[B].checkpoint_high_watermarks()  # the periodic checkpoint: HW 1 on disk

    # m1 is acknowledged the moment A sees B's second fetch; B crashes before
    # that fetch's answer (carrying HW 2) reaches it.
    pending = h.produce(TP, [b"m1"], acks=-1)
    assert h.run_until(lambda: pending.done, 1000)
    assert pending.response.partitions[0].error_code == errors.NONE
    assert h.partition(A, TP).high_watermark == 2 and h.partition(B, TP).high_watermark == 1
    assert h.partition(B, TP).log_end_offset == 2
    h.crash(B)

    # B comes back as a follower of A and truncates by its strategy...
    h.start(B)
    h.send_leader_and_isr(TP, [B])
    assert h.run_until(lambda: h.fetch_phase(B, TP) is FetchPhase.FETCHING, 1000)
    b_after_restart = h.partition(B, TP).log_end_offset
    # ...and before it fetches again, A fails; the controller elects B (still in the ISR).
    h.crash(A)
    h.elect(TP, B, isr=(B,))
    h.start(A)
    h.send_leader_and_isr(TP, [A])
    h.settle(TP)

    logs = {b: h.values(b, TP) for b in (A, B)}
    assert logs[A] == logs[B]
    if strategy == "high-watermark":
        assert b_after_restart == 1
        assert logs[B] == [(0, b"m0")]  # the acknowledged m1 is gone from every replica
    else:
        assert b_after_restart == 2
        assert logs[B] == [(0, b"m0"), (1, b"m1")]
    h.close()


@pytest.mark.parametrize("strategy", ["high-watermark", "leader-epoch"])
def test_scenario_2_double_failure_divergence(tmp_path, strategy):
    """KIP-101 scenario 2: both fail, B lost its unflushed tail and leads first; then A returns."""
    h = _harness(tmp_path, strategy)
    assert h.produce_sync(TP, [b"m0"]).error_code == errors.NONE
    h.settle(TP)
    h.brokers[B].checkpoint_high_watermarks()
    h.snapshot(B, tmp_path / "b-on-disk")  # what B's disk will hold after the power failure

    assert h.produce_sync(TP, [b"m1"]).error_code == errors.NONE
    h.settle(TP)
    h.brokers[A].checkpoint_high_watermarks()  # A's HW 2 reached its disk
    h.crash(A)
    h.crash(B)
    h.restore(B, tmp_path / "b-on-disk")

    h.start(B)
    h.elect(TP, B, isr=(B,))
    assert h.partition(B, TP).log_end_offset == 1
    assert h.produce_sync(TP, [b"m2"], acks=1).error_code == errors.NONE

    h.start(A)
    h.send_leader_and_isr(TP, [A])
    h.settle(TP)
    a_log, b_log = h.values(A, TP), h.values(B, TP)
    assert b_log == [(0, b"m0"), (1, b"m2")]
    if strategy == "high-watermark":
        # A kept m1 at offset 1 (below its HW) and fetches from 2: the logs diverge.
        assert a_log == [(0, b"m0"), (1, b"m1")]
        assert a_log != b_log
        assert h.partition(A, TP).log_end_offset == h.partition(B, TP).log_end_offset
    else:
        # A learns epoch 0 ended at 1 on the leader, cuts there and copies m2.
        assert a_log == b_log
    h.close()


def test_leader_epoch_unknown_to_the_new_leader(tmp_path):
    """KIP-279: B's last epoch (1) never reached the new leader; it answers with the
    largest epoch it has below that (0) and where it ended, and B cuts there."""
    h = Harness(tmp_path, (A, B, 3), config={"replica.truncation.strategy": "leader-epoch"})
    h.create_partition(TP, (A, B, 3))
    h.settle(TP)
    assert h.produce_sync(TP, [b"e0"]).error_code == errors.NONE
    h.settle(TP)
    h.crash(A)
    h.crash(3)
    h.elect(TP, B, isr=(B,))
    assert h.produce_sync(TP, [b"b1-uncommitted"], acks=1).error_code == errors.NONE
    h.crash(B)
    h.start(A)
    h.start(3)
    h.elect(TP, A, isr=(A, 3))
    assert h.produce_sync(TP, [b"a2"]).error_code == errors.NONE
    h.start(B)
    h.send_leader_and_isr(TP, [B])
    h.settle(TP)
    expected = [(0, b"e0"), (1, b"a2")]
    assert h.values(A, TP) == h.values(B, TP) == h.values(3, TP) == expected
    cache = h.partition(B, TP).log.leader_epoch_cache
    assert cache.entries == h.partition(A, TP).log.leader_epoch_cache.entries == [(0, 0), (2, 1)]
    h.close()
