"""The session helper's choices, without a JVM (:mod:`kreplica.spark.session`).

test_spark_sweep.py checks the loopback and interpreter defaults per master, but
the fast run (``-k "not spark"``) leaves that module out, and every Spark module
builds its session with a bare environment and no ``conf``: what the user sets
must win over the defaults, and ``local_session`` must hand the builder every
option and export the executors' interpreter (the eighteenth review,
docs/engine-audit.md, SE..).  ``local_session`` runs here against a stand-in for
pyspark's builder, so these need neither pyspark nor Java.  Test names avoid the
word that would deselect them from the fast run.
"""
from __future__ import annotations

import os
import stat
import sys
import tempfile
import types

import pytest

from kreplica.spark import session

ENV = ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_LOCAL_IP")


@pytest.fixture
def bare(monkeypatch, tmp_path):
    """None of the variables set, and the log4j2 file under ``tmp_path``.  Each is set
    first, so that monkeypatch restores it (unset) after whatever the test sets."""
    for var in ENV:
        monkeypatch.setenv(var, "")
        monkeypatch.delenv(var)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("master, local", [
    ("local", True), ("local[2]", True), ("local[*]", True), ("local[4,2]", True),
    ("spark://head:7077", False), ("yarn", False), ("k8s://https://api:6443", False),
    ("localhost:7077", False), ("local-cluster[2,1,1024]", True),
], ids=["local", "local-n", "local-all", "local-n-retries", "standalone", "yarn", "k8s", "localhost",
        "local-cluster"])
def test_what_counts_as_a_local_master(master, local):
    assert session.is_local(master) is local


def test_the_users_environment_and_conf_win_over_the_defaults(bare, monkeypatch):
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/env/bin/python")
    monkeypatch.setenv("PYSPARK_DRIVER_PYTHON", "/opt/driver/bin/python")
    monkeypatch.setenv("SPARK_LOCAL_IP", "10.1.2.3")
    session.prepare_environment(master="local[2]")
    assert [os.environ[v] for v in ENV] == ["/opt/env/bin/python", "/opt/driver/bin/python", "10.1.2.3"]
    # A local master's workers run PYSPARK_PYTHON's interpreter when it is set.
    assert session.session_conf("local[2]")["spark.pyspark.python"] == "/opt/env/bin/python"
    mine = {"spark.sql.shuffle.partitions": "16", "spark.driver.memory": "4g",
            "spark.pyspark.python": "/srv/py/bin/python", "spark.ui.enabled": "true"}
    conf = session.session_conf("local", mine)
    assert {k: conf[k] for k in mine} == mine
    log4j2 = f"-Dlog4j2.configurationFile=file:{bare / f'kreplica-spark-log4j2-{os.getuid()}.properties'}"
    assert {k: v for k, v in conf.items() if k not in mine} == {
        **{k: v for k, v in session.BASE_CONF.items() if k not in mine},
        "spark.driver.extraJavaOptions": log4j2, "spark.executor.extraJavaOptions": log4j2,
    }


def test_a_stale_log4j2_file_is_rewritten(bare):
    stale = bare / f"kreplica-spark-log4j2-{os.getuid()}.properties"  # each user's own: /tmp is shared
    stale.write_text("rootLogger.level = info\n")  # another version's, or a torn write
    assert session._log4j2_file() == str(stale)
    assert stale.read_text() == session._LOG4J2 and os.listdir(bare) == [stale.name]


