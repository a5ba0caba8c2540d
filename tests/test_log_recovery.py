import os
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given, settings, strategies as st

from kreplica.errors import KafkaStorageError
from kreplica.log import Log
from kreplica.records import decode_records, encode_batch, scan_batches

CONFIG = {"segment.bytes": 32 * 1024, "index.interval.bytes": 256}


def flip_byte(path, position: int) -> None:
    """Damage one byte in place (a bit flip the CRC must catch)."""
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)
        f.seek(position)
        f.write(bytes([byte[0] ^ 0x5A]))


def value(i):
    return b"%08d" % i + b"." * 40


def append_range(log, lo, hi, per_epoch=None):
    """Batches of ten records with the values of offsets ``lo``..``hi - 1``."""
    for i in range(lo, hi, 10):
        log.append_as_leader([value(j) for j in range(i, i + 10)], leader_epoch=i // per_epoch if per_epoch else 0)


def records(log):
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        recs = decode_records(log.read(offset, 1 << 20).view)
        out += [r for r in recs if r.offset >= offset]
        offset = recs[-1].offset + 1
    return out


def assert_prefix(log, appended_up_to, flushed):
    """The recovered log holds offsets 0..LEO-1 with the values written, and all flushed."""
    leo = log.log_end_offset
    assert flushed <= leo <= appended_up_to
    recs = records(log)
    assert [r.offset for r in recs] == list(range(leo))
    assert [r.value for r in recs] == [value(i) for i in range(leo)]
    assert log.recovery_point == leo


def index_positions_valid(log):
    for seg in log.segments:
        arr = seg.offset_index.array()
        mm = seg.log_file.map(seg.size)
        for rel, pos in zip(arr["relative_offset"].tolist(), arr["position"].tolist()):
            assert int.from_bytes(mm[pos:pos + 8], "big") == seg.base_offset + rel


WRITER = textwrap.dedent(
    """
    import sys
    from kreplica.log import Log
    log = Log.open(sys.argv[1], {"segment.bytes": 32 * 1024, "index.interval.bytes": 256,
                                 "flush.messages": 300})
    i = 0
    while True:
        n = 1 + i % 37
        info = log.append_as_leader([b"%08d" % j + b"." * 40 for j in range(i, i + n)])
        i += n
        print(info.last_offset, log.recovery_point, flush=True)
    """
)


def test_sigkill_mid_append_recovers_a_prefix_with_everything_flushed(tmp_path):
    path = tmp_path / "t-0"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE)
    lines = [proc.stdout.readline() for _ in range(400)]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    last_acked, flushed = map(int, lines[-1].split())
    assert flushed > 0
    log = Log.open(path, CONFIG)
    assert log.log_end_offset > last_acked  # the page cache survived the kill
    assert_prefix(log, 1 << 62, flushed)
    index_positions_valid(log)
    log.append_as_leader([value(log.log_end_offset)])
    log.close()


def test_flipped_tail_bytes_are_cut_at_the_first_bad_batch(tmp_path):
    path = tmp_path / "t-0"
    log = Log.open(path, CONFIG)
    append_range(log, 0, 300)
    active = log.segments[-1]
    scan = scan_batches(active.log_file.map(active.size), 0, active.size)
    victim = int(scan.positions[-3])  # third batch from the end
    victim_base = int(scan.base_offsets[-3])
    log.crash(lose_unflushed=False)
    flip_byte(active.log_file.path, victim + 70)
    log = Log.open(path, CONFIG)
    assert log.log_end_offset == victim_base
    assert log.last_recovery[-1].error is not None
    assert_prefix(log, 300, 0)
    index_positions_valid(log)
    assert log.append_as_leader([value(victim_base)]).first_offset == victim_base
    log.close()


def test_crash_loses_only_unflushed_and_recovery_truncates_the_torn_batch(tmp_path):
    path = tmp_path / "t-0"
    log = Log.open(path, CONFIG)
    append_range(log, 0, 200)
    log.flush()
    append_range(log, 200, 260)
    log.crash(lose_unflushed=True, torn_bytes=100)
    log = Log.open(path, CONFIG)
    assert log.log_end_offset == 200
    assert_prefix(log, 260, 200)
    log.close()


def test_a_crash_with_a_negative_torn_length_still_keeps_everything_flushed(tmp_path):
    """A torn write tears what came after the last flush, never what was fsynced before
    it: a torn length below 0 counts as none."""
    path = tmp_path / "t-0"
    log = Log.open(path, CONFIG)
    append_range(log, 0, 200)
    log.flush()
    append_range(log, 200, 260)
    log.crash(lose_unflushed=True, torn_bytes=-100)
    log = Log.open(path, CONFIG)
    assert log.log_end_offset == 200
    assert_prefix(log, 260, 200)
    log.close()


def test_a_crash_whose_torn_write_kept_a_whole_segment_tail_still_loses_the_segments_rolled_after_it(tmp_path):
    """Every byte after the recovery point but the first ``torn_bytes`` is lost, the
    segments rolled since the flush too, even when the torn write reached the end of the
    segment holding the recovery point (no hole is left for recovery to find)."""
    path = tmp_path / "t-0"
    log = Log.open(path, CONFIG)
    append_range(log, 0, 50)
    log.flush()
    while len(log.segments) < 3:
        append_range(log, log.log_end_offset, log.log_end_offset + 50)
    first_end = log.segments[1].base_offset
    appended = log.log_end_offset
    log.crash(lose_unflushed=True, torn_bytes=1 << 30)
    assert sorted(p.name for p in path.glob("*.log")) == ["00000000000000000000.log"]
    log = Log.open(path, CONFIG)
    assert log.log_end_offset == first_end and len(log.segments) == 1
    assert_prefix(log, appended, 50)
    log.close()


