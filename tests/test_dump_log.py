import argparse
import io
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from cli_refusal import refused
from kreplica.cli import main
from kreplica.log import Log
from kreplica.tools.dump_log import dump


def make_log(path):
    log = Log.open(path, {"segment.bytes": 1024, "index.interval.bytes": 100})
    for i in range(12):
        log.append_as_leader([(b"key-%d" % i, b"value-%d-%d" % (i, j)) for j in range(5)], leader_epoch=7,
                             timestamp_ms=1_600_000_000_000 + i)
    log.close()
    return log


def test_dump_prints_batches_like_kafka_dump_log(tmp_path):
    make_log(tmp_path / "t-0")
    out = io.StringIO()
    assert dump([tmp_path / "t-0"], False, out) == 0
    lines = out.getvalue().splitlines()
    batches = [ln for ln in lines if ln.startswith("baseOffset:")]
    assert len(batches) == 12
    assert batches[0].startswith("baseOffset: 0 lastOffset: 4 count: 5 baseSequence: -1 lastSequence: -1 "
                                 "producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 7 ")
    assert "position: 0 CreateTime: 1600000000000 " in batches[0] and batches[0].endswith("isvalid: true")
    assert sum(ln.startswith("Dumping ") for ln in lines) > 1  # several segments, in offset order
    assert [int(b.split()[1]) for b in batches] == list(range(0, 60, 5))
    assert not any(ln.startswith("|") for ln in lines)


def test_print_data_shows_records(tmp_path):
    make_log(tmp_path / "t-0")
    out = io.StringIO()
    dump([tmp_path / "t-0"], True, out)
    records = [ln for ln in out.getvalue().splitlines() if ln.startswith("| ")]
    assert len(records) == 60
    assert records[7] == ("| offset: 7 CreateTime: 1600000000001 keySize: 5 valueSize: 9 sequence: -1 headerKeys: [] "
                          "key: key-1 payload: value-1-2")


def test_a_corrupt_batch_is_reported_invalid(tmp_path):
    make_log(tmp_path / "t-0")
    seg = sorted((tmp_path / "t-0").glob("*.log"))[0]
    data = bytearray(seg.read_bytes())
    data[-5] ^= 0xFF  # inside the last batch's records: CRC no longer matches
    seg.write_bytes(bytes(data))
    out = io.StringIO()
    assert dump([seg], True, out) == 1  # corrupt input fails the command, as bad framing does
    batches = [ln for ln in out.getvalue().splitlines() if ln.startswith("baseOffset:")]
    assert batches[-1].endswith("isvalid: false") and batches[0].endswith("isvalid: true")
    assert out.getvalue().splitlines()[-1] == batches[-1]  # no records read from the corrupt batch


def test_a_batch_length_past_int32_sizes_is_invalid_data_not_a_crash(tmp_path):
    import struct

    seg = tmp_path / "00000000000000000000.log"
    with open(seg, "wb") as f:  # a 2 GiB batch, all hole but its header
        f.truncate(12 + 0x7FFFFFFF)
        f.write(struct.pack(">qiib", 0, 0x7FFFFFFF, 0, 2))
    out = io.StringIO()
    assert dump([seg], False, out) == 1
    assert "Found invalid data after position 0: CORRUPT_MESSAGE: bad batch length 2147483647" in out.getvalue()


def test_a_torn_batch_is_reported_after_the_last_good_batchs_position(tmp_path):
    make_log(tmp_path / "t-0")
    seg = sorted((tmp_path / "t-0").glob("*.log"))[0]
    data = seg.read_bytes()
    seg.write_bytes(data + data[:30])  # a batch cut short, as by a crash mid-write
    out = io.StringIO()
    assert dump([seg], False, out) == 1
    *_, last_good, error = out.getvalue().splitlines()
    assert " position: 830 " in last_good and last_good.endswith("isvalid: true")
    assert error == (f"Found invalid data after position 830: CORRUPT_MESSAGE: torn batch at position {len(data)}: "
                     "needs 166 bytes, 30 available")


def test_invalid_data_is_placed_after_the_last_batch_read_also_one_whose_crc_fails(tmp_path):
    """A batch whose CRC fails is still read (isvalid: false) and counted among the bytes
    read, as kafka-dump-log counts it: framing that breaks after it is reported after its
    position, not after that of the last batch whose CRC held (TL6-19)."""
    make_log(tmp_path / "t-0")
    seg = sorted((tmp_path / "t-0").glob("*.log"))[0]
    data = bytearray(seg.read_bytes())
    data[-5] ^= 0xFF  # the last batch's CRC no longer matches
    seg.write_bytes(bytes(data) + bytes(data[:30]))  # and a batch cut short after it
    out = io.StringIO()
    assert dump([seg], False, out) == 1
    *_, last, error = out.getvalue().splitlines()
    assert " position: 830 " in last and last.endswith("isvalid: false")
    assert error.startswith("Found invalid data after position 830: ")
    assert f"torn batch at position {len(data)}:" in error

