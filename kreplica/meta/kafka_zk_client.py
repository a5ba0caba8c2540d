"""KafkaZkClient: Kafka's typed operations over one metadata-store session.

Theory of operation.  The controller and the brokers never build paths or JSON
themselves; they call this client, which speaks :mod:`layout` over a
:class:`~kreplica.meta.store.Session`.  Where Kafka batches, so does this client:
reads of many partition states go out as one ``get_many`` and writes as one
``multi`` (seed 001 step 3: "ideally we want to use ZK multi to do the reads and
writes"), split only when a batch would exceed the store's ``max_batch_ops``.

Partition-state writes are conditional on the node version carried in
``LeaderAndIsr.zk_version`` (seed 001 step 3.3).  A transaction is all or
nothing, so when one partition's version is stale the client drops that
partition (the store names the failing op), applies the rest, and reports the
stale ones for the caller to re-read and retry -- the controller's loop.
"""
from __future__ import annotations

from typing import Callable, Iterable, Mapping, Sequence, TypeVar

from .. import errors
from ..protocol.common import LeaderAndIsr, TopicPartition
from ..runtime import Clock
from . import layout
from .store import BadVersion, InvalidPath, NodeExists, NoNode, Op, Session, Stat, StoreError, Watch

T = TypeVar("T")


