"""Run Debian's ZooKeeper as a child process on a free loopback port (tests, demo, CLI).

Theory of operation.  ``ZooKeeperServer.start()`` writes a ``zoo.cfg`` into a fresh
temporary ``dataDir``, launches ``ZooKeeperServerMain`` from the Debian package's
jar (its manifest names the rest of its class path), and polls the ``ruok``
four-letter word until it answers ``imok`` (and ``srvr`` shows it serving).  ``stop()`` sends SIGTERM (SIGKILL if
it lingers) and removes the directory.  The tick is short so that sessions can be
given short timeouts in tests (ZooKeeper bounds a session timeout to
[2, 20] ticks unless told otherwise; we widen the upper bound for Kafka's 18 s
default).
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

# KREPLICA_ZK_JAR points elsewhere (another install, or a missing one to test the skip).
ZK_JAR = os.environ.get("KREPLICA_ZK_JAR", "/usr/share/java/zookeeper.jar")
SLF4J_SIMPLE_JAR = "/usr/share/java/slf4j-simple.jar"
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"


class ZooKeeperUnavailable(RuntimeError):
    """Debian's zookeeper package (or java) is not installed."""


def zookeeper_available(jar: str = ZK_JAR) -> bool:
    return os.path.isfile(jar) and shutil.which("java") is not None


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def four_letter_word(host: str, port: int, word: str = "ruok", timeout_s: float = 1.0) -> str:
    with socket.create_connection((host, port), timeout=timeout_s) as s:
        s.sendall(word.encode())
        chunks = []
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


class ZooKeeperServer:
    """One standalone ZooKeeper; use as a context manager or start()/stop()."""

    def __init__(self, *, jar: str = ZK_JAR, tick_time_ms: int = 200,
                 max_session_timeout_ms: int = 60_000, heap_mb: int = 256,
                 host: str = "127.0.0.1") -> None:
        self.jar = jar
        self.tick_time_ms = tick_time_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.heap_mb = heap_mb
        self.host = host
        self.port = 0
        self.data_dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def hosts(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path | None:
        return None if self.data_dir is None else self.data_dir / "zookeeper.log"

    def _write_config(self, data_dir: Path) -> Path:
        cfg = data_dir / "zoo.cfg"
        cfg.write_text("\n".join([
            f"tickTime={self.tick_time_ms}",
            f"dataDir={data_dir / 'data'}",
            f"clientPort={self.port}",
            f"clientPortAddress={self.host}",
            f"minSessionTimeout={2 * self.tick_time_ms}",
            f"maxSessionTimeout={self.max_session_timeout_ms}",
            "maxClientCnxns=0",
            "admin.enableServer=false",
            "4lw.commands.whitelist=*",
            "",
        ]))
        return cfg

    def start(self, timeout_s: float = 30.0) -> "ZooKeeperServer":
        if not zookeeper_available(self.jar):
            raise ZooKeeperUnavailable(f"{self.jar} or java not found (apt-get install zookeeper)")
        last_error = ""
        for _ in range(3):  # another process may grab the free port before the JVM binds it
            self.data_dir = Path(tempfile.mkdtemp(prefix="kreplica-zk-"))
            (self.data_dir / "data").mkdir()
            self.port = free_port(self.host)
            cfg = self._write_config(self.data_dir)
            cp = self.jar + (f":{SLF4J_SIMPLE_JAR}" if os.path.isfile(SLF4J_SIMPLE_JAR) else "")
            log = open(self.data_dir / "zookeeper.log", "wb")
            self._proc = subprocess.Popen(
                ["java", f"-Xmx{self.heap_mb}m", "-cp", cp, MAIN_CLASS, str(cfg)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            log.close()
            try:
                ready = self._wait_ready(timeout_s)
            except BaseException:  # Ctrl-C or SIGTERM while the JVM starts: it must not outlive us
                self.stop()
                raise
            if ready:
                return self
            last_error = self.log_path.read_text(errors="replace")[-2000:] if self.log_path else ""
            self.stop()
        raise RuntimeError(f"ZooKeeper did not start; last log lines:\n{last_error}")

    def _wait_ready(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc is None or self._proc.poll() is not None:
                return False
            try:
                # ``imok`` comes before the server serves; ``srvr`` tells us it does.
                if (four_letter_word(self.host, self.port, "ruok") == "imok"
                        and four_letter_word(self.host, self.port, "srvr").startswith("Zookeeper version")):
                    return True
            except OSError:
                pass
            time.sleep(0.05)
        return False

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self.data_dir = None

    def __enter__(self) -> "ZooKeeperServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
