"""Spark test infrastructure: one real local SparkSession per test module.

Import the fixture into a test module (``from spark_fixtures import spark``) and
mark the module ``pytestmark = pytest.mark.spark``.  When pyspark, pyarrow or
Java is missing the Spark tests are skipped, unless ``KREPLICA_REQUIRE_SPARK=1``
(CI sets it), in which case they fail loudly: a CI run must never pass by
skipping the real engine.
"""
from __future__ import annotations

import importlib.util
import os
from typing import Iterator

import pytest

REQUIRE_SPARK = os.environ.get("KREPLICA_REQUIRE_SPARK") == "1"


def spark_missing() -> str | None:
    """Why a local Spark cannot run here, or None when it can."""
    for module in ("pyspark", "pyarrow", "pandas"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (pip install 'kreplica[spark]')"
    from kreplica.spark.session import java_available

    if not java_available():
        return "no java on PATH or JAVA_HOME (Spark needs Java 17)"
    return None


def require_spark() -> None:
    """Skip the calling test, or fail it when KREPLICA_REQUIRE_SPARK=1, if Spark can't run."""
    reason = spark_missing()
    if reason is None:
        return
    if REQUIRE_SPARK:
        pytest.fail(f"KREPLICA_REQUIRE_SPARK=1 but Spark cannot run: {reason}", pytrace=False)
    pytest.skip(f"Spark unavailable: {reason}")


@pytest.fixture(scope="module")
def spark() -> Iterator["pyspark.sql.SparkSession"]:  # noqa: F821
    """A ``local[2]`` session with the ``kreplica`` source registered, stopped after the module."""
    require_spark()
    from kreplica.spark.session import local_session

    session = local_session("local[2]", app_name="kreplica-tests")
    try:
        yield session
    finally:
        session.stop()


# ---- building and reading logs for the data source tests ----

def open_log(data_dir, topic: str, partition: int, clock, **config):
    """A real :class:`kreplica.log.Log` in ``<data_dir>/<topic>-<partition>``."""
    from kreplica.log import Log, LogConfig

    return Log.open(os.path.join(data_dir, f"{topic}-{partition}"), LogConfig.from_dict(config),
                    clock=clock)


def write_high_watermarks(data_dir, hws: dict) -> None:
    """Write ``replication-offset-checkpoint`` as a broker would: ``{(topic, p): hw}``."""
    from kreplica.log.checkpoints import OffsetCheckpointFile
    from kreplica.protocol.common import TopicPartition

    OffsetCheckpointFile(os.path.join(data_dir, "replication-offset-checkpoint")).write(
        {TopicPartition(t, p): hw for (t, p), hw in hws.items()}
    )


def segment_files(data_dir, topic: str, partition: int) -> list[str]:
    d = os.path.join(data_dir, f"{topic}-{partition}")
    return sorted(os.path.join(d, n) for n in os.listdir(d) if n.endswith(".log"))


def log_rows(data_dir, topic: str, partition: int) -> list[tuple]:
    """Every record of the partition as a data source row, decoded with
    ``kreplica.records.decode_batches`` straight from the segment files."""
    from kreplica.records import decode_batches

    rows = []
    for path in segment_files(data_dir, topic, partition):
        with open(path, "rb") as f:
            data = f.read()
        for batch in decode_batches(data):
            for r in batch.records():
                rows.append((topic, partition, r.offset, r.timestamp, r.key, r.value,
                             [tuple(h) for h in r.headers], batch.leader_epoch))
    return rows


def read_topic(spark, data_dir, topic: str, **options):
    """``spark.read.format("kreplica")`` of ``topic`` under ``data_dir``, with ``options``."""
    reader = spark.read.format("kreplica").option("path", data_dir).option("topic", topic)
    for k, v in options.items():
        reader = reader.option(k, str(v))
    return reader.load()


def as_tuples(rows) -> list[tuple]:
    """Spark rows in the shape of :func:`log_rows`, sorted by (topic, partition, offset)."""
    out = [
        (r.topic, r.partition, r.offset, r.timestamp,
         None if r.key is None else bytes(r.key), None if r.value is None else bytes(r.value),
         [(h.key, None if h.value is None else bytes(h.value)) for h in r.headers], r.leader_epoch)
        for r in rows
    ]
    return sorted(out, key=lambda t: (t[0], t[1], t[2]))


# ---- a real standalone Spark cluster (master + one worker) on loopback ----

def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StandaloneSpark:
    """Spark's own standalone master and one worker, started from the pyspark package's
    ``bin/spark-class`` on free loopback ports (the master's REST server off), each
    logging to a file under ``workdir``; :attr:`url` is the ``spark://`` master URL."""

    def __init__(self, workdir, cores: int = 2, memory: str = "2g", start_timeout_s: float = 60) -> None:
        import pathlib
        import subprocess
        import time

        import pyspark

        self.workdir = pathlib.Path(workdir)
        self.work = self.workdir / "work"  # executors' directories, one per application
        spark_class = str(pathlib.Path(pyspark.__file__).parent / "bin" / "spark-class")
        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1",
               "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"}
        port = _free_port()
        self.url = f"spark://127.0.0.1:{port}"
        self._procs = []
        self._logs = []

        def launch(name: str, *args: str) -> pathlib.Path:
            log = self.workdir / f"{name}.log"
            f = open(log, "wb")
            self._logs.append(f)
            self._procs.append(subprocess.Popen([spark_class, *args], env=env, stdout=f, stderr=subprocess.STDOUT,
                                                start_new_session=True))
            return log

        try:
            launch("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                   "--port", str(port), "--webui-port", str(_free_port()))
            worker_log = launch("worker", "org.apache.spark.deploy.worker.Worker", self.url,
                                "--host", "127.0.0.1", "--port", str(_free_port()),
                                "--webui-port", str(_free_port()), "--cores", str(cores),
                                "--memory", memory, "--work-dir", str(self.work))
            deadline = time.monotonic() + start_timeout_s
            while b"Successfully registered with master" not in worker_log.read_bytes():
                if time.monotonic() > deadline or any(p.poll() is not None for p in self._procs):
                    raise RuntimeError(f"standalone Spark did not start; see {self.workdir}/*.log")
                time.sleep(0.2)
        except BaseException:
            self.stop()
            raise

    def applications(self) -> list[str]:
        """The applications the worker has run executors for."""
        return sorted(p.name for p in self.work.iterdir()) if self.work.exists() else []

    def stop(self) -> None:
        import signal

        for p in reversed(self._procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in self._procs:
            try:
                p.wait(timeout=15)
            except Exception:  # noqa: BLE001 - escalate, never leave a JVM behind
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        for f in self._logs:
            f.close()


@pytest.fixture(scope="module")
def standalone_spark(tmp_path_factory) -> Iterator[StandaloneSpark]:
    require_spark()
    cluster = StandaloneSpark(tmp_path_factory.mktemp("spark-standalone"))
    try:
        yield cluster
    finally:
        cluster.stop()
