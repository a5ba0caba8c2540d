"""The README's Python examples run as written and do what their comments say.

A newcomer copies them first; each test here takes one ```python block from README.md
as it stands (only a path made private to the test), runs it, and checks the names it
leaves behind. The ZooKeeper client example (``connect("zookeeper://...")``) needs broker
processes of its own and is exercised by tests/test_broker_processes.py instead.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from kreplica.records import decode_records

README = Path(__file__).resolve().parent.parent / "README.md"


def _example(first_line: str) -> str:
    """The one ```python block of the README that opens with ``first_line``."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    found = [b for b in blocks if b.startswith(first_line)]
    assert len(found) == 1, f"README has {len(found)} python blocks opening with {first_line!r}"
    return found[0]


def _run(code: str) -> dict:
    names: dict = {"__name__": "readme_example"}
    exec(compile(code, str(README), "exec"), names)
    return names


def test_the_embedded_cluster_example(capsys):
    """Two records acked by the whole ISR, a broker killed, the describe printed as
    kafka-topics.sh does, and the committed records fetched back from the new ISR."""
    code = _example("from kreplica import Cluster\n\nc = Cluster.embedded(")
    names = _run(code)
    c = names["c"]
    try:
        assert names["offset"] == 0
        assert [r.value for r in names["records"]] == [b"v1", b"v2"]
        out = capsys.readouterr().out
        assert out.startswith("Topic:bar\tPartitionCount:3\tReplicationFactor:3")
        isrs = re.findall(r"Isr: ([\d,]+)", out)
        assert len(isrs) == 3 and all("1002" not in isr.split(",") for isr in isrs)
    finally:
        c.close()


def test_the_log_example(tmp_path):
    """Two records appended as leader in one batch, read back whole and zero-copy."""
    code = _example("from kreplica.log import Log, LogConfig")
    assert code.count('"/tmp/bar-0"') == 1
    names = _run(code.replace('"/tmp/bar-0"', repr(str(tmp_path / "bar-0"))))
    log, info, view = names["log"], names["info"], names["view"]
    try:
        assert (info.first_offset, info.last_offset, info.num_records) == (0, 1, 2)
        assert view.first_offset == 0 and len(view) == info.valid_bytes
        assert [(r.offset, r.key, r.value) for r in decode_records(view.view)] == [
            (0, None, b"value"), (1, b"key", b"value")]
        assert log.log_end_offset == 2
    finally:
        log.close()


def test_the_cluster_over_real_sockets_example():
    """The embedded cluster over TcpTransport on the wall clock: the acks=all produce
    returns offset 0, and the cluster and transport are closed by the with block."""
    code = _example("from kreplica import Cluster\nfrom kreplica.net.tcp_transport import TcpTransport")
    code = code.replace('c.produce("bar", 0, [b"v1"], acks="all")', 'acked = c.produce("bar", 0, [b"v1"], acks="all")')
    names = _run(code)
    assert names["acked"] == 0
    assert names["t"]._closed


@pytest.mark.spark
def test_the_spark_example(tmp_path):
    """The data source reads the records a broker of an embedded cluster committed, with
    the example's filter: partition 0 from offset 1000 on."""
    from spark_fixtures import require_spark

    require_spark()
    from kreplica import Cluster

    with Cluster.embedded(data_dir=tmp_path) as c:
        c.create_topic("bar", partitions=3, replication_factor=3)
        for start in range(0, 1200, 300):
            c.produce("bar", 0, [b"v%d" % i for i in range(start, start + 300)], acks="all")
        c.advance(1_000)  # the followers' HW reaches the end
    code = _example("from kreplica.spark import local_session")
    assert code.count('"/data/broker-1001"') == 1
    names = _run(code.replace('"/data/broker-1001"', repr(str(tmp_path / "broker-1001"))))
    try:
        rows = names["df"].orderBy("offset").collect()
        assert [r["offset"] for r in rows] == list(range(1000, 1200))
        assert [bytes(r["value"]) for r in rows[:2]] == [b"v1000", b"v1001"]
    finally:
        names["spark"].stop()
