"""SimNetwork: seeded latency, FIFO links, partitions that hold control messages, pauses."""
from __future__ import annotations

import random
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from kreplica.protocol import FetchRequest, LeaderAndIsrRequest, ProduceRequest
from kreplica.runtime import SimScheduler
from kreplica.sim.network import LinkProfile, SimNetwork


def world(profile: LinkProfile | None = None, seed: int = 1):
    sched = SimScheduler(seed)
    net = SimNetwork(None, random.Random(seed), profile)
    net.scheduler = sched
    got: list[tuple[int, int, object]] = []
    for node in (1, 2, 3):
        net.register(node, lambda src, req, respond, node=node: got.append((sched.now_ms(), node, req)))
    return sched, net, got


def fetch(i: int) -> FetchRequest:
    return FetchRequest(replica_id=i, partitions=())


def lair(epoch: int) -> LeaderAndIsrRequest:
    return LeaderAndIsrRequest(controller_id=1, controller_epoch=epoch, partition_states=())


def test_latency_is_drawn_within_the_profile_and_links_stay_in_order():
    sched, net, got = world(LinkProfile(latency_ms_min=2, latency_ms_max=30))
    for i in range(200):
        net.send(1, 2, fetch(i), None)
    sched.advance(1000)
    assert [req.replica_id for _, _, req in got] == list(range(200))
    assert all(2 <= t <= 30 for t, _, _ in got)


def test_same_seed_same_schedule_other_seed_other_schedule():
    def times(seed: int) -> list[int]:
        sched, net, got = world(LinkProfile(latency_ms_min=1, latency_ms_max=50, drop_probability=0.2), seed)
        for i in range(100):
            net.send(1, 2, fetch(i), None)
        sched.advance(1000)
        return [(t, r.replica_id) for t, _, r in got]

    assert times(7) == times(7)
    assert times(7) != times(8)


def test_partition_drops_data_but_holds_controller_requests_until_heal():
    sched, net, got = world()
    net.partition({1}, {2, 3})
    net.send(1, 2, fetch(0), None)
    net.send(1, 2, lair(5), None)
    net.send(2, 3, fetch(1), None)  # same side: delivered
    sched.advance(100)
    assert [(node, type(r).__name__) for _, node, r in got] == [(3, "FetchRequest")]
    net.heal()
    sched.advance(100)
    assert [(node, type(r).__name__) for _, node, r in got][1:] == [(2, "LeaderAndIsrRequest")]
    assert net.stats.dropped == 1


def test_pause_holds_both_directions_and_resume_delivers_in_order():
    sched, net, got = world()
    net.pause(2)
    for i in range(3):
        net.send(1, 2, fetch(i), None)
    sched.advance(500)
    assert got == []
    net.resume(2)
    sched.advance(100)
    assert [r.replica_id for _, _, r in got] == [0, 1, 2]


def test_a_message_in_flight_when_the_pause_began_stays_ahead_of_later_ones_on_its_link():
    """Swarm config-churn seed 97: a LeaderAndIsr in flight to a broker as it paused
    arrived after the pause had queued two StopReplicas sent later on the same link;
    resumed, the broker deleted a partition it did not have yet and then created it,
    and the deleted topic's replica led on beside the re-created topic's."""
    sched, net, got = world(LinkProfile(latency_ms_min=50, latency_ms_max=50))
    net.send(1, 2, lair(1), None)                  # due at 50
    net.send(3, 2, fetch(30), None)                # another link, due at 50
    sched.advance(10)
    net.pause(2)
    net.send(1, 2, fetch(10), None)                # sent during the pause
    net.send(1, 2, fetch(11), None)
    sched.advance(100)                             # lair(1) and fetch(30) arrive, paused
    net.pause(3)
    net.resume(3)                                  # another node's resume leaves 2's queue as it is
    net.send(1, 2, lair(2), None)
    assert got == []
    net.resume(2)
    sched.advance(200)
    arrived = [(type(r).__name__, getattr(r, "replica_id", None) or r.controller_epoch) for _, _, r in got]
    from_1 = [a for a in arrived if a != ("FetchRequest", 30)]
    assert from_1 == [("LeaderAndIsrRequest", 1), ("FetchRequest", 10), ("FetchRequest", 11),
                      ("LeaderAndIsrRequest", 2)]
    assert ("FetchRequest", 30) in arrived


def test_what_a_paused_node_sent_before_its_pause_arrives_during_it():
    """The kernel does not pause with the process: bytes already written to the socket
    travel on. What the paused node sends during the pause leaves at resume."""
    sched, net, got = world(LinkProfile(latency_ms_min=50, latency_ms_max=50))
    net.send(1, 2, fetch(0), None)                 # due at 50
    sched.advance(10)
    net.pause(1)
    net.send(1, 2, fetch(1), None)                 # sent during the pause
    sched.advance(100)
    assert [(t, r.replica_id) for t, _, r in got] == [(50, 0)]
    net.resume(1)
    sched.advance(100)
    assert [(t, r.replica_id) for t, _, r in got] == [(50, 0), (160, 1)]


def test_at_resume_the_socket_buffer_is_handed_over_before_what_arrives_behind_it():
    """A message reaching the resumed node at its resume instant, on a link whose earlier
    messages still wait in its buffer, is handed over after them (TCP keeps a link in
    order), and a node paused again at that instant keeps them buffered, in order."""
    for pause_again in (False, True):
        sched, net, got = world(LinkProfile(latency_ms_min=50, latency_ms_max=50))
        sched.call_later(60, net.resume, 2)        # at 60, ahead of fetch(1)'s arrival
        if pause_again:
            sched.call_later(60, net.pause, 2)     # paused again before the hand-over
        net.send(1, 2, fetch(0), None)             # due at 50, in the pause
        sched.advance(10)
        net.send(1, 2, fetch(1), None)             # due at 60, the resume instant
        net.pause(2)
        sched.advance(100)
        if pause_again:
            assert got == []
            net.resume(2)
            sched.advance(10)
            assert [(t, r.replica_id) for t, _, r in got] == [(110, 0), (110, 1)]
        else:
            assert [(t, r.replica_id) for t, _, r in got] == [(60, 0), (60, 1)]