def test_a_truncation_below_the_recovery_point_moves_it_back(tmp_path):
    """What was flushed past the cut is gone, and what is appended over it is not durable
    yet: the recovery point comes back to the new LEO.  Left above it, the batches
    appended next counted as flushed, and a power loss kept them unsynced."""
    path = tmp_path / "t-0"
    log = Log.open(path, CONFIG)
    append_range(log, 0, 100)
    log.flush()
    assert log.truncate_to(50) and log.recovery_point == 50
    # The checkpoint moves back with it, though the point stays in its segment: left at
    # 100, a roll at or below 100 put it in the new segment, and an unclean open then
    # trusted the first one, unscanned, with batches appended over the cut unflushed.
    assert (path / "recovery-point-checkpoint").read_text() == "0\n1\n50\n"
    append_range(log, 50, 80)
    assert log.recovery_point == 50
    log.crash(lose_unflushed=True)
    log = Log.open(path, CONFIG)
    assert log.log_end_offset == 50
    assert_prefix(log, 80, 50)
    log.close()


def test_unclean_open_without_loss_keeps_everything(tmp_path):
    path = tmp_path / "t-0"
    log = Log.open(path, CONFIG)
    append_range(log, 0, 500, per_epoch=100)
    log.crash(lose_unflushed=False)
    log = Log.open(path, CONFIG)
    assert_prefix(log, 500, 500)
    assert log.leader_epoch_cache.entries == [(e, e * 100) for e in range(5)]
    index_positions_valid(log)
    log.close()


@settings(max_examples=40, deadline=None)
@given(
    batches=st.lists(st.integers(1, 40), min_size=1, max_size=40),
    flush_after=st.integers(0, 40),
    cut=st.floats(0, 1),
    garbage=st.binary(max_size=200),
)
def test_any_crash_point_recovers_a_prefix_holding_everything_flushed(tmp_path_factory, batches, flush_after,
                                                                      cut, garbage):
    path = tmp_path_factory.mktemp("crash") / "t-0"
    log = Log.open(path, CONFIG)
    offset = 0
    flushed = 0
    for k, n in enumerate(batches):
        log.append_as_leader([value(j) for j in range(offset, offset + n)])
        offset += n
        if k + 1 == flush_after:
            log.flush()
            flushed = offset
    # The OS kept an arbitrary prefix of the unflushed bytes, then garbage (or zeros).
    rp_seg = [s for s in log.segments if s.base_offset <= flushed][-1]
    flushed_pos = rp_seg.position_of(flushed)[0] if flushed < rp_seg.next_offset else rp_seg.size
    last = log.segments[-1]
    log.crash(lose_unflushed=False)
    victim = rp_seg if rp_seg is last else (rp_seg if cut < 0.3 else last)
    lo = flushed_pos if victim is rp_seg else 0
    keep = lo + int((os.path.getsize(victim.log_file.path) - lo) * cut)
    with open(victim.log_file.path, "r+b") as f:
        f.truncate(keep)
        f.seek(keep)
        f.write(garbage)
    if victim is rp_seg:
        for seg in log.segments:
            if seg.base_offset > rp_seg.base_offset:
                seg.delete()
    log = Log.open(path, CONFIG)
    assert_prefix(log, offset, flushed)
    index_positions_valid(log)
    log.close()


def test_reopening_in_process_while_old_views_live_never_shortens_their_files(tmp_path):
    """A broker restarted inside one process (a simulation) may still have fetch
    responses in flight that view the old instance's maps: recovery must not cut the
    file under them (which would SIGBUS), and they keep the bytes they were sent with
    (the power loss took the page cache, not what was already on its way)."""
    path = tmp_path / "t-0"
    log = Log.open(path, CONFIG)
    append_range(log, 0, 100)
    log.flush()
    append_range(log, 100, 150)
    in_flight = log.read(120, 1 << 20)  # a view over the part that will be lost
    sent = bytes(in_flight.view)
    log.crash(lose_unflushed=True, torn_bytes=30)
    size_before = os.path.getsize(log.segments[-1].log_file.path)
    log = Log.open(path, CONFIG)
    assert log.log_end_offset == 100
    assert os.path.getsize(log.segments[-1].log_file.path) >= size_before
    assert bytes(in_flight.view) == sent  # what was sent, not zeros, and not a crash
    log.append_as_leader([value(100)])
    assert [r.offset for r in records(log)] == list(range(101))
    log.close()


def test_a_damaged_index_on_a_clean_open_is_rebuilt(tmp_path):
    path = tmp_path / "t-0"
    log = Log.open(path, CONFIG)
    append_range(log, 0, 600)
    log.close()
    index = log.segments[0].offset_index.path
    data = bytearray(index.read_bytes())
    data[-4:] = (10**6).to_bytes(4, "big")  # the last entry points past the data
    index.write_bytes(bytes(data))
    log = Log.open(path, CONFIG)
    assert not (path / ".kafka_cleanshutdown").exists()
    # rebuilt from the damaged segment on: the later ones are scanned too, not trusted
    assert len(log.segments) >= 2 and len(log.last_recovery) == len(log.segments)
    assert_prefix(log, 600, 600)
    index_positions_valid(log)
    log.close()


def test_epochs_learnt_from_appended_batches_survive_a_crash_before_any_flush(tmp_path):
    """A follower's epochs are written to leader-epoch-checkpoint by the next flush, not
    per append; a crash before it loses none: recovery finds them in the batches."""
    log = Log.open(tmp_path / "t-0", {"segment.bytes": 64 * 1024})
    log.append_as_follower(encode_batch([b"a" * 100] * 5, base_offset=0, leader_epoch=1))
    log.flush()
    assert (tmp_path / "t-0" / "leader-epoch-checkpoint").read_text() == "0\n1\n1 0\n"
    for i in range(1, 40):  # over several segments, epochs 2 and 3 after the flush
        log.append_as_follower(encode_batch([b"b" * 1000] * 5, base_offset=5 * i, leader_epoch=2 if i < 25 else 3))
    assert log.leader_epoch_cache.entries == [(1, 0), (2, 5), (3, 125)]
    assert (tmp_path / "t-0" / "leader-epoch-checkpoint").read_text() == "0\n1\n1 0\n"
    log.crash(lose_unflushed=False)
    again = Log.open(tmp_path / "t-0", {"segment.bytes": 64 * 1024})
    assert again.log_end_offset == 200
    assert again.leader_epoch_cache.entries == [(1, 0), (2, 5), (3, 125)]
    assert (tmp_path / "t-0" / "leader-epoch-checkpoint").read_text() == "0\n3\n1 0\n2 5\n3 125\n"
    again.close()


