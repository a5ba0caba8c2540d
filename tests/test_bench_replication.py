"""``kreplica bench replication --breakdown``: the timed rounds account for the run (no timing asserted)."""
from kreplica.log.mapped_file import MappedFile
from kreplica.tools.bench_replication import _batches, breakdown, main


def test_breakdown_names_every_broker_and_restores_the_hooks(tmp_path):
    write_run, prefault = MappedFile.write_run, MappedFile.prefault
    # 100 KiB batches: big enough that the leader prefaults what a follower fetches
    spent = breakdown(tmp_path / "r", _batches(1024, 100, 2, 1), count=6, in_flight=2)
    assert {"write broker-1", "write broker-2", "write broker-3", "prefault", "rest", "total"} <= set(spent)
    assert all(v >= 0 for k, v in spent.items() if k != "rest")
    assert abs(sum(v for k, v in spent.items() if k != "total") - spent["total"]) < 1e-9
    single = breakdown(tmp_path / "s", _batches(100, 10, 2, 1), count=4, in_flight=2, replicated=False)
    assert set(single) == {"write", "rest", "total"}
    assert (MappedFile.write_run, MappedFile.prefault) == (write_run, prefault)


def test_the_cli_prints_the_breakdown(tmp_path, capsys):
    assert main(["--sizes", "100", "--batch-records", "10", "--batches", "5", "--in-flight", "2",
                 "--repeat", "1", "--data-dir", str(tmp_path), "--breakdown"]) == 0
    out = capsys.readouterr().out
    assert "replicated timed round" in out and "1-replica timed round" in out
    assert "CPU ratio with replication's own work free" in out
