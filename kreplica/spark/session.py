"""A local SparkSession configured the way kreplica's Spark code expects.

Theory of operation: PySpark runs Python in separate worker processes.  Those
workers must run the same interpreter as the driver (so they see the venv that
holds kreplica and its native extension), the Python Data Source API needs
Arrow, and filter pushdown into Python data sources is off unless asked for.
:func:`local_session` sets all of that once, quiets the JVM's logging, and
registers the ``kreplica`` data source.  Everything it sets is a plain Spark
option, so the same settings work with ``--master spark://...`` or ``yarn``
when passed to ``spark-submit`` instead.

Two defaults hold only for a ``local`` (or ``local-cluster``) master, where driver
and workers share this machine: the driver binds to 127.0.0.1 (``SPARK_LOCAL_IP``),
and workers run this very interpreter.  With a cluster master the driver must be reachable
from other hosts and executors bring their own Python: ship kreplica to them
with ``spark.archives`` (a packed venv) and ``spark.pyspark.python`` given in
``conf`` (``kreplica sweep --conf KEY=VALUE``).  PySpark itself reads the
executors' interpreter only from ``PYSPARK_PYTHON``; spark-submit exports the
option there, and :func:`local_session` does the same for a driver started as
plain Python (tested against a real standalone master and worker).
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

if TYPE_CHECKING:  # pyspark is an optional dependency (the "spark" extra)
    from pyspark.sql import SparkSession

# The JVM logs INFO lines from its first second, before setLogLevel can run;
# only a log4j2 configuration given at launch silences those.
_LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.hadoop.name = org.apache.hadoop.util.NativeCodeLoader
logger.hadoop.level = error
"""
# The root stays at WARN until setLogLevel: PySpark counts as a shell, and Spark
# announces on stderr any startup root level other than WARN.


BASE_CONF: dict[str, str] = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Python data sources only see filters when this is on (Spark 4.1+); register() sets
    # it again on a session that was already running.
    "spark.sql.python.filterPushdown.enabled": "true",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.driver.memory": "1g",
    # A second session in the same process (one per test module) must not
    # fight the first over ports.
    "spark.port.maxRetries": "64",
}


def java_available() -> bool:
    """True when Spark's launcher will find ``java``.  bin/spark-class runs
    ``$JAVA_HOME/bin/java`` whenever JAVA_HOME is set and not empty, looking nowhere else,
    and ``java`` on PATH only without it: a JAVA_HOME with no launcher fails the JVM's
    start even with a java on PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        return Path(java_home, "bin", "java").exists()
    return shutil.which("java") is not None


def is_local(master: str) -> bool:
    """True for masters whose executors run on this machine: ``local``, ``local[...]``
    and Spark's test master ``local-cluster[workers,cores,memory]``."""
    return master == "local" or master.startswith(("local[", "local-cluster["))


def prepare_environment(python: str | None = None, master: str = "local") -> None:
    """Set the environment the JVM and its Python workers inherit.

    Must run before the first SparkContext starts: the JVM reads these once.
    Values already set by the user are kept.  Workers' Python and the loopback
    bind are defaults for a local master only (see the module docstring).
    """
    python = python or sys.executable
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", python)
    if is_local(master):
        os.environ.setdefault("PYSPARK_PYTHON", python)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def session_conf(master: str, conf: Mapping[str, str] | None = None) -> dict[str, str]:
    """The options :func:`local_session` gives the builder: :data:`BASE_CONF`, the log4j2
    configuration, workers on this interpreter for a local master, then ``conf``."""
    java_opts = f"-Dlog4j2.configurationFile=file:{_log4j2_file()}"
    out = {"spark.driver.extraJavaOptions": java_opts, "spark.executor.extraJavaOptions": java_opts}
    if is_local(master):
        out["spark.pyspark.python"] = os.environ.get("PYSPARK_PYTHON", sys.executable)
    return {**out, **BASE_CONF, **dict(conf or {})}


def _log4j2_file() -> str:
    # One file per user: another user's in a shared /tmp could not be rewritten (sticky bit).
    path = Path(tempfile.gettempdir()) / f"kreplica-spark-log4j2-{os.getuid()}.properties"
    if not path.exists() or path.read_text() != _LOG4J2:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(_LOG4J2)
        os.replace(tmp, path)
    return str(path)


def local_session(
    master: str = "local[2]",
    app_name: str = "kreplica",
    conf: Mapping[str, str] | None = None,
) -> "SparkSession":
    """Build (or return the running) SparkSession with the ``kreplica`` source registered.

    ``conf`` entries override the defaults in :data:`BASE_CONF`.
    """
    prepare_environment(master=master)
    from pyspark.sql import SparkSession

    options = session_conf(master, conf)
    if "spark.pyspark.python" in options:
        # PySpark takes the executors' interpreter from PYSPARK_PYTHON alone; spark-submit
        # exports the option there, and a driver started as plain Python must do the same.
        os.environ["PYSPARK_PYTHON"] = options["spark.pyspark.python"]
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in options.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return register(spark)


#: The runtime SQL setting without which Spark refuses every read of a Python data source
#: that takes filters (DATA_SOURCE_PUSHDOWN_DISABLED), as the kreplica source does.
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: "SparkSession") -> "SparkSession":
    """Register the ``kreplica`` source on ``spark``, a session built anywhere, and turn on
    filter pushdown into Python data sources, which it needs (Spark 4.1 leaves it off)."""
    from .datasource import KReplicaDataSource

    spark.conf.set(PUSHDOWN_CONF, "true")
    spark.dataSource.register(KReplicaDataSource)
    return spark
