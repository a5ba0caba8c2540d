"""Pushdown equivalence of the ``kreplica`` source: a filtered read equals the
unfiltered read filtered in Python, for any filter Spark may push or not.

One broker data dir holds topic ``bar`` with partitions built to meet the
pruning rules at their edges: skewed CreateTime timestamps in sealed, trimmed
segments (time-index pruning on), LogAppendTime batches whose records carry other
create times, an empty partition, a log start inside a segment after retention,
gzip batches of many records whose HW falls inside one, and decoy directories
(the topics ``bar-x`` and ``barx``, a replica being deleted or moved).  Predicates are drawn from offsets and
timestamps at batch, segment, index, HW and log-start boundaries, combined with
AND / OR / NOT, and evaluated here with SQL's three-valued logic.
"""
from __future__ import annotations

import os
import random
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kreplica.records import decode_batches
from kreplica.runtime import ManualClock
from spark_fixtures import (  # noqa: F401  (spark is a fixture)
    as_tuples,
    log_rows,
    open_log,
    read_topic,
    require_spark,
    segment_files,
    spark,
    write_high_watermarks,
)

pytestmark = pytest.mark.spark

TOPIC = "bar"
T0 = 1_700_000_000_000
LONG_MAX = (1 << 63) - 1
PARTITIONS = range(5)
EMPTY = 2