def test_duplicates_only_for_retry_safe_requests_and_slow_nodes_answer_late():
    sched, net, got = world(LinkProfile(duplicate_probability=1.0))
    net.send(1, 2, ProduceRequest(-1, 100, ()), None)
    net.send(1, 2, lair(1), None)
    sched.advance(100)
    kinds = [type(r).__name__ for _, _, r in got]
    assert kinds.count("ProduceRequest") == 2 and kinds.count("LeaderAndIsrRequest") == 1
    sched2, net2, got2 = world(LinkProfile(latency_ms_min=1, latency_ms_max=1))
    net2.slow_ms[3] = 250
    net2.send(1, 3, fetch(0), None)
    sched2.advance(1000)
    assert got2[0][0] == 251


def test_a_failed_host_loses_what_it_had_in_flight():
    sched, net, got = world(LinkProfile(latency_ms_min=10, latency_ms_max=10))
    net.send(1, 2, fetch(0), None)
    net.send(3, 2, fetch(1), None)
    sched.advance(5)
    net.lose_in_flight(1)
    sched.advance(100)
    assert [r.replica_id for _, _, r in got] == [1]


def test_drops_lose_data_plane_messages_but_never_controller_requests():
    sched, net, got = world(LinkProfile(drop_probability=0.5))
    for i in range(200):
        net.send(1, 2, fetch(i), None)
        net.send(1, 3, lair(i), None)
    sched.advance(1000)
    fetches = [r.replica_id for _, node, r in got if node == 2]
    assert 60 < len(fetches) < 140 and net.stats.dropped == 200 - len(fetches)
    assert fetches == sorted(fetches)  # what arrives still arrives in order
    assert [r.controller_epoch for _, node, r in got if node == 3] == list(range(200))


def test_reordering_applies_to_clients_only_and_links_stay_fifo_between_brokers():
    sched, net, got = world(LinkProfile(latency_ms_min=1, latency_ms_max=40, reorder=True))
    for i in range(100):
        net.send(-1, 2, fetch(i), None)  # a client (negative id) with several connections
        net.send(1, 3, fetch(i), None)   # broker to broker: one TCP connection
    sched.advance(1000)
    from_client = [r.replica_id for _, node, r in got if node == 2]
    between_brokers = [r.replica_id for _, node, r in got if node == 3]
    assert sorted(from_client) == list(range(100)) and from_client != list(range(100))
    assert between_brokers == list(range(100))
    # Counted: each client request that arrived ahead of one its client sent earlier.
    position = {sent: i for i, sent in enumerate(from_client)}
    overtook = sum(any(position[j] > position[i] for j in range(i)) for i in range(100))
    assert net.stats.reordered == overtook > 10


def test_a_link_or_node_profile_overrides_the_default():
    sched, net, got = world(LinkProfile(latency_ms_min=1, latency_ms_max=1))
    net.set_node(3, LinkProfile(latency_ms_min=100, latency_ms_max=100))  # every link to or from 3
    net.set_link(1, 2, LinkProfile(latency_ms_min=40, latency_ms_max=40))  # one direction only
    # a retransmission crosses its request's link: the duplicate takes that link's latency too
    net.set_link(3, 1, LinkProfile(latency_ms_min=40, latency_ms_max=40, duplicate_probability=1.0))
    net.send(1, 2, fetch(0), None)
    net.send(2, 1, fetch(1), None)
    net.send(1, 3, fetch(2), None)
    net.send(2, 2, fetch(3), None)
    net.send(3, 1, fetch(4), None)
    sched.advance(1000)
    assert sorted((r.replica_id, t) for t, _, r in got) == [(0, 40), (1, 1), (2, 100), (3, 1), (4, 40), (4, 40)]


# ---- properties: what a link promises, through pauses and partitions ---------------------------
NODES = (1, 2, 3, 4)
_op = st.one_of(
    st.tuples(st.just("send"), st.sampled_from(NODES), st.sampled_from(NODES)),
    st.tuples(st.just("advance"), st.integers(0, 120)),
    st.tuples(st.just("pause"), st.sampled_from(NODES)),
    st.tuples(st.just("resume"), st.sampled_from(NODES)),
    st.tuples(st.just("partition"), st.sets(st.sampled_from(NODES), min_size=1, max_size=3)),
    st.tuples(st.just("heal"),),
)


def _run_ops(profile: LinkProfile, seed: int, ops, message) -> dict[tuple[int, int], list[int]]:
    """Apply ``ops`` (sending ``message(seq)`` for the n-th send), then heal, resume and
    drain everything; returns {link: the sequence numbers it delivered, in arrival order}."""
    sched, net, got = world(profile, seed)
    net.register(4, lambda src, req, respond: got.append((sched.now_ms(), 4, req)))
    links: dict[int, tuple[int, int]] = {}
    for op in ops:
        if op[0] == "send" and op[1] != op[2]:
            seq = len(links) + 1
            links[seq] = (op[1], op[2])
            net.send(op[1], op[2], message(seq), None)
        elif op[0] == "advance":
            sched.advance(op[1])
        elif op[0] == "pause":
            net.pause(op[1])
        elif op[0] == "resume":
            net.resume(op[1])
        elif op[0] == "partition":
            net.partition(op[1], set(NODES) - op[1])
        elif op[0] == "heal":
            net.heal()
    net.heal()
    for node in NODES:
        net.resume(node)
    sched.advance(10_000)
    received: dict[tuple[int, int], list[int]] = {link: [] for link in links.values()}
    for _t, node, req in got:
        seq = req.controller_epoch if isinstance(req, LeaderAndIsrRequest) else req.replica_id
        assert links[seq][1] == node
        received[links[seq]].append(seq)
    return received


