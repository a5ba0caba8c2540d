"""``kreplica bench replication``: end-to-end acks=all produce on RF=3, beside a plain log append.

Three ReplicaManagers in one process on virtual time (SimScheduler) with a
zero-latency InProcessTransport.  A producer keeps ``in_flight`` acks=all
requests of one ready batch (``batch_records`` records of ``record_bytes``)
outstanding against the leader; followers replicate by fetching (seed 004's
two-fetch HW advance); a request counts once it is acknowledged, i.e.
committed on all three replicas.  The wall-clock time of the whole run gives
committed records/s.  The peer figure is a single Log taking the same batches
through ``append_batches_as_leader`` in the same run.  By default every request
carries its own batch, as a producer's fresh data does: with a few batches
recycled (``--distinct 8``) the peer and the leader read their input from the
CPU caches while the followers, copying from the leader's segment, never can.  The AlterIsr path is a
conditional write on an in-memory state (no ISR change happens in a healthy run).
"""
from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from ..cli import argument, at_least, directory, integer_at_least
from ..errors import NONE, InvalidUpdateVersion
from ..log import Log, LogConfig
from ..log.mapped_file import MappedFile
from ..protocol import (
    AlterIsrRequest,
    AlterIsrResponse,
    FetchRequest,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    OffsetsForLeaderEpochRequest,
    ProducePartition,
    ProduceRequest,
    TopicPartition,
)
from ..records import encode_batch
from ..replica.replica_manager import ReplicaManager
from ..runtime import SimScheduler
from ..transport import InProcessTransport

HELP = "acks=all produce on RF=3 (virtual time) beside a single-replica log append"

BROKERS = (1, 2, 3)
TP = TopicPartition("bench", 0)
SEGMENT_BYTES = 256 << 20