def _executable(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_java_is_found_under_java_home_bin_or_on_the_path(tmp_path, monkeypatch):
    """Where Spark's launcher (bin/spark-class) looks: ``$JAVA_HOME/bin/java`` when JAVA_HOME
    is set and not empty, and then nowhere else; otherwise ``java`` on PATH.  A JAVA_HOME
    without a launcher fails the JVM's start whatever PATH holds, so Spark is not available
    (the hundred-and-ninety-fifth review)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    _executable(tmp_path / "jdk" / "bin" / "java")
    _executable(tmp_path / "notjdk" / "java")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    assert session.java_available()
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "notjdk"))  # a launcher not under bin/
    assert not session.java_available()
    monkeypatch.setenv("PATH", f"{empty}{os.pathsep}{tmp_path / 'jdk' / 'bin'}")
    assert not session.java_available()  # spark-class runs $JAVA_HOME/bin/java, not PATH's
    monkeypatch.setenv("JAVA_HOME", "")  # set but empty: spark-class's `-n` test is false
    assert session.java_available()
    monkeypatch.delenv("JAVA_HOME")
    assert session.java_available()


class _Builder:
    def __init__(self, made):
        self.made = made

    def master(self, master):
        self.made["master"] = master
        return self

    def appName(self, name):  # noqa: N802 - pyspark's name
        self.made["app"] = name
        return self

    def config(self, key, value):
        self.made["conf"][key] = value
        return self

    def getOrCreate(self):  # noqa: N802 - pyspark's name
        made = self.made
        made["env"] = {v: os.environ.get(v) for v in ENV}  # what the JVM would inherit
        return types.SimpleNamespace(
            sparkContext=types.SimpleNamespace(setLogLevel=lambda level: made.setdefault("levels", []).append(level)),
            conf=types.SimpleNamespace(set=lambda key, value: made.setdefault("runtime_conf", {}).__setitem__(key, value)),
            dataSource=types.SimpleNamespace(register=lambda source: made.setdefault("sources", []).append(source)))


@pytest.fixture
def builder(monkeypatch):
    """pyspark's ``SparkSession.builder`` and the data source module, stood in for."""
    made = {"conf": {}}
    sql = types.ModuleType("pyspark.sql")
    sql.SparkSession = types.SimpleNamespace(builder=_Builder(made))
    pyspark = types.ModuleType("pyspark")
    pyspark.sql = sql
    source = types.ModuleType("kreplica.spark.datasource")
    source.KReplicaDataSource = object()
    monkeypatch.setitem(sys.modules, "pyspark", pyspark)
    monkeypatch.setitem(sys.modules, "pyspark.sql", sql)
    monkeypatch.setitem(sys.modules, "kreplica.spark.datasource", source)
    made["source"] = source.KReplicaDataSource
    return made


def test_a_local_session_gets_every_option_and_the_source(bare, builder):
    session.local_session("local[2]", "app", conf={"spark.sql.shuffle.partitions": "8"})
    assert (builder["master"], builder["app"]) == ("local[2]", "app")
    assert builder["conf"] == session.session_conf("local[2]", {"spark.sql.shuffle.partitions": "8"})
    assert builder["conf"]["spark.pyspark.python"] == sys.executable
    assert builder["env"] == {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
                              "SPARK_LOCAL_IP": "127.0.0.1"}
    assert builder["levels"] == ["ERROR"] and builder["sources"] == [builder["source"]]
    assert builder["runtime_conf"] == {session.PUSHDOWN_CONF: "true"}  # set again on a running session


def test_a_cluster_sessions_executor_interpreter_is_exported_before_the_jvm_starts(bare, builder):
    """PySpark reads the executors' interpreter from PYSPARK_PYTHON only; a driver started
    as plain Python must export the option itself, as spark-submit would."""
    session.local_session("spark://head:7077", conf={"spark.pyspark.python": "./env/bin/python",
                                                     "spark.archives": "env.tar.gz#env"})
    assert builder["env"] == {"PYSPARK_PYTHON": "./env/bin/python", "PYSPARK_DRIVER_PYTHON": sys.executable,
                              "SPARK_LOCAL_IP": None}
    assert builder["conf"]["spark.archives"] == "env.tar.gz#env"


def test_a_session_without_a_master_runs_two_local_cores(bare, builder):
    """The default is ``local[2]``, not every core of a machine shared with other work;
    a local master still binds the driver to the loopback address (the sixty-fourth review)."""
    session.local_session()
    assert (builder["master"], builder["app"]) == ("local[2]", "kreplica")
    assert builder["env"]["SPARK_LOCAL_IP"] == "127.0.0.1"


def test_the_executors_interpreter_given_in_conf_is_the_one_exported_on_a_local_master_too(bare, builder):
    """A local master first defaults PYSPARK_PYTHON to this interpreter; a
    ``spark.pyspark.python`` given in ``conf`` must still be the one the workers run, as
    spark-submit would export it, whatever PYSPARK_PYTHON said before (the eighty-third
    review)."""
    session.local_session("local[2]", conf={"spark.pyspark.python": "/srv/py/bin/python"})
    assert builder["conf"]["spark.pyspark.python"] == "/srv/py/bin/python"
    assert builder["env"]["PYSPARK_PYTHON"] == "/srv/py/bin/python"


def test_a_session_opens_no_web_ui_and_prints_no_console_progress(bare, builder):
    """A sweep or a read on a shared machine listens on no extra port (the UI's 4040 and
    up) and leaves stderr to the sweep's own bar; Arrow and filter pushdown are on, which
    the source and the sweep's tasks need (the hundred-and-second review)."""
    session.local_session("local[2]")
    conf = builder["conf"]
    assert (conf["spark.ui.enabled"], conf["spark.ui.showConsoleProgress"]) == ("false", "false")
    assert conf["spark.sql.execution.arrow.pyspark.enabled"] == conf[session.PUSHDOWN_CONF] == "true"


def test_the_jvms_log_goes_to_stderr_at_warn_from_its_first_line(bare):
    """The log4j2 file the JVMs are started with sends their log to stderr, at WARN (the
    root level Spark expects of a shell) and the native-library notice at ERROR: the
    report's table is printed on stdout, where a pipe must get it alone (the
    hundred-and-twenty-first review, docs/engine-audit.md, SP6-..)."""
    java_opts = session.session_conf("local[2]")["spark.driver.extraJavaOptions"]
    path = java_opts.removeprefix("-Dlog4j2.configurationFile=file:")
    props = dict(line.split(" = ", 1) for line in open(path).read().splitlines() if " = " in line)
    appender = next(k.split(".")[1] for k, v in props.items()
                    if k.startswith("appender.") and k.endswith(".name") and v == props["rootLogger.appenderRef.stderr.ref"])
    assert (props[f"appender.{appender}.type"], props[f"appender.{appender}.target"]) == ("Console", "SYSTEM_ERR")
    assert props["rootLogger.level"] == "warn"
    assert (props["logger.hadoop.name"], props["logger.hadoop.level"]) == ("org.apache.hadoop.util.NativeCodeLoader", "error")