def test_a_producers_batch_shows_its_sequences_max_timestamp_and_null_keys_and_values(tmp_path):
    """What a segment written by this broker's own appends never holds: a producer id and
    sequences, records out of time order (CreateTime is the batch's max), a null key and a
    null value (size -1, printed as null), an empty key (size 0), headers (their keys as
    kafka-dump-log prints them, [a,b], where a Python list's repr was printed, in the
    record's order, not sorted: TL5-27; a key the record repeats, as Kafka's Headers
    allow, printed each time: TL6-20)."""
    from kreplica.records import encode_batch

    seg = tmp_path / "00000000000000000040.log"
    seg.write_bytes(encode_batch([(None, b"a", [("trace", None), ("h", b"1"), ("trace", b"2")], 1_000),
                                  (b"k", None, None, 3_000),
                                  (b"", b"c", None, 2_000)],
                                 base_offset=40, leader_epoch=2, producer_id=7, producer_epoch=1, base_sequence=10))
    out = io.StringIO()
    assert dump([seg], True, out) == 0
    _, start, batch, *records = out.getvalue().splitlines()
    assert start == "Log starting offset: 40"
    assert batch.startswith("baseOffset: 40 lastOffset: 42 count: 3 baseSequence: 10 lastSequence: 12 producerId: 7 "
                            "producerEpoch: 1 partitionLeaderEpoch: 2 isTransactional: false isControl: false "
                            "position: 0 CreateTime: 3000 size: ")
    assert records == [
        "| offset: 40 CreateTime: 1000 keySize: -1 valueSize: 1 sequence: 10 headerKeys: [trace,h,trace] key: null payload: a",
        "| offset: 41 CreateTime: 3000 keySize: 1 valueSize: -1 sequence: 11 headerKeys: [] key: k payload: null",
        "| offset: 42 CreateTime: 2000 keySize: 0 valueSize: 1 sequence: 12 headerKeys: [] key:  payload: c"]


def test_sequences_wrap_past_the_largest_int32_to_0(tmp_path):
    """A producer's sequences go on from 2**31 - 1 at 0: a batch straddling it ends at 0."""
    from kreplica.records import encode_batch

    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(encode_batch([(None, b"a", None, 1), (None, b"b", None, 1), (None, b"c", None, 1)],
                                 base_offset=0, producer_id=7, producer_epoch=1, base_sequence=2**31 - 2))
    out = io.StringIO()
    assert dump([seg], True, out) == 0
    _, _, batch, *records = out.getvalue().splitlines()
    assert _fields(batch)["baseSequence"] == "2147483646" and _fields(batch)["lastSequence"] == "0"
    assert [_fields(r[2:])["sequence"] for r in records] == ["2147483646", "2147483647", "0"]


@pytest.mark.parametrize("base_sequence", [0, 2**31 - 3])
def test_last_sequence_is_the_base_sequence_plus_the_last_offset_delta(tmp_path, base_sequence):
    """kafka-dump-log's lastSequence is baseSequence + lastOffsetDelta (wrapping past
    2**31 - 1), not baseSequence + count - 1: a compacted batch keeps its offset range and
    its producer's sequences but fewer records.  A base sequence of 0 is a sequence.  Each
    record's sequence goes by its own offset delta, not by its place in the batch (TL6-27)."""
    import struct

    from kreplica.records import crc32c, encode_batch

    batch = bytearray(encode_batch([(None, b"a", None, 1), (None, b"b", None, 1), (None, b"c", None, 1)],
                                   producer_id=7, producer_epoch=1, base_sequence=base_sequence))
    # Compaction left the records at offset deltas 0, 2 and 5 of 0..5.  Each record is 8
    # bytes after the 61-byte header: length, attributes, timestamp delta, offset delta
    # (zigzag varints of one byte), key length -1, value length 1, the value, no headers.
    for i, delta in enumerate((0, 2, 5)):
        assert batch[61 + 8 * i + 3] == 2 * i
        batch[61 + 8 * i + 3] = 2 * delta
    struct.pack_into(">i", batch, 23, 5)  # lastOffsetDelta
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(bytes(batch))
    out = io.StringIO()
    assert dump([seg], True, out) == 0
    _, _, line, *records = out.getvalue().splitlines()
    fields = _fields(line)
    assert (fields["lastOffset"], fields["count"], fields["baseSequence"], fields["lastSequence"]) == \
        ("5", "3", str(base_sequence), str((base_sequence + 5) % 2**31))
    assert [(_fields(r[2:])["offset"], _fields(r[2:])["sequence"]) for r in records] == \
        [(str(d), str((base_sequence + d) % 2**31)) for d in (0, 2, 5)]


def _fields(line: str) -> dict[str, str]:
    """A dump line's ``name: value`` pairs."""
    words = line.split(" ")
    return {name.rstrip(":"): value for name, value in zip(words[::2], words[1::2])}