def test_an_epoch_of_batches_kept_before_a_torn_tail_survives_a_power_loss(tmp_path):
    """Recovery cut the segment at a torn batch: the epochs of the whole batches before
    it were learnt after the last flush and never reached the checkpoint, so the cache
    must still learn them from the batches it kept, error or not."""
    path = tmp_path / "t-0"
    log = Log.open(path, {"segment.bytes": 64 * 1024})
    log.append_as_follower(encode_batch([b"a" * 100] * 5, base_offset=0, leader_epoch=1))
    log.flush()
    kept = encode_batch([b"b" * 100] * 5, base_offset=5, leader_epoch=2)
    log.append_as_follower(kept)
    log.append_as_follower(encode_batch([b"c" * 100] * 5, base_offset=10, leader_epoch=3))
    assert (path / "leader-epoch-checkpoint").read_text() == "0\n1\n1 0\n"
    log.crash(torn_bytes=len(kept) + 30)  # the epoch-3 batch torn 30 bytes in
    log = Log.open(path, {"segment.bytes": 64 * 1024})
    assert log.last_recovery[-1].error is not None
    assert log.log_end_offset == 10
    assert log.leader_epoch_cache.entries == [(1, 0), (2, 5)]
    assert log.leader_epoch_cache.end_offset_for(2) == (2, 10)
    assert (path / "leader-epoch-checkpoint").read_text() == "0\n2\n1 0\n2 5\n"
    log.close()


def test_a_segment_tail_read_back_as_zeros_drops_the_later_segments(tmp_path):
    # After a power loss a segment's last pages can read back as zeros while later
    # segments survive: recovery cuts the zeros, and the later segments (written after
    # the last flush too) go, or the log would have a hole in its offsets.
    cfg = {"segment.bytes": 4096, "index.interval.bytes": 256}
    log = Log.open(tmp_path, cfg)
    append_range(log, 0, 200)
    assert len(log.segments) > 2 and log.recovery_point == 0
    pos, _base = log.segments[0].position_of(40)
    size0 = log.segments[0].size
    log.crash(lose_unflushed=False)
    with open(os.path.join(tmp_path, "%020d.log" % 0), "r+b") as f:
        f.seek(pos)
        f.write(bytes(size0 - pos))
    log = Log.open(tmp_path, cfg)
    assert [s.base_offset for s in log.segments] == [0]
    assert_prefix(log, 200, 0)
    assert log.log_end_offset == 40
    log.close()


def test_a_log_that_recovers_short_of_its_published_start_starts_over_there(tmp_path):
    # The start moved past unflushed data, then a power loss took that data: the log
    # starts empty at its published start rather than give out offsets below it again.
    log = Log.open(tmp_path, CONFIG)
    append_range(log, 0, 10)
    log.flush()
    append_range(log, 10, 20)
    log.update_high_watermark(20)
    log.maybe_increment_log_start_offset(15)
    log.crash(lose_unflushed=True)
    log = Log.open(tmp_path, CONFIG, log_start_offset=15)
    assert (log.log_start_offset, log.log_end_offset, log.leader_epoch_cache.entries) == (15, 15, [])
    assert log.append_as_leader([b"new"], leader_epoch=1).first_offset == 15
    log.close()
    log = Log.open(tmp_path, CONFIG)               # and it stays so
    assert (log.log_start_offset, log.log_end_offset) == (15, 16)
    log.close()


@pytest.mark.parametrize("stop", ["crash", "close"])
def test_a_sealed_segment_still_at_its_reserved_length_keeps_the_later_ones(tmp_path, stop):
    # A reader's view was alive when the segment rolled, so its file kept its reserved
    # length: zeros after the data.  That is a clean end, not a hole or damage: after a
    # process crash (nothing lost) recovery keeps every later segment, and a clean open's
    # header walk ends there.
    cfg = {"segment.bytes": 4096, "index.interval.bytes": 256}
    log = Log.open(tmp_path, cfg)
    append_range(log, 0, 20)
    view = log.read(0, 1 << 20).view              # held across the roll
    append_range(log, 20, 200)
    assert len(log.segments) > 2
    first = log.segments[0]
    assert os.path.getsize(first.log_file.filename) > first.size   # not trimmed
    log.crash(lose_unflushed=False) if stop == "crash" else log.close()
    view.release()
    log = Log.open(tmp_path, CONFIG | cfg)
    assert_prefix(log, 200, 200)
    assert stop == "crash" or log.last_recovery == []
    log.close()


def _damage(path, batch_index=None, append=b""):
    """Set the batchLength of the ``batch_index``-th batch of the .log file at ``path`` to -1,
    or append bytes to it."""
    data = path.read_bytes()
    with open(path, "r+b") as f:
        if batch_index is not None:
            pos = 0
            for _ in range(batch_index):
                pos += 12 + int.from_bytes(data[pos + 8:pos + 12], "big")
            f.seek(pos + 8)
            f.write((-1).to_bytes(4, "big", signed=True))
        f.seek(0, 2)
        f.write(append)


def test_a_damaged_header_in_a_trusted_segment_is_recovered_not_taken_for_its_end(tmp_path):
    # A clean open walked a trusted segment's headers and took a damaged length for the
    # end of its data: reads past it were served from the next segment, a hole in the log.
    cfg = {"segment.bytes": 4096, "index.interval.bytes": 1 << 20}  # no index entry: walks start at 0
    log = Log.open(tmp_path, cfg)
    append_range(log, 0, 200)
    assert len(log.segments) > 2
    log.close()
    _damage(tmp_path / ("%020d.log" % 0), batch_index=1)
    log = Log.open(tmp_path, cfg)
    assert log.last_recovery[0].error.startswith("bad batch length -1 at position ")
    assert [s.base_offset for s in log.segments] == [0] and log.log_end_offset == 10  # no hole
    assert_prefix(log, 200, 0)
    log.close()


