"""ReplicaManager: one per broker; hosts its partitions and answers the data-plane requests.

Theory of operation (seed 001 'C', seed 004).  The controller's LeaderAndIsr
starts replicas (partition dir ``<data_dir>/<topic>-<partition>``) and makes each
leader or follower; the INIT flag deletes local partitions it does not list.
StopReplica stops (and maybe deletes) replicas, UpdateMetadata feeds the
metadata cache; all three refuse an older controller epoch with
STALE_CONTROLLER_EPOCH, and a partition state with an older leader epoch is
ignored.  Produce appends on the leader and, for acks=all, waits in the produce
purgatory for the HW; fetch serves followers (recording their LEO, which moves
the HW) and consumers (below the HW only), long-polling in the fetch purgatory.
Followers replicate through one :class:`ReplicaFetcher` per source broker.

Sans-I/O: time comes from the injected scheduler, requests to other brokers go
out through ``send(dst, request, on_response)``, ISR proposals through
``alter_isr(request, on_response)``.  Timers: the ISR shrink check (every half
``replica.lag.time.max.ms``) and the HW checkpoint
(``replica.high.watermark.checkpoint.interval.ms``, and at a clean shutdown).
"""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any, Callable, Iterable

from .. import errors
from ..config import LOG_KEYS, LONG_MAX, validate
from ..log import Log, LogConfig
from ..log.checkpoints import OffsetCheckpointFile
from ..log.log_dir import CLEAN_SHUTDOWN
from ..protocol import (
    AlterIsrRequest,
    AlterIsrResponse,
    EpochEndOffset,
    ISOLATION_LEVELS,
    FetchPartition,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    ProducePartitionResult,
    ProduceRequest,
    ProduceResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    TopicPartition,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from ..protocol.common import NO_LEADER
from ..runtime import Scheduler
from .delayed_fetch import DelayedFetch
from .delayed_produce import DelayedProduce, ProduceStatus
from .fetcher import ReplicaFetcher
from .metadata_cache import MetadataCache
from .partition import Partition, Role

_LEADER = Role.LEADER  # a module constant: Enum class attribute lookups are slow in 3.11
from .purgatory import Purgatory

HW_CHECKPOINT_FILE = "replication-offset-checkpoint"
# Kafka's LogManager files: every hosted log's recovery point and log start offset.  Each
# log also keeps its own recovery point (written whenever it must move, truncation
# included), which is what recovery trusts; these are for anything reading the data dir
# as Kafka's (a Kafka broker, kreplica's Spark source).
RECOVERY_POINT_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_CHECKPOINT_FILE = "log-start-offset-checkpoint"
_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")

Send = Callable[[int, Any, Callable[[Any], None]], None]
AlterIsr = Callable[[AlterIsrRequest, Callable[[AlterIsrResponse], None]], None]


class ReplicaManager:
    def __init__(
        self,
        broker_id: int,
        data_dir: str | os.PathLike[str],
        scheduler: Scheduler,
        config: dict[str, Any] | None,
        send: Send,
        alter_isr: AlterIsr,
    ) -> None:
        self.broker_id = broker_id
        self.data_dir = Path(data_dir)
        self.scheduler = scheduler
        self.config = validate(config)
        self.log_config = LogConfig.from_dict({k: self.config[k] for k in LOG_KEYS})
        self._send = send
        self._alter_isr = alter_isr
        self.partitions: dict[TopicPartition, Partition] = {}
        self.metadata_cache = MetadataCache()
        self.controller_epoch = -1
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self.produce_purgatory = Purgatory(scheduler, "Produce", bound=self._produce_bound)
        self.fetch_purgatory = Purgatory(scheduler, "Fetch")
        self._hw_checkpoint = OffsetCheckpointFile(self.data_dir / HW_CHECKPOINT_FILE)
        self._checkpointed_hw: dict[TopicPartition, int] = {}
        self._log_checkpoints = {
            RECOVERY_POINT_CHECKPOINT_FILE: OffsetCheckpointFile(self.data_dir / RECOVERY_POINT_CHECKPOINT_FILE),
            LOG_START_CHECKPOINT_FILE: OffsetCheckpointFile(self.data_dir / LOG_START_CHECKPOINT_FILE),
        }
        # What the last run wrote, kept for logs not opened yet (they have not moved).
        self._checkpointed_logs: dict[str, dict[TopicPartition, int]] = {name: {} for name in self._log_checkpoints}
        # Partition dirs found at startup but not (yet) named by a LeaderAndIsr.
        self._unopened: dict[TopicPartition, Path] = {}
        self._timers: list[Any] = []
        self.running = False
        # Some partition log was not closed cleanly last time (the broker registration says so).
        self.recovered_uncleanly = False

    # ---- lifecycle -----------------------------------------------------------------------
    def startup(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self._hw_checkpoint.path.exists():
            self._checkpointed_hw = self._hw_checkpoint.read()
        for name, file in self._log_checkpoints.items():
            if file.path.exists():
                self._checkpointed_logs[name] = file.read()
        for entry in sorted(self.data_dir.iterdir()):
            m = _PARTITION_DIR.match(entry.name)
            if entry.is_dir() and m:
                self._unopened[TopicPartition(m["topic"], int(m["partition"]))] = entry
                # Logs open lazily, so their clean-shutdown markers are still as the last run left them.
                self.recovered_uncleanly |= not (entry / CLEAN_SHUTDOWN).exists()
        self.running = True
        self._every(self.config["replica.lag.time.max.ms"] // 2 or 1, self.maybe_shrink_isr)
        self._every(self.config["replica.high.watermark.checkpoint.interval.ms"], self.checkpoint_high_watermarks)
        self._every(self.config["log.retention.check.interval.ms"], self.cleanup_logs)
        if self.config["log.flush.scheduler.interval.ms"] < LONG_MAX:  # Kafka's default: never
            self._every(self.config["log.flush.scheduler.interval.ms"], self.flush_dirty_logs)
        self._every(self.config["log.flush.offset.checkpoint.interval.ms"],
                    lambda: self.checkpoint_logs(RECOVERY_POINT_CHECKPOINT_FILE))
        self._every(self.config["log.flush.start.offset.checkpoint.interval.ms"],
                    lambda: self.checkpoint_logs(LOG_START_CHECKPOINT_FILE))

    def _every(self, period_ms: int, fn: Callable[[], Any]) -> None:
        slot = len(self._timers)
        self._timers.append(None)

        def tick() -> None:
            if not self.running:
                return
            fn()
            self._timers[slot] = self.scheduler.call_later(period_ms, tick)

        self._timers[slot] = self.scheduler.call_later(period_ms, tick)

    def shutdown(self, clean: bool = True) -> None:
        """Stop fetching and timers.  Clean: checkpoint HWs and close logs.

        Unclean models a crash: no final HW checkpoint and no clean-shutdown
        marker; whatever the logs flushed is what the next start recovers.
        """
        if not self.running:
            return
        self.running = False
        for timer in self._timers:
            if timer is not None:
                timer.cancel()
        for fetcher in self.fetchers.values():
            fetcher.shutdown()
        self.fetchers.clear()
        self.produce_purgatory.cancel_all()
        self.fetch_purgatory.cancel_all()
        if clean:
            self.checkpoint_high_watermarks()
        for p in self.partitions.values():
            if clean:
                p.log.close()
            else:
                p.log.abandon()
        if clean:  # after the logs closed: their recovery points are their ends now
            for name in self._log_checkpoints:
                self.checkpoint_logs(name)
        self.partitions.clear()

    def checkpoint_high_watermarks(self) -> None:
        """Write every hosted partition's HW to ``replication-offset-checkpoint``."""
        hws = {tp: 0 for tp in self._unopened if tp not in self._checkpointed_hw}
        hws.update((tp, p.high_watermark) for tp, p in self.partitions.items())
        self._checkpointed_hw = _write_over(self._hw_checkpoint, self._checkpointed_hw, hws)

    def flush_dirty_logs(self) -> int:
        """Kafka's LogManager.flushDirtyLogs: flush every hosted log whose ``flush.ms`` has
        passed with appends unflushed; returns how many flushed."""
        now = self.scheduler.now_ms()
        return sum(p.log.maybe_flush(now) for p in self.partitions.values())

    def cleanup_logs(self) -> int:
        """Retention (Kafka's LogManager.cleanupLogs): every hosted log, leader or follower,
        deletes its oldest segments past ``retention.ms`` / beyond ``retention.bytes``, only
        below its own HW.  The leader's new log start reaches followers in fetch answers:
        each adopts it (KIP-107) and its next pass drops the segments below; one that
        fetches below it starts over there (OFFSET_OUT_OF_RANGE).  Returns the number of
        segments deleted."""
        return sum(p.log.delete_old_segments() for p in self.partitions.values())

    def checkpoint_logs(self, name: str) -> None:
        """Write every hosted log's recovery point (``recovery-point-offset-checkpoint``) or
        log start offset (``log-start-offset-checkpoint``), as Kafka's LogManager does."""
        recovery = name == RECOVERY_POINT_CHECKPOINT_FILE
        offsets = {tp: p.log.recovery_point if recovery else p.log.log_start_offset
                   for tp, p in self.partitions.items()}
        self._checkpointed_logs[name] = _write_over(self._log_checkpoints[name], self._checkpointed_logs[name],
                                                    offsets)

    # ---- partitions --------------------------------------------------------------------
    def _start_replica(self, tp: TopicPartition, topic_config: Iterable[tuple[str, str]] = ()) -> Partition:
        """startReplica (seed 001 'C'): open or create the partition dir, restore the HW.
        ``topic_config``: the topic's overrides of the broker's log keys (retention,
        segments, flush, ``min.insync.replicas``, ...), applied when the replica starts."""
        p = self.partitions.get(tp)
        if p is not None:
            return p
        config, log_config = self.configs_with(topic_config)
        self._unopened.pop(tp, None)
        # The log start this broker last published: a start moved inside a segment (KIP-107)
        # must not fall back to the segment's base, making what lies below readable again.
        log = Log.open(self.data_dir / str(tp), log_config, clock=self.scheduler,
                       log_start_offset=self._checkpointed_logs[LOG_START_CHECKPOINT_FILE].get(tp))
        hw = self._checkpointed_hw.get(tp)
        if hw is not None:
            log.update_high_watermark(hw)
        p = Partition(
            tp, self.broker_id, log, config, self.scheduler, self._alter_isr, self._on_high_watermark
        )
        self.partitions[tp] = p
        return p

    def configs_with(self, topic_config: Iterable[tuple[str, str]]) -> tuple[dict[str, Any], LogConfig]:
        """The broker's config with a topic's overrides over it, whole and as a LogConfig."""
        overrides = dict(topic_config)
        if not overrides:
            return self.config, self.log_config
        checked = validate(overrides, allowed=LOG_KEYS)  # the controller's store held them
        config = {**self.config, **{k: checked[k] for k in overrides}}
        return config, LogConfig.from_dict({k: config[k] for k in LOG_KEYS})

    def update_topic_configs(self, topic_configs: dict[str, Iterable[tuple[str, str]]]) -> int:
        """Topics' overrides changed (``/config/changes``, read by the broker): every hosted
        replica of them takes them at once, as Kafka's TopicConfigHandler does -- retention
        and flush at the next check, ``min.insync.replicas`` at the next produce, segment
        sizes at the next roll.  One pass over the hosted replicas; returns how many
        were updated."""
        configs = {topic: self.configs_with(pairs) for topic, pairs in topic_configs.items()}
        updated = 0
        for tp, p in self.partitions.items():
            got = configs.get(tp.topic)
            if got is not None:
                p.update_config(got[0])
                p.log.config = got[1]
                updated += 1
        return updated

    def _delete_partition(self, tp: TopicPartition) -> None:
        self._remove_fetcher(tp)
        p = self.partitions.pop(tp, None)
        path = self._unopened.pop(tp, None)
        if p is not None:
            p.make_offline()
            self._complete_delayed(tp)
            p.log.delete()
        elif path is not None and path.exists():
            shutil.rmtree(path)
        for written in (self._checkpointed_hw, *self._checkpointed_logs.values()):
            written.pop(tp, None)

    def _produce_bound(self, tp: TopicPartition) -> int | None:
        """Waiting produces with a required offset above the leader's HW cannot complete
        yet (seed 004's checkEnoughReplicasReachOffset); without a leader all must answer."""
        p = self.partitions.get(tp)
        if p is None or p.role is not Role.LEADER:
            return None
        return p.log.high_watermark

    def _on_high_watermark(self, tp: TopicPartition) -> None:
        self._complete_delayed(tp)

    def _complete_delayed(self, tp: TopicPartition) -> None:
        self.produce_purgatory.check_and_complete(tp)
        self.fetch_purgatory.check_and_complete(tp)

    # ---- fetchers ---------------------------------------------------------------------------
    def _add_fetcher(self, tp: TopicPartition, leader: int, leader_epoch: int) -> None:
        self._remove_fetcher(tp)
        fetcher = self.fetchers.get(leader)
        if fetcher is None:
            fetcher = ReplicaFetcher(
                self.broker_id, leader, self.scheduler, self.config, self._send, self.partitions.get
            )
            self.fetchers[leader] = fetcher
        fetcher.add_partition(tp, leader_epoch)

    def _remove_fetcher(self, tp: TopicPartition) -> None:
        for leader, fetcher in list(self.fetchers.items()):
            fetcher.remove_partition(tp)
            if not fetcher.states:
                fetcher.shutdown()
                del self.fetchers[leader]

    # ---- dispatch ------------------------------------------------------------------------
    def handle_request(self, request: Any, respond: Callable[[Any], None]) -> bool:
        """Answer any request addressed to the replica manager (controller requests,
        produce, fetch, OffsetsForLeaderEpoch); False when ``request`` is none of them."""
        if isinstance(request, FetchRequest):
            self.handle_fetch(request, respond)
        elif isinstance(request, ProduceRequest):
            self.handle_produce(request, respond)
        else:
            answer = _IMMEDIATE.get(type(request))
            if answer is None:
                return False
            respond(answer(self, request))
        return True

    # ---- controller requests ----------------------------------------------------------
    def _stale_controller(self, epoch: int) -> bool:
        if epoch < self.controller_epoch:
            return True
        self.controller_epoch = epoch
        return False

    def handle_leader_and_isr(self, req: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
        """on_LeaderAndISRCommand (seed 001 'C')."""
        if self._stale_controller(req.controller_epoch):
            return LeaderAndIsrResponse(errors.StaleControllerEpoch.code)
        results: list[tuple[TopicPartition, int]] = []
        for state in req.partition_states:
            results.append((state.tp, self._apply_partition_state(state)))
        if req.is_init:
            listed = {s.tp for s in req.partition_states}
            for tp in [tp for tp in (*self.partitions, *self._unopened) if tp not in listed]:
                self._delete_partition(tp)
        return LeaderAndIsrResponse(errors.NONE, tuple(results))

    def _apply_partition_state(self, state: LeaderAndIsrPartitionState) -> int:
        if self.broker_id not in state.replicas:
            return errors.UnknownTopicOrPartition.code
        current = self.partitions.get(state.tp)
        if current is not None:
            if state.leader_epoch < current.leader_epoch:
                # An older state: Kafka reports the stale epoch and changes nothing.
                return errors.StaleControllerEpoch.code
            if (
                state.leader_epoch == current.leader_epoch
                and state.zk_version <= current.zk_version
                and current.role is not Role.NONE
            ):
                return errors.NONE  # a replay of the state this replica already runs
        try:
            p = self._start_replica(state.tp, state.topic_config)
        except errors.KReplicaError as e:
            return e.code
        if state.leader == self.broker_id:
            self._remove_fetcher(state.tp)
            p.make_leader(state)
        else:
            if p.make_follower(state):
                self._remove_fetcher(state.tp)
                if state.leader != NO_LEADER:
                    self._add_fetcher(state.tp, state.leader, state.leader_epoch)
        # Waiting produces learn they lost leadership; parked fetches re-check.
        self._complete_delayed(state.tp)
        return errors.NONE

    def handle_stop_replica(self, req: StopReplicaRequest) -> StopReplicaResponse:
        """on_StopReplicaCommand (seed 001 'C'): stop fetching; delete the dir if asked."""
        if self._stale_controller(req.controller_epoch):
            return StopReplicaResponse(errors.StaleControllerEpoch.code)
        results = []
        for sp in req.partitions:
            p = self.partitions.get(sp.tp)
            if p is not None and 0 <= sp.leader_epoch < p.leader_epoch:
                results.append((sp.tp, errors.FencedLeaderEpoch.code))
                continue
            if sp.delete:
                self._delete_partition(sp.tp)
            else:
                self._remove_fetcher(sp.tp)
                if p is not None:
                    p.make_offline()
                    self._complete_delayed(sp.tp)
            results.append((sp.tp, errors.NONE))
        return StopReplicaResponse(errors.NONE, tuple(results))

    def handle_update_metadata(self, req: UpdateMetadataRequest) -> UpdateMetadataResponse:
        if self._stale_controller(req.controller_epoch):
            return UpdateMetadataResponse(errors.StaleControllerEpoch.code)
        self.metadata_cache.update(req)
        return UpdateMetadataResponse(errors.NONE)

    # ---- produce ------------------------------------------------------------------------------
    def handle_produce(self, req: ProduceRequest, respond: Callable[[ProduceResponse], None]) -> None:
        """Append on the leader; acks 0/1 answer at once, acks=all waits for the HW (seed 004)."""
        statuses = []
        for pp in req.partitions:
            p = self.partitions.get(pp.tp)
            if p is None:
                statuses.append(ProduceStatus(pp.tp, -1, -1, errors.UnknownTopicOrPartition.code, False))
                continue
            if _holds_a_second_batch(pp.records):
                statuses.append(ProduceStatus(pp.tp, -1, -1, errors.InvalidRecord.code, False))
                continue
            try:
                info = p.append_records_to_leader(pp.records, req.acks)
            except errors.KReplicaError as e:
                statuses.append(ProduceStatus(pp.tp, -1, -1, e.code, False))
                continue
            statuses.append(ProduceStatus(pp.tp, info.last_offset + 1, info.first_offset, errors.NONE, req.acks == -1,
                                          info.log_append_time))
            # Parked follower fetches have new data.
            self.fetch_purgatory.check_and_complete(pp.tp)
        if req.acks != -1 or not any(s.waiting for s in statuses):
            for s in statuses:
                s.waiting = False
            respond(ProduceResponse(tuple(ProducePartitionResult(s.tp, s.error_code, s.base_offset, s.log_append_time)
                                          for s in statuses)))
            return
        op = DelayedProduce(req.timeout_ms, statuses, self.partitions.get, respond)
        self.produce_purgatory.try_complete_else_watch(op, [s.tp for s in statuses if s.waiting])

    # ---- fetch ----------------------------------------------------------------------------------
    def handle_fetch(self, req: FetchRequest, respond: Callable[[FetchResponse], None]) -> None:
        """Serve followers (replica_id >= 0) and consumers; long-poll up to ``max_wait_ms``."""
        is_follower = req.replica_id >= 0
        if req.isolation not in ISOLATION_LEVELS:  # a misspelt level must not read past the HW
            respond(FetchResponse(errors.InvalidRequest.code, tuple(
                FetchPartitionData(fp.tp, errors.InvalidRequest.code) for fp in req.partitions)))
            return
        datas, size, failed = self._read_counted(req)
        if (
            req.max_wait_ms <= 0
            or not req.partitions
            or size >= req.min_bytes
            or failed
            or (is_follower and self._hw_news(req, datas))
        ):
            self._answer_fetch(req, datas, respond)
            return
        epochs = {}
        hw_sent = {}
        for d in datas:
            p = self.partitions[d.tp]
            epochs[d.tp] = p.leader_epoch
            hw_sent[d.tp] = d.high_watermark
        op = DelayedFetch(
            req, epochs, hw_sent, self.partitions.get,
            lambda: self._answer_fetch(req, self._read(req), respond),
        )
        self.fetch_purgatory.try_complete_else_watch(op, [fp.tp for fp in req.partitions])

    def _hw_news(self, req: FetchRequest, datas: list[FetchPartitionData]) -> bool:
        """Has any partition's HW moved past what this follower was last told?"""
        for d in datas:
            r = self.partitions[d.tp].remote_replicas.get(req.replica_id)
            if r is not None and d.high_watermark > r.high_watermark_sent:
                return True
        return False

    def _answer_fetch(
        self, req: FetchRequest, datas: list[FetchPartitionData], respond: Callable[[FetchResponse], None]
    ) -> None:
        if req.replica_id >= 0:
            for d in datas:
                p = self.partitions.get(d.tp)
                r = p.remote_replicas.get(req.replica_id) if p is not None else None
                if r is not None and d.error_code == errors.NONE:
                    r.high_watermark_sent = d.high_watermark
        respond(FetchResponse(errors.NONE, tuple(datas)))

    def _read(self, req: FetchRequest) -> list[FetchPartitionData]:
        return self._read_counted(req)[0]

    def _read_counted(self, req: FetchRequest) -> tuple[list[FetchPartitionData], int, bool]:
        """The partitions' data, the bytes read, and whether any partition answered an error."""
        is_follower = req.replica_id >= 0
        budget = req.max_bytes
        size = 0
        failed = False
        out = []
        for fp in req.partitions:
            d = self._read_partition(req, fp, is_follower, budget)
            n = len(d.records)
            size += n
            if n:  # most partitions of a fetch answer nothing: the budget stays as it is
                budget = max(0, budget - n)
            failed = failed or d.error_code != errors.NONE
            out.append(d)
        return out, size, failed

    def _read_partition(
        self, req: FetchRequest, fp: FetchPartition, is_follower: bool, budget: int
    ) -> FetchPartitionData:
        tp = fp.tp
        p = self.partitions.get(tp)
        if p is None:
            return FetchPartitionData(tp, errors.UnknownTopicOrPartition.code)
        if p.role is not _LEADER:
            return FetchPartitionData(tp, errors.NotLeaderOrFollower.code)
        epoch = fp.current_leader_epoch
        if epoch >= 0 and epoch != p.leader_epoch:  # the common case, an epoch that matches, skips the call
            return FetchPartitionData(tp, p.check_leader_epoch(epoch))
        log = p.log
        leo = log.log_end_offset
        offset = fp.fetch_offset
        if offset > leo or offset < log.log_start_offset:
            return FetchPartitionData(
                tp, errors.OffsetOutOfRange.code, log.high_watermark, log.log_start_offset, leo
            )
        if is_follower:
            # Seed 004: the fetch offset is the follower's LEO; recording it may move the HW.
            p.update_follower_fetch_state(req.replica_id, offset, fp.log_start_offset)
            upper = leo
        else:
            upper = log.high_watermark if req.isolation == "committed" else leo
        records: Any = b""
        # A follower caught up fetches at the LEO: nothing to read, and read_records would only
        # check the bounds above again to answer the same empty bytes.
        if budget > 0 and offset < upper:
            records = p.read_records(offset, min(fp.max_bytes, budget), upper, prefault=True)
        return FetchPartitionData(
            tp, errors.NONE, log.high_watermark, log.log_start_offset, log.log_end_offset, records
        )

    # ---- OffsetsForLeaderEpoch ------------------------------------------------------------
    def handle_offsets_for_leader_epoch(self, req: OffsetsForLeaderEpochRequest) -> OffsetsForLeaderEpochResponse:
        """KIP-101: where did the requested epoch end in this leader's log?"""
        out = []
        for op in req.partitions:
            p = self.partitions.get(op.tp)
            if p is None:
                out.append(EpochEndOffset(op.tp, errors.UnknownTopicOrPartition.code))
                continue
            if p.role is not Role.LEADER:
                out.append(EpochEndOffset(op.tp, errors.NotLeaderOrFollower.code))
                continue
            code = p.check_leader_epoch(op.current_leader_epoch)
            if code != errors.NONE:
                out.append(EpochEndOffset(op.tp, code))
                continue
            epoch, end = p.end_offset_for_epoch(op.leader_epoch)
            out.append(EpochEndOffset(op.tp, errors.NONE, epoch, end))
        return OffsetsForLeaderEpochResponse(tuple(out))

    # ---- ISR maintenance ----------------------------------------------------------------------
    def maybe_shrink_isr(self) -> None:
        """The periodic check of seed 004 section 5, over every partition this broker leads."""
        for p in list(self.partitions.values()):
            p.maybe_shrink_isr()


def _holds_a_second_batch(records: Any) -> bool:
    """Does a produce's partition data hold a whole batch after its first?  Kafka refuses
    that (produce v3 and later: exactly one v2 batch per partition) with INVALID_RECORD,
    before the leader looks at it.  Frames are read as Kafka's batch iterator reads them:
    the 12-byte offset and length, then the length's bytes.  Bytes too few for a whole
    frame are no batch, and a length below any batch's is corrupt; both are left to the
    append's own framing to judge."""
    n = len(records)
    second = _frame_end(records, 0, n)
    return second > 0 and _frame_end(records, second, n) > 0


def _frame_end(records: Any, at: int, n: int) -> int:
    """Where the frame at ``at`` ends, or -1 if there is no sound whole frame there."""
    if n - at < 12:
        return -1
    size = int.from_bytes(records[at + 8:at + 12], "big", signed=True)
    if size < _SMALLEST_RECORD or n - at - 12 < size:
        return -1
    return at + 12 + size


_SMALLEST_RECORD = 14  # Kafka's LegacyRecord.RECORD_OVERHEAD_V0: a shorter frame is corrupt


def _write_over(file: OffsetCheckpointFile, written: dict[TopicPartition, int],
                current: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
    """Write ``current`` over what ``file`` last held: a partition not hosted now (not yet
    reopened, or stopped without delete) keeps its entry; a deleted one was dropped."""
    out = {**written, **current}
    file.write(out)
    return out


# Requests answered at once (no purgatory), by type.
_IMMEDIATE: dict[type, Callable[[ReplicaManager, Any], Any]] = {
    LeaderAndIsrRequest: ReplicaManager.handle_leader_and_isr,
    StopReplicaRequest: ReplicaManager.handle_stop_replica,
    UpdateMetadataRequest: ReplicaManager.handle_update_metadata,
    OffsetsForLeaderEpochRequest: ReplicaManager.handle_offsets_for_leader_epoch,
}