def test_index_entries_point_at_the_batches_of_their_segment(tmp_path):
    """A second segment (base offset 30): its .index maps a batch's base offset to its
    position, its .timeindex a batch's max timestamp to its last offset, both absolute."""
    make_log(tmp_path / "t-0")
    seg = sorted((tmp_path / "t-0").glob("*.log"))[1]
    out = io.StringIO()
    assert dump([seg, seg.with_suffix(".index"), seg.with_suffix(".timeindex")], False, out) == 0
    lines = [_fields(line) for line in out.getvalue().splitlines()]
    batches = [f for f in lines if "baseOffset" in f]
    index = [(f["offset"], f["position"]) for f in lines if "position" in f and "baseOffset" not in f]
    timeindex = [(f["timestamp"], f["offset"]) for f in lines if "timestamp" in f]
    assert batches[0]["baseOffset"] == "30" and len(index) == len(timeindex) == 5
    assert set(index) <= {(b["baseOffset"], b["position"]) for b in batches}
    assert set(timeindex) <= {(b["CreateTime"], b["lastOffset"]) for b in batches}


def test_a_timeindex_timestamp_is_a_signed_long(tmp_path):
    """kafka-dump-log reads a .timeindex entry's timestamp as a Java long: a -1 (a
    segment's NO_TIMESTAMP) prints as -1, not as 2**64 - 1 (TL6-17)."""
    import struct

    timeindex = tmp_path / "00000000000000000040.timeindex"
    timeindex.write_bytes(struct.pack(">qI", -1, 0) + struct.pack(">qI", 1_000, 2))
    out = io.StringIO()
    assert dump([timeindex], False, out) == 0
    assert out.getvalue().splitlines() == [f"Dumping {timeindex}", "timestamp: -1 offset: 40",
                                           "timestamp: 1000 offset: 42"]


def test_indexes_and_missing_files(tmp_path):
    make_log(tmp_path / "t-0")
    index = sorted((tmp_path / "t-0").glob("*.index"))[0]
    out = io.StringIO()
    assert dump([index, tmp_path / "t-0" / "nope.log"], False, out) == 1
    text = out.getvalue()
    assert "offset: 5 position: " in text and "no such file" in text