@settings(max_examples=300, deadline=None)
@given(ops=st.lists(_op, max_size=80), seed=st.integers(0, 2**16),
       tail=st.floats(0, 0.5), reorder=st.booleans())
def test_controller_messages_keep_their_link_order_through_pauses_and_partitions(ops, seed, tail, reorder):
    """TCP's promise, whatever faults come between: every LeaderAndIsr sent on a link
    arrives exactly once, in the order it was sent (control messages are never dropped;
    pauses and partitions only hold them). Long tail latencies put messages in flight
    across a pause's start, the case swarm config-churn seed 97 found out of order."""
    profile = LinkProfile(latency_ms_min=1, latency_ms_max=20, tail_probability=tail,
                          latency_ms_tail=200, drop_probability=0.3, reorder=reorder)
    received = _run_ops(profile, seed, ops,
                        lambda seq: LeaderAndIsrRequest(controller_id=1, controller_epoch=seq, partition_states=()))
    assert all(seqs == sorted(set(seqs)) for seqs in received.values())      # in order, once each
    assert sum(map(len, received.values())) == sum(1 for op in ops if op[0] == "send" and op[1] != op[2])


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(_op, max_size=80), seed=st.integers(0, 2**16), tail=st.floats(0, 0.5))
def test_data_messages_between_brokers_may_be_lost_or_doubled_but_never_reordered(ops, seed, tail):
    """Fetches between brokers may be dropped (and, being retry-safe, duplicated), but
    what arrives on a link arrives in send order."""
    profile = LinkProfile(latency_ms_min=1, latency_ms_max=20, tail_probability=tail,
                          latency_ms_tail=200, drop_probability=0.2, duplicate_probability=0.2)
    received = _run_ops(profile, seed, ops, fetch)
    assert all(seqs == sorted(seqs) for seqs in received.values())


def test_calm_stops_loss_and_duplication_everywhere_and_keeps_latency():
    lossy = LinkProfile(2, 9, 0.1, 40, drop_probability=0.3, duplicate_probability=0.2, reorder=True)
    net = SimNetwork(SimScheduler(1), random.Random(1), lossy)
    net.set_link(1, 2, lossy)
    net.set_node(3, lossy)
    net.calm()
    for p in (net.profile, net.links[(1, 2)], net.node_profiles[3]):
        assert (p.drop_probability, p.duplicate_probability) == (0.0, 0.0)
        assert (p.latency_ms_min, p.latency_ms_max, p.tail_probability, p.latency_ms_tail) == (2, 9, 0.1, 40)
        assert p.reorder  # a client with several connections still has them


def test_a_partition_cuts_both_directions_and_spares_nodes_in_no_group():
    """Whichever side sends, a cut link drops its data and holds its controller requests;
    a client, in no group, still reaches brokers on both sides."""
    sched, net, got = world()
    net.partition({1}, {2, 3})
    net.send(2, 1, fetch(0), None)
    net.send(1, 3, fetch(1), None)
    net.send(3, 1, lair(7), None)
    net.send(-1, 1, fetch(2), None)
    net.send(-1, 3, fetch(3), None)
    sched.advance(100)
    assert sorted((node, r.replica_id) for _, node, r in got) == [(1, 2), (3, 3)]
    assert (net.stats.dropped, net.stats.held) == (2, 1)
    net.heal()
    sched.advance(100)
    assert [(node, r.controller_epoch) for _, node, r in got[2:]] == [(1, 7)]


def test_latency_is_drawn_over_the_whole_range_and_the_tail_up_to_its_bound():
    rng = random.Random(3)
    plain = LinkProfile(latency_ms_min=2, latency_ms_max=5)
    assert {plain.draw_latency_ms(rng) for _ in range(400)} == {2, 3, 4, 5}
    tail = LinkProfile(latency_ms_min=1, latency_ms_max=1, tail_probability=1.0, latency_ms_tail=3)
    assert {tail.draw_latency_ms(rng) for _ in range(400)} == {1, 2, 3, 4}


def test_a_links_own_profile_beats_the_node_profile_of_either_end():
    sched, net, got = world(LinkProfile(latency_ms_min=1, latency_ms_max=1))
    net.set_node(2, LinkProfile(latency_ms_min=100, latency_ms_max=100))
    net.set_link(1, 2, LinkProfile(latency_ms_min=40, latency_ms_max=40))  # into 2
    net.set_link(2, 3, LinkProfile(latency_ms_min=20, latency_ms_max=20))  # out of 2
    for i, (src, dst) in enumerate([(1, 2), (2, 3), (2, 1), (3, 2)]):
        net.send(src, dst, fetch(i), None)
    sched.advance(1000)
    assert sorted((r.replica_id, t) for t, _, r in got) == [(0, 40), (1, 20), (2, 100), (3, 100)]


def test_between_two_nodes_with_profiles_of_their_own_the_receivers_applies():
    """A link's own profile comes first; on a link without one, the node profile of the
    receiver, then the sender's: one rule, whichever end sends."""
    sched, net, got = world(LinkProfile(latency_ms_min=1, latency_ms_max=1))
    net.set_node(1, LinkProfile(latency_ms_min=30, latency_ms_max=30))
    net.set_node(3, LinkProfile(latency_ms_min=70, latency_ms_max=70))
    for i, (src, dst) in enumerate([(1, 3), (3, 1), (2, 1), (1, 2)]):
        net.send(src, dst, fetch(i), None)
    sched.advance(1000)
    assert sorted((r.replica_id, t) for t, _, r in got) == [(0, 70), (1, 30), (2, 30), (3, 30)]


