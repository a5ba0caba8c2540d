"""The ``kreplica`` Spark data source: a broker's log directory as a DataFrame.

Issue 6, "Data source".  ``spark.read.format("kreplica").option("path", log_dir)
.option("topic", T).load()`` yields one row per record with the columns of
:data:`SCHEMA`.  The same reader tails the log as a streaming source.

Options: ``path`` (a broker's data dir), ``topic``; ``isolation`` =
``committed`` (default) | ``uncommitted``; ``max_partition_bytes`` (``"4m"``; default
one input partition per segment); ``on_corrupt`` = ``fail`` (default) | ``skip``
with ``corrupt_report`` = a directory for the count; streaming only:
``starting_offsets`` = ``earliest`` (default) | ``latest``, ``fail_on_data_loss``
(default true: records retention deleted before the query read them stop it, and so
does a partition the query has read whose directory is gone, its topic deleted or its
replica moved off the broker, as Spark's Kafka source counts a deleted topic; false
skips them, a segment deleted while being read included, and goes on without the
partition),
``max_records_per_trigger``.  Needs pyspark 4.2 or later (filter
pushdown and read limits of the Python Data Source API).  ``timestamp`` is the record's Kafka timestamp in ms since the
epoch, a long, so rows equal the log exactly and pushdown compares integers.

Theory of operation
-------------------
Planning (driver side) reads mostly small files: the directory listing, each
segment's sparse ``.index`` and ``.timeindex`` (see :mod:`kreplica.spark.log_files`)
and ``replication-offset-checkpoint`` for the high watermark.  Of the record data
it reads one batch per segment, to check the index there, and the active
segment's tail when the HW may lie past the log end.  Each input partition is
the offset range of one segment, cut at offset-index entries (batch starts)
when ``max_partition_bytes`` is set, and clipped by the pushed-down partition,
offset and timestamp filters.

Reading (executor side) preads the range, validates it with the native
:func:`kreplica.records.scan_batches` (CRC and framing in C), decodes the kept
batches with :func:`kreplica.records.decode_records` and returns Arrow record
batches: no per-record Python bytecode runs.  A range that stops short of the
offsets it must cover is corrupt or torn: the read fails naming file and
position, or with ``on_corrupt=skip`` skips the bad batch, resynchronises on the
next batch boundary and records the count in ``corrupt_report``.

Isolation: ``committed`` (default) reads offsets below the high watermark, what a
Kafka consumer may see; ``uncommitted`` reads to the log end offset.  The HW is the
broker's last checkpoint of it (written every
``replica.high.watermark.checkpoint.interval.ms``), so a committed read may lag
the broker's in-memory HW by that interval but never includes a record the
broker had not committed.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows
from pyspark.sql.types import StructType

from ..arguments import java_boolean
from ..errors import InvalidConfig, OffsetOutOfRange, UnknownTopicOrPartition
from .log_files import OffsetBounds, PartitionFiles, list_partitions, read_high_watermarks
from .segment_reader import SegmentSlice, read_slice

SCHEMA = (
    "topic string, partition int, offset long, timestamp long, key binary, value binary, "
    "headers array<struct<key:string,value:binary>>, leader_epoch int"
)

ISOLATION = ("committed", "uncommitted")
ON_CORRUPT = ("fail", "skip")
_SIZE_SUFFIX = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
                "g": 1 << 30, "gb": 1 << 30, "t": 1 << 40, "tb": 1 << 40, "p": 1 << 50, "pb": 1 << 50}
_SIZE = re.compile(r"([0-9]+)([a-z]*)")


def parse_size(text: str) -> int:
    """``"4m"`` -> 4194304; the unit suffix is optional (bytes).  Read as Spark reads its
    own sizes (``spark.sql.files.maxPartitionBytes``): ASCII digits then a unit, blanks
    only around the whole, so ``"4 m"``, ``"+4m"``, ``"1_000"`` and ``"1.5g"`` are refused
    (``int()`` alone would take all but the last)."""
    match = _SIZE.fullmatch(text.strip().lower())
    if match is None or match.group(2) not in _SIZE_SUFFIX:
        raise InvalidConfig(f"max_partition_bytes: not a size: {text!r}")
    value = int(match.group(1)) * _SIZE_SUFFIX[match.group(2)]
    if value <= 0:
        raise InvalidConfig(f"max_partition_bytes: must be positive, got {text!r}")
    return value


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """The user's options, checked once at planning time."""

    path: str
    topic: str
    isolation: str = "committed"
    max_partition_bytes: int | None = None
    on_corrupt: str = "fail"
    corrupt_report: str | None = None
    starting_offsets: str = "earliest"
    fail_on_data_loss: bool = True
    max_records_per_trigger: int | None = None

    @classmethod
    def from_options(cls, options: dict[str, str]) -> "ReadOptions":
        opts = {k.lower(): v for k, v in options.items()}
        for required in ("path", "topic"):
            if not opts.get(required):
                raise InvalidConfig(f"the kreplica source needs option({required!r}, ...)")
        made = cls(
            path=opts["path"],
            topic=opts["topic"],
            isolation=opts.get("isolation", "committed").lower(),
            max_partition_bytes=(
                parse_size(opts["max_partition_bytes"]) if opts.get("max_partition_bytes") else None
            ),
            on_corrupt=opts.get("on_corrupt", "fail").lower(),
            corrupt_report=opts.get("corrupt_report") or None,
            starting_offsets=opts.get("starting_offsets", "earliest").lower(),
            fail_on_data_loss=_flag(opts, "fail_on_data_loss", True),
            max_records_per_trigger=(
                _positive(opts, "max_records_per_trigger") if opts.get("max_records_per_trigger") else None
            ),
        )
        made._check()
        return made

    def _check(self) -> None:
        if self.isolation not in ISOLATION:
            raise InvalidConfig(f"isolation: {self.isolation!r} is not one of {ISOLATION}")
        if self.on_corrupt not in ON_CORRUPT:
            raise InvalidConfig(f"on_corrupt: {self.on_corrupt!r} is not one of {ON_CORRUPT}")
        if self.on_corrupt == "skip" and not self.corrupt_report:
            # Skipping without recording what was skipped would lose data silently.
            raise InvalidConfig("on_corrupt=skip needs option('corrupt_report', <dir>) "
                                "to record the count of skipped batches")
        if self.starting_offsets not in ("earliest", "latest"):
            raise InvalidConfig(f"starting_offsets: {self.starting_offsets!r} is not earliest/latest")
        if not Path(self.path).is_dir():
            raise InvalidConfig(f"path: {self.path!r} is not a directory")


