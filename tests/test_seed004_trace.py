"""Seed 004's produce trace, step by step, on 2 and 3 replicas.

(1) produce: leader LEO 1, HW 0; (2-4) the first fetch gives each follower LEO 1
and HW 0; (5-6) the second fetch moves the leader's HW to 1 and the followers'
HW to 1; only then does the acks=all produce complete.
"""
import pytest

from kreplica import errors
from kreplica.protocol import FetchRequest, FetchResponse, ProduceResponse, TopicPartition
from replica_harness import Harness

TP = TopicPartition("flinkin-01", 0)


def _fetch_answers(h: Harness, follower: int) -> list:
    """The leader's answers to ``follower``'s fetches, in order: (HW, record bytes)."""
    out = []
    for _, src, dst, msg in h.transport.log:
        if src == 1 and dst == follower and isinstance(msg, FetchResponse):
            d = msg.partitions[0]
            out.append((d.high_watermark, len(d.records)))
    return out


@pytest.mark.parametrize("rf", [2, 3])
def test_two_fetch_high_watermark_advance(tmp_path, rf):
    brokers = tuple(range(1, rf + 1))
    h = Harness(tmp_path, brokers)
    h.create_partition(TP, brokers)
    # The followers' first fetches find nothing and park in the leader's long-poll.
    h.advance(1)
    leader = h.partition(1, TP)
    followers = [h.partition(b, TP) for b in brokers[1:]]
    assert leader.is_leader and all(not f.is_leader for f in followers)
    assert h.brokers[1].fetch_purgatory.watched(TP) == rf - 1

    # (1) The produce is appended: leader LEO 1, HW 0; it waits in purgatory.
    pending = h.produce(TP, [b"m0"], acks=-1)
    assert h.run_until(lambda: leader.log_end_offset == 1, 100)
    assert leader.high_watermark == 0
    assert h.brokers[1].produce_purgatory.watched(TP) == 1
    assert not pending.done

    # (2)-(4) First fetch: each follower copies the record; LEO 1, HW 0 everywhere.
    assert h.run_until(lambda: all(f.log_end_offset == 1 for f in followers), 100)
    assert [f.high_watermark for f in followers] == [0] * (rf - 1)
    assert leader.high_watermark == 0
    assert not pending.done
    for b in brokers[1:]:
        assert h.partition(1, TP).remote_replicas[b].log_end_offset in (0, 1)

    # (5)-(6) Second fetch: the leader sees every follower at LEO 1, HW becomes 1,
    # and the produce completes only now.
    assert h.run_until(lambda: leader.high_watermark == 1, 100)
    assert all(r.log_end_offset == 1 for r in leader.remote_replicas.values())
    assert h.run_until(lambda: pending.done, 100)
    result = pending.response.partitions[0]
    assert (result.error_code, result.base_offset) == (errors.NONE, 0)
    assert h.run_until(lambda: all(f.high_watermark == 1 for f in followers), 100)

    # The fetch answers each follower saw: data with HW 0, then no data with HW 1.
    for b in brokers[1:]:
        answers = _fetch_answers(h, b)
        with_data = [a for a in answers if a[1] > 0]
        assert len(with_data) == 1 and with_data[0][0] == 0
        after = answers[answers.index(with_data[0]) + 1]
        assert after == (1, 0)

    # The produce answer crossed the wire after the leader's HW reached 1, never before
    # the last follower's second fetch arrived.
    produce_at = next(i for i, m in enumerate(h.transport.log) if isinstance(m[3], ProduceResponse))
    second_fetches = [
        i for i, (_, src, dst, msg) in enumerate(h.transport.log)
        if dst == 1 and isinstance(msg, FetchRequest) and msg.partitions[0].fetch_offset == 1
    ]
    assert len(second_fetches) >= rf - 1
    assert produce_at > sorted(second_fetches)[rf - 2]
    h.close()


def test_consumer_sees_the_record_only_after_the_second_fetch(tmp_path):
    h = Harness(tmp_path, (1, 2))
    h.create_partition(TP, (1, 2))
    h.advance(1)
    leader = h.partition(1, TP)
    h.produce(TP, [b"m0"], acks=1)
    assert h.run_until(lambda: leader.log_end_offset == 1, 100)
    before = h.fetch(TP, 0)
    assert before.error_code == errors.NONE and len(before.records) == 0 and before.high_watermark == 0
    assert h.run_until(lambda: leader.high_watermark == 1, 100)
    after = h.fetch(TP, 0)
    assert after.error_code == errors.NONE and len(after.records) > 0 and after.high_watermark == 1
    h.close()