class _Session:
    """A broker's store session, as the network sees it: reachable or not."""

    reachable = True

    def set_reachable(self, reachable: bool) -> None:
        self.reachable = reachable


def test_a_store_session_is_back_only_once_neither_a_pause_nor_a_store_cut_holds():
    """A paused process sends no heartbeats, and a broker cut from the store reaches it
    not: its session is reachable again only when both are over, in either order."""
    _sched, net, _got = world()
    session = _Session()
    net.track_session(2, session)
    net.pause(2)
    assert not session.reachable
    net.resume(2)
    assert session.reachable
    net.cut_from_store(2)
    assert not session.reachable  # the session open when the cut begins is cut too
    net.pause(2)
    net.resume(2)  # the pause ends, the cut goes on
    assert not session.reachable
    net.pause(2)
    net.heal_store(2)  # the cut ends, the pause goes on
    assert not session.reachable
    net.resume(2)
    assert session.reachable


def test_a_partition_replaced_releases_only_the_links_it_no_longer_cuts():
    """A new partition sends on what was held on links it heals, and keeps holding the
    controller requests on links it still cuts until they heal too."""
    sched, net, got = world()
    net.partition({1}, {2, 3})
    net.send(1, 2, lair(1), None)
    net.send(1, 3, lair(2), None)
    sched.advance(100)
    assert got == [] and net.stats.held == 2
    net.partition({1, 3}, {2})  # 1-3 healed, 1-2 still cut
    sched.advance(100)
    assert [(node, r.controller_epoch) for _, node, r in got] == [(3, 2)]
    net.heal()
    sched.advance(100)
    assert [(node, r.controller_epoch) for _, node, r in got] == [(3, 2), (2, 1)]


def test_controller_requests_a_cut_link_held_arrive_in_send_order_when_it_heals():
    """Several controller requests held on one cut link go on, at the heal, in the order they
    were sent (the controller's channel is one TCP connection), whatever their latencies."""
    sched, net, got = world(LinkProfile(latency_ms_min=1, latency_ms_max=40))
    net.partition({1}, {2, 3})
    for epoch in range(1, 9):
        net.send(1, 2, lair(epoch), None)
    sched.advance(100)
    assert got == []
    net.heal()
    sched.advance(100)
    assert [r.controller_epoch for _, _, r in got] == list(range(1, 9))


def test_heal_store_without_a_broker_ends_every_cut_from_the_store():
    """The liveness phase calls heal_store() with no argument: every broker cut from the
    store gets its session back, not just one (and a paused one once it resumes)."""
    _sched, net, _got = world()
    sessions = {n: _Session() for n in (1, 2, 3)}
    for n, s in sessions.items():
        net.track_session(n, s)
    net.cut_from_store(1)
    net.cut_from_store(3)
    net.pause(3)
    net.heal_store()
    assert net.store_cut == set()
    assert [sessions[n].reachable for n in (1, 2, 3)] == [True, True, False]
    net.resume(3)
    assert sessions[3].reachable


def test_heal_store_of_broker_0_ends_its_cut_only():
    """Broker ids start at 0 in Kafka (server.properties' ``broker.id=0``): healing broker
    0's cut from the store is a heal of that one broker, not the liveness phase's heal of
    every cut (``heal_store()`` with no argument)."""
    _sched, net, _got = world()
    sessions = {n: _Session() for n in (0, 1)}
    for n, s in sessions.items():
        net.track_session(n, s)
        net.cut_from_store(n)
    net.heal_store(0)
    assert net.store_cut == {1}
    assert [sessions[n].reachable for n in (0, 1)] == [True, False]


def test_what_is_sent_to_a_paused_node_across_a_cut_meets_the_cut_only_at_resume():
    """What is sent to a paused node leaves at its resume, so the partition it meets is the
    one in place then: a fetch sent across a cut that heals before the resume arrives
    after it (neither dropped at the send nor counted twice), and one sent across a cut
    still in place at the resume is lost there."""
    sched, net, got = world(LinkProfile(latency_ms_min=3, latency_ms_max=3))
    net.partition({1}, {2, 3})
    net.pause(2)
    net.send(1, 2, fetch(1), None)
    sched.advance(10)
    net.heal()
    sched.advance(10)
    assert got == [] and (net.stats.held, net.stats.dropped) == (1, 0)
    net.resume(2)
    sched.advance(10)
    assert [(t, node, r.replica_id) for t, node, r in got] == [(23, 2, 1)]
    net.partition({1}, {2, 3})
    net.pause(3)
    net.send(1, 3, fetch(2), None)
    net.resume(3)
    sched.advance(10)
    assert len(got) == 1 and (net.stats.held, net.stats.dropped) == (2, 1)


def test_only_produce_and_fetch_requests_are_ever_duplicated():
    """A retransmission doubles a request only where the protocol tolerates it: an
    OffsetsForLeaderEpoch request, an answer or a controller request arrives once."""
    from kreplica.protocol import FetchResponse, OffsetsForLeaderEpochRequest

    sched, net, got = world(LinkProfile(duplicate_probability=1.0))
    net.send(1, 2, fetch(0), None)
    net.send(1, 2, OffsetsForLeaderEpochRequest(replica_id=1, partitions=()), None)
    net.send(1, 2, lair(1), None)
    sched.advance(100)
    kinds = [type(r).__name__ for _, _, r in got]
    assert kinds == ["FetchRequest", "FetchRequest", "OffsetsForLeaderEpochRequest", "LeaderAndIsrRequest"]
    answers: list[object] = []
    net.deliver(2, 1, FetchResponse.__new__(FetchResponse), answers.append)
    sched.advance(100)
    assert len(answers) == 1 and net.stats.duplicated == 1