@pytest.mark.parametrize("at,written,error", [(16, b"\x01", "bad magic 1 at position "), (0, bytes(12), ""),
                                              (0, bytes(60), "bad magic 0 at position "),
                                              (16, b"\x03", "bad magic 3 at position ")],
                         ids=["another magic", "offset and length zeroed", "all but the header's last byte zeroed",
                              "a later magic"])
def test_a_damaged_header_in_a_trusted_segment_outside_the_crc_is_recovered(tmp_path, at, written, error):
    # The magic byte lies outside the CRC: a clean open's header walk must check it itself,
    # or a batch no v2 reader can decode is served as data without any recovery.  And zero
    # fill is a whole zero header: twelve zero bytes (baseOffset, batchLength) with a header
    # behind them are damage, not the end of the data with the batches after it dropped,
    # and so is a header that is zero but for its last byte (the record count's low byte).
    cfg = {"segment.bytes": 4096, "index.interval.bytes": 1 << 20}  # no index entry: walks start at 0
    log = Log.open(tmp_path, cfg)
    append_range(log, 0, 30)
    log.close()
    path = tmp_path / ("%020d.log" % 0)
    data = path.read_bytes()
    second = 12 + int.from_bytes(data[8:12], "big")
    with open(path, "r+b") as f:
        f.seek(second + at)
        f.write(written)
    log = Log.open(tmp_path, cfg)
    assert log.last_recovery and log.last_recovery[0].error.startswith(error)
    assert log.log_end_offset == 10
    assert_prefix(log, 30, 0)
    log.close()


def test_an_open_that_cut_a_trusted_segment_rewrites_the_recovery_point_checkpoint(tmp_path):
    """The open found a damaged header in a cleanly closed log and cut it there: the
    recovery point checkpoint must follow it back.  Left at the old end, it vouched for
    the offsets appended next, and after a crash their segments were trusted unscanned,
    a corrupt batch among them served as data."""
    cfg = {"segment.bytes": 4096, "index.interval.bytes": 1 << 20}
    log = Log.open(tmp_path, cfg)
    append_range(log, 0, 200)
    log.close()
    _damage(tmp_path / ("%020d.log" % 0), batch_index=1)
    log = Log.open(tmp_path, cfg)
    assert log.log_end_offset == 10 and log.recovery_point == 10
    append_range(log, 10, 150)  # unflushed, over several segments
    assert len(log.segments) >= 3
    victim = log.segments[1]
    scan = scan_batches(victim.log_file.map(victim.size), 0, victim.size)
    position, base = int(scan.positions[1]), int(scan.base_offsets[1])
    log.crash(lose_unflushed=False)
    with open(victim.log_file.path, "r+b") as f:  # a write the disk never finished
        f.seek(position + 70)
        byte = f.read(1)
        f.seek(position + 70)
        f.write(bytes([byte[0] ^ 0x5A]))
    log = Log.open(tmp_path, cfg)
    assert log.log_end_offset == base
    assert_prefix(log, 150, 10)
    log.close()


def test_garbage_after_a_trusted_segments_data_is_cut_and_costs_no_later_segment(tmp_path):
    # Not zeros, so not a clean end: the segment is recovered.  But its batches still reach
    # the next segment's base, so the later (flushed) segments stay.
    cfg = {"segment.bytes": 4096, "index.interval.bytes": 256}
    log = Log.open(tmp_path, cfg)
    append_range(log, 0, 200)
    log.close()
    first = tmp_path / ("%020d.log" % 0)
    size = os.path.getsize(first)
    _damage(first, append=b"\xff" * 100)
    log = Log.open(tmp_path, cfg)
    assert log.last_recovery[0].error is not None and os.path.getsize(first) == size
    assert_prefix(log, 200, 200)
    assert log.log_end_offset == 200
    log.close()


def test_a_recovered_active_segment_is_cut_to_its_data_and_takes_a_smaller_segment_bytes(tmp_path):
    """After a kill the active segment's file still has the length it was preallocated
    to; recovery cuts it to its batches even when the scan ended cleanly on zeros, so the
    segment is mapped again at the ``segment.bytes`` the log is opened with now.  Left at
    its old length, a segment.bytes lowered across the restart was not honoured: the
    segment grew to the old size before it rolled."""
    path = tmp_path / "t-0"
    first = path / ("%020d.log" % 0)
    log = Log.open(path, {"segment.bytes": 64 * 1024})
    append_range(log, 0, 50)
    size = log.segments[-1].size
    log.crash(lose_unflushed=False)
    assert os.path.getsize(first) == 64 * 1024
    log = Log.open(path, {"segment.bytes": 16 * 1024})
    assert log.last_recovery[-1].error is None and log.last_recovery[-1].valid_bytes == size
    append_range(log, 50, 500)
    assert len(log.segments) > 1
    assert log.segments[0].size <= 16 * 1024 and os.path.getsize(first) == log.segments[0].size
    log.flush()
    assert_prefix(log, 500, 500)
    log.close()


def test_batches_recovery_cut_never_come_back_after_the_next_crash(tmp_path):
    """Recovery cuts the file at the first bad batch, not only the log's idea of its end:
    the intact batches after the bad one would otherwise still sit in the file, and once
    an append of the same size overwrote the bad one, the next recovery would find them
    contiguous again and bring back offsets the log had given out anew."""
    path = tmp_path / "t-0"
    log = Log.open(path, CONFIG)
    append_range(log, 0, 100)
    active = log.segments[-1]
    scan = scan_batches(active.log_file.map(active.size), 0, active.size)
    victim, victim_base = int(scan.positions[-3]), int(scan.base_offsets[-3])
    log.crash(lose_unflushed=False)
    flip_byte(active.log_file.path, victim + 70)
    log = Log.open(path, CONFIG)
    assert log.log_end_offset == victim_base
    append_range(log, victim_base, victim_base + 10)  # the same size as the batch cut
    log.crash(lose_unflushed=False)
    log = Log.open(path, CONFIG)
    assert log.log_end_offset == victim_base + 10
    assert_prefix(log, victim_base + 10, victim_base + 10)
    log.close()


