import io
import subprocess
import sys

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
    assert not any(ln.startswith("|") for ln in lines)


def test_print_data_shows_records(tmp_path):
    make_log(tmp_path / "t-0")
    out = io.StringIO()
    dump([tmp_path / "t-0"], True, out)
    records = [ln for ln in out.getvalue().splitlines() if ln.startswith("| ")]
    assert len(records) == 60
    assert records[7] == ("| offset: 7 CreateTime: 1600000000001 keySize: 5 valueSize: 9 headerKeys: [] "
                          "key: key-1 payload: value-1-2")


def test_a_corrupt_batch_is_reported_invalid(tmp_path):
    make_log(tmp_path / "t-0")
    seg = sorted((tmp_path / "t-0").glob("*.log"))[0]
    data = bytearray(seg.read_bytes())
    data[-5] ^= 0xFF  # inside the last batch's records: CRC no longer matches
    seg.write_bytes(bytes(data))
    out = io.StringIO()
    dump([seg], True, out)
    batches = [ln for ln in out.getvalue().splitlines() if ln.startswith("baseOffset:")]
    assert batches[-1].endswith("isvalid: false") and batches[0].endswith("isvalid: true")


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