def test_a_resumed_receiver_reads_its_buffer_even_from_a_sender_still_paused():
    """Bytes that reached a paused receiver are in its socket buffer: when it resumes it
    reads them at once, though their sender has been paused since (its pause holds only
    what it sends from then on)."""
    sched, net, got = world(LinkProfile(latency_ms_min=10, latency_ms_max=10))
    net.send(1, 2, fetch(0), None)  # on the wire, due at 10
    net.pause(2)
    net.pause(1)
    net.send(1, 2, fetch(1), None)  # sent during 1's pause: waits for it
    sched.advance(50)
    assert got == []
    net.resume(2)
    sched.advance(20)
    assert [(t, r.replica_id) for t, _, r in got] == [(50, 0)]
    net.resume(1)
    sched.advance(20)
    assert [(t, r.replica_id) for t, _, r in got] == [(50, 0), (80, 1)]


def test_a_senders_host_failure_does_not_take_back_what_a_paused_receiver_already_buffered():
    """A host failure loses what its node had in flight, not the bytes already in a
    receiver's socket buffer: handed over at the receiver's resume, they arrive whatever
    has become of the sender's host since (one failure before the send, one after)."""
    sched, net, got = world(LinkProfile(latency_ms_min=10, latency_ms_max=10))
    net.lose_in_flight(1)  # an earlier incarnation of 1's host failed
    net.send(1, 2, fetch(0), None)
    net.pause(2)
    sched.advance(50)  # arrived at 10, in 2's buffer
    net.lose_in_flight(1)
    net.send(1, 2, fetch(1), None)  # sent by the new incarnation, held by 2's pause
    net.resume(2)
    sched.advance(20)
    assert [(t, r.replica_id) for t, _, r in got] == [(50, 0), (60, 1)]


def test_a_dropped_request_is_never_duplicated_into_an_arrival():
    """Loss comes before retransmission: a request the link loses is not also doubled, so
    with certain loss nothing arrives however likely duplication is.  Loss is the whole data
    plane's, not only what may be doubled: an OffsetsForLeaderEpoch request and an answer
    are lost as well (the 165th review)."""
    from kreplica.protocol import FetchResponse, OffsetsForLeaderEpochRequest

    sched, net, got = world(LinkProfile(drop_probability=1.0, duplicate_probability=1.0))
    for i in range(20):
        net.send(1, 2, fetch(i), None)
    net.send(1, 2, OffsetsForLeaderEpochRequest(replica_id=1, partitions=()), None)
    answers: list[object] = []
    net.deliver(2, 1, FetchResponse.__new__(FetchResponse), answers.append)
    sched.advance(100)
    assert got == [] and answers == []
    assert (net.stats.dropped, net.stats.duplicated, net.stats.delivered) == (22, 0, 0)


def test_a_session_a_paused_broker_opens_stays_unreachable_until_its_resume():
    """attach_store follows sessions opened later: one opened by a broker while its process
    is paused hears nothing from it until the resume, as a cut from the store would.  Each
    is opened with the broker's own expiry callback (the 222nd review: dropped, a broker
    whose session expired never registered again)."""
    _sched, net, _got = world()

    def open_session(name="", on_expired=None):
        s = _Session()
        s.on_expired = on_expired
        return s

    store = SimpleNamespace(session=open_session)
    net.attach_store(store)
    net.pause(2)
    def expired():
        pass

    paused_session = store.session("broker-2", expired)
    other = store.session("broker-3", on_expired=expired)
    assert not paused_session.reachable and other.reachable
    assert paused_session.on_expired is expired and other.on_expired is expired
    net.resume(2)
    assert paused_session.reachable


def test_a_failed_hosts_message_arriving_behind_a_hand_over_is_still_lost():
    """A message still on the wire when its sender's host failed is lost, also when it reaches
    a receiver at the instant of its resume, behind the socket buffer being handed over on
    that link: only the buffered bytes outlive the sender's host."""
    sched, net, got = world(LinkProfile(latency_ms_min=10, latency_ms_max=10))
    sched.call_later(20, net.resume, 2)  # due with fetch(1), and ahead of it
    net.send(1, 2, fetch(0), None)  # arrives at 10, into 2's buffer
    net.set_link(1, 2, LinkProfile(latency_ms_min=20, latency_ms_max=20))
    net.send(1, 2, fetch(1), None)  # arrives at 20, at 2's resume
    net.pause(2)
    sched.advance(15)
    net.lose_in_flight(1)  # fetch(1) is on the wire: lost with 1's host
    sched.advance(20)
    assert [(t, r.replica_id) for t, _, r in got] == [(20, 0)]
    assert net.stats.dropped == 1


def test_every_host_failure_loses_what_its_node_then_had_in_flight():
    """Each host failure of a node loses what it had on the wire at that moment, the second
    and third as the first (the hundred-and-eighth review)."""
    sched, net, got = world(LinkProfile(latency_ms_min=10, latency_ms_max=10))
    for i in range(3):
        net.send(1, 2, fetch(i), None)
        net.send(3, 2, fetch(10 + i), None)
        sched.advance(5)
        net.lose_in_flight(1)
        sched.advance(50)
    assert [r.replica_id for _, _, r in got] == [10, 11, 12]
    assert net.stats.dropped == 3


def test_a_paused_receivers_buffer_keeps_the_arrival_order_across_links():
    """An arrival at a paused receiver goes ahead only of what its own link's paused sender
    sent since, not of what that sender sent to another node: at the resume the buffer is
    read in the order its bytes arrived, whichever link carried them."""
    sched, net, got = world(LinkProfile(latency_ms_min=10, latency_ms_max=10))
    net.register(4, lambda src, req, respond: got.append((sched.now_ms(), 4, req)))
    net.set_link(1, 2, LinkProfile(latency_ms_min=20, latency_ms_max=20))
    net.send(3, 2, fetch(0), None)  # reaches 2 at 10, in its buffer
    net.send(1, 2, fetch(1), None)  # reaches 2 at 20, behind it
    net.pause(2)
    net.pause(4)
    net.send(1, 4, fetch(2), None)  # sent by 1 during 4's pause: waits for 4
    sched.advance(50)
    net.resume(2)
    sched.advance(1)
    assert [(t, n, r.replica_id) for t, n, r in got] == [(50, 2, 0), (50, 2, 1)]
    net.resume(4)
    sched.advance(20)
    assert [(t, n, r.replica_id) for t, n, r in got][2:] == [(61, 4, 2)]