def fsynced(monkeypatch):
    """The files fsynced from now on, in order (each descriptor's path, from /proc)."""
    paths = []
    real = os.fsync

    def spy(fd):
        paths.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    return paths


def test_a_flush_fsyncs_every_segment_written_since_the_last_before_the_recovery_point_moves(
        tmp_path, monkeypatch):
    """The segment holding the old recovery point has unflushed batches after it too; and
    the recovery point reaches its checkpoint only once the data is durable (written
    first, a power loss in between left a checkpoint vouching for batches the disk never
    got, in segments the next open trusts without a scan)."""
    path = tmp_path / "t-0"
    log = Log.open(path, CONFIG)
    append_range(log, 0, 100)
    log.flush()
    append_range(log, 100, 2000)
    assert len(log.segments) >= 3 and log.segments[0].next_offset > 100
    synced = fsynced(monkeypatch)
    log.flush()
    logs = [os.path.realpath(s.log_file.path) for s in log.segments]
    assert [p for p in synced if p.endswith(".log")] == logs
    checkpoint = synced.index(os.path.realpath(path / "recovery-point-checkpoint") + ".tmp")
    assert max(synced.index(p) for p in logs) < checkpoint
    log.close()


def test_batches_appended_over_a_truncated_flushed_tail_are_fsynced(tmp_path, monkeypatch):
    """A truncation moves the segment's durable mark back to the cut: left where it was,
    a flush took the batches written since over the same bytes for durable already and
    moved the recovery point past them without an fsync."""
    path = tmp_path / "t-0"
    log = Log.open(path, CONFIG)
    append_range(log, 0, 100)
    log.flush()
    assert log.truncate_to(50)
    append_range(log, 50, 60)
    synced = fsynced(monkeypatch)
    log.flush()
    assert os.path.realpath(log.segments[-1].log_file.path) in synced
    assert log.recovery_point == 60
    log.close()


def test_a_truncation_over_durable_batches_makes_its_zeroes_durable_at_once(tmp_path, monkeypatch):
    """Zeroes left in the page cache over batches already on disk could be lost to a power
    loss, and the next open would find the cut batches again, CRCs intact. A truncation
    that cuts only batches never flushed needs no fsync."""
    path = tmp_path / "t-0"
    log = Log.open(path, CONFIG)
    append_range(log, 0, 100)
    log.flush()
    append_range(log, 100, 120)
    synced = fsynced(monkeypatch)
    assert log.truncate_to(110)  # only unflushed batches
    segment = os.path.realpath(log.segments[-1].log_file.path)
    assert segment not in synced
    assert log.truncate_to(50)  # batches a flush made durable
    assert os.path.realpath(log.segments[-1].log_file.path) in synced
    log.close()



def test_a_clean_open_puts_the_recovery_point_at_the_log_end(tmp_path):
    """After a clean shutdown everything is on disk: the recovery point is the LEO, even
    when the broker's own checkpoint (passed in) lags, as Kafka's LogLoader sets it.
    Left at the lagging value, the next crash re-scans segments that were never at risk."""
    path = tmp_path / "t-0"
    log = Log.open(path, CONFIG)
    append_range(log, 0, 100)
    log.close()
    log = Log.open(path, CONFIG, recovery_point=30)
    assert log.last_recovery == [] and log.recovery_point == 100
    log.close()


def test_epochs_recovered_below_a_later_log_start_are_clamped_to_it(tmp_path):
    """Epochs found in batches an unclean open re-read start no lower than the log start,
    as the checkpointed ones are clamped: the cache never claims offsets below it."""
    path = tmp_path / "t-0"
    log = Log.open(path, CONFIG)
    append_range(log, 0, 10)                           # epoch 0 at 0
    log.append_as_leader([value(j) for j in range(10, 20)], leader_epoch=1)  # epoch 1 at 10
    log.crash(lose_unflushed=False)                    # no flush: the epochs are only in the batches
    log = Log.open(path, CONFIG, log_start_offset=15)
    assert log.log_start_offset == 15
    assert log.leader_epoch_cache.entries == [(1, 15)]
    log.close()


def test_a_clean_open_trusts_an_empty_active_segment(tmp_path):
    """A log closed cleanly right after a roll has an empty last segment (index and data
    both empty): it loads like any other clean segment, nothing is re-scanned and the
    recovery point is the LEO.  Taken for a damaged index, the open turned unclean."""
    path = tmp_path / "t-0"
    log = Log.open(path, CONFIG)
    append_range(log, 0, 50)
    log.roll()
    log.close()
    log = Log.open(path, CONFIG)
    assert [s.base_offset for s in log.segments] == [0, 50]
    assert log.last_recovery == [] and log.recovery_point == log.log_end_offset == 50
    log.close()


def test_an_open_at_a_later_log_start_puts_the_high_watermark_there(tmp_path):
    """The HW an open starts from is the log start (the broker's checkpoint raises it
    later), never 0 below it: log start <= HW holds from the first moment."""
    path = tmp_path / "t-0"
    log = Log.open(path, CONFIG)
    append_range(log, 0, 50)
    log.close()
    log = Log.open(path, CONFIG, log_start_offset=30)
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (30, 30, 50)
    assert log.update_high_watermark(0) == 30
    log.close()


