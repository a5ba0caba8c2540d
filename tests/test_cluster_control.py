"""Controller and broker behaviours seen from the embedded Cluster (virtual time, real logs).

Each test drives whole brokers through the in-process transport; a few hold or
record messages on it to build the races the seeds describe (a late request
from a dead controller, an ISR write overtaken by the controller).
"""
import itertools
import os

import pytest

from kreplica import Cluster, errors
from kreplica.log.checkpoints import OffsetCheckpointFile
from kreplica.broker import ALTER_ISR_RETRY_MS, REGISTRATION_RETRY_MS
from kreplica.cluster import CLIENT_ID
from kreplica.meta.store import ConnectionLoss, SessionExpired
from kreplica.protocol import (
    ControlledShutdownRequest,
    FetchRequest,
    LeaderAndIsrRequest,
    ProducePartition,
    ProduceRequest,
    TopicPartition,
    UpdateMetadataRequest,
)
from kreplica.records import encode_batch
from recording_transport import RecordingTransport

BAR = {0: [1001, 1003, 1002], 1: [1002, 1001, 1003], 2: [1003, 1002, 1001]}
SESSION_MS = 6000
CONFIG = {"min.insync.replicas": 2, "zookeeper.session.timeout.ms": SESSION_MS,
          "replica.lag.time.max.ms": 10000, "auto.leader.rebalance.enable": False}


_chroots = itertools.count()


@pytest.fixture(params=["memory", pytest.param("zookeeper", marks=pytest.mark.zookeeper)])
def metadata(request):
    """The metadata URI: the embedded store (virtual time) or a real ZooKeeper (wall clock)."""
    if request.param == "memory":
        return "memory"
    server = request.getfixturevalue("zk_server")
    return f"zookeeper://{server.hosts}/control-{os.getpid()}-{next(_chroots)}"


@pytest.fixture
def make(tmp_path):
    """``make(config, transport, topic, metadata)``: one cluster in ``tmp_path``, closed after the test."""
    made = []

    def build(config=None, transport=None, topic=True, metadata="memory"):
        c = Cluster.embedded(data_dir=tmp_path, config={**CONFIG, **(config or {})}, transport=transport,
                             metadata=metadata)
        made.append(c)
        if topic:
            c.create_topic("bar", partitions=3, replication_factor=3, assignment=BAR)
            assert c.run_until(lambda: isr_full(c), 60_000)
        return c

    yield build
    for c in made:
        c.close()


def isr_full(c, topic="bar"):
    return all(len(p.isr) == len(p.replicas) for p in c.describe(topic).partitions)


def state(c, partition, topic="bar"):
    return c.describe(topic).partitions[partition]


