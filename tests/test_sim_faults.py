"""Power loss on real segment files: what was not fsynced is gone, a torn tail is cut."""
from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from kreplica.log import Log
from kreplica.protocol import TopicPartition
from kreplica.records import decode_records
from kreplica.runtime import ManualClock
from kreplica.sim.faults import drop_tail, unflushed_tails


@pytest.mark.parametrize("torn", [False, True])
def test_power_loss_keeps_exactly_the_flushed_prefix(tmp_path, torn):
    tp = TopicPartition("t", 0)
    log = Log.open(tmp_path / "t-0", {"segment.bytes": 1 << 20}, ManualClock())
    for i in range(5):
        log.append_as_leader([b"flushed-%d" % i], leader_epoch=0)
    log.flush()
    for i in range(7):
        log.append_as_leader([b"volatile-%d" % i] * 3, leader_epoch=0)
    assert (log.recovery_point, log.log_end_offset) == (5, 26)
    rm = SimpleNamespace(partitions={tp: SimpleNamespace(log=log)})
    tails = unflushed_tails(rm, random.Random(4), torn)
    assert [(t.tp, t.first_offset) for t in tails] == [(tp, 5)]
    assert (tails[0].torn_bytes > 0) is torn
    log.abandon()
    for t in tails:
        drop_tail(t)
    again = Log.open(tmp_path / "t-0", {"segment.bytes": 1 << 20}, ManualClock())
    try:
        assert again.log_end_offset == 5
        assert (again.last_recovery[-1].error is not None) is torn
        assert [r.value for r in decode_records(again.read(0).view)] == [b"flushed-%d" % i for i in range(5)]
    finally:
        again.close()


def test_nothing_to_lose_when_everything_was_flushed(tmp_path):
    log = Log.open(tmp_path / "t-0", {"segment.bytes": 1 << 20}, ManualClock())
    log.append_as_leader([b"x"], leader_epoch=0)
    log.flush()
    rm = SimpleNamespace(partitions={TopicPartition("t", 0): SimpleNamespace(log=log)})
    assert unflushed_tails(rm, random.Random(1), True) == []
    log.close()