def test_checkpointed_epochs_past_what_recovery_kept_are_dropped(tmp_path):
    """An epoch persisted at a start the crash then took away (a new leader's epoch is
    written at once, at its LEO, before that LEO is flushed) goes at the open: the cache
    never names offsets the log no longer has, or OffsetsForLeaderEpoch answers ends
    past this log's end and a follower keeps batches the leader never had."""
    path = tmp_path / "t-0"
    log = Log.open(path, CONFIG)
    append_range(log, 0, 50)
    log.flush()
    for i in range(50, 100, 10):
        log.append_as_leader([value(j) for j in range(i, i + 10)], leader_epoch=1)
    log.leader_epoch_cache.assign(2, 100)              # durable: the checkpoint has 0, 1 and 2
    log.crash(lose_unflushed=True)
    log = Log.open(path, CONFIG)
    assert log.log_end_offset == 50
    assert log.leader_epoch_cache.entries == [(0, 0)]
    assert log.leader_epoch_cache.end_offset_for(0) == (0, 50)
    log.close()


def test_an_open_whose_published_start_is_its_log_end_keeps_the_epoch_covering_it(tmp_path):
    """A log start (from the broker's checkpoint) equal to the LEO is not data lost past
    the start: the log is kept and the epoch covering the start survives, clamped to it
    (Kafka's truncateFromEnd, then truncateFromStart), so OffsetsForLeaderEpoch still
    answers it.  Only a start beyond the LEO restarts the log empty."""
    path = tmp_path / "t-0"
    log = Log.open(path, CONFIG)
    append_range(log, 0, 20)
    log.close()
    log = Log.open(path, CONFIG, log_start_offset=20)
    assert (log.log_start_offset, log.log_end_offset) == (20, 20)
    assert log.leader_epoch_cache.entries == [(0, 20)]
    assert log.leader_epoch_cache.end_offset_for(0) == (0, 20)
    log.close()


@pytest.mark.parametrize("cut", [1, 5, 11, 12])
def test_a_trusted_segment_whose_last_batch_lost_its_last_bytes_is_recovered(tmp_path, cut):
    """A cleanly closed segment whose file ends a few bytes short of its last batch's
    declared end (the batch runs past the data by less than the 12 bytes before its
    batchLength) is damaged: the open's header walk must not take the torn batch, or
    its end lies past the file and a read serves bytes that are not there."""
    cfg = {"segment.bytes": 4096, "index.interval.bytes": 1 << 20}  # no index entry: walks start at 0
    log = Log.open(tmp_path, cfg)
    append_range(log, 0, 30)
    log.close()
    path = tmp_path / ("%020d.log" % 0)
    size = os.path.getsize(path)
    os.truncate(path, size - cut)
    log = Log.open(tmp_path, cfg)
    assert log.last_recovery and log.last_recovery[0].error is not None
    assert log.log_end_offset == 20
    assert_prefix(log, 30, 0)
    log.close()


def test_a_clean_open_whose_log_ends_at_its_last_index_entry_recovers_that_segment(tmp_path):
    """An index entry with no batch at its position (the .log cut there behind the log's
    back) is damage: the open rebuilds the segment instead of taking it for empty."""
    path = tmp_path / "t-0"
    log = Log.open(path, CONFIG)
    append_range(log, 0, 300)
    last = log.segments[-1]
    log.close()
    with open(last.offset_index.path, "rb") as f:
        entries = f.read()
    rel, pos = int.from_bytes(entries[-8:-4], "big"), int.from_bytes(entries[-4:], "big")
    assert pos > 0
    os.truncate(last.log_file.path, pos)
    log = Log.open(path, CONFIG)
    assert len(log.last_recovery) == 1
    assert log.log_end_offset == last.base_offset + rel
    assert [r.value for r in records(log)] == [value(i) for i in range(last.base_offset + rel)]
    log.close()


def test_a_flush_fsyncs_the_indexes_of_the_rolled_segments_too(tmp_path, monkeypatch):
    """A rolled segment before the recovery point is trusted at the next open, indexes
    included: they must be on disk before the point passes them."""
    path = tmp_path / "t-0"
    log = Log.open(path, CONFIG)
    append_range(log, 0, 2000)
    sealed = log.segments[:-1]
    assert sealed and log.recovery_point == 0
    synced = fsynced(monkeypatch)
    log.flush()
    for seg in sealed:
        assert os.path.realpath(seg.offset_index.path) in synced
        assert os.path.realpath(seg.time_index.path) in synced
    # The active segment's too: rolled right after this flush, it is sealed with these
    # entries while the point sits at the new segment's base, and no later flush looks
    # at it again.
    active = log.segments[-1]
    assert active.offset_index.entries and active.time_index.entries
    assert os.path.realpath(active.offset_index.path) in synced
    assert os.path.realpath(active.time_index.path) in synced
    log.close()


def test_an_unclean_open_rescans_from_the_segment_holding_the_recovery_point(tmp_path):
    """A recovery point at a segment's base needs only that segment scanned, not the one
    before it (Kafka recovers from the segment holding the point)."""
    path = tmp_path / "t-0"
    log = Log.open(path, CONFIG)
    append_range(log, 0, 100)
    log.roll()
    log.flush()
    assert log.recovery_point == log.segments[-1].base_offset == 100
    append_range(log, 100, 120)
    log.crash(lose_unflushed=False)
    log = Log.open(path, CONFIG)
    assert len(log.last_recovery) == 1 and log.log_end_offset == 120
    log.close()


def test_a_segment_whose_data_runs_past_the_next_segments_base_drops_the_later_segments(tmp_path):
    """Recovery needs each segment to end exactly where the next begins.  A segment whose
    batches run past the next one's base (say the next one's unlink after a truncation
    was lost to a power loss, and the re-appended data went on in the earlier segment)
    keeps its own batches and the later segments go: kept, the log held two copies of
    offsets 100..149 and its end came from the stale segment."""
    path, stale = tmp_path / "t-0", tmp_path / "stale"
    log = Log.open(path, CONFIG)
    append_range(log, 0, 150)
    assert [s.base_offset for s in log.segments] == [0]
    log.close()
    other = Log.open(stale, CONFIG)
    append_range(other, 0, 100)
    other.roll()
    append_range(other, 100, 200)
    other.close()
    for ext in (".log", ".index", ".timeindex"):
        shutil.copy(stale / ("%020d%s" % (100, ext)), path / ("%020d%s" % (100, ext)))
    os.unlink(path / ".kafka_cleanshutdown")
    log = Log.open(path, CONFIG, recovery_point=0)
    assert [s.base_offset for s in log.segments] == [0]
    assert not (path / ("%020d.log" % 100)).exists()
    assert_prefix(log, 150, 150)
    log.close()