def test_a_paused_receivers_buffer_is_read_in_arrival_order_when_its_sender_is_paused_too():
    """A paused receiver's buffer is read in the order its bytes arrived, whichever link
    carried them, also when the sender of a later arrival has been paused since and has
    sent on that link meanwhile: that arrival goes ahead of what its sender sent during
    its pause (still to leave), not ahead of what another link delivered before it (the
    165th review; it used to be handed over first)."""
    sched, net, got = world(LinkProfile(latency_ms_min=10, latency_ms_max=10))
    net.set_link(1, 2, LinkProfile(latency_ms_min=30, latency_ms_max=30))
    net.send(1, 2, fetch(1), None)  # reaches 2 at 30, in its buffer
    net.send(3, 2, fetch(3), None)  # reaches 2 at 10, in its buffer first
    net.pause(1)
    net.pause(2)
    net.send(1, 2, fetch(11), None)  # sent by 1 during its pause: leaves at 1's resume
    sched.advance(50)
    net.resume(2)
    sched.advance(1)
    assert [(t, r.replica_id) for t, _, r in got] == [(50, 3), (50, 1)]
    net.resume(1)
    sched.advance(40)
    assert [(t, r.replica_id) for t, _, r in got][2:] == [(81, 11)]  # the 1-2 link takes 30 ms


def test_what_a_paused_node_sent_meets_the_network_as_it_is_at_its_resume():
    """What a node sent during its pause leaves at its resume through the links as they are
    then: a partition begun meanwhile drops its data and holds its controller requests
    until the heal."""
    sched, net, got = world(LinkProfile(latency_ms_min=10, latency_ms_max=10))
    net.pause(1)
    net.send(1, 2, fetch(0), None)
    net.send(1, 2, lair(1), None)
    net.partition({1}, {2, 3})
    net.resume(1)
    sched.advance(50)
    assert got == [] and net.stats.dropped == 1
    net.heal()
    sched.advance(50)
    assert [(t, type(r).__name__) for t, _, r in got] == [(60, "LeaderAndIsrRequest")]


def test_a_heal_releases_the_held_links_in_link_order_whichever_was_cut_first():
    """At a heal the controller requests held on several links go on link by link in the
    links' order, so a seed's arrivals depend on what was held, not on which link first
    held something (the hundred-and-twenty-seventh review)."""
    def arrivals(first: int, second: int) -> list:
        sched, net, got = world(LinkProfile(latency_ms_min=1, latency_ms_max=50))
        net.partition({1}, {2, 3})
        for src in (first, second):
            for i in range(3):
                net.send(src, 1, lair(10 * src + i), None)
        sched.advance(100)
        assert got == [] and net.stats.held == 6
        net.heal()
        sched.advance(100)
        return [(t, r.controller_epoch) for t, _, r in got]

    held_3_first = arrivals(3, 2)
    assert held_3_first == arrivals(2, 3)
    # each link kept its order
    assert [e for _, e in held_3_first if e < 30] == [20, 21, 22]
    assert [e for _, e in held_3_first if e >= 30] == [30, 31, 32]


def test_a_latency_without_a_slow_tail_takes_one_draw_from_the_seed():
    """A profile without a tail draws one number per message: switching the tail off leaves
    every other draw of a seed where it was, as a fault kind at rate 0 does."""
    rng, expected = random.Random(5), random.Random(5)
    plain = LinkProfile(latency_ms_min=2, latency_ms_max=5)
    for _ in range(50):
        plain.draw_latency_ms(rng)
        expected.random()
    assert rng.getstate() == expected.getstate()


def test_what_follows_a_slowed_request_on_its_link_waits_behind_it_when_the_slow_disk_ends():
    """A slow disk delays each request to its broker on the link it came by: a request sent
    just after the slow disk ends still arrives behind the slowed one (TCP keeps a link in
    order), and requests sent while it lasts each arrive slow_ms late."""
    sched, net, got = world(LinkProfile(latency_ms_min=5, latency_ms_max=5))
    net.slow_ms[2] = 100
    net.send(1, 2, fetch(0), None)  # due at 105
    sched.advance(10)
    net.send(1, 2, fetch(1), None)  # due at 115
    net.slow_ms.clear()
    net.send(1, 2, fetch(2), None)  # due at 15 on its own: behind fetch(1)
    net.send(3, 2, fetch(3), None)  # another link: at 15
    sched.advance(200)
    assert [(t, r.replica_id) for t, _, r in got] == [(15, 3), (105, 0), (115, 1), (115, 2)]


def test_a_resume_leaves_what_waits_for_another_paused_node_where_it_is():
    """At one node's resume, what was sent to, or arrived at, another node still paused
    stays in the queue as it was: counted held once, handed over at that node's own resume
    in its first order (the hundred-and-forty-sixth review)."""
    sched, net, got = world(LinkProfile(latency_ms_min=10, latency_ms_max=10))
    net.send(1, 3, fetch(0), None)  # on the wire: reaches paused 3 at 10, its buffer
    net.pause(2)
    net.pause(3)
    net.send(1, 3, fetch(1), None)  # sent to a paused node: held
    net.send(1, 2, fetch(2), None)  # held
    sched.advance(50)
    assert net.stats.held == 2
    net.resume(2)
    sched.advance(30)
    assert [(t, n, r.replica_id) for t, n, r in got] == [(60, 2, 2)]
    assert net.stats.held == 2
    net.resume(3)
    sched.advance(30)
    assert [(t, n, r.replica_id) for t, n, r in got][1:] == [(80, 3, 0), (90, 3, 1)]
    assert net.stats.held == 2


