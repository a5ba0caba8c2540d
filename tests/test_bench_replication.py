"""``kreplica bench replication --breakdown``: the timed rounds account for the run (no timing asserted);
bad arguments are refused before anything runs."""
import pytest

from cli_refusal import refused
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


@pytest.mark.parametrize("argv, message", [
    (["--sizes", "abc"], "argument --sizes: 'abc': expected record sizes in bytes"),
    (["--sizes", ""], "argument --sizes: '': expected record sizes in bytes"),
    (["--sizes", "100,"], "argument --sizes: '100,': expected record sizes in bytes"),
    (["--sizes=-5"], "argument --sizes: '-5': expected record sizes in bytes"),
    (["--repeat", "0"], "argument --repeat: 0: must be at least 1"),
    (["--batches", "-1"], "argument --batches: -1: must be at least 1"),
    (["--batches", "0"], "argument --batches: 0: must be at least 1"),  # was silently the default
    (["--in-flight", "0"], "argument --in-flight: 0: must be at least 1"),
    (["--batch-records", "0"], "argument --batch-records: 0: must be at least 1"),
    (["--batch-records", "-1"], "argument --batch-records: -1: must be at least 1"),
    (["--distinct", "-1"], "argument --distinct: -1: must be at least 0"),
    (["--data-dir", "/nonexistent"], "argument --data-dir: '/nonexistent': no such directory"),
])
def test_bad_arguments_are_refused_by_the_parser(argv, message, capsys):
    assert message in refused(main, argv, capsys)