def _positive(opts: dict[str, str], key: str) -> int:
    """A positive whole number as Spark reads ``maxOffsetsPerTrigger`` (Java's
    ``Long.parseLong``): a sign and digits, nothing around them; ``int()`` alone would
    also take blanks and ``1_000``."""
    text = opts[key]
    try:
        value = int(text) if "_" not in text and text == text.strip() else 0
    except ValueError:
        value = 0
    if value <= 0:
        raise InvalidConfig(f"{key}: {opts[key]!r} is not a positive integer")
    return value


def _flag(opts: dict[str, str], key: str, default: bool) -> bool:
    """``true`` or ``false`` in any case and nothing else, no blanks around it: what
    Spark's Kafka source takes for ``failOnDataLoss`` (Scala's ``toBoolean``, which is
    Java's ``equalsIgnoreCase``, as :func:`kreplica.arguments.java_boolean` compares)."""
    given = opts.get(key, str(default))
    value = java_boolean(given)
    if value is None:
        raise InvalidConfig(f"{key}: {given!r} is not true/false")
    return value


# ---------------------------------------------------------------- filters

@dataclass(slots=True)
class Pushdown:
    """What the pushed filters allow: a partition set and offset/timestamp ranges.

    Bounds are half-open ``[lo, hi)``; None means unbounded.  Only used to prune
    ranges: Spark still evaluates every filter on the rows (see ``pushFilters``).
    """

    partitions: frozenset[int] | None = None
    partition_ranges: list[tuple[int | None, int | None]] = field(default_factory=list)
    offset_lo: int | None = None
    offset_hi: int | None = None
    timestamp_lo: int | None = None

    def absorb(self, f: Filter) -> None:
        attribute = getattr(f, "attribute", ())  # Not(...) has a child, no attribute
        column = attribute[0] if len(attribute) == 1 else None
        values = _ints(f.value) if isinstance(f, In) else []
        if column == "partition":
            if isinstance(f, In):  # NULL in the list matches nothing
                self.partitions = frozenset(values if self.partitions is None else self.partitions & set(values))
            else:
                self.partition_ranges.append(_bounds(f))
        elif column == "offset":
            lo, hi = _bounds(f)
            if values:
                lo, hi = min(values), max(values) + 1
            self.offset_lo = _max(self.offset_lo, lo)
            self.offset_hi = _min(self.offset_hi, hi)
        elif column == "timestamp":
            # The time index only bounds timestamps from below (it records the
            # running maximum); an upper bound cannot prune CreateTime data.
            lo, _ = _bounds(f)
            self.timestamp_lo = _max(self.timestamp_lo, lo)

    def allows_partition(self, p: int) -> bool:
        if self.partitions is not None and p not in self.partitions:
            return False
        return all((lo is None or p >= lo) and (hi is None or p < hi)
                   for lo, hi in self.partition_ranges)