def test_controller_requests_a_heal_releases_from_a_paused_sender_leave_at_once():
    """A cut link's held controller requests were sent before the pause (the kernel keeps
    retrying them): at the heal they go on the wire even while their sender is paused, and
    reach a live receiver during the pause (the hundred-and-forty-sixth review)."""
    sched, net, got = world(LinkProfile(latency_ms_min=10, latency_ms_max=10))
    net.partition({1}, {2, 3})
    net.send(1, 2, lair(1), None)
    net.send(1, 2, lair(2), None)
    sched.advance(20)
    net.pause(1)
    net.heal()
    sched.advance(30)
    assert [(t, n, r.controller_epoch) for t, n, r in got] == [(30, 2, 1), (30, 2, 2)]
    assert net.stats.held == 2 and net.is_paused(1)


def test_a_resumed_nodes_socket_buffer_is_handed_over_in_one_scheduler_event():
    """However many arrivals a paused node's buffer took in, its resume hands them over in
    one event at the resume instant, so a run's scheduler event count (the report's
    simulated events per second) counts no empty hand-overs (the hundred-and-forty-sixth
    review)."""
    sched, net, got = world(LinkProfile(latency_ms_min=10, latency_ms_max=10))
    for i in range(5):
        net.deliver(1, 2, fetch(i), lambda m: got.append((sched.now_ms(), 2, m)))
    net.pause(2)
    sched.advance(10)  # on the wire before the pause began: all five in 2's buffer
    assert got == [] and len(sched) == 0
    sched.advance(40)
    net.resume(2)
    assert len(sched) == 1
    before = sched.events_run
    sched.advance(1)
    assert sched.events_run - before == 1
    assert [(t, r.replica_id) for t, _, r in got] == [(50, i) for i in range(5)]


def test_every_controller_message_and_answer_is_held_by_a_cut_and_never_lost():
    """The controller's channel retries until it gets through, both ways: each of its
    requests and answers (ControlledShutdown's answer too) is held by a cut link and never
    dropped by loss, whatever the link's drop rate (the hundred-and-forty-sixth review)."""
    from kreplica import protocol

    CONTROL_PLANE = tuple(getattr(protocol, kind + way) for kind in (
        "LeaderAndIsr", "StopReplica", "UpdateMetadata", "ControlledShutdown") for way in ("Request", "Response"))
    sched, net, _got = world(LinkProfile(drop_probability=1.0))
    arrived: list = []
    net.partition({1}, {2, 3})
    for cls in CONTROL_PLANE:
        net.deliver(2, 1, object.__new__(cls), lambda m: arrived.append(("healed", type(m))))
        net.deliver(2, 3, object.__new__(cls), lambda m: arrived.append(("lossy", type(m))))
    sched.advance(100)
    assert arrived == [("lossy", cls) for cls in CONTROL_PLANE]
    assert net.stats.held == len(CONTROL_PLANE) and net.stats.dropped == 0
    net.heal()
    sched.advance(100)
    assert arrived[len(CONTROL_PLANE):] == [("healed", cls) for cls in CONTROL_PLANE]


def test_a_controller_request_a_heal_releases_crosses_its_link_with_that_links_latency():
    """What a cut link held goes on at the heal as any message on that link does: it takes
    the link's own profile, or the node's, not the network's default (the 184th review)."""
    sched, net, got = world(LinkProfile(latency_ms_min=1, latency_ms_max=1))
    net.set_link(1, 2, LinkProfile(latency_ms_min=40, latency_ms_max=40))
    net.set_node(3, LinkProfile(latency_ms_min=100, latency_ms_max=100))
    net.partition({1}, {2, 3})
    net.send(1, 2, lair(1), None)
    net.send(1, 3, lair(2), None)
    sched.advance(50)
    assert got == []
    net.heal()
    sched.advance(200)
    assert [(t, node, r.controller_epoch) for t, node, r in got] == [(90, 2, 1), (150, 3, 2)]


def test_a_profile_that_neither_loses_nor_duplicates_takes_one_draw_per_request():
    """Without loss or duplication a request's only draw is its latency: a retry-safe request
    on such a link takes no loss or duplication draw from the seed, so switching either off
    leaves every other draw where it was (the 184th review)."""
    sched, net, got = world(LinkProfile(latency_ms_min=2, latency_ms_max=5))
    for i in range(20):
        net.send(1, 2, fetch(i), None)
    expected = random.Random(1)
    for _ in range(20):
        expected.random()
    assert net.rng.getstate() == expected.getstate()
    sched.advance(100)
    assert [r.replica_id for _, _, r in got] == list(range(20))


def test_messages_delivered_counts_each_message_the_network_puts_on_a_link():
    """SimNetwork keeps the transport's ``messages_delivered`` as InProcessTransport and
    TcpTransport do, counting what leaves on a link: a duplicate counts, a message lost to a
    cut does not, and a controller request a cut held counts when the heal sends it on (the
    184th review)."""
    sched, net, _got = world()
    net.set_link(1, 3, LinkProfile(duplicate_probability=1.0))
    net.send(1, 2, fetch(0), None)
    net.send(1, 3, fetch(1), None)
    net.partition({1}, {2, 3})
    net.send(1, 2, fetch(2), None)
    net.send(1, 2, lair(1), None)
    assert net.messages_delivered == net.stats.delivered == 3
    net.heal()
    sched.advance(100)
    assert net.messages_delivered == net.stats.delivered == 4