def _batches(record_bytes: int, batch_records: int, distinct: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    return [
        encode_batch([rng.randbytes(record_bytes) for _ in range(batch_records)], timestamp_ms=0)
        for _ in range(distinct)
    ]


def _handler(rm: ReplicaManager):
    def handle(src: int, request: Any, respond: Any) -> None:
        if isinstance(request, FetchRequest):
            rm.handle_fetch(request, respond)
        elif isinstance(request, ProduceRequest):
            rm.handle_produce(request, respond)
        elif isinstance(request, OffsetsForLeaderEpochRequest):
            respond(rm.handle_offsets_for_leader_epoch(request))
        else:
            raise TypeError(f"unexpected request {request!r}")

    return handle


def run_replicated(root: Path, batches: list[bytes], count: int, in_flight: int) -> dict[str, float]:
    """Produce ``count`` batches with acks=all to a 3-replica partition; wall-clock figures."""
    cluster = prepare_replicated(root)
    try:
        produced = produce_replicated(cluster, batches, count, in_flight)
    except BaseException:
        _shutdown(cluster)  # a failed round's logs are not left open under its removed directory
        raise
    return finish_replicated(cluster, produced, batches, count)


def _shutdown(cluster: dict[str, Any]) -> None:
    for rm in cluster["managers"].values():
        rm.shutdown(clean=True)


def prepare_replicated(root: Path) -> dict[str, Any]:
    """Three ReplicaManagers with the partition online (untimed: the setup of
    :func:`run_replicated`, apart so that pytest-benchmark times the produce alone)."""
    scheduler = SimScheduler(0)
    transport = InProcessTransport(scheduler, latency_ms=0)
    state = {"isr": BROKERS, "version": 0}

    def alter_isr(req: AlterIsrRequest, on_response: Any) -> None:
        if req.zk_version != state["version"]:
            on_response(AlterIsrResponse(req.tp, InvalidUpdateVersion.code))
            return
        state["isr"], state["version"] = req.new_isr, state["version"] + 1
        on_response(AlterIsrResponse(req.tp, NONE, req.leader_epoch, req.new_isr, state["version"]))

    config = {"segment.bytes": SEGMENT_BYTES}
    cluster: dict[str, Any] = {"scheduler": scheduler, "transport": transport, "managers": {}}
    try:
        for b in BROKERS:
            rm = ReplicaManager(
                b, root / f"broker-{b}", scheduler, config,
                send=lambda dst, req, cb, b=b: transport.send(b, dst, req, cb),
                alter_isr=lambda req, cb: scheduler.call_soon(alter_isr, req, cb),
            )
            rm.startup()
            transport.register(b, _handler(rm))
            cluster["managers"][b] = rm
        ps = LeaderAndIsrPartitionState(TP, 1, 1, 0, BROKERS, 0, BROKERS)
        for rm in cluster["managers"].values():
            rm.handle_leader_and_isr(LeaderAndIsrRequest(0, 1, (ps,)))
        scheduler.advance(1)
    except BaseException:
        _shutdown(cluster)  # the brokers already started (and their open logs) go with the error
        raise
    return cluster


def produce_replicated(cluster: dict[str, Any], batches: list[bytes], count: int, in_flight: int) -> dict[str, Any]:
    """The measured stretch: ``count`` acks=all requests, ``in_flight`` outstanding."""
    scheduler, transport = cluster["scheduler"], cluster["transport"]
    sent = acked = 0
    failures: list[int] = []

    def on_ack(response: Any) -> None:
        nonlocal acked
        code = response.partitions[0].error_code
        if code != NONE:
            failures.append(code)
        acked += 1
        send_next()

    def send_next() -> None:
        nonlocal sent
        if sent < count:
            batch = batches[sent % len(batches)]
            sent += 1
            transport.send(-1, 1, ProduceRequest(-1, 30000, (ProducePartition(TP, batch),)), on_ack)

    t0, c0 = time.perf_counter(), time.thread_time()
    for _ in range(min(in_flight, count)):
        send_next()
    scheduler.run_until(lambda: acked == count, 3_600_000)
    elapsed, cpu = time.perf_counter() - t0, time.thread_time() - c0
    return {"seconds": elapsed, "cpu_seconds": cpu, "acked": acked, "failures": failures}


def finish_replicated(cluster: dict[str, Any], produced: dict[str, Any], batches: list[bytes],
                      count: int) -> dict[str, float]:
    """Check the run (every request acknowledged, the replicas converged), shut the
    brokers down (whether or not the check passes), and return the figures (untimed)."""
    managers, acked, failures = cluster["managers"], produced["acked"], produced["failures"]
    elapsed, cpu = produced["seconds"], produced["cpu_seconds"]
    leader = managers[1].partitions[TP]
    try:
        if failures or acked != count:
            raise RuntimeError(f"replication bench: {acked}/{count} acknowledged, errors {failures[:5]}")
        ends = {b: rm.partitions[TP].log_end_offset for b, rm in managers.items()}
        if len(set(ends.values())) != 1 or leader.high_watermark != ends[1]:
            raise RuntimeError(f"replicas did not converge: LEOs {ends}, HW {leader.high_watermark}")
        fetches = sum(f.fetches_sent for rm in managers.values() for f in rm.fetchers.values())
    finally:
        _shutdown(cluster)
    return {"seconds": elapsed, "cpu_seconds": cpu, "records": leader.high_watermark, "follower_fetches": fetches,
            "bytes": sum(len(batches[i % len(batches)]) for i in range(count))}


def breakdown(root: Path, batches: list[bytes], count: int, in_flight: int,
              replicated: bool = True) -> dict[str, float]:
    """One more round, reporting only: this thread's CPU seconds in each broker's log
    writes (``MappedFile.write_run``: the CRC-checked copy into the segment), in the
    leader's fetch prefaults, and in everything else (appends' bookkeeping, produce and
    fetch handling, purgatory, scheduler, transport); ``replicated=False`` times the
    single-log peer the same way.  Timing hooks cost a little, so the headline figures
    never come from this round."""
    spent: dict[str, float] = {}
    write_run, prefault = MappedFile.write_run, MappedFile.prefault

    def timed_write(self: MappedFile, *args: Any) -> None:
        c = time.thread_time()
        try:
            write_run(self, *args)
        finally:
            key = f"write {self.path.parent.parent.name}" if replicated else "write"  # <root>/broker-N/<tp>/
            spent[key] = spent.get(key, 0.0) + time.thread_time() - c

    def timed_prefault(self: MappedFile, *args: Any) -> None:
        c = time.thread_time()
        try:
            prefault(self, *args)
        finally:
            spent["prefault"] = spent.get("prefault", 0.0) + time.thread_time() - c

    MappedFile.write_run, MappedFile.prefault = timed_write, timed_prefault  # type: ignore[method-assign]
    try:
        total = (run_replicated(root, batches, count, in_flight) if replicated
                 else run_single_log(root, batches, count))["cpu_seconds"]
    finally:
        MappedFile.write_run, MappedFile.prefault = write_run, prefault  # type: ignore[method-assign]
    spent["rest"] = total - sum(spent.values())
    spent["total"] = total
    return spent


def run_single_log(root: Path, batches: list[bytes], count: int) -> dict[str, float]:
    """The same batches appended to one Log (``append_batches_as_leader``): the peer figure."""
    log = open_single_log(root)
    try:
        elapsed, cpu = append_single_log(log, batches, count)
        records = log.log_end_offset
    finally:
        log.close()
    return {"seconds": elapsed, "cpu_seconds": cpu, "records": records}


def open_single_log(root: Path) -> Log:
    return Log.open(root / "single-0", LogConfig.from_dict({"segment.bytes": SEGMENT_BYTES}))


def append_single_log(log: Log, batches: list[bytes], count: int) -> tuple[float, float]:
    """The peer's measured stretch: (wall s, this thread's CPU s)."""
    t0, c0 = time.perf_counter(), time.thread_time()
    for i in range(count):
        log.append_batches_as_leader(batches[i % len(batches)], 0)
    return time.perf_counter() - t0, time.thread_time() - c0


def run(record_bytes: int, batch_records: int = 1000, count: int = 500, in_flight: int = 32,
        data_dir: str | None = None, repeat: int = 3, with_breakdown: bool = False,
        distinct: int = 0) -> dict[str, Any]:
    """Interleaved rounds of both runs; the best round of each counts (the machine is shared).
    ``distinct`` batches are cycled through (0: one per request); ``with_breakdown`` adds
    one timed round (``breakdown``) after them."""
    batches = _batches(record_bytes, batch_records, distinct or count, record_bytes)
    singles, replicated = [], []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="kreplica-bench-", dir=data_dir) as tmp:
            singles.append(run_single_log(Path(tmp), batches, count))
        with tempfile.TemporaryDirectory(prefix="kreplica-bench-", dir=data_dir) as tmp:
            replicated.append(run_replicated(Path(tmp), batches, count, in_flight))
    single = min(singles, key=lambda r: r["seconds"])
    best = min(replicated, key=lambda r: r["seconds"])
    rep_rate = best["records"] / best["seconds"]
    single_rate = single["records"] / single["seconds"]
    return {
        "record_bytes": record_bytes,
        "batch_records": batch_records,
        "batches": count,
        "distinct_batches": len(batches),
        "committed_records_per_s": rep_rate,
        "committed_mb_per_s": best["bytes"] / best["seconds"] / 1e6,
        "single_append_records_per_s": single_rate,
        "ratio": rep_rate / single_rate,
        # The same rounds in this thread's CPU time: on a shared machine a low wall-clock
        # ratio with a sound CPU ratio is load from elsewhere, not a slow path.
        "cpu_ratio": (min(r["cpu_seconds"] for r in singles) / single["records"])
        / (min(r["cpu_seconds"] for r in replicated) / best["records"]),
        "follower_fetches": best["follower_fetches"],
        "rounds_committed_records_per_s": [r["records"] / r["seconds"] for r in replicated],
        "breakdown": _breakdown_rounds(batches, count, in_flight, data_dir) if with_breakdown else None,
    }