def _producer_batch(records, gzip: bool) -> bytes:
    """A v2 producer batch (kafka-python's builder) of ``(timestamp, key, value, headers)``."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(2, 1 if gzip else 0, False, -1, -1, -1, 1 << 20)
    for i, (ts, key, value, headers) in enumerate(records):
        builder.append(i, ts, key, value, headers)
    return bytes(builder.build())


def _record(rng: random.Random, n: int):
    key = None if rng.random() < 0.2 else f"k{n}".encode()
    value = None if rng.random() < 0.1 else bytes([97 + n % 26]) * rng.randint(0, 120)
    headers = [] if rng.random() < 0.6 else [("h", f"{n}".encode()), ("none", None)]
    return key, value, headers


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """The data dir, the HW and log start per partition, and the expected committed rows."""
    from kreplica.log.checkpoints import OffsetCheckpointFile
    from kreplica.protocol.common import TopicPartition

    data_dir = str(tmp_path_factory.mktemp("pushdown"))
    rng = random.Random(20261125)
    clock = ManualClock(T0)
    small = {"segment.bytes": 3072, "index.interval.bytes": 200}
    open_logs = []

    # 0: CreateTime, skewed both ways, 1-4 records a batch; closed, so its index files are trimmed.
    log = open_log(data_dir, TOPIC, 0, clock, **small)
    for b in range(45):
        log.append_as_leader([_record(rng, b * 10 + i) for i in range(rng.randint(1, 4))],
                             leader_epoch=b // 15, timestamp_ms=clock.now_ms() + rng.randint(-3000, 3000))
        clock.advance(100)
    hw0 = log.log_end_offset - 2
    log.close()

    # 1: LogAppendTime, producer batches whose records say other times; left open.
    log = open_log(data_dir, TOPIC, 1, clock, **small, **{"message.timestamp.type": "LogAppendTime"})
    for b in range(30):
        created = T0 - 10_000_000 + rng.randint(0, 5_000_000)
        batch = [(created + 7 * i, *_record(rng, b * 10 + i)) for i in range(rng.randint(1, 5))]
        log.append_batches_as_leader(_producer_batch(batch, gzip=b % 3 == 0), leader_epoch=2)
        clock.advance(100)
    hw1 = log.log_end_offset
    open_logs.append(log)

    # 2: empty, open (a preallocated, zero-filled active segment).
    open_logs.append(open_log(data_dir, TOPIC, EMPTY, clock, **small))

    # 3: retention moved the log start into a segment; closed.
    log = open_log(data_dir, TOPIC, 3, clock, **small)
    for b in range(40):
        log.append_as_leader([_record(rng, b * 10 + i) for i in range(3)], leader_epoch=1)
        clock.advance(100)
    log.update_high_watermark(log.log_end_offset)
    start3 = log.segments[2].base_offset + 4
    assert log.maybe_increment_log_start_offset(start3)
    assert log.delete_old_segments() == 2
    hw3 = log.log_end_offset - 1
    log.close()

    # 4: gzip batches of 5-9 records with skewed create times; the HW inside a batch; open.
    log = open_log(data_dir, TOPIC, 4, clock, **small)
    for b in range(30):
        batch = [(clock.now_ms() + rng.randint(-2000, 2000), *_record(rng, b * 10 + i))
                 for i in range(rng.randint(5, 9))]
        log.append_batches_as_leader(_producer_batch(batch, gzip=True), leader_epoch=3)
        clock.advance(100)
    hw4 = log.log_end_offset - 3
    open_logs.append(log)

    # Decoys: topics whose partition directories share the prefix "bar", and the
    # directories Kafka renames a replica's to while deleting or moving it.
    for topic in ("bar-x", "barx"):
        decoy = open_log(data_dir, topic, 0, clock, **small)
        decoy.append_as_leader([(b"decoy", b"not bar")] * 3, leader_epoch=0)
        open_logs.append(decoy)
    for suffix in ("0123abcd-delete", "0123abcd-future"):
        shutil.copytree(os.path.join(data_dir, f"{TOPIC}-3"), os.path.join(data_dir, f"{TOPIC}-3.{suffix}"))
    hws = {0: hw0, 1: hw1, 2: 0, 3: hw3, 4: hw4}
    write_high_watermarks(data_dir, {**{(TOPIC, p): hw for p, hw in hws.items()},
                                     ("bar-x", 0): 3, ("barx", 0): 3})
    OffsetCheckpointFile(os.path.join(data_dir, "log-start-offset-checkpoint")).write(
        {TopicPartition(TOPIC, 3): start3, TopicPartition("bar-x", 0): 0})
    starts = {p: 0 for p in PARTITIONS} | {3: start3}
    rows = [r for p in PARTITIONS for r in log_rows(data_dir, TOPIC, p)
            if starts[p] <= r[2] < hws[p]]
    yield data_dir, hws, starts, rows
    for log in open_logs:
        log.close()


def _read(spark, data_dir, **options):
    return read_topic(spark, data_dir, TOPIC, **options)


def test_executors_import_the_code_under_test(spark):
    import kreplica

    files = spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("kreplica").__file__).collect()
    assert files == [kreplica.__file__]


def _batches(path):
    with open(path, "rb") as f:
        return list(decode_batches(f.read()))


def test_the_fixture_covers_what_it_claims(spark, broker):
    data_dir, hws, starts, rows = broker
    # Partition 1's records take their batch's append time, never their own create time.
    for path in segment_files(data_dir, TOPIC, 1):
        for batch in _batches(path):
            assert batch.timestamp_type == 1
            assert {r.timestamp for r in batch.records()} == {batch.max_timestamp}
    # Partition 4's HW falls inside a gzip batch of many records.
    [holder] = [b for path in segment_files(data_dir, TOPIC, 4) for b in _batches(path)
                if b.base_offset < hws[4] <= b.last_offset]
    assert holder.compression == "gzip"
    assert all(len(segment_files(data_dir, TOPIC, p)) >= 2 for p in (0, 1, 3, 4))
    assert not any(r[2] < starts[3] for r in rows if r[1] == 3)
    assert min(r[2] for r in log_rows(data_dir, TOPIC, 3)) < starts[3]  # the segment holds older records
    assert {r[1] for r in rows} == {0, 1, 3, 4}
    assert as_tuples(_read(spark, data_dir).collect()) == rows


# ---- predicates: SQL text and a three-valued evaluation of it on a row ----

_COLUMNS = {"partition": 1, "offset": 2, "timestamp": 3}


def _boundaries(broker) -> dict[str, list[int]]:
    """Offsets and timestamps where pruning decides: batch and segment edges, index
    entries, HW and log start, each with its neighbours."""
    from kreplica.spark.log_files import SegmentFiles

    data_dir, hws, starts, _ = broker
    offsets, stamps = {0, LONG_MAX, -LONG_MAX}, {0, LONG_MAX, -LONG_MAX}
    for p in PARTITIONS:
        offsets |= {hws[p], starts[p]}
        for path in segment_files(data_dir, TOPIC, p):
            offsets.add(int(os.path.basename(path)[:20]))
            for batch in _batches(path):
                offsets |= {batch.base_offset, batch.last_offset}
                stamps.add(batch.max_timestamp)
                stamps |= {r.timestamp for r in batch.records()}
            ts, ts_offsets = SegmentFiles(path, int(os.path.basename(path)[:20]), None).time_index()
            stamps |= set(ts.tolist())
            offsets |= set(ts_offsets.tolist())
    near = lambda values: sorted({v + d for v in values for d in (-1, 0, 1)})  # noqa: E731
    return {"partition": list(range(-1, 7)), "offset": near(offsets), "timestamp": near(stamps)}


def _cmp(op, a, b):
    if a is None or b is None:
        return None
    return {"=": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def _not(v):
    return None if v is None else not v


def _and(a, b):
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _or(a, b):
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def _in(x, values):
    if x in [v for v in values if v is not None]:
        return True
    return None if None in values else False


def _lit(v):
    return "null" if v is None else str(v)


@st.composite
def _atoms(draw, values):
    kind = draw(st.sampled_from(["cmp", "cmp", "cmp", "in", "between", "nullsafe", "opaque"]))
    col = draw(st.sampled_from(list(_COLUMNS)))
    i = _COLUMNS[col]
    pick = st.sampled_from(values[col])
    if kind == "cmp":
        op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="]))
        v = draw(pick)
        return f"{col} {op} {v}", lambda r: _cmp(op, r[i], v)
    if kind == "in":
        vs = draw(st.lists(st.one_of(pick, st.none()), min_size=1, max_size=4))
        return f"{col} in ({', '.join(map(_lit, vs))})", lambda r: _in(r[i], vs)
    if kind == "between":
        a, b = sorted(draw(st.lists(pick, min_size=2, max_size=2)))
        return f"{col} between {a} and {b}", lambda r: a <= r[i] <= b
    if kind == "nullsafe":
        v = draw(st.one_of(pick, st.none()))
        return f"{col} <=> {_lit(v)}", lambda r: r[i] == v
    # Filters Spark cannot hand to the source, on the same columns and on others.
    k = draw(st.integers(2, 5))
    return draw(st.sampled_from([
        (f"{col} % {k} = 1", lambda r: r[i] % k == 1),
        (f"{col} + 0 >= {values[col][len(values[col]) // 2]}",
         lambda r: r[i] >= values[col][len(values[col]) // 2]),
        ("key is null", lambda r: r[4] is None),
        ("value is not null", lambda r: r[5] is not None),
        ("size(headers) > 0", lambda r: len(r[6]) > 0),
        ("leader_epoch = 1", lambda r: r[7] == 1),
        ("topic = 'bar-x'", lambda r: r[0] == "bar-x"),
    ]))


def _predicates(values):
    def extend(children):
        return st.one_of(
            st.tuples(children, children).map(
                lambda ab: (f"({ab[0][0]}) and ({ab[1][0]})", lambda r: _and(ab[0][1](r), ab[1][1](r)))),
            st.tuples(children, children).map(
                lambda ab: (f"({ab[0][0]}) or ({ab[1][0]})", lambda r: _or(ab[0][1](r), ab[1][1](r)))),
            children.map(lambda a: (f"not ({a[0]})", lambda r: _not(a[1](r)))),
        )

    return st.recursive(_atoms(values), extend, max_leaves=4)


def _conjunction(values):
    """Top-level ANDs of atoms: what Spark splits and pushes one by one."""
    return st.lists(_atoms(values), min_size=1, max_size=4).map(
        lambda atoms: (" and ".join(f"({a[0]})" for a in atoms),
                       lambda r: all(a[1](r) is True for a in atoms)))


@pytest.fixture(scope="module")
def values(broker):
    require_spark()
    return _boundaries(broker)


# ---- the planner and reader alone, against Spark's filter objects (no session) ----

def _filters(values):
    """Filters as Spark hands them to ``pushFilters``, with a three-valued evaluation."""
    from pyspark.sql.datasource import (EqualNullSafe, EqualTo, GreaterThan, GreaterThanOrEqual, In,
                                        IsNotNull, IsNull, LessThan, LessThanOrEqual, Not,
                                        StringStartsWith)

    ops = {EqualTo: "=", GreaterThan: ">", GreaterThanOrEqual: ">=", LessThan: "<", LessThanOrEqual: "<="}

    @st.composite
    def simple(draw):
        col = draw(st.sampled_from(list(_COLUMNS)))
        i, pick = _COLUMNS[col], st.sampled_from(values[col])
        kind = draw(st.sampled_from([*ops, EqualNullSafe, In, IsNull, IsNotNull]))
        if kind in ops:
            v = draw(pick)
            return kind((col,), v), lambda r: _cmp(ops[kind], r[i], v)
        if kind is EqualNullSafe:
            v = draw(pick)
            return kind((col,), v), lambda r: r[i] == v
        if kind is In:
            vs = tuple(draw(st.lists(st.one_of(pick, st.none()), min_size=1, max_size=4)))
            return kind((col,), vs), lambda r: _in(r[i], vs)
        return kind((col,)), (lambda r: False) if kind is IsNull else (lambda r: True)

    others = st.sampled_from([
        (IsNotNull(("key",)), lambda r: r[4] is not None),
        (StringStartsWith(("topic",), "bar"), lambda r: r[0].startswith("bar")),
        (EqualTo(("leader_epoch",), 1), lambda r: r[7] == 1),
    ])
    negated = simple().map(lambda f: (Not(f[0]), lambda r: _not(f[1](r))))
    return st.lists(st.one_of(simple(), simple(), negated, others), max_size=5)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_planned_reads_equal_the_rows_filtered_in_python(broker, values, data):
    """Any filters Spark may push, any range size, both isolations: the rows planned
    and read, filtered as Spark then filters them, are exactly the expected ones."""
    require_spark()
    from kreplica.spark.datasource import KReplicaReader, ReadOptions
    from kreplica.spark.segment_reader import read_slice

    data_dir, *_, rows = broker
    filters = data.draw(_filters(values))
    isolation = data.draw(st.sampled_from(["committed", "uncommitted"]))
    max_bytes = data.draw(st.sampled_from([None, 150, 300, 1024]))
    reader = KReplicaReader(ReadOptions.from_options({
        "path": data_dir, "topic": TOPIC, "isolation": isolation,
        **({"max_partition_bytes": str(max_bytes)} if max_bytes else {})}))
    assert [f for f, _ in filters] == list(reader.pushFilters([f for f, _ in filters]))
    read = sorted(
        (*r[:6], [(h["key"], h["value"]) for h in r[6]], r[7])
        for part in reader.partitions() for batch in reader.read(part)
        for r in zip(*(batch.column(c).to_pylist() for c in
                       ("topic", "partition", "offset", "timestamp", "key", "value", "headers", "leader_epoch"))))
    base = rows if isolation == "committed" else _uncommitted(data_dir)
    holds = lambda r: all(f(r) is True for _, f in filters)  # noqa: E731
    got = [r for r in read if holds(r)]
    assert got == [r for r in base if holds(r)], (filters, isolation, max_bytes)


_OPTIONS = st.sampled_from([{}, {"max_partition_bytes": 300}, {"isolation": "uncommitted"}])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_pushed_conjunctions_equal_the_rows_filtered_in_python(spark, broker, values, data):
    data_dir, *_, rows = broker
    sql, holds = data.draw(_conjunction(values))
    options = data.draw(_OPTIONS)
    base = rows if options.get("isolation") != "uncommitted" else _uncommitted(data_dir)
    got = as_tuples(_read(spark, data_dir, **options).where(sql).collect())
    assert got == [r for r in base if holds(r) is True], (sql, options)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_predicate_equals_the_rows_filtered_in_python(spark, broker, values, data):
    data_dir, *_, rows = broker
    sql, holds = data.draw(_predicates(values))
    got = as_tuples(_read(spark, data_dir).where(sql).collect())
    assert got == [r for r in rows if holds(r) is True], sql


def _uncommitted(data_dir):
    from kreplica.spark.log_files import list_partitions

    starts = {p.partition: p.log_start_offset for p in list_partitions(data_dir, TOPIC)}
    return [r for p in PARTITIONS for r in log_rows(data_dir, TOPIC, p) if r[2] >= starts[p]]


@pytest.mark.parametrize("isolation", ["committed", "uncommitted"])
@pytest.mark.parametrize("budget", [7, 1000])
def test_a_stream_in_small_steps_reads_every_row_once(broker, isolation, budget):
    """The stream reader's offsets and ranges over the same partitions (no session)."""
    require_spark()
    from pyspark.sql.streaming.datasource import ReadMaxRows

    from kreplica.spark.datasource import KReplicaDataSource

    data_dir, *_, rows = broker
    reader = KReplicaDataSource({"path": data_dir, "topic": TOPIC, "isolation": isolation}).streamReader(None)
    start, got, steps = reader.initialOffset(), [], 0
    while (end := reader.latestOffset(start, ReadMaxRows(budget))) != start:
        assert sum(end[p] - start[p] for p in end) <= budget
        got += [(r["partition"], r["offset"], r["timestamp"], r["key"], r["value"])
                for part in reader.partitions(start, end) for b in reader.read(part) for r in b.to_pylist()]
        start, steps = end, steps + 1
    base = rows if isolation == "committed" else _uncommitted(data_dir)
    assert sorted(got) == [(r[1], r[2], r[3], r[4], r[5]) for r in base]
    assert steps >= len(base) // budget