def test_the_default_profile_takes_one_to_five_ms_and_never_delivers_in_the_sending_instant():
    """A scenario naming no latency (config-churn, gc-pause-chaos, ...) runs on the default
    profile: every message takes 1 to 5 ms, never 0, so nothing sent arrives in the instant
    it left, before the sender's own next step (the 184th review)."""
    rng = random.Random(7)
    assert {LinkProfile().draw_latency_ms(rng) for _ in range(400)} == {1, 2, 3, 4, 5}
    sched, net, got = world()
    for src, dst in ((1, 2), (2, 1), (1, 3), (3, 1), (2, 3), (3, 2)):
        net.send(src, dst, fetch(src * 10 + dst), None)
    sched.advance(0)
    assert got == []
    sched.advance(5)
    assert len(got) == 6


def test_a_slow_disk_delays_what_reaches_its_node_and_not_what_the_node_sends():
    """A slow node handles each request ``slow_ms`` late: the delay is taken once, on the
    way in.  What the slow node sends (its answers, its own fetches) crosses its link at
    the link's latency; charged again on the way out, a slow follower's fetch round trip
    would take the delay twice (the 203rd review)."""
    sched, net, got = world(LinkProfile(latency_ms_min=1, latency_ms_max=1))
    net.slow_ms[3] = 250
    net.send(3, 1, fetch(31), None)
    net.send(1, 3, fetch(13), None)
    net.send(1, 2, fetch(12), None)
    sched.advance(1000)
    assert sorted((t, node, r.replica_id) for t, node, r in got) == [(1, 1, 31), (1, 2, 12), (251, 3, 13)]


def test_at_resume_the_socket_buffer_goes_before_what_the_node_sent_during_its_pause():
    """Even over links of no latency, a resumed node first reads its socket buffer, then what
    it sent during the pause leaves: the sends go through the network after the hand-over
    was queued, whatever order the two were held in (the 203rd review)."""
    sched, net, got = world(LinkProfile(latency_ms_min=0, latency_ms_max=0))
    net.send(3, 1, fetch(31), None)  # on the wire when 1 pauses: it reaches 1's buffer
    net.pause(1)
    net.send(1, 2, fetch(12), None)  # held by the pause, ahead of the buffered arrival
    sched.advance(10)
    assert got == []
    net.resume(1)
    sched.advance(10)
    assert [(node, r.replica_id) for _, node, r in got] == [(1, 31), (2, 12)]


def _answering(net: SimNetwork, node: int, pending: list | None = None) -> None:
    """Register ``node`` to answer each fetch with its replica id, at once or, given ``pending``,
    when the test calls the kept ``respond`` (a long poll)."""
    def handler(src, req, respond):
        if pending is None:
            respond(req.replica_id)
        else:
            pending.append(lambda: respond(req.replica_id))
    net.register(node, handler)


def test_what_a_paused_askers_buffer_holds_for_it_dies_with_its_process_and_not_with_the_answerer():
    """An answer or refusal that reached a paused asker's socket buffer is read only if the
    asker is still there at the hand-over: a crash during the pause (the network resumed, then
    the node gone, as ``faults.crash`` does) loses both.  Whether the asker is there is what
    counts, not the answerer: an answer from a node that stopped after sending it (no host
    failure) still arrives (the 222nd review: the arrival check of d175317)."""
    sched = SimScheduler(1)
    net = SimNetwork(None, random.Random(1), LinkProfile(latency_ms_min=10, latency_ms_max=10))
    net.scheduler = sched
    for node in (1, 2, 3):
        _answering(net, node)
    got2: list = []
    got3: list = []
    net.send(2, 1, fetch(21), got2.append)  # answered at 10, in 2's buffer at 20
    net.send(2, 9, fetch(29), got2.append)  # nobody at 9: refused at 10, in 2's buffer at 20
    net.send(3, 1, fetch(31), got3.append)  # answered at 10, reaches 3 at 20
    sched.advance(15)
    net.pause(2)
    net.unregister(1)                       # 1 stops with its answer to 3 on the wire
    sched.advance(10)
    assert got2 == [] and got3 == [31]
    net.resume(2)                           # 2 crashes: resumed, then gone
    net.unregister(2)
    sched.advance(100)
    assert got2 == [] and net.stats.delivered == 6


def test_an_answer_to_an_asker_gone_before_it_was_given_never_goes_on_a_link():
    """A long-poll answer given after its asker went away is not sent: it takes no latency
    draw from the seed and is not counted, as a write to a closed connection sends nothing;
    put on a link and lost only on arrival, it would move every later draw of the network."""
    sched = SimScheduler(1)
    net = SimNetwork(None, random.Random(1))
    net.scheduler = sched
    pending: list = []
    _answering(net, 1, pending)
    net.register(2, lambda src, req, respond: None)
    got: list = []
    net.send(2, 1, fetch(0), got.append)
    net.send(-1, 1, fetch(1), got.append)   # a client, never registered: always answered
    sched.advance(10)
    net.unregister(2)
    state, sent = net.rng.getstate(), net.messages_delivered
    pending[0]()
    assert net.rng.getstate() == state and net.messages_delivered == sent == 2
    pending[1]()
    sched.advance(10)
    assert got == [1] and net.messages_delivered == 3


def test_a_host_failure_loses_the_controller_requests_a_cut_link_held_for_it():
    """A controller request a cut link holds is on its sender's host still (its socket's
    queue): the host failing loses it as anything else in flight, and the heal delivers only
    what the sender's new process sent and what other nodes sent (the 222nd review: the
    heal delivered a crashed controller's requests)."""
    sched, net, got = world()
    net.partition({1}, {2, 3})
    net.send(1, 2, lair(5), None)
    net.send(3, 1, lair(6), None)
    sched.advance(50)
    net.lose_in_flight(1)
    net.send(1, 2, lair(7), None)  # the restarted process, still cut off
    sched.advance(50)
    assert got == []
    net.heal()
    sched.advance(100)
    assert [(node, r.controller_epoch) for _, node, r in got] == [(1, 6), (2, 7)]
    assert net.stats.dropped == 1