class KafkaZkClient:
    def __init__(self, session: Session, clock: Clock) -> None:
        self.session = session
        self.clock = clock
        self._persistent_paths_ready = False

    # -- helpers

    def _chunks(self, items: Sequence[T]) -> Iterable[Sequence[T]]:
        n = max(1, self.session.max_batch_ops)
        for i in range(0, len(items), n):
            yield items[i:i + n]

    # A topic a caller names that no node can be named after ("", ".", "..", or one
    # holding a character ZooKeeper refuses) does not exist: the reads below answer as
    # for an absent node instead of the store's InvalidPath.  Nor does one holding "/"
    # (:func:`_names_a_topic`), whose path names a node under another topic's.  Legal
    # names never reach these fallbacks (creating a topic checks its name first).

    def _get_many(self, paths: Sequence[str]) -> list[tuple[bytes, Stat] | None]:
        out: list[tuple[bytes, Stat] | None] = []
        for chunk in self._chunks(paths):
            try:
                out.extend(self.session.get_many(chunk))
            except InvalidPath:
                out.extend(self._get_or_watch(path, None) for path in chunk)
        return out

    def _get_or_watch(self, path: str, watch: Watch | None) -> tuple[bytes, Stat] | None:
        """Read a node that may be absent; a watch is left either way (exists-watch semantics)."""
        try:
            return self._read(path, watch)
        except InvalidPath:
            return None

    def _read(self, path: str, watch: Watch | None) -> tuple[bytes, Stat] | None:
        if watch is None:
            try:
                return self.session.get(path)
            except NoNode:
                return None
        if self.session.exists(path, watch) is None:
            return None
        try:
            return self.session.get(path)
        except NoNode:
            return None  # deleted in between: the exists watch reports it

    def _children(self, path: str, watch: Watch | None) -> list[str]:
        """Children of one of Kafka's persistent parents, created if missing so the watch sticks."""
        try:
            return self.session.get_children(path, watch)
        except NoNode:
            self.session.ensure_path(path)
            return self.session.get_children(path, watch)

    def _multi_dropping(self, keyed_ops: list[tuple[T, Op]],
                        on_fail: Callable[[T, StoreError], None]) -> list[tuple[T, object]]:
        """Run ops as few transactions as possible; a failing op is reported and dropped.

        Each conflict costs one more round trip, so a batch with k stale entries takes
        k + 1 transactions (per chunk), never one write per entry.
        """
        done: list[tuple[T, object]] = []
        for chunk in self._chunks(keyed_ops):
            pending = list(chunk)
            while pending:
                try:
                    results = self.session.multi([op for _, op in pending])
                except StoreError as exc:
                    if exc.op_index is None:
                        raise
                    key, _ = pending.pop(exc.op_index)
                    on_fail(key, exc)
                    continue
                done.extend(zip((k for k, _ in pending), results))
                break
        return done

    def ensure_persistent_paths(self) -> None:
        """Kafka's top-level persistent paths (once per client: they are never deleted)."""
        if self._persistent_paths_ready:
            return
        for path in layout.PERSISTENT_PATHS:
            self.session.ensure_path(path)
        self._persistent_paths_ready = True

    # -- brokers

    def register_broker(self, broker_id: int, host: str = "127.0.0.1", port: int = 9092,
                        rack: str | None = None, unclean_shutdown_controller_epoch: int | None = None) -> None:
        """Create this broker's ephemeral ``/brokers/ids/<id>``.

        As Kafka's checked ephemeral create: a node this very session already owns
        (a retry after a lost reply) is success; one held by another session -- a
        crashed predecessor whose session has not yet expired -- raises NodeExists.
        ``unclean_shutdown_controller_epoch``: see :func:`layout.encode_broker`.
        """
        path = layout.broker_path(broker_id)
        data = layout.encode_broker(broker_id, host, port, self.clock.now_ms(), rack,
                                    unclean_shutdown_controller_epoch)
        try:
            self.session.create(path, data, ephemeral=True, makepath=True)
        except NodeExists:
            stat = self.session.exists(path)
            if stat is None or stat.ephemeral_owner != self.session.session_id:
                raise

    def get_broker_epoch(self, broker_id: int) -> int | None:
        """The broker's epoch: the session that owns its registration (None: not registered)."""
        stat = self.session.exists(layout.broker_path(broker_id))
        return None if stat is None else stat.ephemeral_owner

    def get_unclean_shutdowns_handled(self, broker_ids: Sequence[int]) -> dict[int, int]:
        """{broker: the broker epoch whose unclean restart a controller has handled}
        for those of ``broker_ids`` that have a marker (one batched read)."""
        got = self._get_many([layout.unclean_shutdown_handled_path(b) for b in broker_ids])
        return {b: layout.decode_unclean_shutdown_handled(g[0]) for b, g in zip(broker_ids, got) if g is not None}

    def set_unclean_shutdown_handled(self, broker_id: int, broker_epoch: int, controller_epoch: int) -> None:
        """Record that ``broker_id``'s unclean restart under ``broker_epoch`` is handled
        (a persistent node, overwritten by the next one)."""
        path = layout.unclean_shutdown_handled_path(broker_id)
        data = layout.encode_unclean_shutdown_handled(broker_epoch, controller_epoch)
        try:
            self.session.set(path, data)
        except NoNode:
            try:
                self.session.create(path, data, makepath=True)
            except NodeExists:  # another controller's marker, just made: ours is as true
                self.session.set(path, data)

    def get_live_broker_ids(self, watch: Watch | None = None) -> list[int]:
        return sorted(int(n) for n in self._children(layout.BROKER_IDS, watch))

    def get_broker(self, broker_id: int) -> layout.BrokerInfo | None:
        got = self._get_or_watch(layout.broker_path(broker_id), None)
        return None if got is None else layout.decode_broker(broker_id, got[0])

    # -- topics

    def create_topic(self, topic: str, assignment: Mapping[int, Sequence[int]],
                     config: Mapping[str, object] | None = None) -> None:
        """Write the topic's config and assignment in one transaction (config first, as Kafka)."""
        self.ensure_persistent_paths()
        ops = [Op.create(layout.topic_config_path(topic), layout.encode_topic_config(config)),
               Op.create(layout.topic_path(topic), layout.encode_topic_assignment(assignment))]
        if self.session.exists(layout.topic_config_path(topic)) is not None:
            # Left over from a deleted topic: overwrite rather than refuse.
            ops[0] = Op.set(layout.topic_config_path(topic), layout.encode_topic_config(config))
        try:
            self.session.multi(ops)
        except NodeExists as exc:
            raise errors.TopicAlreadyExists(f"topic {topic!r} already exists") from exc

    def get_all_topics(self, watch: Watch | None = None) -> list[str]:
        return self._children(layout.BROKER_TOPICS, watch)

    def topic_exists(self, topic: str) -> bool:
        if not _names_a_topic(topic):
            return False
        try:
            return self.session.exists(layout.topic_path(topic)) is not None
        except InvalidPath:
            return False

    def get_topic_assignment(self, topic: str, watch: Watch | None = None) -> dict[int, list[int]]:
        """The topic's {partition: replicas}; raises UnknownTopicOrPartition when absent."""
        return self.get_topic_assignment_and_version(topic, watch)[0]

    def get_topic_assignment_and_version(self, topic: str, watch: Watch | None = None
                                         ) -> tuple[dict[int, list[int]], int]:
        got = self._get_or_watch(layout.topic_path(topic), watch) if _names_a_topic(topic) else None
        if got is None:
            raise errors.UnknownTopicOrPartition(f"topic {topic!r} does not exist")
        return layout.decode_topic_assignment(got[0], layout.topic_path(topic)), got[1].version

    def get_topic_assignments(self, topics: Sequence[str]) -> dict[str, dict[int, list[int]]]:
        """Many topics' assignments in one batched read (absent topics are left out)."""
        topics = [t for t in topics if _names_a_topic(t)]
        got = self._get_many([layout.topic_path(t) for t in topics])
        return {t: layout.decode_topic_assignment(g[0], layout.topic_path(t)) for t, g in zip(topics, got)
                if g is not None}

    def get_replica_assignment(self, topics: Sequence[str]) -> dict[TopicPartition, list[int]]:
        out: dict[TopicPartition, list[int]] = {}
        for topic, assignment in self.get_topic_assignments(topics).items():
            for p, replicas in assignment.items():
                out[TopicPartition(topic, p)] = replicas
        return out

    def set_topic_assignment(self, topic: str, assignment: Mapping[int, Sequence[int]],
                             expected_version: int | None = None) -> int:
        """Rewrite the assignment (conditionally when ``expected_version`` is given); new version."""
        data = layout.encode_topic_assignment(assignment)
        version = -1 if expected_version is None else expected_version
        return self.session.set(layout.topic_path(topic), data, version).version

    def get_topic_config(self, topic: str) -> dict[str, str]:
        return self.get_topic_configs([topic])[topic]

    def get_topic_configs(self, topics: Sequence[str]) -> dict[str, dict[str, str]]:
        """Several topics' overrides in one batched read (a missing node reads as none)."""
        got = self._get_many([layout.topic_config_path(t) for t in topics])
        return {t: {} if g is None else layout.decode_topic_config(g[0]) for t, g in zip(topics, got)}

    def set_topic_config(self, topic: str, config: Mapping[str, object]) -> None:
        """Replace a topic's overrides, then announce it under ``/config/changes`` (Kafka's
        order: a listener that sees the notification reads the new config).  A topic without
        a config node (made by hand, or by a tool that writes none) gets one, as Kafka's
        ``updatePersistentPath`` makes it."""
        path, data = layout.topic_config_path(topic), layout.encode_topic_config(config)
        try:
            self.session.set(path, data)
        except NoNode:
            try:
                self.session.create(path, data, makepath=True)
            except NodeExists:  # made meanwhile by another writer: ours is the newer
                self.session.set(path, data)
        self.session.create(layout.config_change_path(layout.CONFIG_CHANGE_PREFIX),
                            layout.encode_config_change(topic), sequential=True, makepath=True)

    def get_config_changes(self, watch: Watch | None = None) -> list[str]:
        """The change notifications, oldest first."""
        return sorted(self._children(layout.CONFIG_CHANGES, watch), key=layout.change_sequence)

    def get_config_change_topics(self, names: Sequence[str]) -> list[str | None]:
        """The topic each notification names (None: gone, or not a topic's)."""
        return [None if got is None else layout.decode_config_change(got[0])
                for got in self._get_many([layout.config_change_path(n) for n in names])]

    def delete_config_changes(self, names: Iterable[str]) -> None:
        keyed = [(n, Op.delete(layout.config_change_path(n))) for n in names]
        self._multi_dropping(keyed, _ignore_no_node)

    def delete_topic_znodes(self, topic: str) -> None:
        """Remove the topic's assignment, partition states and config (the deletion's last step)."""
        for path in (layout.topic_path(topic), layout.topic_config_path(topic)):
            try:
                self.session.delete(path, recursive=True)
            except NoNode:
                pass

    # -- partition states (leaderAndIsr)

    def get_partition_states(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, LeaderAndIsr]:
        """Read many leaderAndIsr nodes in one batch; partitions without state are left out."""
        tps = list(tps)
        got = self._get_many([layout.partition_state_path(t, p) for t, p in tps])
        decode = layout.decode_partition_state
        return {tp: decode(g[0], g[1].version) for tp, g in zip(tps, got) if g is not None}

    def create_partition_states(self, states: Mapping[TopicPartition, LeaderAndIsr]
                                ) -> tuple[dict[TopicPartition, LeaderAndIsr], dict[TopicPartition, StoreError]]:
        """Create the initial state nodes (and their parents) in one transaction.

        Returns (created with ``zk_version=0``, {tp: error}) -- an existing state node is
        reported as NodeExists for that partition only, and a partition whose parents could
        not be made (its topic gone meanwhile) as its own state's error: the others are still
        created, as Kafka's controller does.
        """
        tps = list(states)
        topics = sorted({t for t, _ in tps})
        parents = [layout.partitions_path(t) for t in topics] + [layout.partition_path(t, p) for t, p in tps]
        present = {path for path, g in zip(parents, self._get_many(parents)) if g is not None}
        keyed: list[tuple[TopicPartition | str, Op]] = []
        for path in parents:
            if path not in present:
                keyed.append((path, Op.create(path)))
        for tp in tps:
            keyed.append((tp, Op.create(layout.partition_state_path(*tp), layout.encode_partition_state(states[tp]))))
        failed: dict[TopicPartition, StoreError] = {}

        def on_fail(key: TopicPartition | str, exc: StoreError) -> None:
            # A parent's error is not reported: made meanwhile by someone else is fine, and
            # one that cannot be made (NoNode: the topic went) fails the state nodes under it,
            # each reported for its own partition. Kafka 2.x ignores these creates' answers.
            if not isinstance(key, str):
                failed[key] = exc

        done = self._multi_dropping(keyed, on_fail)
        created = {k: _with_version(states[k], 0) for k, _ in done if isinstance(k, TopicPartition)}
        return created, failed

    def update_partition_states(self, states: Mapping[TopicPartition, LeaderAndIsr]
                                ) -> tuple[dict[TopicPartition, LeaderAndIsr], list[TopicPartition],
                                           dict[TopicPartition, StoreError]]:
        """Conditionally write many leaderAndIsr nodes (seed 001 step 3.3).

        Each write expects ``state.zk_version``.  Returns (updated states carrying their
        new ``zk_version``, partitions whose version was stale, {tp: other error}).
        All writes go in one transaction when none conflicts.
        """
        keyed = [(tp, Op.set(layout.partition_state_path(*tp), layout.encode_partition_state(s), s.zk_version))
                 for tp, s in states.items()]
        bad_version: list[TopicPartition] = []
        failed: dict[TopicPartition, StoreError] = {}

        def on_fail(tp: TopicPartition, exc: StoreError) -> None:
            if isinstance(exc, BadVersion):
                bad_version.append(tp)
            else:
                failed[tp] = exc

        done = self._multi_dropping(keyed, on_fail)
        updated = {tp: _with_version(states[tp], stat.version) for tp, stat in done}  # type: ignore[attr-defined]
        return updated, bad_version, failed

    # -- controller election

    def try_elect_controller(self, broker_id: int) -> bool:
        """Create the ephemeral ``/controller``; False when another broker holds it."""
        try:
            self.session.create(layout.CONTROLLER, layout.encode_controller(broker_id, self.clock.now_ms()),
                                ephemeral=True)
        except NodeExists:
            return False
        return True

    def register_controller_and_increment_epoch(self, broker_id: int) -> tuple[int, int] | None:
        """Win the election and bump ``/controller_epoch`` in one transaction (Kafka 2.x's way).

        Returns (new epoch, its node version), or None when another broker holds
        ``/controller``.  An epoch moved by someone else between the read and the
        transaction (a dying predecessor) is re-read and retried.
        """
        data = layout.encode_controller(broker_id, self.clock.now_ms())
        for _ in range(16):
            current = self.get_controller_epoch()
            if current is None:
                epoch, epoch_op = 1, Op.create(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(1))
            else:
                epoch = current[0] + 1
                epoch_op = Op.set(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(epoch), current[1])
            try:
                results = self.session.multi([Op.create(layout.CONTROLLER, data, ephemeral=True), epoch_op])
            except NodeExists as exc:
                if exc.op_index == 0:
                    return None
                continue
            except BadVersion:
                continue
            return epoch, (0 if current is None else results[1].version)  # type: ignore[attr-defined]
        raise BadVersion(f"{layout.CONTROLLER_EPOCH} kept moving while broker {broker_id} stood for controller")

    def get_controller_id(self, watch: Watch | None = None) -> int | None:
        """The current controller's broker id, or None; ``watch`` fires on creation or deletion too."""
        got = self._get_or_watch(layout.CONTROLLER, watch)
        return None if got is None else layout.decode_controller(got[0])

    def get_controller_epoch(self) -> tuple[int, int] | None:
        """(epoch, node version), or None before any controller was elected."""
        got = self._get_or_watch(layout.CONTROLLER_EPOCH, None)
        return None if got is None else (layout.decode_controller_epoch(got[0]), got[1].version)

    def increment_controller_epoch(self, expected_version: int | None) -> tuple[int, int]:
        """Bump ``/controller_epoch`` conditionally; returns (new epoch, new version).

        ``expected_version=None`` means the node is expected to be absent and is created
        at 1.  A controller that lost a race gets BadVersion (Kafka's ControllerMovedException).
        """
        if expected_version is None:
            try:
                self.session.create(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(1))
            except NodeExists as exc:
                raise BadVersion(f"{layout.CONTROLLER_EPOCH} already exists") from exc
            return 1, 0
        data, stat = self.session.get(layout.CONTROLLER_EPOCH)
        if stat.version != expected_version:
            raise BadVersion(f"{layout.CONTROLLER_EPOCH}: expected version {expected_version}, found {stat.version}")
        epoch = layout.decode_controller_epoch(data) + 1
        new = self.session.set(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(epoch), expected_version)
        return epoch, new.version

    # -- /admin/reassign_partitions

    def get_partition_reassignment(self, watch: Watch | None = None) -> dict[TopicPartition, list[int]]:
        got = self._get_or_watch(layout.REASSIGN_PARTITIONS, watch)
        return {} if got is None else layout.decode_reassignment(got[0])

    def reassignment_in_progress(self) -> bool:
        return self.session.exists(layout.REASSIGN_PARTITIONS) is not None

    def create_partition_reassignment(self, reassignment: Mapping[TopicPartition, Sequence[int]]) -> None:
        """Start a reassignment; NodeExists while another is in progress (as Kafka's tool)."""
        self.session.create(layout.REASSIGN_PARTITIONS, layout.encode_reassignment(reassignment), makepath=True)

    def set_partition_reassignment(self, reassignment: Mapping[TopicPartition, Sequence[int]],
                                   expected_version: int = -1) -> None:
        """Rewrite the pending reassignments; an empty mapping deletes the node (as Kafka)."""
        if not reassignment:
            self.delete_partition_reassignment(expected_version)
            return
        data = layout.encode_reassignment(reassignment)
        try:
            self.session.set(layout.REASSIGN_PARTITIONS, data, expected_version)
        except NoNode:
            self.session.create(layout.REASSIGN_PARTITIONS, data, makepath=True)

    def delete_partition_reassignment(self, expected_version: int = -1) -> None:
        try:
            self.session.delete(layout.REASSIGN_PARTITIONS, expected_version)
        except NoNode:
            pass

    # -- /admin/preferred_replica_election

    def get_preferred_replica_election(self, watch: Watch | None = None) -> set[TopicPartition]:
        got = self._get_or_watch(layout.PREFERRED_REPLICA_ELECTION, watch)
        return set() if got is None else layout.decode_partition_list(got[0])

    def create_preferred_replica_election(self, tps: Iterable[TopicPartition]) -> None:
        """Ask the controller for a preferred election; NodeExists while one is pending."""
        self.session.create(layout.PREFERRED_REPLICA_ELECTION, layout.encode_partition_list(tps), makepath=True)

    def delete_preferred_replica_election(self) -> None:
        try:
            self.session.delete(layout.PREFERRED_REPLICA_ELECTION)
        except NoNode:
            pass

    # -- /admin/delete_topics

    def get_topic_deletions(self, watch: Watch | None = None) -> list[str]:
        return self._children(layout.DELETE_TOPICS, watch)

    def create_topic_deletion(self, topic: str) -> None:
        try:
            self.session.create(layout.delete_topic_path(topic), makepath=True)
        except NodeExists:
            pass  # already marked for deletion

    def delete_topic_deletions(self, topics: Iterable[str]) -> None:
        keyed = [(t, Op.delete(layout.delete_topic_path(t))) for t in topics]
        self._multi_dropping(keyed, _ignore_no_node)

    # -- /isr_change_notification

    def create_isr_change_notification(self, tps: Iterable[TopicPartition]) -> str:
        """A leader announces ISR changes; returns the sequential node's name."""
        path = self.session.create(layout.isr_change_path(layout.ISR_CHANGE_PREFIX),
                                   layout.encode_partition_list(tps), sequential=True, makepath=True)
        return path.rsplit("/", 1)[1]

    def get_isr_change_notifications(self, watch: Watch | None = None) -> list[str]:
        return self._children(layout.ISR_CHANGE_NOTIFICATION, watch)

    def get_isr_change_partitions(self, names: Sequence[str]) -> set[TopicPartition]:
        """The union of the partitions named by these notifications (one batched read)."""
        out: set[TopicPartition] = set()
        for got in self._get_many([layout.isr_change_path(n) for n in names]):
            if got is not None:
                out |= layout.decode_partition_list(got[0])
        return out

    def delete_isr_change_notifications(self, names: Iterable[str]) -> None:
        keyed = [(n, Op.delete(layout.isr_change_path(n))) for n in names]
        self._multi_dropping(keyed, _ignore_no_node)


def _names_a_topic(topic: str) -> bool:
    """False for a name holding "/": no topic's name holds one (Kafka's legal characters
    are ``[a-zA-Z0-9._-]``), and its path would name a node under another topic's --
    ``bar/partitions`` is bar's partitions node, and deleting it as a topic marked bar."""
    return "/" not in str(topic)


def _with_version(state: LeaderAndIsr, zk_version: int) -> LeaderAndIsr:
    return LeaderAndIsr(state.leader, state.leader_epoch, state.isr, zk_version, state.controller_epoch)


def _ignore_no_node(_key: object, exc: StoreError) -> None:
    if not isinstance(exc, NoNode):
        raise exc