# ---- kill versus controlled shutdown --------------------------------------------------------
def test_a_killed_broker_leads_until_its_session_expires(make):
    c = make()
    killed_at = c.now_ms()
    c.kill(1002)  # the leader of bar-1
    c.advance(SESSION_MS * 2 // 3 - 10)
    # Nobody has noticed yet: still registered, still the leader, and unreachable.
    assert 1002 in c.zk.get_live_broker_ids() and state(c, 1).leader == 1002
    with pytest.raises(errors.NetworkException):
        c.produce("bar", 1, [b"x"], retries=0)
    assert c.run_until(lambda: state(c, 1).leader != 1002, SESSION_MS)
    elapsed = c.now_ms() - killed_at
    # The session expires one timeout after the last heartbeat before the crash.
    assert SESSION_MS * 2 // 3 <= elapsed <= SESSION_MS + 50
    assert state(c, 1).leader == 1001 and 1002 not in c.zk.get_live_broker_ids()


def test_controlled_shutdown_moves_leadership_without_waiting_for_a_session(make):
    c = make()
    start = c.now_ms()
    assert c.controlled_shutdown(1002) is True
    assert c.now_ms() - start < 100
    assert state(c, 1).leader == 1001 and 1002 not in state(c, 1).isr


def lone_leader(make, retries, backoff_ms):
    """1001 leads ``solo-0`` alone (its other replica, 1002, crashed): it cannot hand over."""
    t = RecordingTransport()
    c = make({"controlled.shutdown.max.retries": retries,
                        "controlled.shutdown.retry.backoff.ms": backoff_ms}, transport=t, topic=False)
    c.create_topic("solo", assignment={0: [1001, 1002]})
    c.produce("solo", 0, [b"a", b"b"])
    c.kill(1002)
    assert c.run_until(lambda: state(c, 0, "solo").isr == (1001,), 60_000)
    return c, t


def test_controlled_shutdown_retries_while_partitions_remain_then_gives_up(make):
    c, t = lone_leader(make, retries=2, backoff_ms=1000)
    start = c.now_ms()
    assert c.controlled_shutdown(1001) is False
    attempts = [at for at, *_ in t.requests(ControlledShutdownRequest, src=1001)]
    # max.retries counts attempts, as Kafka's loop does; the backoff separates them.
    assert len(attempts) == 2 and attempts[1] - attempts[0] >= 1000
    # Kafka stops the broker anyway; the partition then waits for a live replica.
    assert not c.brokers[1001].alive and c.now_ms() - start >= 1000
    # The timeline says the shutdown failed (the eighty-eighth review's BR5-20).
    assert [e.details["ok"] for e in c.timeline if e.kind == "controlled_shutdown_done"] == [False]
    assert c.run_until(lambda: state(c, 0, "solo").leader == -1, 30_000)
    # A failed shutdown still closes the logs cleanly, as Kafka's KafkaServer.shutdown goes on
    # after controlledShutdown gave up: the next start has no crash to recover (BR6-09).
    c.start(1001)
    assert not c.brokers[1001].replica_manager.recovered_uncleanly


def test_controlled_shutdown_succeeds_on_a_retry_once_a_follower_is_back(make):
    c, t = lone_leader(make, retries=3, backoff_ms=2000)
    c.produce("solo", 0, [b"c"], acks=1)  # below min.insync.replicas: acks=all is refused
    c.scheduler.call_later(100, c.start, 1002)  # returns while the shutdown backs off
    assert c.controlled_shutdown(1001) is True
    assert len(t.requests(ControlledShutdownRequest, src=1001)) == 2
    s = state(c, 0, "solo")
    assert s.leader == 1002 and s.isr == (1002,)
    assert [r.value for r in c.fetch("solo", 0, 0)] == [b"a", b"b", b"c"]



def test_an_unanswered_controlled_shutdown_attempt_times_out_and_is_retried(make):
    """The request (or the controller's answer) is lost: the attempt fails after
    controller.socket.timeout.ms and the next one, a backoff later, goes through.  Not
    request.timeout.ms (30 s here), the produce purgatory's (the hundred-and-forty-fifth
    review's BR8-14): Kafka's controlled shutdown waits on its controller channel."""
    t = RecordingTransport()
    c = make({"controlled.shutdown.max.retries": 3, "controlled.shutdown.retry.backoff.ms": 1000,
              "controller.socket.timeout.ms": 3000}, transport=t)
    lost = []
    t.hold = lambda src, dst, m: isinstance(m, ControlledShutdownRequest) and not lost and not lost.append(m)
    assert c.controlled_shutdown(1002, timeout_ms=60_000) is True
    attempts = [at for at, *_ in t.requests(ControlledShutdownRequest, src=1002)]
    assert len(attempts) == 2 and attempts[1] - attempts[0] == 3000 + 1000
    assert 1002 not in state(c, 1).isr


def test_create_topic_waits_until_each_leader_runs_the_stored_leader_epoch(make):
    """The leader's first LeaderAndIsr arrives after the controller already bumped the
    epoch (a follower's controlled shutdown shrank the ISR): create_topic waits for the
    newer one, not just for a broker that calls itself leader."""
    t = RecordingTransport()
    c = make(transport=t, topic=False)
    leader, follower = [b for b in (1001, 1002, 1003) if b != c.controller_id]
    tp = TopicPartition("t", 0)

    def hold(src, dst, m):
        if dst != leader or not isinstance(m, LeaderAndIsrRequest) or all(ps.tp != tp for ps in m.partition_states):
            return False
        if not t.held:  # the first: shut the follower down, so the controller bumps the epoch
            c.scheduler.call_later(1, c.brokers[follower].controlled_shutdown, lambda ok: None)
            c.scheduler.call_later(1_000, lambda: t.held[0][1](t.held[0][0]))
            c.scheduler.call_later(5_000, lambda: t.held[1][1](t.held[1][0]))
        return True

    t.hold = hold
    c.create_topic("t", assignment={0: [leader, follower]})
    s = state(c, 0, "t")
    assert len(t.held) == 2 and s.leader == leader and s.leader_epoch >= 1
    assert c.brokers[leader].replica_manager.partitions[tp].leader_epoch == s.leader_epoch

# ---- auto leader rebalance -------------------------------------------------------------------
@pytest.mark.parametrize("enabled,percentage,moved", [(True, 10, True), (True, 100, False), (False, 10, False)])
def test_auto_leader_rebalance_returns_leadership_to_the_preferred_replica(make, enabled, percentage, moved):
    c = make({"auto.leader.rebalance.enable": enabled,
                        "leader.imbalance.per.broker.percentage": percentage,
                        "leader.imbalance.check.interval.seconds": 30})
    assert c.controller_id == 1001
    c.kill(1002)
    assert c.run_until(lambda: state(c, 1).leader == 1001, 60_000)
    c.start(1002)
    assert c.run_until(lambda: isr_full(c), 60_000)
    # 1002 prefers bar-1 and leads nothing: 100% imbalance.  The checks run 5 s after
    # the controller's failover (t=0) and every 30 s after: the next is at 35 s.
    assert c.now_ms() < 30_000
    c.advance(35_000 - 10 - c.now_ms())
    assert state(c, 1).leader == 1001
    c.advance(100)
    assert (state(c, 1).leader == 1002) is moved
    c.advance(60_000)
    assert (state(c, 1).leader == 1002) is moved
    assert {p.partition: p.leader for p in c.describe("bar").partitions if p.partition != 1} == {0: 1001, 2: 1003}


# ---- controller epochs and ISR races ---------------------------------------------------------
def test_a_dead_controllers_late_request_is_fenced_by_the_broker(make, metadata):
    t = RecordingTransport()
    # 4 s: ZooKeeper's shortest session (two ticks).
    c = make({"zookeeper.session.timeout.ms": 4000}, transport=t, topic=False, metadata=metadata)
    old = c.controller_id
    assert old == 1001
    # The old controller's UpdateMetadata for the new topic is delayed on its way to 1003.
    t.hold = lambda src, dst, m: (src == old and dst == 1003 and isinstance(m, UpdateMetadataRequest)
                                  and bool(m.partition_states))
    c.create_topic("bar", partitions=3, replication_factor=3, assignment=BAR)
    late = [m for m, _ in t.held]
    assert late and all(m.controller_epoch == 1 for m in late)
    assert any(s.tp == TopicPartition("bar", 0) and s.leader == old for m in late for s in m.partition_states)
    t.hold = lambda src, dst, m: False
    c.kill(old)  # also the leader of bar-0
    assert c.run_until(lambda: c.controller_id not in (None, old) and state(c, 0).leader not in (-1, old), 60_000)
    rm = c.brokers[1003].replica_manager
    tp = TopicPartition("bar", 0)
    assert c.run_until(lambda: rm.metadata_cache.leader_for(tp) == state(c, 0).leader, 5000)
    new_epoch = rm.controller_epoch
    assert new_epoch == 2
    t.release()  # it arrives now
    # The late request said bar-0 is led by 1001: refused, the cache keeps the new leader.
    assert rm.controller_epoch == new_epoch
    assert rm.metadata_cache.leader_for(tp) == state(c, 0).leader != old


def test_controller_wins_against_a_leaders_isr_shrink_it_overtakes(make, metadata):
    # The lag time is well below the session timeout: the leader notices first.
    c = make({"replica.lag.time.max.ms": 2000, "zookeeper.session.timeout.ms": 30_000},
             metadata=metadata)
    tp = TopicPartition("bar", 1)
    assert c.controller_id == 1001
    # Make 1001 lead bar-1 (preferred 1002): a restart of 1002 hands leadership over.
    assert c.controlled_shutdown(1002)
    assert state(c, 1).leader == 1001
    c.start(1002)
    assert c.run_until(lambda: isr_full(c), 60_000)
    leader = c.brokers[1001]
    held = []  # the leader's conditional ISR writes, delayed on their way to the store
    leader._apply_alter_isr = lambda request, on_response, proposer: held.append((request, on_response))
    c.kill(1003)  # a follower: once behind, the leader proposes a shrink after the lag time
    c.produce("bar", 1, [b"x"], acks=1)
    assert c.run_until(lambda: any(r.tp == tp for r, _ in held), 10_000)
    proposal = next(r for r, _ in held if r.tp == tp)
    assert set(proposal.new_isr) == {1001, 1002}
    before = state(c, 1)
    # Meanwhile the controller moves leadership back to the preferred replica...
    c.elect_preferred_leaders("bar")
    after = state(c, 1)
    assert after.leader == 1002 and after.leader_epoch == before.leader_epoch + 1
    assert set(after.isr) == {1001, 1002, 1003}
    # ...so the old leader's conditional write, arriving now, loses and is dropped.
    del leader._apply_alter_isr
    real_notify, notified = leader.zk.create_isr_change_notification, []
    leader.zk.create_isr_change_notification = lambda tps: notified.extend(tps) or real_notify(tps)
    answers = []
    leader._apply_alter_isr(proposal, answers.append, leader.replica_manager)
    part = leader.replica_manager.partitions[tp]
    if part.awaits_isr_answer(proposal):
        assert answers[0].error_code == errors.FencedLeaderEpoch.code
    else:  # on ZooKeeper's wall clock the LeaderAndIsr may be there first: nothing is sent
        assert answers == []
    assert state(c, 1) == after
    # Nor announced: /isr_change_notification is for an ISR the leader stored, as in Kafka;
    # one for a lost write had the controller re-read the partition and send every broker
    # an UpdateMetadata for a change that never happened (the 221st review's BR12-05).
    assert notified == []
    del leader.zk.create_isr_change_notification
    c.advance(10)
    assert not part.is_leader and part.leader_epoch == after.leader_epoch
    # The new leader makes its own proposal, from the controller's state.
    assert c.run_until(lambda: set(state(c, 1).isr) == {1002, 1001}, 10_000)



@pytest.mark.parametrize("landed, lost", [(True, ConnectionLoss), (False, ConnectionLoss), (False, SessionExpired)],
                         ids=["write-landed", "write-lost", "session-expired"])
def test_an_isr_write_with_an_unknown_outcome_is_retried_until_the_store_answers(make, landed, lost):
    # The leader's ISR expansion loses its store connection mid-write: with ZooKeeper the
    # write may have landed.  The proposal stays pending and is retried; a retry that finds
    # it stored succeeds.  Dropped, the leader would forget a follower the store has in
    # the ISR (an electable replica) and move the HW without it.  A write refused because
    # the session just expired (before the broker renewed it) is retried too, not raised
    # into the broker's event loop (the eighty-eighth review's BR5-01).  The change it
    # finally writes, or finds written, is announced (/isr_change_notification) either
    # way: the controller learns of it from nothing else (the hundred-and-forty-fifth
    # review's BR8-06, where a retry finding its own write answered without the notice).
    c = make()
    tp = TopicPartition("bar", 0)
    c.kill(1003)
    assert c.run_until(lambda: 1003 not in state(c, 0).isr, 30_000)
    leader = c.brokers[1001]
    real = leader.zk.update_partition_states
    failed = []
    real_notify, notified = leader.zk.create_isr_change_notification, []
    leader.zk.create_isr_change_notification = lambda tps: notified.extend(tps) or real_notify(tps)

    def flaky(states):
        if not failed and tp in states and 1003 in states[tp].isr:
            failed.append(states[tp])
            if landed:
                real(states)
            raise lost("the reply was lost")
        return real(states)

    leader.zk.update_partition_states = flaky
    c.start(1003)
    assert c.run_until(lambda: bool(failed) and 1003 in leader.replica_manager.partitions[tp].isr, 30_000)
    stored = c.brokers[1001].zk.get_partition_states([tp])[tp]
    part = leader.replica_manager.partitions[tp]
    assert set(stored.isr) == set(part.isr) == {1001, 1002, 1003}
    assert part.zk_version == stored.zk_version and not part.isr_state.is_inflight
    assert notified == [tp]


def test_a_leader_not_first_in_its_isr_writes_its_isr_changes_as_the_leader(make):
    # After a preferred election the leader (1002) is no longer first in the ISR it took
    # over, (1001, 1003, 1002): the ISR it writes when a follower falls out still names
    # 1002 as the leader, the broker that proposed it (the hundred-and-forty-fifth review's
    # BR8-24, where the leader was read from the ISR's first member).
    c = make({"replica.lag.time.max.ms": 1_000})  # the leader shrinks before the session expires
    c.kill(1002)  # the leader of bar-1
    assert c.run_until(lambda: state(c, 1).leader == 1001, 2 * SESSION_MS)
    c.start(1002)
    assert c.run_until(lambda: isr_full(c), 60_000)
    c.elect_preferred_leaders("bar")
    assert state(c, 1).leader == 1002 and state(c, 1).isr[0] != 1002
    c.kill(1003)
    assert c.run_until(lambda: 1003 not in state(c, 1).isr, SESSION_MS // 2)
    stored = c.zk.get_partition_states([TopicPartition("bar", 1)])[TopicPartition("bar", 1)]
    assert stored.leader == state(c, 1).leader == 1002 and set(stored.isr) == {1001, 1002}


def test_an_isr_write_that_conflicts_with_a_state_gone_at_the_re_read_is_dropped(make):
    # The ISR write meets another version; before its re-read the partition state is gone
    # (a topic deletion, on a store other processes write).  The write lost: it is answered
    # as such and dropped, not taken for the leader's own (the eighty-eighth review's BR5-11).
    c = make(config={"replica.lag.time.max.ms": 1_000})  # the leader shrinks before the session expires
    # A leader that is not the controller: the controller's writes go through the same client.
    p = next(i for i in BAR if BAR[i][0] != c.controller_id)
    leader = c.brokers[BAR[p][0]]
    follower = next(b for b in BAR[p] if b not in (c.controller_id, leader.broker_id))
    tp = TopicPartition("bar", p)
    real_update, real_get = leader.zk.update_partition_states, leader.zk.get_partition_states
    conflicted, reread = [], []

    def conflict_once(states):
        if conflicted or tp not in states:
            return real_update(states)
        conflicted.append(states[tp])
        return {}, [tp], {}

    def gone_once(tps):
        if conflicted and not reread and list(tps) == [tp]:
            reread.append(c.now_ms())
            return {}
        return real_get(tps)

    leader.zk.update_partition_states, leader.zk.get_partition_states = conflict_once, gone_once
    c.kill(follower)
    assert c.run_until(lambda: follower not in state(c, p).isr, SESSION_MS // 2)  # a later proposal lands
    assert conflicted and reread and follower not in conflicted[0].isr
    part = leader.replica_manager.partitions[tp]
    assert follower not in part.isr and not part.isr_state.is_inflight


def test_a_conflicting_stored_state_is_taken_for_the_leaders_own_write_only_if_it_matches_in_full():
    """After a write with an unknown outcome, the retry's conflict is the leader's own write
    only when the stored state is the proposal at another node version.  An ISR another
    writer stored at the same leader and epochs is not (the twenty-fourth review's B20)."""
    from dataclasses import replace

    from kreplica.broker import _same_state
    from kreplica.protocol import LeaderAndIsr

    proposed = LeaderAndIsr(1001, 3, (1001, 1002), zk_version=7, controller_epoch=2)
    assert _same_state(proposed, replace(proposed, zk_version=8))
    for other in ({"isr": (1001,)}, {"isr": (1001, 1002, 1003)}, {"leader": 1002}, {"leader_epoch": 4},
                  {"controller_epoch": 3}):
        assert not _same_state(proposed, replace(proposed, zk_version=8, **other)), other


@pytest.mark.parametrize("error", [ConnectionLoss, SessionExpired], ids=["connection-loss", "session-expired"])
def test_an_isr_change_notification_lost_with_the_store_is_sent_again(make, error):
    # The leader's ISR expansion lands, then the store is lost before its notification:
    # the controller, which hears of ISR changes only from those, left the reassignment
    # waiting for its new replica to join the ISR (seed 000 step 4) for good.  A session
    # expired just then is no different: the notification is sent again on the renewed
    # session, not raised into the broker's event loop (the eighty-eighth review's BR5-02).
    # It is sent again ALTER_ISR_RETRY_MS later, as a lost ISR write is (the
    # hundred-and-twenty-sixth review's BR7-09): the controller waits no longer than that.
    c = make(topic=False)
    c.create_topic("r", assignment={0: [1001, 1002]})
    leader = c.brokers[c.leader_for("r", 0)]
    real = leader.zk.create_isr_change_notification
    lost, resent = [], []

    def flaky(tps):
        if not lost:
            lost.append(c.now_ms())
            raise error("the store went away right after the ISR write")
        resent.append(c.now_ms())
        return real(tps)

    leader.zk.create_isr_change_notification = flaky
    c.reassign("r", 0, [1002, 1003], timeout_ms=60_000)
    assert lost and state(c, 0, "r").replicas == (1002, 1003)
    assert set(state(c, 0, "r").isr) == {1002, 1003}
    assert resent[0] - lost[0] == ALTER_ISR_RETRY_MS


def _cut_until_expired(c, client, name):
    """``client.<name>`` loses the store from its first call (which pauses the session's
    heartbeats: it expires) until the session has expired, then asks the expired session;
    returns the times it was called."""
    real = getattr(client, name)
    calls = []

    def cut(arg):
        calls.append(c.now_ms())
        if len(calls) == 1:
            client.session.pause_heartbeats()  # a long pause: the session expires
        if not client.session.expired:
            raise ConnectionLoss("the store is out of reach")
        return real(arg)

    setattr(client, name, cut)
    return calls


@pytest.mark.parametrize("call", ["update_partition_states", "create_isr_change_notification"],
                         ids=["isr-write", "notification"])
def test_an_isr_change_retried_across_a_session_expiry_goes_through_the_renewed_session(make, call):
    # The leader's ISR write (or, once it landed, its /isr_change_notification) loses the
    # store, and the leader's session expires before the store is back.  The retry must go
    # through the broker's renewed session: the expired one refuses every call for good,
    # so asked again it kept the expansion pending (the partition could change its ISR no
    # more) or the controller unaware of it, retried every ALTER_ISR_RETRY_MS for ever
    # (the hundred-and-eighty-third review's BR10-03, BR10-04).
    t = RecordingTransport()
    c = make(transport=t, topic=False)
    leader_id, follower = [b for b in (1001, 1002, 1003) if b != c.controller_id]
    c.create_topic("r", assignment={0: [leader_id, follower]})
    tp = TopicPartition("r", 0)
    leader = c.brokers[leader_id]
    c.kill(follower)
    assert c.run_until(lambda: state(c, 0, "r").isr == (leader_id,), 3 * SESSION_MS)
    old = leader.zk
    calls = _cut_until_expired(c, old, call)
    # The controller's LeaderAndIsr to the leader is held: only the leader's retries decide.
    t.hold = lambda src, dst, m: dst == leader_id and isinstance(m, LeaderAndIsrRequest)
    c.start(follower)
    assert c.run_until(lambda: bool(calls) and leader.zk is not old, 4 * SESSION_MS)
    part = leader.replica_manager.partitions[tp]
    assert c.run_until(lambda: not part.isr_state.is_inflight, 10 * ALTER_ISR_RETRY_MS)
    asked = len(calls)
    c.advance(10 * ALTER_ISR_RETRY_MS)
    assert len(calls) == asked  # the expired session is asked no more


# ---- LeaderAndIsr INIT, HW checkpoint, reads between HW and LEO, follower min bytes ----------
def test_a_restarted_broker_deletes_partitions_moved_away_while_it_was_down(make, tmp_path, metadata):
    c = make(metadata=metadata)
    c.produce("bar", 0, [b"x"])
    assert c.controlled_shutdown(1003)
    c.reassign("bar", 0, [1001, 1002])  # its StopReplica(delete) to 1003 is lost
    assert (tmp_path / "broker-1003" / "bar-0").is_dir()
    c.start(1003)
    # The first LeaderAndIsr after a restart carries INIT and lists only bar-1 and bar-2.
    assert c.run_until(lambda: not (tmp_path / "broker-1003" / "bar-0").exists(), 30_000)
    assert c.run_until(lambda: isr_full(c), 60_000)
    assert (tmp_path / "broker-1003" / "bar-1").is_dir() and state(c, 0).replicas == (1001, 1002)


def test_a_restarted_follower_resumes_from_its_checkpointed_high_watermark(make, tmp_path):
    t = RecordingTransport()
    c = make({"replica.high.watermark.checkpoint.interval.ms": 5000}, transport=t)
    tp = TopicPartition("bar", 1)
    c.produce("bar", 1, [b"a%d" % i for i in range(10)])
    c.advance(5000)
    checkpoint = OffsetCheckpointFile(tmp_path / "broker-1003" / "replication-offset-checkpoint")
    assert checkpoint.read()[tp] == 10
    c.produce("bar", 1, [b"b%d" % i for i in range(5)])
    assert c.run_until(lambda: c.offsets("bar", 1)[1003] == (15, 15), 1000)
    c.kill(1003)  # a crash: no checkpoint at shutdown
    assert checkpoint.read()[tp] == 10
    restarted_at = c.now_ms()
    c.start(1003)
    assert c.run_until(lambda: c.offsets("bar", 1).get(1003) == (15, 15), 60_000)
    fetches = [r for at, src, _, r in t.requests(FetchRequest, src=1003) if at >= restarted_at
               and any(fp.tp == tp for fp in r.partitions)]
    # high-watermark truncation: back to the checkpointed HW (not 0, not the LEO of 15).
    assert next(fp.fetch_offset for fp in fetches[0].partitions if fp.tp == tp) == 10


def test_consumer_reads_between_hw_and_leo_are_empty_not_errors(make):
    c = make()
    c.produce("bar", 0, [b"a"])
    c.kill(1003)  # a follower of bar-0 that stays in the ISR until its session expires
    assert c.produce("bar", 0, [b"b"], acks=1) == 1
    assert c.run_until(lambda: c.offsets("bar", 0)[1001] == (2, 1), 100)
    assert [r.value for r in c.fetch("bar", 0, 0)] == [b"a"]
    assert c.fetch("bar", 0, 1) == []  # between HW and LEO
    assert c.fetch("bar", 0, 2) == []  # at the LEO
    with pytest.raises(errors.OffsetOutOfRange):
        c.fetch("bar", 0, 3, retries=0)
    # Once the ISR loses 1003 the HW moves and the record becomes visible.
    assert c.run_until(lambda: c.offsets("bar", 0)[1001] == (2, 2), 60_000)
    assert [r.value for r in c.fetch("bar", 0, 1)] == [b"b"]


def test_follower_fetches_wait_for_replica_fetch_min_bytes(make):
    t = RecordingTransport()
    c = make({"replica.fetch.min.bytes": 1000, "replica.fetch.wait.max.ms": 500}, transport=t)
    leos = lambda: {b: leo for b, (leo, _) in c.offsets("bar", 0).items()}  # noqa: E731
    c.advance(1000)
    # Produce just after 1002's fetch reached the leader (1001) and parked there.
    seen = len(t.requests(FetchRequest, src=1002))
    assert c.run_until(lambda: len(t.requests(FetchRequest, src=1002)) > seen, 1000)
    parked_at = t.requests(FetchRequest, src=1002)[-1][0] + 1
    c.advance(1)
    c.produce("bar", 0, [b"small"], acks=1)
    c.advance(400)
    assert leos() == {1001: 1, 1002: 0, 1003: 0}  # too few bytes: still parked
    assert c.run_until(lambda: leos()[1002] == 1, 1000)
    assert c.now_ms() == parked_at + 500 + 1  # answered at max wait, one hop back
    # Enough bytes answer a parked fetch at once.
    c.advance(50)
    c.produce("bar", 0, [b"y" * 2000], acks=1)
    sent = c.now_ms()
    assert c.run_until(lambda: all(leo == 2 for leo in leos().values()), 1000)
    assert c.now_ms() - sent <= 3


def test_a_zombie_leader_cut_from_the_store_never_acknowledges_acks_all(make):
    c = make()
    tp = TopicPartition("bar", 1)
    acked = [(c.produce("bar", 1, [b"a%d" % i]), b"a%d" % i) for i in range(5)]
    zombie = c.brokers[1002]  # leads bar-1
    zombie.session.set_reachable(False)  # cut from the store, not from the other brokers
    assert c.run_until(lambda: state(c, 1).leader == 1001, 30_000)
    assert zombie.replica_manager.partitions[tp].is_leader  # it cannot know yet
    answers = {}
    for acks in (-1, 1):
        request = ProduceRequest(acks, 2000, (ProducePartition(tp, encode_batch([b"zombie%d" % acks])),))
        c.transport.send(CLIENT_ID, 1002, request, lambda r, acks=acks: answers.setdefault(acks, r))
    acked += [(c.produce("bar", 1, [b"b%d" % i]), b"b%d" % i) for i in range(3)]
    assert c.run_until(lambda: len(answers) == 2, 5000)
    # acks=1 is acknowledged by the zombie alone; acks=all never is: nobody fetches from it.
    assert answers[1].partitions[0].error_code == errors.NONE
    assert answers[-1].partitions[0].error_code == errors.RequestTimedOut.code
    zombie.session.set_reachable(True)  # it learns of the expiry, registers again, follows
    assert c.run_until(lambda: isr_full(c) and not zombie.replica_manager.partitions[tp].is_leader, 30_000)
    assert c.run_until(lambda: len(set(c.offsets("bar", 1).values())) == 1, 30_000)
    values = {r.offset: r.value for r in c.fetch("bar", 1, 0)}
    assert all(values[o] == v for o, v in acked)
    assert not {b"zombie-1", b"zombie1"} & set(values.values())  # the zombie's appends were truncated


# ---- unclean restarts across controller failovers -------------------------------------------
def test_a_follower_back_from_a_crash_keeps_its_isr_place_at_the_next_failover(make, metadata):
    """1003 crashes (its logs do not close cleanly, so its registration says so), comes
    back and re-joins every ISR by fetching again; the controller in office handled the
    restart and recorded it. When that controller dies, its successor leaves 1003 in
    the ISRs it earned back. It used to take it out again (the leaders' ISR writes
    carry the controller epoch 1003 registered with), which a follower that cannot
    fetch at that moment -- paused, cut off -- does not recover from in time."""
    t = RecordingTransport()
    c = make({"zookeeper.session.timeout.ms": 4000, "replica.lag.time.max.ms": 30_000},
             transport=t, metadata=metadata)
    assert c.controller_id == 1001
    c.kill(1003)
    c.start(1003)
    assert c.brokers[1003].replica_manager.recovered_uncleanly
    # On the wall clock (ZooKeeper), 1003 registers again and the ISRs still list it from
    # before the crash a moment before the controller has handled the restart: wait for the
    # controller's record of it, and for the ISRs it earned back after that.
    assert c.run_until(lambda: c.brokers[1003].controller is not None
                       and c.zk.get_unclean_shutdowns_handled([1003]) == {1003: c.zk.get_broker_epoch(1003)}
                       and isr_full(c), 60_000)
    assert c.zk.get_broker(1003).unclean_shutdown_controller_epoch == 1
    # From here on 1003 cannot fetch from 1002: out of bar-1's ISR, it could not get back.
    t.hold = lambda src, dst, m: src == 1003 and dst == 1002 and isinstance(m, FetchRequest)
    c.kill(1001)                                     # the controller, and bar-0's leader
    assert c.run_until(lambda: c.controller_id not in (None, 1001)
                       and state(c, 0).leader not in (-1, 1001), 60_000)
    led = state(c, 1)
    assert led.leader == 1002 and set(led.isr) == {1002, 1003}


@pytest.mark.parametrize("gone", ["stopped", "deleted"])
def test_a_retried_isr_write_stops_once_its_partition_moved_on(make, gone):
    # The leader's store connection is lost while it proposes; before the store answers,
    # the proposal is overtaken (here: the replica is stopped, or deleted as a StopReplica
    # with delete does).  The retries must stop, or a dead proposal could land later -- in
    # a topic re-created under the same name (the hundred-and-forty-fifth review's BR8-05:
    # a replica no longer hosted at all, not only one whose proposal was overtaken).
    from kreplica.meta.store import ConnectionLoss

    c = make()
    tp = TopicPartition("bar", 1)
    leader = c.brokers[1002]                      # not the controller (1001)
    c.kill(1003)
    assert c.run_until(lambda: 1003 not in state(c, 1).isr, 30_000)
    attempts = []

    def unreachable(states):
        if tp in states:
            attempts.append(c.scheduler.now_ms())
        raise ConnectionLoss("cut from the store")

    leader.zk.update_partition_states = unreachable
    c.start(1003)                                 # caught up, it is proposed for the ISR
    assert c.run_until(lambda: len(attempts) >= 3, 30_000)
    assert attempts[-1] - attempts[-2] == ALTER_ISR_RETRY_MS
    if gone == "stopped":
        leader.replica_manager.partitions[tp].make_offline()
    else:
        leader.replica_manager._delete_partition(tp)
        assert tp not in leader.replica_manager.partitions
    seen = len(attempts)
    c.advance(2000)
    assert len(attempts) == seen


# ---- broker sessions and lifecycle under a flapping store ------------------------------------

def _cut_new_sessions_of(c, broker_id, cut):
    """Open broker ``broker_id``'s next sessions cut off from the store while ``cut(session)``
    says so (a flap right after a reconnection); returns the sessions it opened."""
    opened = []
    open_session = c.store.session

    def session(name="", on_expired=None):
        s = open_session(name, on_expired)
        if name == f"broker-{broker_id}":
            opened.append(s)
            if cut(s, len(opened)):
                s.set_reachable(False)
        return s

    c.store.session = session
    return opened


def test_only_the_session_in_use_may_tear_the_broker_down_when_it_expires(make):
    """A session the broker gave up on while the store flapped, expiring later, used to
    replace the session that had registered since: the broker ran on with broker epoch
    -1 and every LeaderAndIsr to it was answered STALE_BROKER_EPOCH, for good."""
    c = make()
    opened = _cut_new_sessions_of(c, 1003, lambda s, n: n == 1)
    broker = c.brokers[1003]
    broker.session.pause_heartbeats()  # a long pause: the session expires
    c.advance(SESSION_MS + 1_000)
    assert opened, "the broker did not renew its session"
    c.scheduler.call_later(25_000, opened[0].set_reachable, True)  # the flap ends
    c.advance(120_000)
    assert broker.broker_epoch == broker.session.session_id != -1
    assert c.zk.get_broker_epoch(1003) == broker.broker_epoch
    c.kill(1002)
    c.advance(SESSION_MS + 30_000)
    for p in c.describe("bar").partitions:
        assert p.leader in (1001, 1003) and 1003 in p.isr



def test_a_session_renewal_that_cannot_reach_the_store_is_tried_again(make):
    """After an expiry the new session could not be opened (ZooKeeper's ensemble out of
    reach, as ZooKeeperStore.session raises then): the broker tries again until it can,
    instead of staying unregistered for good."""
    c = make()
    real_session = c.store.session
    refused = []

    def flaky(name="", on_expired=None):
        if name == "broker-1003" and len(refused) < 2:
            refused.append(c.now_ms())
            raise ConnectionLoss("the store is out of reach")
        return real_session(name, on_expired)

    c.store.session = flaky
    mark = len(c.timeline)
    c.brokers[1003].session.pause_heartbeats()  # a long pause: the session expires
    assert c.run_until(lambda: len(refused) == 2 and 1003 in c.zk.get_live_broker_ids(), 60_000)
    # One expiry, told once: a refused renewal is tried again, not the expiry handled again.
    assert [e.kind for e in c.timeline[mark:] if e.kind == "session_expired"] == ["session_expired"]
    # A second apart, the broker's renewal backoff: an unreachable store is not asked twice
    # as often (the hundred-and-seventh review's BR6-11).
    assert refused[1] - refused[0] >= 1000
    assert c.brokers[1003].broker_epoch == c.zk.get_broker_epoch(1003) != -1
    assert c.run_until(lambda: isr_full(c), 60_000)

def test_an_observer_hears_a_broker_stopped_or_killed_once_it_no_longer_runs(make):
    """``broker_killed`` and ``broker_stopped`` are told once the broker is down: an
    observer that asks, as it hears one, which brokers run is not told the one it has
    just heard go."""
    c = make()
    heard = []

    def observe(event):
        if event.kind in ("broker_killed", "broker_stopped"):
            heard.append((event.kind, event.broker, c.live_brokers()))

    c.observers.append(observe)
    c.kill(1003)
    c.controlled_shutdown(1002)
    assert heard == [("broker_killed", 1003, [1001, 1002]), ("broker_stopped", 1002, [1001])]


def _start_with_the_store_out_of_reach(c, broker: int) -> None:
    """``c.start(broker)`` while no store session can be opened: it raises ConnectionLoss
    (the store is reachable again afterwards)."""
    real_session = c.store.session

    def unreachable(name="", on_expired=None):
        raise ConnectionLoss("the store is out of reach")

    c.store.session = unreachable
    try:
        with pytest.raises(ConnectionLoss):
            c.start(broker)
    finally:
        c.store.session = real_session


def test_a_broker_that_cannot_reach_the_store_at_start_is_not_left_half_started(make):
    c = make()
    c.kill(1003)
    c.advance(SESSION_MS + 1_000)
    _start_with_the_store_out_of_reach(c, 1003)
    assert not c.brokers[1003].alive and 1003 not in c.live_brokers()
    c.start(1003)  # it may be started again once the store is back
    assert c.run_until(lambda: isr_full(c), 60_000)


def test_a_broker_killed_while_its_controlled_shutdown_is_answered_did_not_shut_down_cleanly():
    c = Cluster.embedded(data_dir=None, config=CONFIG, latency_ms=5)
    try:
        c.create_topic("bar", partitions=3, replication_factor=3, assignment=BAR)
        victim = next(b for b in (1001, 1002, 1003) if b != c.controller_id)
        done = []
        c.brokers[victim].controlled_shutdown(done.append)  # answered at +10 ms
        c.advance(7)
        c.kill(victim)  # the answer is on the wire
        c.advance(1_000)
        assert done == []
        kinds = [e.kind for e in c.timeline if e.broker == victim]
        assert kinds[-1] == "broker_killed" and "controlled_shutdown_done" not in kinds
    finally:
        c.close()


def test_cluster_controlled_shutdown_of_a_broker_killed_midway_returns_false():
    c = Cluster.embedded(data_dir=None, config=CONFIG, latency_ms=5)
    try:
        c.create_topic("bar", partitions=3, replication_factor=3, assignment=BAR)
        victim = next(b for b in (1001, 1002, 1003) if b != c.controller_id)
        c.scheduler.call_later(7, c.kill, victim)
        assert c.controlled_shutdown(victim) is False
        assert c.now_ms() < 1_000  # it did not wait out its timeout
    finally:
        c.close()


# ---- broker request handling (twenty-fourth review) ---------------------------------------
def _answer_of(broker, request):
    answers = []
    broker._handle(CLIENT_ID, request, answers.append)
    return answers


@pytest.mark.parametrize("kind", ["LeaderAndIsr", "StopReplica", "UpdateMetadata"])
def test_every_controller_request_naming_another_registration_is_refused_as_stale(make, kind):
    from kreplica.protocol import StopReplicaRequest
    c = make(topic=False)
    b = c.brokers[1001]
    current = b.session.session_id
    assert current > 0
    build = {"LeaderAndIsr": lambda e: LeaderAndIsrRequest(c.controller_id, 1, (), broker_epoch=e),
             "StopReplica": lambda e: StopReplicaRequest(c.controller_id, 1, (), broker_epoch=e),
             "UpdateMetadata": lambda e: UpdateMetadataRequest(c.controller_id, 1, (), (), broker_epoch=e)}[kind]
    # An earlier session (a request delayed past a restart or a renewal) as well as any
    # other: refusing only ids above the current one let the old registration's requests in
    # (the hundred-and-eighty-third review's BR10-17).
    for other in (current + 1000, current - 1):
        [refused] = _answer_of(b, build(other))
        assert refused.error_code == errors.StaleBrokerEpoch.code, other
        # Answered in its own response type, as Kafka answers every request (BR6-06).
        assert type(refused).__name__ == f"{kind}Response"
    assert [a.error_code for a in _answer_of(b, build(current))] != [errors.StaleBrokerEpoch.code]
    unchecked = {"LeaderAndIsr": lambda: LeaderAndIsrRequest(c.controller_id, 1, ()),
                 "StopReplica": lambda: StopReplicaRequest(c.controller_id, 1, ()),
                 "UpdateMetadata": lambda: UpdateMetadataRequest(c.controller_id, 1, (), ())}[kind]
    # Built without one, a request carries broker epoch -1: unchecked, never stale.
    assert [a.error_code for a in _answer_of(b, unchecked())] != [errors.StaleBrokerEpoch.code]


def test_a_controlled_shutdown_sent_to_a_broker_that_is_not_the_controller_is_refused(make):
    c = make(topic=False)
    other = next(b for bid, b in c.brokers.items() if bid != c.controller_id)
    answers = _answer_of(other, ControlledShutdownRequest(1001, c.brokers[1001].broker_epoch))
    assert [a.error_code for a in answers] == [errors.NotController.code]


def test_a_controlled_shutdown_sent_to_a_restarted_controller_not_registered_yet_is_refused_and_retried(make):
    """The controller crashed and came straight back: until its old session expires
    ``/controller`` still names it, so another broker's controlled shutdown goes to the new
    process, which has not registered yet and has no controller candidate at all.  It is
    refused NOT_CONTROLLER like any broker's that is not the controller, and the shutdown
    tries again until the next controller carries it out (the hundred-and-eighty-third
    review's BR10-02, where the request was handed to the missing candidate and the
    AttributeError crashed the process's event loop)."""
    t = RecordingTransport()
    c = make(transport=t)
    ctl = c.controller_id
    other = next(b for b in (1001, 1002, 1003) if b != ctl)
    c.kill(ctl)
    c.start(ctl)
    restarted = c.brokers[ctl]
    assert restarted.controller is None and c.controller_id == ctl
    assert c.controlled_shutdown(other, timeout_ms=4 * SESSION_MS)
    to_restarted = [r for _, s, d, r in t.requests(ControlledShutdownRequest, src=other) if d == ctl]
    assert to_restarted  # the first attempt reached the process not registered yet
    assert other not in {p.leader for p in c.describe("bar").partitions}


def test_a_controlled_shutdown_refused_with_an_error_is_not_taken_as_done(make):
    """An error answer lists no partitions remaining: it must still count as a failed attempt."""
    from kreplica.protocol import ControlledShutdownResponse
    t = RecordingTransport()
    c = make({"controlled.shutdown.max.retries": 2, "controlled.shutdown.retry.backoff.ms": 500},
             transport=t, topic=False)
    b = c.brokers[1002]
    send = b.transport.send

    def refusing(src, dst, request, on_response):
        if isinstance(request, ControlledShutdownRequest):
            return c.scheduler.call_soon(on_response, ControlledShutdownResponse(errors.NotController.code))
        return send(src, dst, request, on_response)

    b.transport = type("T", (), {"send": staticmethod(refusing), "unregister": t.unregister})()
    done = []
    b.controlled_shutdown(done.append)
    assert c.run_until(lambda: bool(done), 10_000)
    assert done == [False] and not b.alive


def test_a_controlled_shutdown_attempt_refused_with_an_error_is_retried(make):
    """The first attempt reaches a broker that lost the controllership meanwhile (NOT_CONTROLLER):
    it failed, and the next attempt, a backoff later, goes to the controller and succeeds.
    Kafka 0.10's doControlledShutdown retries on any error code, as on partitions remaining
    (the hundred-and-forty-fifth review's BR8-15, where an error ended the shutdown as failed)."""
    from kreplica.protocol import ControlledShutdownResponse
    c = make({"controlled.shutdown.max.retries": 3, "controlled.shutdown.retry.backoff.ms": 500})
    b = c.brokers[1002]
    send, refused = b.transport.send, []

    def refusing_once(src, dst, request, on_response):
        if isinstance(request, ControlledShutdownRequest) and not refused:
            refused.append(c.now_ms())
            return c.scheduler.call_soon(on_response, ControlledShutdownResponse(errors.NotController.code))
        return send(src, dst, request, on_response)

    b.transport = type("T", (), {"send": staticmethod(refusing_once), "unregister": send.__self__.unregister})()
    assert c.controlled_shutdown(1002) is True
    assert refused and not b.alive and state(c, 1).leader != 1002


def test_controlled_shutdown_with_no_retries_makes_no_attempt(make):
    t = RecordingTransport()
    c = make({"controlled.shutdown.max.retries": 0}, transport=t)
    assert c.controlled_shutdown(1002) is False
    assert t.requests(ControlledShutdownRequest, src=1002) == []
    assert not c.brokers[1002].alive


def test_the_leader_and_isr_event_is_told_only_by_the_leader_it_names(make):
    c = make()
    events = [e for e in c.timeline if e.kind == "leader_and_isr"]
    assert {e.broker for e in events} == {1001, 1002, 1003}
    assert all(e.details["leader"] == e.broker for e in events)


def test_the_leader_and_isr_event_names_the_epoch_of_the_controller_that_sent_it(make):
    # After a controller failover the new controller tells each leader its partition again;
    # the states it sends were written under the old epoch, but the event names the epoch
    # of the controller that sent them (the eighty-eighth review's BR5-17).
    c = make(topic=False)
    old = c.controller_id
    others = [b for b in (1001, 1002, 1003) if b != old]
    c.create_topic("r", assignment={0: others, 1: others[::-1]})  # the old controller hosts none
    assert c.run_until(lambda: isr_full(c, "r"), 60_000)
    told = len(c.timeline)
    c.brokers[old].stop()
    assert c.run_until(lambda: c.controller_id not in (None, old), 10_000)
    epoch = c.zk.get_controller_epoch()[0]
    assert c.run_until(lambda: any(e.kind == "leader_and_isr" for e in c.timeline[told:]), 10_000)
    c.advance(1_000)
    resent = [e for e in c.timeline[told:] if e.kind == "leader_and_isr"]
    assert {e.details["controller_epoch"] for e in resent} == {epoch}
    stored = c.zk.get_partition_states([e.details["tp"] for e in resent])
    assert any(s.controller_epoch < epoch for s in stored.values())  # not all rewritten by it


def test_a_restarted_broker_has_no_broker_epoch_until_its_own_session_registers(make):
    """The crashed session still holds /brokers/ids/<id>: the new process must not claim an epoch yet,
    or its controlled shutdown names a session the controller does not know and is refused."""
    c = make()
    c.kill(1002)
    c.start(1002)
    b = c.brokers[1002]
    c.advance(REGISTRATION_RETRY_MS * 2)
    assert b.alive and b.broker_epoch == -1
    assert c.run_until(lambda: b.broker_epoch == b.session.session_id, 3 * SESSION_MS)


def test_a_restarted_broker_not_registered_yet_shuts_down_without_naming_a_session(make):
    """A controlled shutdown begun while the crashed predecessor's session still holds the
    registration: the request names no broker epoch (-1), not the session the process has
    opened, which the controller has never read and would refuse as stale until the
    registration lands (the hundred-and-twenty-sixth review's BR7-14).  Unchecked, it is
    carried out at once, as Kafka's controller takes a request without an epoch."""
    t = RecordingTransport()
    c = make(transport=t)
    victim = next(b for b in (1001, 1002, 1003) if b != c.controller_id)
    c.kill(victim)
    c.start(victim)
    b = c.brokers[victim]
    c.advance(10)
    assert b.alive and b.broker_epoch == -1
    answers = []
    send = b.transport.send

    def recording(src, dst, request, on_response):
        if isinstance(request, ControlledShutdownRequest):
            return send(src, dst, request, lambda r: (answers.append(r), on_response(r)))
        return send(src, dst, request, on_response)

    b.transport.send = recording
    done = []
    b.controlled_shutdown(done.append)
    assert c.run_until(lambda: bool(answers), 5_000)
    [(_, _, _, request)] = t.requests(ControlledShutdownRequest, src=victim)
    assert request.broker_epoch == -1
    assert answers[0].error_code == errors.NONE


def test_a_broker_killed_while_its_controlled_shutdown_backs_off_sends_no_further_attempt(make):
    c, t = lone_leader(make, retries=3, backoff_ms=1000)
    b = c.brokers[1001]
    done = []
    b.controlled_shutdown(done.append)
    c.advance(100)  # the first attempt is answered: partitions remain, a retry is due in 1 s
    assert len(t.requests(ControlledShutdownRequest, src=1001)) == 1
    c.kill(1001)
    c.advance(5000)
    assert len(t.requests(ControlledShutdownRequest, src=1001)) == 1 and done == []


def test_the_timeout_of_an_answered_controlled_shutdown_attempt_starts_no_second_retry(make):
    """The socket timeout (1 s) fires during the backoff (5 s) after an answer: it must not retry too."""
    c, t = lone_leader(make, retries=3, backoff_ms=5000)
    c.brokers[1001].config["controller.socket.timeout.ms"] = 1000
    assert c.controlled_shutdown(1001, timeout_ms=60_000) is False
    attempts = [at for at, *_ in t.requests(ControlledShutdownRequest, src=1001)]
    assert len(attempts) == 3 and all(b - a >= 5000 for a, b in zip(attempts, attempts[1:]))


def _expire_while_renewals_are_refused(c, broker_id):
    """Expire ``broker_id``'s session while none of its new sessions can reach the store;
    returns, once a renewal was refused, the store's own ``session`` to put back."""
    real_session = c.store.session
    refused = []

    def unreachable(name="", on_expired=None):
        if name == f"broker-{broker_id}":
            refused.append(c.now_ms())
            raise ConnectionLoss("the store is out of reach")
        return real_session(name, on_expired)

    c.store.session = unreachable
    c.brokers[broker_id].session.pause_heartbeats()  # a long pause: the session expires
    assert c.run_until(lambda: bool(refused), 2 * SESSION_MS)
    return real_session


def test_a_broker_whose_session_renewal_cannot_reach_the_store_refuses_its_old_registrations_requests(make):
    """Between an expiry and a renewal that reaches the store the broker has no session: a
    controller request still naming the expired registration must be refused as stale, not applied."""
    c = make()
    b = c.brokers[1003]
    old_epoch = b.broker_epoch
    real_session = _expire_while_renewals_are_refused(c, 1003)
    assert b.alive and b.session is None
    late = LeaderAndIsrRequest(c.controller_id, b.replica_manager.controller_epoch, (), broker_epoch=old_epoch)
    assert [a.error_code for a in _answer_of(b, late)] == [errors.StaleBrokerEpoch.code]
    c.store.session = real_session
    assert c.run_until(lambda: b.broker_epoch == c.zk.get_broker_epoch(1003) != -1, 10_000)
    assert b.broker_epoch != old_epoch


def test_the_late_answer_of_a_timed_out_controlled_shutdown_attempt_is_ignored(make):
    """Attempt 1's answer is held past its timeout (1 s) and arrives during attempt 2's backoff:
    it must not start a second chain of retries beside attempt 2's."""
    from kreplica.protocol import ControlledShutdownResponse
    c, t = lone_leader(make, retries=5, backoff_ms=1000)
    c.brokers[1001].config["controller.socket.timeout.ms"] = 1000
    held = []

    def hold(src, dst, m):
        if not isinstance(m, ControlledShutdownResponse) or held:
            return False
        held.append(c.now_ms())
        c.scheduler.call_later(2_500, t.release)  # after attempt 2 was answered, before attempt 3
        return True

    t.hold = hold
    assert c.controlled_shutdown(1001, timeout_ms=60_000) is False
    assert held and t.held == [] and c.now_ms() - held[0] > 2_500  # the held answer arrived meanwhile
    attempts = [at for at, *_ in t.requests(ControlledShutdownRequest, src=1001)]
    assert len(attempts) == 5 and all(b - a >= 1000 for a, b in zip(attempts, attempts[1:]))


def test_the_late_answer_of_an_earlier_attempt_is_not_taken_for_the_attempt_in_flight(make):
    """Attempt 1 ("partitions remain": 1002 is down) times out, its answer held on the wire;
    1002 comes back meanwhile, and the answer arrives just as the last attempt, 2, is sent.
    Taken for attempt 2's, it ended the shutdown as failed though attempt 2 moved the
    leadership (the hundred-and-eighty-third review's BR10-18): each answer counts for the
    attempt it answers."""
    from kreplica.protocol import ControlledShutdownResponse
    c, t = lone_leader(make, retries=2, backoff_ms=5_000)
    b = c.brokers[1001]
    b.config["controller.socket.timeout.ms"] = 5_000

    first = []

    def hold(src, dst, m):
        if isinstance(m, ControlledShutdownResponse) and dst == 1001 and not first:
            first.append(m)
            return True  # attempt 1's answer
        if isinstance(m, ControlledShutdownRequest) and src == 1001 and t.held:
            t.release()  # attempt 1's answer arrives as attempt 2 leaves
        return False

    t.hold = hold
    done = []
    b.controlled_shutdown(done.append)
    c.start(1002)
    assert c.run_until(lambda: bool(done), 60_000)
    assert first and first[0].partitions_remaining and t.held == []
    assert done == [True] and len(t.requests(ControlledShutdownRequest, src=1001)) == 2
    assert state(c, 0, "solo").leader == 1002


def test_a_request_of_a_type_no_broker_handles_is_answered_disconnected(make):
    # An unknown request type is answered as a refused connection, at once: the sender's
    # retry logic then treats it like an unreachable broker instead of waiting forever
    # (or taking some other answer for the broker's word).
    from kreplica.transport import DISCONNECTED

    c = make(topic=False)
    box = []
    c.transport.send(CLIENT_ID, 1001, ("not", "a", "request"), box.append)
    assert c.run_until(lambda: bool(box), 1_000)
    assert box == [DISCONNECTED]


def test_a_start_that_cannot_reach_the_store_is_reported_as_a_stop_not_a_crash(make):
    # The half-started broker closes what it opened cleanly: the timeline says it stopped,
    # and the next start finds no crash to recover from.
    c = make()
    c.brokers[1003].stop()
    told = len(c.timeline)
    _start_with_the_store_out_of_reach(c, 1003)
    # Never told as started: the start failed (the hundred-and-seventh review's BR6-04).
    assert [e.kind for e in c.timeline[told:] if e.broker == 1003] == ["broker_stopped"]
    c.start(1003)
    assert not c.brokers[1003].replica_manager.recovered_uncleanly


def test_a_start_that_fails_after_registering_closes_the_session_it_registered_with(make, monkeypatch):
    # The session opened and the registration landed, then the rest of the start failed
    # (here the controller candidate's startup): start() undoes it, closing that session,
    # so no registration of a dead broker is left behind in /brokers/ids -- the session
    # must be the broker's before its registration is attempted, not after.
    import kreplica.broker as broker_module

    c = make()
    c.brokers[1003].stop()
    real = broker_module.KafkaController.startup

    def failing(self):
        if self.broker_id == 1003:
            raise RuntimeError("the controller candidate could not start")
        return real(self)

    monkeypatch.setattr(broker_module.KafkaController, "startup", failing)
    with pytest.raises(RuntimeError):
        c.start(1003)
    assert not c.brokers[1003].alive
    assert 1003 not in c.zk.get_live_broker_ids()  # closed at once, no session timeout awaited
    monkeypatch.setattr(broker_module.KafkaController, "startup", real)
    c.start(1003)
    assert c.run_until(lambda: isr_full(c), 60_000)


def test_a_registration_that_loses_the_store_is_tried_again_in_place(make, monkeypatch):
    # The store connection drops during the registration write of a (re)start: the broker
    # retries it on the same session, as it retries a node its crashed predecessor holds,
    # instead of failing the start.
    from kreplica.meta.kafka_zk_client import KafkaZkClient

    c = make()
    c.brokers[1003].stop()
    real = KafkaZkClient.register_broker
    lost = []

    def flaky(self, broker_id, **kwargs):
        if broker_id == 1003 and not lost:
            lost.append(c.now_ms())
            raise ConnectionLoss("the store went away during the registration")
        return real(self, broker_id, **kwargs)

    monkeypatch.setattr(KafkaZkClient, "register_broker", flaky)
    c.start(1003)
    session = c.brokers[1003].session
    assert lost and c.brokers[1003].alive
    assert c.run_until(lambda: 1003 in c.zk.get_live_broker_ids(), REGISTRATION_RETRY_MS + 100)
    assert c.brokers[1003].session is session and c.brokers[1003].broker_epoch == session.session_id
    assert c.run_until(lambda: isr_full(c), 60_000)


def test_a_session_that_expires_before_its_first_registration_is_renewed(make, monkeypatch):
    # A (re)started broker's registration keeps losing the store, and the session expires
    # before any attempt lands: the broker has no controller candidate yet, and it still
    # opens a new session and registers through it.  Kept on the expired session, it would
    # retry the registration there, be refused for good and never join the cluster again
    # (the hundred-and-eighty-third review's BR10-12).
    from kreplica.meta.kafka_zk_client import KafkaZkClient

    c = make()
    c.brokers[1003].stop()
    real = KafkaZkClient.register_broker
    cut = [True]

    def unreachable_while_cut(self, broker_id, **kwargs):
        if broker_id == 1003 and cut[0]:
            raise ConnectionLoss("the store is out of reach for the registration")
        return real(self, broker_id, **kwargs)

    monkeypatch.setattr(KafkaZkClient, "register_broker", unreachable_while_cut)
    c.start(1003)
    broker = c.brokers[1003]
    first = broker.session
    first.pause_heartbeats()  # a long pause too: the session expires unregistered
    assert c.run_until(lambda: first.expired, 2 * SESSION_MS)
    assert broker.controller is None
    cut[0] = False
    assert c.run_until(lambda: 1003 in c.zk.get_live_broker_ids(), 10 * REGISTRATION_RETRY_MS)
    assert broker.session is not first and broker.broker_epoch == broker.session.session_id
    assert c.run_until(lambda: isr_full(c), 60_000)


def _out_of_reach(c, calls, what):
    """A store call that notes when it was made (in ``calls``) and never reaches the store."""
    def unreachable(*args, **kwargs):
        calls.append(c.now_ms())
        raise ConnectionLoss(f"the store is out of reach for {what}")
    return unreachable


def _silent_once_killed(c, broker, calls, quiet_ms):
    """Kill ``broker``: True if the dead process makes none of ``calls`` in the next ``quiet_ms``."""
    broker.kill()
    killed_at = c.now_ms()
    c.advance(quiet_ms)
    return [t for t in calls if t > killed_at] == []


def test_a_broker_stopped_in_the_instant_its_session_expires_does_not_report_the_expiry(make):
    # The store expires the session and, before the notice reaches the broker, the broker
    # stops cleanly (closing a session already expired does nothing): the notice then finds
    # a stopped process, which neither renews nor tells session_expired after its
    # broker_stopped (the hundred-and-forty-fifth review's BR8-16).
    c = make(topic=False)
    b = c.brokers[1003]
    s = b.session
    expire = s._expire

    def expire_then_stop():
        expire()
        b.stop()

    s._expire = expire_then_stop
    s.pause_heartbeats()
    assert c.run_until(lambda: not b.alive, 2 * SESSION_MS)
    c.advance(1_000)
    kinds = [e.kind for e in c.timeline if e.broker == 1003]
    assert kinds[-1] == "broker_stopped" and "session_expired" not in kinds
    assert b.session is s and 1003 not in c.zk.get_live_broker_ids()


def test_a_dead_leader_stops_retrying_its_isr_change_notification(make):
    # The leader's ISR shrink lands but its notification cannot reach the store; the
    # leader then dies.  Its retries end with the process: a dead process sends nothing.
    c = make(config={"replica.lag.time.max.ms": 1_000}, topic=False)  # shrinks before the session expires
    c.create_topic("r", assignment={0: [1001, 1002, 1003]})
    leader = c.brokers[c.leader_for("r", 0)]
    follower = next(b for b in (1001, 1002, 1003) if b != leader.broker_id)
    calls = []
    leader.zk.create_isr_change_notification = _out_of_reach(c, calls, "the notification")
    c.kill(follower)
    assert c.run_until(lambda: len(calls) >= 3, SESSION_MS // 2)  # the shrink landed, its notice retried
    assert follower not in state(c, 0, "r").isr
    assert _silent_once_killed(c, leader, calls, 10 * ALTER_ISR_RETRY_MS)


def test_a_controlled_shutdown_has_stopped_the_broker_when_it_reports_done(make):
    # A rolling restart starts the broker again from the shutdown's answer: by then the
    # process has stopped (its session closed, its node gone), so the start is a new
    # process, not refused as a second one (the eighty-eighth review's BR5-08).
    # The timeline tells the shutdown's outcome, then the stop, as Kafka logs "controlled
    # shutdown succeeded" before it shuts the rest down (the hundred-and-twenty-sixth
    # review's BR7-28).
    c = make()
    seen = []

    def restart(ok):
        seen.append((ok, c.brokers[1003].alive, 1003 in c.zk.get_live_broker_ids()))
        c.start(1003)

    began = len(c.timeline)
    c.brokers[1003].controlled_shutdown(restart)
    assert c.run_until(lambda: bool(seen), 30_000)
    assert seen == [(True, False, False)] and c.brokers[1003].alive
    kinds = [e.kind for e in c.timeline[began:] if e.broker == 1003]
    assert kinds[:2] == ["controlled_shutdown_done", "broker_stopped"]
    assert c.run_until(lambda: isr_full(c), 60_000)


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_a_brokers_stop_or_crash_is_told_once_the_broker_is_down(make, how):
    # An observer told broker_stopped (or broker_killed) acts on a broker that is down:
    # its logs closed or abandoned, its controller candidate gone, and after a clean stop
    # its registration already removed from /brokers/ids (a crash leaves it to expire).
    c = make()
    b = c.brokers[1003]
    seen = []

    def on_event(e):
        if e.broker == 1003 and e.kind in ("broker_stopped", "broker_killed"):
            seen.append((e.kind, b.replica_manager.running, b.controller._running,
                         1003 in c.zk.get_live_broker_ids(), b.session.killed))

    c.observers.append(on_event)
    getattr(b, how)()
    if how == "stop":
        assert seen == [("broker_stopped", False, False, False, False)]
    else:
        assert seen == [("broker_killed", False, False, True, True)]


def test_a_controlled_shutdown_that_cannot_look_up_the_controller_tries_again(make):
    # The first attempt cannot read /controller (the store connection dropped): that attempt
    # failed, and the next one, a backoff later, moves the leaderships as usual.
    c = make()
    broker = c.brokers[1003]
    real = broker.zk.get_controller_id
    lost = []

    def flaky(*args, **kwargs):
        if not lost:
            lost.append(c.now_ms())
            raise ConnectionLoss("the store went away")
        return real(*args, **kwargs)

    broker.zk.get_controller_id = flaky
    assert c.controlled_shutdown(1003)
    assert lost and all(p.leader != 1003 for p in c.describe("bar").partitions)


def test_stopping_a_killed_broker_does_not_make_its_crash_a_clean_stop(make):
    # A crash is final for the process: a stop() reaching the dead Broker afterwards (a
    # teardown, a late callback) must not close its abandoned session, checkpoint its logs
    # as cleanly closed or tell a second departure (the eighty-eighth review's BR5-07).
    c = make()
    b = c.brokers[1003]
    b.kill()
    told = len(c.timeline)
    b.stop()
    b.kill()
    assert [e.kind for e in c.timeline[told:]] == []
    assert 1003 in c.zk.get_live_broker_ids()  # the crashed session holds its node until it expires
    assert c.run_until(lambda: 1003 not in c.zk.get_live_broker_ids(), 2 * SESSION_MS)
    c.start(1003)
    assert c.brokers[1003].replica_manager.recovered_uncleanly


def test_a_clean_stop_deregisters_the_broker_at_once(make):
    # A stopped process closes its session: its registration goes with it, and the controller
    # acts on the departure now, not a session timeout later as for a crash.
    c = make()
    c.brokers[1003].stop()
    c.advance(100)
    assert 1003 not in c.zk.get_live_broker_ids()
    assert c.run_until(lambda: all(1003 not in p.isr for p in c.describe("bar").partitions), 1_000)


def test_a_controlled_shutdown_names_the_registration_it_comes_from(make):
    # KIP-380: the request of a broker that crashed mid shutdown and restarted must not shut
    # down its next incarnation.  Held on the wire across the restart, it names the old
    # registration, and the controller refuses it: the new incarnation keeps its place.
    t = RecordingTransport()
    c = make(transport=t)
    victim = next(b for b in (1001, 1002, 1003) if b != c.controller_id)
    t.hold = lambda src, dst, m: isinstance(m, ControlledShutdownRequest) and src == victim
    c.brokers[victim].controlled_shutdown(lambda ok: None)
    c.advance(10)
    assert len(t.held) == 1 and t.held[0][0].broker_epoch == c.zk.get_broker_epoch(victim) != -1
    c.kill(victim)
    c.start(victim)
    assert c.run_until(lambda: c.brokers[victim].controller is not None and isr_full(c), 60_000)
    assert c.elect_preferred_leaders("bar") == {}  # the new incarnation leads its preferred partition
    leaders = {p.partition: p.leader for p in c.describe("bar").partitions}
    assert victim in leaders.values()
    t.hold = lambda src, dst, m: False
    t.release()
    c.advance(5_000)
    assert isr_full(c) and {p.partition: p.leader for p in c.describe("bar").partitions} == leaders


def test_a_broker_whose_session_expired_stands_for_controller_again(make):
    c = make()
    broker = c.brokers[1003]
    told = len(c.timeline)
    broker.session.pause_heartbeats()  # a long pause: the session expires, a new one registers
    c.advance(SESSION_MS + 1_000)
    assert c.run_until(lambda: broker.broker_epoch != -1 and 1003 in c.zk.get_live_broker_ids(), 10_000)
    # The timeline (and the demo, which prints it) tells the expiry, then the new registration
    # (the eighty-eighth review's BR5-14, BR5-18).
    kinds = [e.kind for e in c.timeline[told:] if e.broker == 1003]
    assert [k for k in kinds if k in ("session_expired", "broker_registered")] == ["session_expired",
                                                                                   "broker_registered"]
    # The new session is opened at the expiry, as Kafka's ZooKeeper client reconnects at once,
    # not after a renewal's back-off (the hundred-and-twenty-sixth review's BR7-15).
    at = {e.kind: e.time_ms for e in c.timeline[told:] if e.broker == 1003}
    assert at["broker_registered"] - at["session_expired"] < REGISTRATION_RETRY_MS
    c.brokers[1001].stop()
    c.brokers[1002].stop()
    assert c.run_until(lambda: c.controller_id == 1003, 10_000)


def test_a_broker_shutting_down_does_not_come_back_through_a_session_renewal(make):
    # The session of a broker in controlled shutdown expires (its request is stuck on the
    # wire): the broker is going away, so it does not register again and stand for controller.
    t = RecordingTransport()
    c = make(transport=t, config={"controller.socket.timeout.ms": 60_000})
    victim = next(b for b in (1001, 1002, 1003) if b != c.controller_id)
    t.hold = lambda src, dst, m: isinstance(m, ControlledShutdownRequest) and src == victim
    broker = c.brokers[victim]
    broker.controlled_shutdown(lambda ok: None)
    began = len(c.timeline)
    broker.session.pause_heartbeats()
    c.advance(SESSION_MS + 5_000)
    assert broker.alive and broker.shutting_down
    assert victim not in c.zk.get_live_broker_ids()
    assert [e.kind for e in c.timeline[began:] if e.broker == victim] == []


def test_a_killed_controllers_controller_stops_with_it(make):
    # The controller object goes with its broker's process: a killed controller broker's
    # controller neither runs nor acts, and nothing leaves the dead broker.
    t = RecordingTransport()
    c = make(transport=t, config={"auto.leader.rebalance.enable": True,
                                  "leader.imbalance.check.interval.seconds": 5})
    old = c.controller_id
    controller = c.brokers[old].controller
    c.kill(old)
    killed_at = c.now_ms()
    assert c.run_until(lambda: c.controller_id not in (None, old), 60_000)
    c.advance(20_000)
    assert not controller.is_active
    assert [r for t_ms, s, d, r in t.sent if s == old and t_ms > killed_at] == []


def test_a_controlled_shutdown_that_never_finds_the_controller_gives_up_after_its_retries(make):
    # Each lookup of /controller that fails is one failed attempt: after max.retries of them
    # the broker stops anyway, as after attempts the controller refused, instead of
    # retrying for as long as the store stays out of reach.
    c = make({"controlled.shutdown.max.retries": 3, "controlled.shutdown.retry.backoff.ms": 1000})
    broker = c.brokers[1003]
    lookups = []

    def lost(*args, **kwargs):
        lookups.append(c.now_ms())
        raise ConnectionLoss("the store went away")

    broker.zk.get_controller_id = lost
    assert c.controlled_shutdown(1003, timeout_ms=60_000) is False
    assert len(lookups) == 3 and all(b - a >= 1000 for a, b in zip(lookups, lookups[1:]))
    assert not broker.alive


def test_a_dead_broker_stops_retrying_the_topic_configs_of_replicas_it_started(make):
    # A LeaderAndIsr started a replica, and the read of its topic's overrides cannot reach
    # the store: the read is retried, but not by a process that has died meanwhile.
    c = make(topic=False)
    broker = c.brokers[1003]
    calls = []
    broker.zk.get_topic_configs = _out_of_reach(c, calls, "the topic configs")
    c.create_topic("r", assignment={0: [1003, 1001]})
    assert c.run_until(lambda: len(calls) >= 2, 5 * REGISTRATION_RETRY_MS)  # started, and retried
    assert _silent_once_killed(c, broker, calls, 10 * REGISTRATION_RETRY_MS)


def test_a_topic_config_read_refused_by_an_expired_session_is_tried_again(make):
    # The read of a started replica's topic overrides meets a session that has just expired
    # (the broker has not renewed it yet): it is retried, as after a lost connection, not
    # raised out of the LeaderAndIsr's handling (the eighty-eighth review's BR5-10).
    c = make(topic=False)
    broker = c.brokers[1003]
    real = broker.zk.get_topic_configs
    calls = []

    def expired_once(topics):
        calls.append(c.now_ms())
        if len(calls) == 1:
            raise SessionExpired("the session has just expired")
        return real(topics)

    broker.zk.get_topic_configs = expired_once
    c.create_topic("r", assignment={0: [1003, 1001]}, config={"retention.bytes": 4096})
    assert c.run_until(lambda: len(calls) == 2, 5 * REGISTRATION_RETRY_MS)
    assert calls[1] - calls[0] == REGISTRATION_RETRY_MS
    assert broker.replica_manager.partitions[TopicPartition("r", 0)].log.config.retention_bytes == 4096


def test_a_topic_config_read_retried_across_a_session_expiry_uses_the_renewed_session(make):
    # The read of a started replica's topic overrides loses the store, and the session
    # expires before the store is back: the retry must read through the broker's renewed
    # session, not go on asking the expired one (which refuses every call for good), or the
    # replica never takes the store's overrides.
    c = make(topic=False)
    bid = next(b for b in (1003, 1002) if b != c.controller_id)
    broker = c.brokers[bid]
    old = broker.zk
    calls = _cut_until_expired(c, old, "get_topic_configs")
    ctl = c.brokers[c.controller_id].controller
    ctl.batch._topic_config = lambda topic: ()  # the LeaderAndIsr carries no overrides
    other = next(b for b in (1001, 1002, 1003) if b != bid)
    c.create_topic("r", assignment={0: [other, bid]}, config={"retention.bytes": 4096})
    tp = TopicPartition("r", 0)
    assert c.run_until(lambda: broker.zk is not old and tp in broker.replica_manager.partitions
                       and broker.replica_manager.partitions[tp].log.config.retention_bytes == 4096,
                       4 * SESSION_MS)
    asked = len(calls)
    c.advance(10 * REGISTRATION_RETRY_MS)
    assert len(calls) == asked  # the expired session is asked no more


def test_a_broker_killed_while_its_registration_is_retried_stops_retrying_it(make, monkeypatch):
    # Restarted right after a crash, the broker finds its crashed session's node and retries
    # the registration; killed meanwhile, the dead process retries nothing more (the
    # eighty-eighth review's BR5-06): its attempts only meet its own killed session.
    from kreplica.meta.kafka_zk_client import KafkaZkClient

    c = make()
    real = KafkaZkClient.register_broker
    calls = []

    def counted(self, broker_id, **kwargs):
        if broker_id == 1003:
            calls.append(c.now_ms())
        return real(self, broker_id, **kwargs)

    monkeypatch.setattr(KafkaZkClient, "register_broker", counted)
    c.kill(1003)
    c.start(1003)
    assert c.run_until(lambda: len(calls) >= 3, 5 * REGISTRATION_RETRY_MS)  # NodeExists, retried
    assert _silent_once_killed(c, c.brokers[1003], calls, 2 * SESSION_MS)  # past the crashed sessions' expiry
    assert 1003 not in c.zk.get_live_broker_ids()


def test_a_dead_broker_stops_retrying_its_config_change_listing(make):
    # The listing of /config/changes cannot reach the store and is retried; the broker then
    # dies, and the dead process lists nothing more (the eighty-eighth review's BR5-21).
    c = make()
    broker = c.brokers[1003]
    calls = []
    broker.zk.get_config_changes = _out_of_reach(c, calls, "the listing")
    c.alter_topic_config("bar", {"retention.bytes": 4096}, wait=False)
    assert c.run_until(lambda: len(calls) >= 2, 5 * REGISTRATION_RETRY_MS)  # the watch fired, retried
    assert _silent_once_killed(c, broker, calls, 10 * REGISTRATION_RETRY_MS)


def test_a_session_renewal_pending_when_the_broker_dies_is_not_made(make):
    # The session expired and its renewal could not reach the store; the broker is killed
    # before the renewal's retry.  The dead process opens no session (the eighty-eighth
    # review's BR5-22): one would ping on for good, owned by nothing.
    c = make()
    real_session = _expire_while_renewals_are_refused(c, 1003)
    c.store.session = real_session  # the store is back before the renewal's retry
    opened = []
    c.store.session = lambda name="", on_expired=None: opened.append(name) or real_session(name, on_expired)
    c.kill(1003)
    c.advance(2_000)
    assert opened == [] and 1003 not in c.zk.get_live_broker_ids()


def test_a_leader_and_isr_refused_as_stale_is_not_told_as_one_the_broker_acts_on(make):
    # The observer's leader_and_isr event says what the leader was told to run; a request
    # naming another registration changes nothing, so it is no such event.
    from kreplica.protocol import LeaderAndIsrPartitionState
    c = make(topic=False)
    b = c.brokers[1001]
    ps = LeaderAndIsrPartitionState(TopicPartition("ghost", 0), 1, 1001, 7, (1001,), 0, (1001,))
    late = LeaderAndIsrRequest(c.controller_id, 1, (ps,), broker_epoch=b.session.session_id + 1000)
    before = len(c.timeline)
    assert [a.error_code for a in _answer_of(b, late)] == [errors.StaleBrokerEpoch.code]
    assert [e.kind for e in c.timeline[before:]] == []


def test_a_leader_and_isr_the_replica_manager_refuses_is_not_told_as_one_the_broker_acts_on(make):
    # Past the broker-epoch fence, the replica manager refuses a request of an older
    # controller epoch, and a partition state older than the one its replica runs (Kafka
    # 0.10's becomeLeaderOrFollower ignores both): neither changes what the broker leads, so
    # neither is a leader_and_isr event, which the demo prints as "becomes leader".
    from kreplica.protocol import LeaderAndIsrPartitionState
    c = make()
    b = c.brokers[1001]
    epoch = b.replica_manager.controller_epoch
    assert epoch >= 1

    def ghost(leader_epoch, controller_epoch=epoch):
        ps = LeaderAndIsrPartitionState(TopicPartition("ghost", 0), controller_epoch, 1001, leader_epoch,
                                        (1001,), leader_epoch, (1001,))
        return LeaderAndIsrRequest(c.controller_id, controller_epoch, (ps,))

    before = len(c.timeline)
    assert [a.error_code for a in _answer_of(b, ghost(7, controller_epoch=epoch - 1))] == [
        errors.StaleControllerEpoch.code]
    assert [e.kind for e in c.timeline[before:]] == []
    [applied] = _answer_of(b, ghost(7))
    assert applied.error_code == errors.NONE and applied.partition_errors == ((TopicPartition("ghost", 0), 0),)
    [older] = _answer_of(b, ghost(6))
    assert older.partition_errors == ((TopicPartition("ghost", 0), errors.StaleControllerEpoch.code),)
    told = [(e.kind, e.details["leader_epoch"]) for e in c.timeline[before:] if e.kind == "leader_and_isr"]
    assert told == [("leader_and_isr", 7)]


def test_a_session_renewal_still_pending_when_a_controlled_shutdown_begins_is_not_made(make):
    # The session expired and its renewal could not reach the store (it is retried a second
    # later); meanwhile the broker begins its controlled shutdown.  The retry must not
    # register the broker again and stand for controller while it is going away.
    c = make()
    b = c.brokers[1003]
    real_session = _expire_while_renewals_are_refused(c, 1003)
    c.store.session = real_session  # the store is back before the renewal's retry
    began = len(c.timeline)
    b.controlled_shutdown(lambda ok: None)
    c.advance(2_000)
    assert b.session is None and 1003 not in c.zk.get_live_broker_ids()
    assert "broker_registered" not in [e.kind for e in c.timeline[began:] if e.broker == 1003]


def test_a_registration_whose_reply_was_lost_takes_the_requests_naming_it_at_once(make, monkeypatch):
    # The registration write lands but its reply is lost: the broker retries it (its own node,
    # success) half a second later.  Meanwhile the controller has seen the registration and
    # sends requests naming it; they name the session in use and must be applied, not
    # refused as another registration's.
    from kreplica.meta.kafka_zk_client import KafkaZkClient

    c = make()
    c.brokers[1003].stop()
    c.advance(1_000)
    real = KafkaZkClient.register_broker
    lost = []

    def landed_then_lost(self, broker_id, **kwargs):
        real(self, broker_id, **kwargs)
        if broker_id == 1003 and not lost:
            lost.append(c.now_ms())
            raise ConnectionLoss("the reply of the registration was lost")

    monkeypatch.setattr(KafkaZkClient, "register_broker", landed_then_lost)
    c.start(1003)
    b = c.brokers[1003]
    c.advance(REGISTRATION_RETRY_MS // 2)  # before the retry
    assert lost and b.broker_epoch == -1 and c.zk.get_broker_epoch(1003) == b.session.session_id
    assert sorted(tp.partition for tp in b.replica_manager.partitions) == [0, 1, 2]
    assert c.run_until(lambda: isr_full(c), 60_000)


def test_a_leader_and_isr_for_replicas_already_running_reads_no_topic_configs(make):
    # Only replicas a LeaderAndIsr starts read their topic's overrides from the store; those
    # already running follow /config/changes, and a failover costs no store reads for them.
    c = make()
    reads = []
    for bid in (1001, 1003):
        zk = c.brokers[bid].zk
        zk.get_topic_configs = lambda topics, real=zk.get_topic_configs, bid=bid: reads.append(bid) or real(topics)
    c.kill(1002)  # the leader of bar-1: the others are told of a new leader
    assert c.run_until(lambda: state(c, 1).leader not in (-1, 1002), 2 * SESSION_MS)
    c.advance(1_000)
    assert reads == []


def test_a_leader_and_isr_that_starts_no_replica_reads_no_topic_configs(make):
    # Only the replicas a LeaderAndIsr did start read their topic's overrides: one refused
    # whole (an older controller epoch) or naming partitions this broker is no replica of
    # starts none, and costs no store read (the eighty-eighth review's BR5-05).
    from kreplica.protocol import LeaderAndIsrPartitionState
    c = make(topic=False)
    b = c.brokers[1001]
    reads = []
    b.zk.get_topic_configs = lambda topics, real=b.zk.get_topic_configs: reads.append(topics) or real(topics)
    epoch = b.replica_manager.controller_epoch
    elsewhere = LeaderAndIsrPartitionState(TopicPartition("ghost", 0), epoch, 1002, 1, (1002,), 0, (1002,))
    here = LeaderAndIsrPartitionState(TopicPartition("ghost", 1), epoch, 1001, 1, (1001,), 0, (1001,))
    session = b.session.session_id
    [other] = _answer_of(b, LeaderAndIsrRequest(c.controller_id, epoch, (elsewhere,), broker_epoch=session))
    [older] = _answer_of(b, LeaderAndIsrRequest(c.controller_id, epoch - 1, (here,), broker_epoch=session))
    assert other.partition_errors == ((elsewhere.tp, errors.UnknownTopicOrPartition.code),)
    assert older.error_code == errors.StaleControllerEpoch.code
    c.advance(1_000)
    assert reads == [] and not b.replica_manager.partitions


def test_the_isr_changed_event_names_the_state_version_the_leader_wrote(make):
    # The timeline (and the demo, which prints it) gives the node version of the ISR the
    # leader wrote: the one its next conditional write must name, not the one it replaced.
    c = make(config={"replica.lag.time.max.ms": 1_000}, topic=False)  # shrinks before the session expires
    c.create_topic("r", assignment={0: [1001, 1002, 1003]})
    leader = c.leader_for("r", 0)
    follower = next(b for b in (1001, 1002, 1003) if b != leader)
    c.kill(follower)
    assert c.run_until(lambda: follower not in state(c, 0, "r").isr, SESSION_MS // 2)
    changed = [e for e in c.timeline if e.kind == "isr_changed" and e.broker == leader]
    stored = c.zk.get_partition_states([TopicPartition("r", 0)])[TopicPartition("r", 0)]
    assert changed and changed[-1].details["isr"] == stored.isr
    assert changed[-1].details["zk_version"] == stored.zk_version


# ---- the hundred-and-seventh review (BR6) ---------------------------------------------------
def _leader_and_follower_beside_the_controller(c, topic="r"):
    """Topic ``topic`` (one partition) led by a broker that is not the controller, with a
    follower that is not either: patching the leader's store client leaves the controller's
    writes alone.  Returns (leader Broker, follower id)."""
    ctrl = c.controller_id
    leader, follower = [b for b in (1001, 1002, 1003) if b != ctrl]
    c.create_topic(topic, assignment={0: [leader, follower, ctrl]})
    assert c.run_until(lambda: isr_full(c, topic), 60_000)
    return c.brokers[leader], follower


def test_an_isr_write_whose_conflict_re_read_loses_the_store_is_retried(make):
    # The ISR write's reply is lost although it landed; its retry conflicts with that very
    # write, and the re-read that would show it ours loses the store connection too.  The
    # outcome is still unknown: the proposal is retried, not raised into the broker's event
    # loop, and the next re-read takes the stored state for the leader's own (BR6-08).
    c = make(config={"replica.lag.time.max.ms": 1_000}, topic=False)
    leader, follower = _leader_and_follower_beside_the_controller(c)
    tp = TopicPartition("r", 0)
    real_update, real_get = leader.zk.update_partition_states, leader.zk.get_partition_states
    landed, reread = [], []

    def lands_then_loses(states):
        if not landed and tp in states:
            landed.append(states[tp])
            real_update(states)
            raise ConnectionLoss("the reply was lost")
        return real_update(states)

    def reread_lost_once(tps):
        if landed and not reread and list(tps) == [tp]:
            reread.append(c.now_ms())
            raise ConnectionLoss("the store went away again")
        return real_get(tps)

    leader.zk.update_partition_states, leader.zk.get_partition_states = lands_then_loses, reread_lost_once
    c.kill(follower)
    assert c.run_until(lambda: bool(reread) and not leader.replica_manager.partitions[tp].isr_state.is_inflight,
                       SESSION_MS // 2)
    stored = c.zk.get_partition_states([tp])[tp]
    part = leader.replica_manager.partitions[tp]
    assert follower not in stored.isr and part.isr == stored.isr and part.zk_version == stored.zk_version


def test_a_controlled_shutdown_finds_a_controller_whose_id_is_zero(tmp_path):
    # Broker ids start at 0 in most Kafka deployments: /controller naming broker 0 is a
    # controller found, not "no controller yet" (the hundred-and-seventh review's BR6-05).
    c = Cluster.embedded(brokers=(0, 1, 2), data_dir=tmp_path, config=CONFIG)
    try:
        assert c.controller_id == 0
        c.create_topic("z", assignment={0: [1, 0, 2]})
        assert c.run_until(lambda: isr_full(c, "z"), 60_000)
        start = c.now_ms()
        assert c.controlled_shutdown(1) is True
        assert c.now_ms() - start < 100  # the first attempt, not a retry
        assert state(c, 0, "z").leader in (0, 2)
    finally:
        c.close()


def test_the_leader_and_isr_event_names_the_isr_the_request_gives_not_the_replicas(make):
    # After a failover the ISR is smaller than the assignment: the event the new leader
    # tells (and the demo prints) names the ISR it leads with (BR6-10), and the leader
    # epoch it leads in, not the state's node version (the hundred-and-forty-fifth
    # review's BR8-11; they differ once a follower rejoined the ISR, which bumps only the
    # version).
    c = make()
    c.kill(1003)
    assert c.run_until(lambda: 1003 not in state(c, 1).isr, 2 * SESSION_MS)
    c.start(1003)
    assert c.run_until(lambda: isr_full(c), 60_000)
    told = len(c.timeline)
    c.kill(1002)  # the leader of bar-1
    assert c.run_until(lambda: state(c, 1).leader == 1001, 2 * SESSION_MS)
    c.advance(100)
    tp = TopicPartition("bar", 1)
    events = [e for e in c.timeline[told:] if e.kind == "leader_and_isr" and e.details["tp"] == tp]
    assert events and events[-1].broker == 1001
    assert tuple(events[-1].details["isr"]) == tuple(state(c, 1).isr) == (1001, 1003)
    stored = c.zk.get_partition_states([tp])[tp]
    assert events[-1].details["leader_epoch"] == stored.leader_epoch != stored.zk_version


def test_an_earlier_attempts_timeout_does_not_fail_the_controlled_shutdown_attempt_in_flight(make):
    # The first attempt is answered (a partition remains); the second is lost on the wire.
    # The first attempt's timer, due while the second is in flight, belongs to the first:
    # the second fails only after its own controller.socket.timeout.ms (BR6-15).
    t = RecordingTransport()
    c = make({"controlled.shutdown.max.retries": 3, "controlled.shutdown.retry.backoff.ms": 1000,
              "controller.socket.timeout.ms": 3000}, transport=t, topic=False)
    c.create_topic("solo", assignment={0: [1001, 1002]})
    c.kill(1002)
    assert c.run_until(lambda: state(c, 0, "solo").isr == (1001,), 60_000)
    sent = []
    t.hold = lambda src, dst, m: isinstance(m, ControlledShutdownRequest) and (sent.append(m) or len(sent) == 2)
    assert c.controlled_shutdown(1001) is False
    attempts = [at for at, *_ in t.requests(ControlledShutdownRequest, src=1001)]
    assert len(attempts) == 3
    assert 1000 <= attempts[1] - attempts[0] < 3000  # the first was answered at once
    assert attempts[2] - attempts[1] >= 3000 + 1000


def test_a_leaders_isr_change_is_written_when_proposed_not_a_retry_backoff_later(make):
    # Kafka 0.10's leader writes its ISR shrink to the store in the same call that decides
    # it; here the write waits only for the scheduler's next turn, not for the retry
    # backoff of a write whose outcome is unknown (BR6-12).
    c = make(config={"replica.lag.time.max.ms": 1_000}, topic=False)  # shrinks before the session expires
    leader, follower = _leader_and_follower_beside_the_controller(c)
    part = leader.replica_manager.partitions[TopicPartition("r", 0)]
    c.kill(follower)
    assert c.run_until(lambda: part.isr_state.is_inflight, SESSION_MS // 2)
    c.advance(5)
    assert not part.isr_state.is_inflight and follower not in state(c, 0, "r").isr


def test_a_leaders_isr_write_keeps_the_controller_epoch_its_state_was_written_under(make):
    # Kafka 0.10's Partition.updateIsr writes the controller epoch of the LeaderAndIsr state
    # it leads under (the epoch the controller wrote it in), not the newest controller epoch
    # the broker has heard of: after a controller failover that rewrote nothing, the
    # leader's ISR shrink still names the old epoch (BR6-16).
    c = make(config={"replica.lag.time.max.ms": 1_000}, topic=False)  # shrinks before the session expires
    old = c.controller_id
    leader, follower = [b for b in (1001, 1002, 1003) if b != old]
    c.create_topic("r", assignment={0: [leader, follower]})  # the old controller hosts none
    assert c.run_until(lambda: isr_full(c, "r"), 60_000)
    tp = TopicPartition("r", 0)
    written = c.zk.get_partition_states([tp])[tp].controller_epoch
    c.brokers[old].stop()
    assert c.run_until(lambda: c.controller_id not in (None, old), 10_000)
    epoch = c.zk.get_controller_epoch()[0]
    assert c.run_until(lambda: c.brokers[leader].replica_manager.controller_epoch == epoch, 10_000)
    assert written < epoch
    c.kill(follower)
    c.produce("r", 0, [b"x"], acks=1)  # the dead follower now lags the leader's log end
    assert c.run_until(lambda: state(c, 0, "r").isr == (leader,), SESSION_MS // 2)
    stored = c.zk.get_partition_states([tp])[tp]
    assert stored.leader == leader and stored.controller_epoch == written


def test_each_controlled_shutdown_attempt_looks_the_controller_up_again(make):
    # The controller the first attempt reached fails over before the retry: the retry
    # goes to the new one, as Kafka's controlledShutdown reads /controller at each
    # attempt, not to the dead one again (BR6-17).
    t = RecordingTransport()
    c = make({"controlled.shutdown.max.retries": 3, "controlled.shutdown.retry.backoff.ms": 2000},
             transport=t, topic=False)
    ctrl = c.controller_id
    leader, follower = [b for b in (1001, 1002, 1003) if b != ctrl]
    c.create_topic("solo", assignment={0: [leader, follower]})
    c.kill(follower)
    assert c.run_until(lambda: state(c, 0, "solo").isr == (leader,), 60_000)
    done = []
    c.brokers[leader].controlled_shutdown(done.append)  # a partition remains: it will retry
    c.advance(100)
    c.brokers[ctrl].stop()
    assert c.run_until(lambda: c.controller_id not in (None, ctrl), 1_500)
    new = c.controller_id
    assert c.run_until(lambda: bool(done), 30_000)
    sent_to = [dst for _, _, dst, _ in t.requests(ControlledShutdownRequest, src=leader)]
    assert sent_to[0] == ctrl and len(sent_to) == 3 and set(sent_to[1:]) == {new}


def test_brokers_start_in_the_order_given_and_are_reported_in_id_order(tmp_path):
    """``Cluster.embedded(brokers=...)`` starts the brokers in the order they are listed:
    the first registers first and wins the controller election, as the first Kafka broker
    up does -- the order is the caller's, not the ids'.  What the cluster reports per
    broker (live_brokers, offsets) comes in id order whatever that start order was
    (hundred-and-forty-ninth review)."""
    with Cluster.embedded(brokers=(1003, 1001, 1002), data_dir=tmp_path) as c:
        assert c.controller_id == 1003
        assert list(c.brokers) == [1003, 1001, 1002] and c.live_brokers() == [1001, 1002, 1003]
        c.create_topic("t", assignment={0: [1002, 1003, 1001]})
        c.produce("t", 0, [b"x"], acks="all")
        assert list(c.offsets("t", 0)) == [1001, 1002, 1003]


def test_a_broker_built_without_the_cluster_takes_kafkas_defaults_refuses_bad_keys_and_needs_no_observer(tmp_path):
    """The Broker validates its own config and runs with no observer, as `kreplica broker
    --quiet` builds it: the Cluster's validation and timeline are not what make it work.
    Unvalidated, a bad value went in unnoticed and a missing key was a KeyError later, deep in
    a shutdown; with no stand-in observer, the first event raised out of start()."""
    from kreplica.broker import Broker
    from kreplica.config import validate
    from kreplica.meta.memory_store import MemoryStore
    from kreplica.runtime import SimScheduler
    from kreplica.transport import InProcessTransport

    scheduler = SimScheduler(0)
    store = MemoryStore(scheduler, session_timeout_ms=SESSION_MS)
    transport = InProcessTransport(scheduler)
    with pytest.raises(errors.InvalidConfig, match="controlled.shutdown.max.retries=-1: out of range"):
        Broker(1, tmp_path / "b1", store, transport, scheduler, {"controlled.shutdown.max.retries": -1})
    b = Broker(1, tmp_path / "b1", store, transport, scheduler)
    assert b.config == validate(None)
    b.start()  # no observer: nothing to tell it
    assert scheduler.run_until(lambda: b.controller is not None and b.controller.is_active, 10_000)
    done = []
    b.controlled_shutdown(done.append)
    assert scheduler.run_until(lambda: bool(done), 60_000)
    assert done == [True] and not b.alive
    store.close()