def test_garbage_after_the_data_of_the_segment_holding_the_recovery_point_drops_the_later_segments(tmp_path):
    """The segment holding the recovery point is rescanned, not trusted: a bad batch in it,
    even one after data reaching the next segment's base, means its tail was being
    written past the last flush, and the later segments (all unflushed) go, as Kafka's
    LogLoader deletes the unflushed segments after one whose recovery cut bytes.  Only
    a segment wholly below the recovery point keeps them (the test above)."""
    cfg = {"segment.bytes": 4096, "index.interval.bytes": 256}
    log = Log.open(tmp_path, cfg)
    append_range(log, 0, 200)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 3
    log.close()
    os.unlink(tmp_path / ".kafka_cleanshutdown")
    _damage(tmp_path / ("%020d.log" % bases[1]), append=b"\xff" * 100)
    log = Log.open(tmp_path, cfg, recovery_point=bases[1])
    assert log.last_recovery[0].error is not None
    assert [s.base_offset for s in log.segments] == bases[:2]
    assert_prefix(log, 200, bases[2])
    assert log.log_end_offset == bases[2]
    log.close()


def test_an_unclean_open_fsyncs_what_recovery_kept_before_its_recovery_point_passes_it(tmp_path, monkeypatch):
    """After a SIGKILL the batches written since the last flush are in the page cache
    only; recovery keeps them and moves the recovery point to the LEO, so its flush must
    fsync them first. Taken for durable because they were there at the open, they were
    never fsynced, and a power loss later lost batches the checkpoint vouched for."""
    path = tmp_path / "t-0"
    log = Log.open(path, CONFIG)
    append_range(log, 0, 100)
    log.flush()
    append_range(log, 100, 150)
    log.crash(lose_unflushed=False)
    synced = fsynced(monkeypatch)
    log = Log.open(path, CONFIG)
    assert log.log_end_offset == log.recovery_point == 150
    segment = os.path.realpath(log.segments[-1].log_file.path)
    checkpoint = synced.index(os.path.realpath(path / "recovery-point-checkpoint") + ".tmp")
    assert segment in synced[:checkpoint]
    log.close()


def test_an_unclean_open_writes_the_epochs_it_learnt_once_after_the_data_is_durable(tmp_path, monkeypatch):
    """Epochs recovery learns from the batches after the last flush go to the
    leader-epoch checkpoint with the open's flush: once, however many there are, and
    after the batches that carry them were fsynced.  Written epoch by epoch at once,
    each cost a checkpoint write and two fsyncs, and the checkpoint vouched for epochs
    whose batches the disk did not hold yet."""
    path = tmp_path / "t-0"
    log = Log.open(path, CONFIG)
    log.append_as_follower(encode_batch([value(i) for i in range(10)], base_offset=0, leader_epoch=1))
    log.flush()
    for epoch in range(2, 6):
        log.append_as_follower(encode_batch([value(i) for i in range(10 * epoch, 10 * epoch + 10)],
                                            base_offset=10 * epoch - 10, leader_epoch=epoch))
    log.crash(lose_unflushed=False)
    synced = fsynced(monkeypatch)
    log = Log.open(path, CONFIG)
    assert log.leader_epoch_cache.entries == [(1, 0), (2, 10), (3, 20), (4, 30), (5, 40)]
    epochs = os.path.realpath(path / "leader-epoch-checkpoint") + ".tmp"
    assert synced.count(epochs) == 1
    assert synced.index(os.path.realpath(log.segments[-1].log_file.path)) < synced.index(epochs)
    log.close()


def test_a_flush_rewrites_a_checkpoint_only_when_it_changed(tmp_path, monkeypatch):
    """The recovery-point checkpoint is rewritten when the point enters another segment
    (recovery rescans whole segments), the leader-epoch checkpoint when an epoch was
    learnt since: each write is two fsyncs (the file, its directory) that every flush
    paid otherwise."""
    path = tmp_path / "t-0"
    log = Log.open(path, CONFIG)
    append_range(log, 0, 10)
    log.flush()
    append_range(log, 10, 20)  # the same epoch, the same segment
    synced = fsynced(monkeypatch)
    log.flush()
    assert os.path.realpath(log.segments[-1].log_file.path) in synced
    assert [p for p in synced if "checkpoint" in p] == []
    log.roll()
    append_range(log, 20, 30, per_epoch=20)  # epoch 1, in a new segment
    log.flush()
    assert [os.path.basename(p) for p in synced if "checkpoint" in p] == [
        "leader-epoch-checkpoint.tmp", "recovery-point-checkpoint.tmp"]
    log.close()


def test_recovery_cutting_a_file_a_live_view_still_maps_leaves_the_view_its_bytes(tmp_path):
    """A reader's view over batches a reopen's recovery then cuts (a damaged batch
    before them, no power loss) keeps them: the file is replaced by a copy of what stays.
    Cut in place, the view's pages past the cut were gone (SIGBUS), or read back as
    zeros once the file grew again for writing."""
    path = tmp_path / "t-0"
    log = Log.open(path, CONFIG)
    append_range(log, 0, 400)
    seg = log.segments[-1]
    assert seg.base_offset == 0 and seg.size > 3 * 4096
    in_flight = log.read(300, 1 << 20)  # pages past the cut below
    sent = bytes(in_flight.view)
    cut = seg.position_of(50)[0]
    assert cut < 4096 and seg.position_of(300)[0] > 8192
    flip_byte(seg.log_file.path, cut + 70)  # a record byte of the batch at 50: a bad CRC
    log.crash(lose_unflushed=False)
    size_before = os.path.getsize(seg.log_file.path)
    log = Log.open(path, CONFIG)
    assert log.log_end_offset == 50 and log.last_recovery[0].error is not None
    assert os.path.getsize(log.segments[-1].log_file.path) >= size_before
    assert bytes(in_flight.view) == sent
    assert_prefix(log, 50, 50)
    log.close()