def test_cli_dump_log(tmp_path, capsys):
    make_log(tmp_path / "t-0")
    assert main(["dump-log", str(tmp_path / "t-0"), "--print-data"]) == 0
    assert "payload: value-11-4" in capsys.readouterr().out
    run = subprocess.run([sys.executable, "-m", "kreplica", "dump-log", str(tmp_path / "t-0")],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and "baseOffset: 55 lastOffset: 59" in run.stdout


def test_log_demo_runs_and_recovers(tmp_path):
    run = subprocess.run([sys.executable, "-m", "kreplica", "log-demo", "--records", "20000", "--dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "a gap-free prefix holding everything flushed" in " ".join(run.stdout.split())
    assert "baseOffset: 0 lastOffset: 999 count: 1000" in " ".join(run.stdout.split())
    # The writer is killed mid-way between two flushes: records past the recovery point
    # were acknowledged and may be lost, those below it must not be.
    acked, flushed = (int(x.replace(",", "")) for x in re.search(
        r"acknowledging offset ([\d,]+); recovery point \(flushed\) ([\d,]+)", " ".join(run.stdout.split())).groups())
    assert acked >= flushed >= 150_000
    # --dir keeps the log, where the output says, for dump-log
    (kept,) = tmp_path.glob("kreplica-log-demo-*/demo-0")
    assert f"the log is kept in {kept}" in run.stdout and any(kept.glob("*.log"))
    assert main(["dump-log", str(kept)]) == 0


def test_nothing_to_dump_is_said_and_fails(tmp_path):
    (tmp_path / "empty").mkdir()
    make_log(tmp_path / "broker" / "bar-0")
    (tmp_path / "x.index").write_bytes(b"garbage")  # 7 bytes: not whole 8-byte entries
    for path, message in [(tmp_path / "empty", "  no log segments (.log files) found"),
                          (tmp_path / "broker", "  no log segments (.log files) here, but partition directories: "
                                                f"dump those, e.g. {tmp_path / 'broker' / 'bar-0'}"),
                          (tmp_path / "x.index", "  invalid index: 7 bytes is not a whole number of 8-byte entries"),
                          (Path("/dev/null"), "  not a regular file"),
                          (tmp_path / "nope", "  no such file")]:
        out = io.StringIO()
        assert dump([path], False, out) == 1, path
        assert out.getvalue().splitlines() == [f"Dumping {path}", message]


def test_a_closed_pipe_ends_the_dump_quietly(tmp_path):
    log = Log.open(tmp_path / "t-0", {})
    for i in range(200):  # ~2 MB of --print-data lines: far more than a pipe holds
        log.append_as_leader([b"value-%d" % j for j in range(100)])
    log.close()
    dump_log = subprocess.Popen([sys.executable, "-m", "kreplica", "dump-log", str(tmp_path / "t-0"), "--print-data"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    head = subprocess.run(["head", "-2"], stdin=dump_log.stdout, capture_output=True, timeout=60)
    dump_log.stdout.close()
    _, err = dump_log.communicate(timeout=60)
    assert head.stdout.decode().startswith("Dumping ")
    assert err == b"" and dump_log.returncode == 1


def test_log_demo_appends_the_records_asked_for(tmp_path, monkeypatch):
    from rich.console import Console

    from kreplica.tools.log_demo import _append

    ends = []
    close = Log.close
    monkeypatch.setattr(Log, "close", lambda log: (ends.append(log.log_end_offset), close(log))[1])
    out = io.StringIO()
    assert _append(Console(file=out, width=200), tmp_path / "demo-0", 1500)
    assert "appended 1,500 records" in out.getvalue()
    assert ends == [1500] and list((tmp_path / "demo-0").iterdir()) == []  # the writer starts afresh


def test_log_demo_progress_reaches_the_last_record_and_sizes_are_in_mb(tmp_path, monkeypatch):
    """The bar moves every 50 batches and once more at the end, so a run of 51,500 records
    ends at 51,500 (without the last update a run under 50 batches sits at 0 throughout); the summary's
    MB are 10^6 bytes, as its GB/s are 10^9."""
    import rich.progress
    from rich.console import Console

    from kreplica.tools.log_demo import _append

    updates, sizes = [], []
    update = rich.progress.Progress.update
    monkeypatch.setattr(rich.progress.Progress, "update",
                        lambda self, task, **kw: (updates.append(kw.get("completed")), update(self, task, **kw))[1])
    close = Log.close
    monkeypatch.setattr(Log, "close", lambda log: (sizes.append(log.size_in_bytes()), close(log))[1])
    out = io.StringIO()
    assert _append(Console(file=out, width=200), tmp_path / "demo-0", 51_500)
    assert updates == [50_000, 51_500]
    assert f"{sizes[0] / 1e6:,.0f}" != f"{sizes[0] / (1 << 20):,.0f}"  # the size tells MB from MiB
    assert f"appended 51,500 records ({sizes[0] / 1e6:,.0f} MB) in " in out.getvalue()


def test_a_demo_whose_writer_dies_says_so_fails_and_leaves_no_temporary_directory(tmp_path, monkeypatch, capsys):
    from rich.console import Console

    from kreplica.tools import log_demo

    out = io.StringIO()
    not_a_dir = tmp_path / "demo-0"
    not_a_dir.write_text("the writer cannot open a log here")
    assert log_demo._kill_and_recover(Console(file=out, width=200), not_a_dir) is False
    assert "the writer died on its own" in out.getvalue()
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    monkeypatch.setattr(log_demo, "_kill_and_recover", lambda console, path: False)
    assert log_demo.execute(argparse.Namespace(records=1000, dir=None, writer=None)) == 1
    assert list(temp.iterdir()) == []
    # and, without --dir, it does not send anyone to dump-log a log it has just deleted (BH12-14)
    out = " ".join(capsys.readouterr().out.split())
    assert "appended 1,000 records" in out and "is kept in" not in out



# The eighty-second review (docs/engine-audit.md, BH4-..): the fourth pass over log-demo.

def test_log_demo_rates_are_records_and_bytes_over_the_appends_time(tmp_path, monkeypatch):
    """1,500 records in 0.5 fake ms: 3.00 M records/s, and the log's bytes in GB/s of 10^9."""
    from types import SimpleNamespace

    from rich.console import Console

    from kreplica.tools import log_demo

    readings = iter([0.0, 0.0005])
    monkeypatch.setattr(log_demo, "time", SimpleNamespace(perf_counter=lambda: next(readings)))
    sizes = []
    close = Log.close
    monkeypatch.setattr(Log, "close", lambda log: (sizes.append(log.size_in_bytes()), close(log))[1])
    out = io.StringIO()
    assert log_demo._append(Console(file=out, width=200), tmp_path / "demo-0", 1500)
    gbps = sizes[0] / 0.0005 / 1e9
    assert f"{gbps:.2f}" != f"{sizes[0] / 0.0005 / (1 << 30):.2f}"  # the figure tells GB from GiB
    assert f"in 0.00 s: 3.00 M records/s, {gbps:.2f} GB/s, 1 segments" in " ".join(out.getvalue().split())


def _stand_in_writer(monkeypatch, path):
    """log-demo's writer process replaced: it reports 1,000 more records a line and a flush
    at 150,000 from its 100th line on, and is killed (and reaped) where the demo kills it.
    The list returned records the kill and the reaping."""
    from kreplica.tools import log_demo

    lines = "".join(f"{1000 * n + 999} {150_000 if n >= 99 else 0}\n" for n in range(300))
    killed = []

    class Writer:
        pid = 4242
        stdout = io.StringIO(lines)

        def __init__(self, argv, stdout, text):
            assert argv[-2:] == ["--writer", str(path)]

        def wait(self):
            killed.append("reaped")  # before the log is reopened: the writer's lock is gone with it
            return -9

    monkeypatch.setattr(log_demo.subprocess, "Popen", Writer)
    monkeypatch.setattr(log_demo.os, "kill", lambda pid, sig: killed.append((pid, sig)))
    return killed


@pytest.mark.parametrize("records, value", [(2000, None), (150_000, b"x" * 100)],
                         ids=["short-of-the-flush", "other-values"])
def test_log_demo_kills_the_writer_past_a_flush_and_fails_a_log_short_of_what_was_flushed(records, value, tmp_path,
                                                                                          monkeypatch):
    """A stand-in writer reports 1,000 more records a line and a flush at 150,000 from its
    100th line on: it is killed at its 175th, and a log holding less than the flushed
    150,000 records (2,000 here, every one in place) is not a clean recovery; nor is one
    holding all of them, gap-free, but not the values the writer wrote (the hundred-and-
    first review's BH5-16)."""
    from rich.console import Console

    from kreplica.tools import log_demo

    path = tmp_path / "demo-0"
    log = Log.open(path, log_demo.CONFIG)
    others = [value] * 1000
    for start in range(0, records, 1000):
        log.append_as_leader(others if value else [log_demo._value(i) for i in range(start, start + 1000)])
    log.close()
    killed = _stand_in_writer(monkeypatch, path)
    out = io.StringIO()
    assert log_demo._kill_and_recover(Console(file=out, width=200), path) is False
    text = " ".join(out.getvalue().split())
    assert killed == [(4242, log_demo.signal.SIGKILL), "reaped"]
    assert "writer killed after acknowledging offset 174,999; recovery point (flushed) 150,000" in text
    assert f"log end offset {records:,}" in text and f"{records:,} records read back: NOT a clean prefix" in text


@pytest.mark.parametrize("argv, message", [
    (["--records", "0"], "argument --records: 0: must be at least 1"),
    (["--records", "-5"], "argument --records: -5: must be at least 1"),
    (["--dir", "/nonexistent/path"], "argument --dir: '/nonexistent/path': no such directory"),
    (["--dir", "/dev/null"], "argument --dir: '/dev/null': not a directory"),
])
def test_log_demo_refuses_bad_arguments(argv, message, capsys):
    assert refused(main, ["log-demo", *argv], capsys) == f"kreplica log-demo: error: {message}"


def test_log_demo_says_in_one_line_that_it_cannot_create_its_directory_under_dir(tmp_path, monkeypatch, capsys):
    """A --dir that is a directory the user may not create in (stood in: the tests may run as
    root, who can): one line and exit 1, not a traceback (the hundred-and-twentieth review's
    BH6-24 caught only a vanished directory)."""
    from kreplica.tools import log_demo

    def mkdtemp(prefix, dir):
        raise PermissionError(13, "Permission denied", f"{dir}/{prefix}x")

    monkeypatch.setattr(log_demo.tempfile, "mkdtemp", mkdtemp)
    assert main(["log-demo", "--dir", str(tmp_path)]) == 1
    assert capsys.readouterr().err == (
        f"Error: --dir {tmp_path}: [Errno 13] Permission denied: '{tmp_path}/kreplica-log-demo-x'\n")


# The sixty-first review (docs/engine-audit.md, T3-..): the third pass over dump-log.
def test_a_file_that_is_not_a_segment_alone_fails_the_dump(tmp_path):
    # A script checking `kreplica dump-log FILE` by its exit status must not take a
    # checkpoint file, or a typo's .lgo, for a clean segment.
    other = tmp_path / "replication-offset-checkpoint"
    other.write_text("0\n0\n")
    out = io.StringIO()
    assert dump([other], False, out) == 1
    assert out.getvalue() == f"Dumping {other}\n  not a segment file (.log, .index, .timeindex)\n"


def test_an_empty_segment_is_dumped_as_empty_and_is_not_an_error(tmp_path):
    # A partition's new active segment holds nothing yet: nothing wrong with it.
    seg = tmp_path / "00000000000000000060.log"
    seg.write_bytes(b"")
    out = io.StringIO()
    assert dump([seg], True, out) == 0
    assert out.getvalue() == f"Dumping {seg}\nLog starting offset: 60\n"


def test_bytes_that_are_not_utf8_print_as_backslash_escapes(tmp_path):
    # As written, \xff: not U+FFFD, which would make two different keys print the same.
    from kreplica.records import encode_batch

    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(encode_batch([(b"k\xff", b"\xfe\xffv", None, 1_000)], base_offset=0))
    out = io.StringIO()
    assert dump([seg], True, out) == 0
    assert out.getvalue().splitlines()[-1].endswith(r"key: k\xff payload: \xfe\xffv")


# The eighty-first review (docs/engine-audit.md, T4-..): the fourth pass over dump-log.
def test_a_corrupt_segment_fails_the_dump_of_its_directory_whatever_follows_it(tmp_path):
    """The exit status is the worst of every file's: a bad first segment is not forgotten
    when the directory's later, sound segments are dumped after it (T4-11)."""
    make_log(tmp_path / "t-0")
    first, *later = sorted((tmp_path / "t-0").glob("*.log"))
    data = bytearray(first.read_bytes())
    data[-5] ^= 0xFF  # the first segment's last batch fails its CRC
    first.write_bytes(bytes(data))
    out = io.StringIO()
    assert later and dump([tmp_path / "t-0"], False, out) == 1
    batches = [ln for ln in out.getvalue().splitlines() if ln.startswith("baseOffset:")]
    assert sum(ln.endswith("isvalid: false") for ln in batches) == 1 and batches[-1].endswith("isvalid: true")


def test_a_transactional_batch_with_log_append_time_says_so(tmp_path):
    """The attribute bits kafka-dump-log prints: a transactional batch (0x10) that is not a
    control batch (0x20), stamped at append (0x08): the batch and each of its records
    show LogAppendTime, the batch's max timestamp, in place of CreateTime (T4-12, T4-14)."""
    from kreplica.records import encode_batch

    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(encode_batch([(b"k", b"a", None, 1_000), (b"k", b"b", None, 3_000)], base_offset=0,
                                 producer_id=7, producer_epoch=1, base_sequence=0, attributes=0x18))
    out = io.StringIO()
    assert dump([seg], True, out) == 0
    _, _, batch, *records = out.getvalue().splitlines()
    assert " isTransactional: true isControl: false position: 0 LogAppendTime: 3000 size: " in batch
    assert [r.split(" keySize:")[0] for r in records] == ["| offset: 0 LogAppendTime: 3000",
                                                          "| offset: 1 LogAppendTime: 3000"]


def test_a_broker_log_dir_is_pointed_at_its_first_partition_directory_not_at_any_directory(tmp_path):
    """A log dir on a file system of its own holds lost+found, which is no partition: the
    hint names the first directory holding segments (T4-28, T4-33), and a log dir with no
    partition yet says there are no segments."""
    broker = tmp_path / "broker"
    (broker / "lost+found").mkdir(parents=True)
    out = io.StringIO()
    assert dump([broker], False, out) == 1
    assert out.getvalue().splitlines() == [f"Dumping {broker}", "  no log segments (.log files) found"]
    for partition in ("topic-1", "topic-0"):
        make_log(broker / partition)
    out = io.StringIO()
    assert dump([broker], False, out) == 1
    assert out.getvalue().splitlines() == [f"Dumping {broker}", "  no log segments (.log files) here, but partition "
                                                                f"directories: dump those, e.g. {broker / 'topic-0'}"]


def test_a_reader_gone_before_a_short_dump_is_written_ends_it_quietly(tmp_path):
    """A dump shorter than stdout's buffer reaches the pipe only at the final flush: a
    reader already gone (`| true`) is met there, and that too stops quietly with exit
    status 1, not a BrokenPipeError traceback (T4-34).  The read end is closed before the
    command starts, so no timing decides which write meets it; PYTHONUNBUFFERED (set in
    some shells and CI runners) is left out, or every print would meet it at once."""
    make_log(tmp_path / "t-0")
    seg = sorted((tmp_path / "t-0").glob("*.log"))[0]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        run = subprocess.run([sys.executable, "-m", "kreplica", "dump-log", str(seg)], stdout=write_end,
                             stderr=subprocess.PIPE, env=env, timeout=60)
    finally:
        os.close(write_end)
    assert run.returncode == 1 and run.stderr == b""


@pytest.mark.parametrize("name", ["copy-of-segment", "\u00b2", "\u0663"])
def test_a_segment_whose_name_is_not_a_base_offset_still_dumps_and_says_the_start_is_unknown(tmp_path, name):
    # A renamed copy of a segment: its batches carry their own offsets, so they dump
    # whole; the starting offset, which only the name gives, is said to be unknown rather
    # than left as an empty line. A superscript two or an Arabic-Indic digit is a digit to
    # str.isdigit() but no offset the log would write (int() even refuses the first).
    make_log(tmp_path / "t-0")
    seg = sorted((tmp_path / "t-0").glob("*.log"))[1]
    copy = tmp_path / f"{name}.log"
    copy.write_bytes(seg.read_bytes())
    index = tmp_path / f"{name}.index"
    index.write_bytes(seg.with_suffix(".index").read_bytes())
    out = io.StringIO()
    assert dump([copy, index], False, out) == 0
    lines = out.getvalue().splitlines()
    assert lines[1] == "Log starting offset: unknown (the file's name is not a base offset)"
    note = lines.index(f"Dumping {index}") + 1
    batches = {(int(f["baseOffset"]), f["position"]) for f in map(_fields, lines[2:note - 1])}
    assert min(b for b, _ in batches) == 30
    assert lines[note] == ("  base offset unknown (the file's name is not a base offset): "
                           "the offsets below are relative to it")
    entries = [_fields(line) for line in lines[note + 1:]]
    assert entries and {(int(e["offset"]) + 30, e["position"]) for e in entries} <= batches


# The hundredth review (docs/engine-audit.md, TL5-..): the fifth pass over dump-log.
def test_the_first_segment_and_its_index_start_at_offset_0(tmp_path):
    """A partition's first segment is named for offset 0: its starting offset is 0, not
    unknown, and its index's offsets are absolute ones, with no note that they are
    relative (TL5-17, TL5-18)."""
    make_log(tmp_path / "t-0")
    seg = sorted((tmp_path / "t-0").glob("*.log"))[0]
    index = seg.with_suffix(".index")
    out = io.StringIO()
    assert seg.name == "00000000000000000000.log" and dump([seg, index], False, out) == 0
    lines = out.getvalue().splitlines()
    assert lines[:2] == [f"Dumping {seg}", "Log starting offset: 0"]
    entries = lines[lines.index(f"Dumping {index}") + 1:]
    assert entries and all(line.startswith("offset: ") for line in entries)


def test_a_corrupt_segment_fails_the_dump_whatever_index_follows_it(tmp_path):
    # The exit status is the worst of every file's, an index's included (TL5-19, beside T4-11).
    make_log(tmp_path / "t-0")
    seg = sorted((tmp_path / "t-0").glob("*.log"))[0]
    data = bytearray(seg.read_bytes())
    data[-5] ^= 0xFF
    seg.write_bytes(bytes(data))
    assert dump([seg, seg.with_suffix(".index")], False, io.StringIO()) == 1


def test_a_directory_dumps_its_segments_not_the_files_kafka_renames_them_to(tmp_path):
    """Kafka renames a segment it deletes to .log.deleted, and the cleaner writes
    .log.cleaned and .log.swap: a partition directory's dump is of its .log segments
    alone, and is not failed by the others (TL5-28)."""
    make_log(tmp_path / "t-0")
    seg = sorted((tmp_path / "t-0").glob("*.log"))[0]
    for suffix in (".deleted", ".cleaned", ".swap"):
        (tmp_path / "t-0" / (seg.name + suffix)).write_bytes(seg.read_bytes())
    out = io.StringIO()
    assert dump([tmp_path / "t-0"], False, out) == 0
    dumped = [line for line in out.getvalue().splitlines() if line.startswith("Dumping ")]
    assert dumped == [f"Dumping {s}" for s in sorted((tmp_path / "t-0").glob("*.log"))]


def test_each_file_is_named_as_given(tmp_path, monkeypatch):
    # As kafka-dump-log prints "Dumping " and the file as given: a relative path stays relative (TL5-29).
    make_log(tmp_path / "t-0")
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    assert dump([Path("t-0")], False, out) == 0
    assert out.getvalue().startswith(f"Dumping {Path('t-0') / '00000000000000000000.log'}\n")


def test_a_partition_directory_of_a_dotted_topic_is_a_directory(tmp_path):
    # Topic names hold dots ("my.topic-0" has a suffix to pathlib): still a directory whose segments are dumped (TL5-31).
    make_log(tmp_path / "my.topic-0")
    out = io.StringIO()
    assert dump([tmp_path / "my.topic-0"], False, out) == 0
    assert sum(line.startswith("baseOffset:") for line in out.getvalue().splitlines()) == 12


def test_log_demo_dumps_the_first_two_batches_the_last_and_three_records_of_the_first_segment(tmp_path, monkeypatch):
    """Step 4 shows what its heading says: the dump's first two batches, then its last
    line, then three records with --print-data from the log's first segment (offsets 0 to
    2), however many segments the killed writer left (here 5 batches in 3 segments)."""
    from rich.console import Console

    from kreplica.tools import log_demo

    monkeypatch.setattr(log_demo, "CONFIG", {**log_demo.CONFIG, "segment.bytes": 250_000})  # two batches a segment
    path = tmp_path / "demo-0"
    log = Log.open(path, log_demo.CONFIG)
    for start in range(0, 5000, 1000):
        log.append_as_leader([log_demo._value(i) for i in range(start, start + 1000)])
    assert len(log.segments) == 3
    log.close()
    _stand_in_writer(monkeypatch, path)
    out = io.StringIO()
    log_demo._kill_and_recover(Console(file=out, width=1000), path)
    step4 = out.getvalue().split("4. kreplica dump-log")[1].splitlines()[1:]
    assert [line.split(" count:")[0] for line in step4[:6]] == [
        f"Dumping {path / '00000000000000000000.log'}", "Log starting offset: 0",
        "baseOffset: 0 lastOffset: 999", "baseOffset: 1000 lastOffset: 1999", "...",
        "baseOffset: 4000 lastOffset: 4999"]
    assert [line.split(" CreateTime")[0] for line in step4[6:]] == ["| offset: 0", "| offset: 1", "| offset: 2"]


def test_log_demo_takes_a_log_holding_exactly_what_was_flushed_as_a_clean_recovery(tmp_path, monkeypatch):
    """Records past the recovery point were acknowledged but may be lost: a recovered log
    ending at the recovery point itself (150,000, every record in place) holds everything
    flushed, the demo's promise, and passes."""
    from rich.console import Console

    from kreplica.tools import log_demo

    path = tmp_path / "demo-0"
    log = Log.open(path, log_demo.CONFIG)
    for start in range(0, 150_000, 1000):
        log.append_as_leader([log_demo._value(i) for i in range(start, start + 1000)])
    log.close()
    _stand_in_writer(monkeypatch, path)
    out = io.StringIO()
    assert log_demo._kill_and_recover(Console(file=out, width=200), path) is True
    assert ("log end offset 150,000 (acknowledged up to 174,999, flushed 150,000); 150,000 records read back: "
            "a gap-free prefix holding everything flushed") in " ".join(out.getvalue().split())


def test_log_demo_fails_a_recovered_log_missing_a_batch_inside_a_read(tmp_path, monkeypatch):
    """Step 3 promises a gap-free prefix: a log whose offsets jump over one batch (149,000
    to 149,999 missing; recovery takes the gap, as a compacted log's) is read back 4 MiB at a
    time, each read starting where one should and ending on the right value, yet holds
    150,000 records for a log end offset of 151,000: not clean."""
    from rich.console import Console

    from kreplica.records import encode_batch
    from kreplica.tools import log_demo

    path = tmp_path / "demo-0"
    path.mkdir()
    with open(path / "00000000000000000000.log", "wb") as f:
        for base in [*range(0, 149_000, 1000), 150_000]:
            f.write(encode_batch([log_demo._value(i) for i in range(base, base + 1000)], base_offset=base,
                                 leader_epoch=0, timestamp_ms=1_700_000_000_000))
    _stand_in_writer(monkeypatch, path)
    out = io.StringIO()
    assert log_demo._kill_and_recover(Console(file=out, width=200), path) is False
    assert "log end offset 151,000 (acknowledged up to 174,999, flushed 150,000); 150,000 records read back: " \
           "NOT a clean prefix" in " ".join(out.getvalue().split())


# The two-hundred-and-ninth review (docs/engine-audit.md, TL11-..).
def test_a_batchs_size_is_its_bytes_in_the_segment_offset_and_length_included(tmp_path):
    """kafka-dump-log prints a batch's sizeInBytes: its length field's count and the 12
    bytes of its offset and length before it, so each batch starts where the one before
    started plus its size, and the last ends at the file's end (TL11-10)."""
    from kreplica.records import encode_batch

    first = encode_batch([(None, b"a", None, 1_000)], base_offset=0)
    second = encode_batch([(b"k", b"bc", None, 2_000), (None, b"d", None, 3_000)], base_offset=1)
    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(first + second)
    out = io.StringIO()
    assert dump([seg], False, out) == 0
    placed = [tuple(map(int, re.search(r" position: (\d+) .* size: (\d+) ", line).groups()))
              for line in out.getvalue().splitlines() if line.startswith("baseOffset: ")]
    assert placed == [(0, len(first)), (len(first), len(second))]


# The two-hundred-and-twenty-eighth review (docs/engine-audit.md, TL12-..).
@pytest.mark.parametrize("suffix, entry, lines", [
    (".index", ">II", ["offset: 40 position: 0", "offset: 45 position: 166"]),
    (".timeindex", ">qI", ["timestamp: 1000 offset: 40", "timestamp: 2000 offset: 45"]),
])
def test_an_index_ends_where_its_preallocated_zero_fill_begins(tmp_path, suffix, entry, lines):
    """An active index is preallocated and mapped, zeros past its entries, and a crash
    leaves it so; each zero slot reads as the base offset.  As kafka-dump-log, the dump
    stops at the first entry after the first whose offset is the base offset (an entry
    at the base offset may only come first): it printed a line for each empty slot."""
    import struct

    index = tmp_path / f"00000000000000000040{suffix}"
    values = [(0, 0), (5, 166)] if suffix == ".index" else [(1000, 0), (2000, 5)]
    index.write_bytes(b"".join(struct.pack(entry, *v) for v in values) + bytes(struct.calcsize(entry) * 100))
    out = io.StringIO()
    assert dump([index], False, out) == 0
    assert out.getvalue().splitlines() == [f"Dumping {index}", *lines]


def test_the_active_segments_indexes_of_an_open_log_dump_only_their_entries(tmp_path):
    """`kreplica dump-log` on the .index and .timeindex of a running broker's active
    segment: each is 10 MiB of preallocated slots, a few of them used.  Their dump is the
    entries, offsets rising, not some two million lines of the base offset."""
    log = Log.open(tmp_path / "t-0", {"segment.bytes": 1024, "index.interval.bytes": 100})
    try:
        for i in range(12):
            log.append_as_leader([(b"key-%d" % i, b"value-%d-%d" % (i, j)) for j in range(5)], leader_epoch=7,
                                 timestamp_ms=1_600_000_000_000 + i)
        active = sorted((tmp_path / "t-0").glob("*.index"))[-1]
        assert active.stat().st_size > 1_000_000  # preallocated
        for index in (active, active.with_suffix(".timeindex")):
            out = io.StringIO()
            assert dump([index], False, out) == 0
            offsets = [int(_fields(line)["offset"]) for line in out.getvalue().splitlines()[1:]]
            assert 0 < len(offsets) <= 12 and offsets == sorted(set(offsets)) and offsets[0] >= 30, index
    finally:
        log.close()