def _breakdown_rounds(batches: list[bytes], count: int, in_flight: int,
                      data_dir: str | None) -> tuple[dict[str, float], dict[str, float]]:
    out = []
    for replicated in (False, True):
        with tempfile.TemporaryDirectory(prefix="kreplica-bench-", dir=data_dir) as tmp:
            out.append(breakdown(Path(tmp), batches, count, in_flight, replicated))
    return out[0], out[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kreplica bench replication", description=__doc__.split("\n")[0])
    add_arguments(parser)
    return execute(parser.parse_args(argv))


def _sizes(text: str) -> list[int]:
    try:
        return [integer_at_least(1)(size) for size in text.split(",")]
    except ValueError:
        raise ValueError(f"{text!r}: expected record sizes in bytes (integers >= 1), e.g. 100,1024") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", type=argument(_sizes), default=[100, 1024],
                        help="record sizes in bytes, comma-separated (default 100,1024)")
    parser.add_argument("--batch-records", type=at_least(1), default=1000,
                        help="records per produce request (default 1000)")
    parser.add_argument("--batches", type=at_least(1), default=None,
                        help="batches per size (default: about 50 MiB of records)")
    parser.add_argument("--in-flight", type=at_least(1), default=32, help="acks=all requests outstanding")
    parser.add_argument("--repeat", type=at_least(1), default=3, help="rounds per size; the best counts")
    parser.add_argument("--data-dir", type=directory, default=None, help="where the temporary logs go")
    parser.add_argument("--distinct", type=at_least(0), default=0,
                        help="distinct batches cycled through (default 0: every request its own, "
                             "as fresh producer data; a few recycled batches stay in the CPU caches)")
    parser.add_argument("--breakdown", action="store_true",
                        help="one more timed round per size: CPU ms in each broker's log writes, "
                             "the fetch prefaults and the rest")


