"""``kreplica bench net``: every row commits what it sends and is read back (no timing asserted)."""
import pytest

from kreplica import cli
from kreplica.tools import bench_net


def test_each_transport_commits_every_batch_and_the_table_compares_them(capsys):
    assert cli.main(["bench", "net", "--batches", "4", "--batch-records", "3", "--record-bytes", "16",
                     "--no-processes"]) == 0
    out = capsys.readouterr().out
    assert "in-process" in out and "tcp, one process" in out and "broker processes" not in out
    assert "1.00x" in out


@pytest.mark.zookeeper
def test_the_broker_process_row(request):
    request.getfixturevalue("zk_server")  # Debian's package is there (or the test fails in CI)
    secs = bench_net.processes(bench_net.batches(3, 2, 16))
    assert secs is not None and secs > 0


def test_a_short_read_back_is_an_error_not_a_figure(monkeypatch):
    from kreplica.cluster import Cluster

    monkeypatch.setattr(Cluster, "fetch", lambda self, *a, **k: [])
    with pytest.raises(AssertionError, match="read back 0 committed records, expected 6"):
        bench_net.in_process(bench_net.batches(2, 2, 8))