def test_an_unclean_open_keeps_where_an_epoch_begun_in_an_earlier_segment_starts(tmp_path):
    """Recovery reads the epochs of every batch in the segment it rescans, those before
    the recovery point too; only epochs newer than the checkpoint's latest are new.
    Re-assigned, epoch 1 (begun at 50, in the first segment) moved to the rescanned
    segment's base, and OffsetsForLeaderEpoch answered epoch 0's end 30 offsets late:
    a follower diverging at 50 would have kept its own 50..79."""
    path = tmp_path / "t-0"
    log = Log.open(path, CONFIG)
    append_range(log, 0, 80, per_epoch=50)  # epoch 0 at 0, epoch 1 at 50
    log.roll()
    append_range(log, 80, 150, per_epoch=50)  # epoch 1 goes on, epoch 2 at 100
    log.flush()
    assert [s.base_offset for s in log.segments] == [0, 80]
    log.crash(lose_unflushed=False)
    log = Log.open(path, CONFIG)
    assert [r.batches for r in log.last_recovery] == [7]  # the second segment, rescanned
    assert log.leader_epoch_cache.entries == [(0, 0), (1, 50), (2, 100)]
    assert log.leader_epoch_cache.end_offset_for(0) == (0, 50)
    log.close()


def test_a_flush_whose_epoch_checkpoint_fails_leaves_the_recovery_point_where_it_was(tmp_path):
    """The epochs learnt from appended batches are made durable before the recovery point
    passes them: with the leader-epoch checkpoint's write failing (its temp file cannot
    be made), the recovery-point checkpoint must not move, or the next unclean open
    trusts the segments where those epochs begin and never finds them again."""
    path = tmp_path / "t-0"
    log = Log.open(path, CONFIG)
    log.append_as_follower(encode_batch([value(i) for i in range(10)], base_offset=0, leader_epoch=1))
    log.flush()
    for i in range(10, 1000, 10):
        log.append_as_follower(encode_batch([value(j) for j in range(i, i + 10)], base_offset=i, leader_epoch=2))
    assert len(log.segments) >= 2  # the point would enter a later segment
    (path / "leader-epoch-checkpoint.tmp").mkdir()  # the write's open fails: EISDIR
    with pytest.raises(KafkaStorageError, match="leader-epoch-checkpoint"):
        log.flush()
    log.crash(lose_unflushed=False)
    (path / "leader-epoch-checkpoint.tmp").rmdir()
    log = Log.open(path, CONFIG)
    assert log.leader_epoch_cache.entries == [(1, 0), (2, 10)]
    log.close()


def test_a_trusted_segment_whose_log_came_back_empty_under_its_index_is_recovered(tmp_path):
    """An index entry with no data under it, the ``.log`` empty: not a segment to take
    for empty with its stale entries kept (reads and appends would go through them), but
    one to recover, indexes rebuilt; the later segments then go, as after any hole."""
    path = tmp_path / "t-0"
    log = Log.open(path, CONFIG)
    append_range(log, 0, 600)
    log.close()
    assert len(log.segments) >= 2 and log.segments[0].offset_index.entries
    os.truncate(log.segments[0].log_file.path, 0)
    log = Log.open(path, CONFIG)
    assert [r.batches for r in log.last_recovery] == [0]
    assert [s.base_offset for s in log.segments] == [0]
    assert log.segments[0].offset_index.entries == 0 and log.log_end_offset == 0
    log.close()


def test_an_unclean_open_whose_recovery_point_lags_the_first_segment_fsyncs_every_segment(
        tmp_path, monkeypatch):
    """Retention deletes segments the recovery point never reached (flush.ms unset, the
    default) without rewriting its checkpoint, which then lags the first segment. An
    unclean open recovers every segment, and its flush must fsync them all before the
    point passes them, not only the last."""
    path = tmp_path / "t-0"
    log = Log.open(path, {**CONFIG, "retention.bytes": 64 * 1024})
    append_range(log, 0, 100)
    log.flush()
    append_range(log, 100, 2000)
    log.update_high_watermark(2000)
    assert log.delete_old_segments() > 0
    assert log.segments[0].base_offset > 100 and len(log.segments) >= 2
    log.crash(lose_unflushed=False)
    synced = fsynced(monkeypatch)
    log = Log.open(path, {**CONFIG, "retention.bytes": 64 * 1024})
    assert len(log.last_recovery) == len(log.segments)
    checkpoint = synced.index(os.path.realpath(path / "recovery-point-checkpoint") + ".tmp")
    for seg in log.segments:
        assert os.path.realpath(seg.log_file.path) in synced[:checkpoint]
    log.close()


def test_a_flush_whose_fsync_fails_leaves_the_recovery_point_and_the_next_flush_redoes_it(tmp_path, monkeypatch):
    """The recovery point moves only once every segment since it was fsynced: moved
    first, an fsync error left it at the LEO, and the next flush started from the
    segment holding it, so the earlier segments' batches were never made durable and a
    power loss took them while the checkpoint called them flushed."""
    from kreplica.log.log_segment import LogSegment

    log = Log.open(tmp_path / "t-0", CONFIG)
    append_range(log, 0, 1000)
    first = log.segments[0]
    assert len(log.segments) >= 2 and log.recovery_point == 0
    flushed = []
    real = LogSegment.flush

    def failing(seg):
        if seg is first:
            raise KafkaStorageError("flushing: Input/output error")
        real(seg)

    monkeypatch.setattr(LogSegment, "flush", failing)
    with pytest.raises(KafkaStorageError):
        log.flush()
    assert log.recovery_point == 0
    monkeypatch.setattr(LogSegment, "flush", lambda seg: (flushed.append(seg.base_offset), real(seg)))
    log.flush()
    assert flushed[0] == 0 and log.recovery_point == 1000
    log.close()