def execute(args: argparse.Namespace) -> int:
    fresh = "every request its own batch" if not args.distinct else f"{args.distinct} batches recycled"
    print("acks=all, RF=3, in-process, virtual time, zero latency; wall-clock throughput, "
          f"best of {args.repeat} interleaved rounds; {fresh}; MB/s of the encoded batches (10^6 bytes)")
    print(f"{'record':>7} {'batches':>8} {'committed rec/s':>16} {'MB/s':>7} "
          f"{'1-replica append rec/s':>23} {'ratio':>6} {'CPU-time ratio':>15}")
    for size in args.sizes:
        count = args.batches or max(100, (50 << 20) // (size * args.batch_records))
        r = run(size, args.batch_records, count, args.in_flight, args.data_dir, args.repeat, args.breakdown,
                args.distinct)
        print(f"{size:>6}B {count:>8} {r['committed_records_per_s']:>16,.0f} {r['committed_mb_per_s']:>7.0f} "
              f"{r['single_append_records_per_s']:>23,.0f} {r['ratio']:>6.3f} {r['cpu_ratio']:>15.3f}")
        if r["breakdown"]:
            _print_breakdown(*r["breakdown"])
    return 0


def _print_breakdown(single: dict[str, float], replicated: dict[str, float]) -> None:
    """The timed rounds' CPU ms by part, and the CPU ratio the replicated round would have if
    replication's own work were free: its log writes and prefaults plus three times the
    single log's appends' bookkeeping (the peer's "rest")."""
    for name, spent in (("1-replica", single), ("replicated", replicated)):
        parts = ", ".join(f"{k} {v * 1e3:.1f}" for k, v in sorted(spent.items()) if k not in ("rest", "total"))
        print(f"{'':>8} {name} timed round, CPU ms: {parts}, rest {spent['rest'] * 1e3:.1f} "
              f"(total {spent['total'] * 1e3:.1f})")
    floor = replicated["total"] - replicated["rest"] + 3 * single["rest"]
    print(f"{'':>8} CPU ratio with replication's own work free: {single['total'] / floor:.2f}")


if __name__ == "__main__":
    raise SystemExit(main())
