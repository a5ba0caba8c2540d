"""`kreplica demo` (make demo): seed 003's story end to end on the embedded cluster."""
import io

import pytest

from rich.console import Console

from kreplica import demo


def test_demo_reproduces_seed003_and_loses_nothing():
    out = io.StringIO()
    assert demo.run(Console(file=out, width=200, color_system=None), seed=0) is True
    text = out.getvalue()
    lines = {" ".join(line.split()) for line in text.splitlines()}  # the console expands tabs
    # The published --describe lines of seed 003, after the controlled shutdown and the kill.
    for line in ("Topic: bar Partition: 0 Leader: 1003 Replicas: 1001,1003,1002 Isr: 1003,1002",
                 "Topic: bar Partition: 1 Leader: 1001 Replicas: 1002,1001,1003 Isr: 1003,1001"):
        assert line in lines
    assert "differs" not in text and "nothing acknowledged was lost" in text
    assert "Leader-election and ISR timeline" in text and "becomes leader" in text
    assert "demo passed" in text


@pytest.mark.zookeeper
def test_demo_on_a_private_real_zookeeper(request):
    request.getfixturevalue("zk_server")  # fails under KREPLICA_REQUIRE_ZK=1 when ZooKeeper is missing
    out = io.StringIO()
    assert demo.run(Console(file=out, width=200, color_system=None), metadata="zookeeper+local:///kreplica-demo")
    text = out.getvalue()
    assert "metadata: zookeeper+local:///kreplica-demo, real time" in text
    assert "nothing acknowledged was lost" in text and "demo passed" in text