def _ints(values: object) -> list[int]:
    return [v for v in values if isinstance(v, int) and not isinstance(v, bool)]  # type: ignore[union-attr]


def _bounds(f: Filter) -> tuple[int | None, int | None]:
    """Half-open integer bounds of a comparison filter, or (None, None)."""
    v = getattr(f, "value", None)
    if not isinstance(v, int) or isinstance(v, bool):
        return None, None
    if isinstance(f, EqualTo):
        return v, v + 1
    if isinstance(f, GreaterThan):
        return v + 1, None
    if isinstance(f, GreaterThanOrEqual):
        return v, None
    if isinstance(f, LessThan):
        return None, v
    if isinstance(f, LessThanOrEqual):
        return None, v + 1
    return None, None


def _max(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def _min(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


# ---------------------------------------------------------------- planning

def _partitions_of(opts: ReadOptions) -> list[PartitionFiles]:
    parts = list_partitions(opts.path, opts.topic)
    if not parts:
        raise UnknownTopicOrPartition(f"no partition directories for topic {opts.topic!r} in {opts.path}")
    return parts


def _upper_bounds(opts: ReadOptions, parts: Sequence[PartitionFiles]) -> dict[int, int | None]:
    """Per partition, the offset reads stop before: the HW (never past the log end),
    or None for the log end."""
    if opts.isolation == "uncommitted":
        return {p.partition: None for p in parts}
    hws = read_high_watermarks(opts.path, opts.topic)
    return {p.partition: p.committed_end(hws.get(p.partition, 0)) for p in parts}


def plan_slices(opts: ReadOptions, pushdown: Pushdown, hi_by_partition: dict[int, int | None],
                lo_by_partition: dict[int, int] | None = None,
                parts: Sequence[PartitionFiles] | None = None) -> list[SegmentSlice]:
    """Byte ranges of segments that may hold the selected records, in log order, over
    ``parts`` (the topic's partitions listed now when not given)."""
    slices: list[SegmentSlice] = []
    for part in _partitions_of(opts) if parts is None else parts:
        if part.partition not in hi_by_partition or not pushdown.allows_partition(part.partition):
            continue
        bounds = OffsetBounds(
            lo=_max(_max(pushdown.offset_lo, part.log_start_offset),
                    (lo_by_partition or {}).get(part.partition)) or 0,
            hi=_min(pushdown.offset_hi, hi_by_partition[part.partition]),
            known_end=hi_by_partition[part.partition],
        )
        for seg in part.segments:
            slices.extend(
                seg.slices(bounds, pushdown.timestamp_lo, opts.max_partition_bytes,
                           topic=opts.topic, partition=part.partition,
                           on_corrupt=opts.on_corrupt, corrupt_report=opts.corrupt_report,
                           on_missing="fail" if opts.fail_on_data_loss else "skip")
            )
    return slices


# ---------------------------------------------------------------- Spark API

def _read(partition: InputPartition) -> Iterator:
    # Spark plans one InputPartition(None) when every range was pruned away.
    if partition.value is not None:
        yield from read_slice(partition.value)


class KReplicaDataSource(DataSource):
    """Registered as ``kreplica``; see the module docstring for options."""

    @classmethod
    def name(cls) -> str:
        return "kreplica"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: StructType) -> "KReplicaReader":
        return KReplicaReader(ReadOptions.from_options(dict(self.options)))

    def streamReader(self, schema: StructType) -> "KReplicaStreamReader":
        return KReplicaStreamReader(ReadOptions.from_options(dict(self.options)))


class KReplicaReader(DataSourceReader):
    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self.pushdown = Pushdown()

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        # Filters prune whole ranges and batches; Spark still evaluates each one
        # on the rows, so a range that is kept conservatively never leaks rows.
        for f in filters:
            self.pushdown.absorb(f)
            yield f

    def partitions(self) -> Sequence[InputPartition]:
        parts = _partitions_of(self.opts)
        slices = plan_slices(self.opts, self.pushdown, _upper_bounds(self.opts, parts), parts=parts)
        return [InputPartition(s) for s in slices]

    def read(self, partition: InputPartition) -> Iterator:
        yield from _read(partition)


class KReplicaStreamReader(DataSourceStreamReader):
    """Tails committed offsets.  Offsets: ``{"<partition>": next_offset}``, kept by Spark."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts

    def _available(self, parts: Sequence[PartitionFiles]) -> dict[str, int]:
        if self.opts.isolation == "uncommitted":
            return {str(p.partition): p.log_end_offset() for p in parts}
        hws = read_high_watermarks(self.opts.path, self.opts.topic)
        # An HW below the log start (a restarted broker writes 0 for a partition its last
        # checkpoint never named) commits nothing readable, nor does a log whose data ends
        # below the log start (the log start checkpoint lags, as the HW's does): the
        # stream's end is the log start, never an offset below it that would read as
        # deleted records.  The clamp comes after ``committed_end``: its own clamp to a clean
        # log end may land below the log start, as an HW below the log start does.
        return {str(p.partition): max(p.committed_end(hws.get(p.partition, 0)), p.log_start_offset) for p in parts}

    def initialOffset(self) -> dict:
        parts = _partitions_of(self.opts)
        if self.opts.starting_offsets == "latest":
            return self._available(parts)
        return {str(p.partition): p.log_start_offset for p in parts}

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.opts.max_records_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def _listing(self, start: dict | None) -> list[PartitionFiles]:
        """The topic's partitions now.  One the query has read from (in ``start``) whose
        directory is gone may have held records it never read: that stops the query
        unless ``fail_on_data_loss`` is false, which goes on without it (with no
        partition at all when the whole topic went).  Before anything was read, no
        directory is a misspelt topic or data dir, refused by name."""
        if not start:
            return _partitions_of(self.opts)
        parts = list_partitions(self.opts.path, self.opts.topic)
        listed = {p.partition for p in parts}
        gone = sorted(int(p) for p in start if int(p) not in listed)
        if gone and self.opts.fail_on_data_loss:
            names = ", ".join(f"{self.opts.topic}-{p}" for p in gone)
            raise UnknownTopicOrPartition(
                f"{names}: gone from {self.opts.path} (topic deleted or replica moved); records "
                "after the query's offsets may have been missed (set fail_on_data_loss=false to go on without them)")
        return parts

    def latestOffset(self, start: dict | None = None, limit: ReadLimit | None = None) -> dict:
        parts = self._listing(start)
        latest = self._available(parts)
        begin = {**{str(p.partition): p.log_start_offset for p in parts}, **(start or {})}
        # Never move a partition backwards: offsets Spark has checkpointed were
        # read, and a lower HW after a restart must not replay them.
        for p, off in (start or {}).items():
            latest[p] = max(latest.get(p, off), off)
        if isinstance(limit, ReadMaxRows):
            latest = _cap(begin, latest, limit.max_rows)
        return latest

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        lo = {int(p): off for p, off in start.items()}
        parts = self._listing(start)  # none when the whole topic went and fail_on_data_loss=false
        if self.opts.fail_on_data_loss:
            # Retention deleted records the query has not read yet: as Kafka's own
            # Spark source, stop rather than skip them silently.
            for part in parts:
                if lo.get(part.partition, part.log_start_offset) < part.log_start_offset:
                    raise OffsetOutOfRange(
                        f"{self.opts.topic}-{part.partition}: the query's next offset "
                        f"{lo[part.partition]} is below the log start offset {part.log_start_offset}; "
                        "those records were deleted (set fail_on_data_loss=false to skip them)")
        hi = {int(p): off for p, off in end.items() if off > lo.get(int(p), 0)}
        # A partition created after the query started begins at its log start.
        slices = plan_slices(self.opts, Pushdown(), hi, lo, parts)
        return [InputPartition(s) for s in slices]

    def read(self, partition: InputPartition) -> Iterator:
        yield from _read(partition)

    def commit(self, end: dict) -> None:
        """Nothing to release: Spark's checkpoint is the only record of progress."""


def _cap(begin: dict[str, int], latest: dict[str, int], budget: int) -> dict[str, int]:
    """Advance partitions by at most ``budget`` offsets in all, shared in proportion
    to each partition's backlog (as Kafka's Spark source shares maxOffsetsPerTrigger)."""
    backlog = {p: latest[p] - begin.get(p, latest[p]) for p in sorted(latest, key=int)}
    total = sum(backlog.values())
    if total <= budget:
        return latest
    grant = {p: b * budget // total for p, b in backlog.items()}
    for p in backlog:  # the rounding remainder, one each, so a small budget still moves
        if sum(grant.values()) >= budget:
            break
        if grant[p] < backlog[p]:
            grant[p] += 1
    return {p: begin.get(p, latest[p]) + grant[p] if backlog[p] else latest[p] for p in latest}


# ---------------------------------------------------------------- corrupt-data report

def skipped_batches(report_dir: str | os.PathLike) -> int:
    """Total batches skipped by ``on_corrupt=skip`` reads that wrote to ``report_dir``."""
    total = 0
    for entry in Path(report_dir).glob("*.json"):
        total += json.loads(entry.read_text())["skipped_batches"]
    return total


def skipped_regions(report_dir: str | os.PathLike) -> list[dict]:
    """Every skipped region recorded in ``report_dir``: file, position, reason, batches."""
    regions: list[dict] = []
    for entry in sorted(Path(report_dir).glob("*.json")):
        regions.extend(json.loads(entry.read_text())["regions"])
    return regions
