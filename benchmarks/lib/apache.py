"""The real brokers ("anchors") beside rokka: Apache Kafka (KRaft) and Apache RocketMQ, started from Maven jars.

Theory of operation
-------------------
``benchmarks/anchors/install.sh`` (``make anchors``) copies the jars from Maven Central into
``benchmarks/anchors/target/{kafka,rocketmq}/lib``.  This module starts them as plain ``java -cp lib/*``
processes in a temp directory, each on free 127.0.0.1 ports, and stops them (SIGTERM, then SIGKILL after
a bounded wait).  Nothing of a user's home is touched: ``user.home`` and every data path point into the
given working directory.

* Apache Kafka 4.4.0, one KRaft node that is broker and controller at once (``process.roles=
  broker,controller``), with the settings of the ``config/server.properties`` that Kafka ships (3 network
  threads, 8 I/O threads, 1 partition per new topic, replication factor 1 for its internal topics, 1 GiB
  segments, retention 7 days) and data on disk in ``workdir/kraft-logs``.  The storage is formatted first
  (``kafka.tools.StorageTool format``), then ``kafka.Kafka`` runs with the JVM flags of
  ``kafka-run-class.sh`` (G1, 20 ms pause goal) and a 1 GiB heap.  Kafka logs through slf4j, which has no
  binding in these jars, so it prints nothing: readiness is an ApiVersions request answered on its port.
* Apache RocketMQ 4.9.7 (the newest 4.9 broker that Maven Central serves here; the Java client in
  ``interop/java/rocketmq`` is 4.9.8, same protocol), ``NamesrvStartup`` and then ``BrokerStartup``
  (broker ``DefaultCluster``/``broker-a``, id 0, ``flushDiskType=ASYNC_FLUSH``, ``autoCreateTopicEnable``,
  ``brokerIP1=127.0.0.1``), each with ``-Xmx1g -Xmn256m`` (G1) and a ``ROCKETMQ_HOME`` whose ``conf/``
  holds the logback files both need (logs in ``workdir/logs``).  Ready: the "boot success" line each
  prints.  The broker also listens on ``listenPort - 2`` (VIP channel) and ``listenPort + 1`` (HA), so its
  port is picked with both neighbours free.

``pids`` of a started anchor lists its server processes for ``/proc`` CPU accounting (``benchmarks.lib.cpu``);
for RocketMQ that is the name server and the broker (rokka is both in one process).  Every wait is
bounded; a failed start raises ``AnchorError`` with the tail of the process's log and leaves nothing
running.
"""

from __future__ import annotations

import base64
import os
import signal
import socket
import struct
import subprocess
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ANCHORS = ROOT / "benchmarks" / "anchors" / "target"
KAFKA_LIB = ANCHORS / "kafka" / "lib"
ROCKETMQ_LIB = ANCHORS / "rocketmq" / "lib"
KAFKA_VERSION = "4.4.0"
ROCKETMQ_VERSION = "4.9.7"
HOST = "127.0.0.1"
STOP_S = 30.0

#: kafka-run-class.sh's performance options and kafka-server-start.sh's heap (1 GiB).
KAFKA_JVM = ["-Xmx1g", "-Xms1g", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
             "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true"]
#: runserver.sh / runbroker.sh options at a heap small enough for a 2-core, shared machine.  The opens let
#: RocketMQ 4.9 unmap its mapped files through the JDK internals it was written against (Java 8).
ROCKETMQ_JVM = ["-server", "-Xms1g", "-Xmx1g", "-Xmn256m", "-XX:+UseG1GC", "-XX:G1HeapRegionSize=16m",
                "-XX:-OmitStackTraceInFastThrow", "-Djava.awt.headless=true",
                "--add-opens=java.base/java.nio=ALL-UNNAMED", "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
                "--add-opens=java.base/java.lang=ALL-UNNAMED", "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED",
                "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED"]

#: The settings of Kafka's shipped config/server.properties (besides roles, listeners, paths).
KAFKA_DEFAULTS: dict[str, str] = {
    "num.network.threads": "3", "num.io.threads": "8", "socket.send.buffer.bytes": "102400",
    "socket.receive.buffer.bytes": "102400", "socket.request.max.bytes": "104857600", "num.partitions": "1",
    "num.recovery.threads.per.data.dir": "1", "offsets.topic.replication.factor": "1",
    "share.coordinator.state.topic.replication.factor": "1", "share.coordinator.state.topic.min.isr": "1",
    "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
    "log.retention.hours": "168", "log.segment.bytes": "1073741824", "log.retention.check.interval.ms": "300000",
}


class AnchorError(RuntimeError):
    """An anchor broker is not installed or did not start; the message says why (with its log's tail)."""


def missing() -> str | None:
    """Why the anchors cannot run here (None: they can): java absent or the jars not fetched."""
    from shutil import which

    if which("java") is None:
        return "java is not installed (OpenJDK 17 expected)"
    for lib, jar in ((KAFKA_LIB, f"kafka_2.13-{KAFKA_VERSION}.jar"),
                     (ROCKETMQ_LIB, f"rocketmq-broker-{ROCKETMQ_VERSION}.jar")):
        if not (lib / jar).is_file():
            return f"{lib / jar} is missing: run `make anchors` (benchmarks/anchors/install.sh)"
    return None


def _tail(path: Path, n: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:]) or "<empty>"
    except OSError:
        return "<no log>"


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def free_port(neighbours: tuple[int, ...] = ()) -> int:
    """A free port on 127.0.0.1 whose ``port + d`` for each d in ``neighbours`` is free as well."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind((HOST, 0))
            port = int(s.getsockname()[1])
        if all(1024 < port + d < 65536 and _bindable(port + d) for d in neighbours):
            return port
    raise AnchorError(f"no free port with free neighbours {neighbours}")


@dataclass
class JavaProcess:
    """One JVM, its output in ``log``, started in its own session."""

    name: str
    argv: list[str]
    log: Path
    env: dict[str, str]
    cwd: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> JavaProcess:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         cwd=self.cwd, env=self.env, start_new_session=True)
        return self

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_ready(self, ready: object, timeout: float) -> None:
        """Poll ``ready()`` (a callable returning bool) until true; AnchorError if the JVM exits or time is up."""
        deadline = time.monotonic() + timeout
        while not ready():  # type: ignore[operator]
            if not self.running() or time.monotonic() > deadline:
                why = "exited" if not self.running() else f"was not ready within {timeout:.0f} s"
                self.stop()
                raise AnchorError(f"{self.name} {why}: {' '.join(self.argv[-4:])}\n{_tail(self.log)}")
            time.sleep(0.2)

    def stop(self, timeout: float = STOP_S) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)


def _api_versions_answered(port: int) -> bool:
    """True once the Kafka listener answers an ApiVersions v0 request with error code 0."""
    client = b"rokka-probe"
    body = struct.pack(">hhih", 18, 0, 1, len(client)) + client
    try:
        with socket.create_connection((HOST, port), timeout=2) as s:
            s.settimeout(5)
            s.sendall(struct.pack(">i", len(body)) + body)
            head = s.recv(4 + 4 + 2, socket.MSG_WAITALL)
    except OSError:
        return False
    return len(head) == 10 and struct.unpack(">ih", head[4:10]) == (1, 0)


def kafka_properties(log_dir: Path, port: int, controller_port: int,
                     overrides: Mapping[str, str] | None = None) -> str:
    """server.properties of a one-node KRaft cluster (broker + controller) on 127.0.0.1."""
    props = {
        "process.roles": "broker,controller", "node.id": "1",
        "controller.quorum.voters": f"1@{HOST}:{controller_port}",
        "listeners": f"PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{controller_port}",
        "inter.broker.listener.name": "PLAINTEXT", "advertised.listeners": f"PLAINTEXT://{HOST}:{port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(log_dir), **KAFKA_DEFAULTS, **(overrides or {}),
    }
    return "".join(f"{k}={v}\n" for k, v in props.items())


@dataclass
class ApacheKafka:
    """A running one-node Apache Kafka; ``bootstrap`` is its "host:port"."""

    workdir: Path
    port: int
    controller_port: int
    server: JavaProcess
    version: str = KAFKA_VERSION

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def pids(self) -> list[int]:
        assert self.server.proc is not None
        return [self.server.proc.pid]

    def stop(self) -> None:
        self.server.stop()

    def restart(self, *, hard: bool = False, timeout: float = 180.0) -> ApacheKafka:
        """Stop (SIGTERM, or SIGKILL when ``hard``) and start again on the same ports and data."""
        if hard and self.server.proc is not None and self.server.proc.poll() is None:
            self.server.proc.kill()
            self.server.proc.wait(timeout=STOP_S)
        self.stop()
        self.server.start().wait_ready(lambda: _api_versions_answered(self.port), timeout)
        return self


def start_kafka(workdir: Path, overrides: Mapping[str, str] | None = None, timeout: float = 180.0) -> ApacheKafka:
    """Format a fresh KRaft storage under ``workdir`` and start Apache Kafka on free ports."""
    if why := missing():
        raise AnchorError(why)
    workdir.mkdir(parents=True, exist_ok=True)
    port, cport = free_port(), free_port()
    conf = workdir / "server.properties"
    conf.write_text(kafka_properties(workdir / "kraft-logs", port, cport, overrides))
    env = {**os.environ, "HOME": str(workdir)}
    cp = f"{KAFKA_LIB}/*"
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
    fmt = subprocess.run(["java", "-Xmx256m", f"-Duser.home={workdir}", "-cp", cp, "kafka.tools.StorageTool",
                          "format", "-t", cluster_id, "-c", str(conf)],
                         cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout)
    if fmt.returncode != 0:
        raise AnchorError(f"kafka-storage format failed (exit {fmt.returncode}):\n{fmt.stdout}\n{fmt.stderr}")
    argv = ["java", *KAFKA_JVM, f"-Duser.home={workdir}", "-cp", cp, "kafka.Kafka", str(conf)]
    server = JavaProcess("apache-kafka", argv, workdir / "kafka.log", env, workdir).start()
    server.wait_ready(lambda: _api_versions_answered(port), timeout)
    return ApacheKafka(workdir, port, cport, server)


_LOGBACK = """<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>{log}</file>
    <encoder><pattern>%d{{HH:mm:ss.SSS}} %-5p [%t] %c{{0}} - %m%n</pattern></encoder>
  </appender>
  <root level="{level}"><appender-ref ref="FILE"/></root>
</configuration>
"""


def _rocketmq_home(workdir: Path) -> Path:
    """A ROCKETMQ_HOME with the conf/logback_*.xml that NamesrvStartup and BrokerStartup load."""
    home = workdir / "home"
    (home / "conf").mkdir(parents=True, exist_ok=True)
    (workdir / "logs").mkdir(parents=True, exist_ok=True)
    for role in ("namesrv", "broker", "tools"):
        (home / "conf" / f"logback_{role}.xml").write_text(
            _LOGBACK.format(log=workdir / "logs" / f"{role}.log", level="WARN"))
    return home


@dataclass
class ApacheRocketMQ:
    """A running Apache RocketMQ name server + broker; ``namesrv`` and ``broker`` are "host:port"."""

    workdir: Path
    namesrv_port: int
    broker_port: int
    namesrv_proc: JavaProcess
    broker_proc: JavaProcess
    version: str = ROCKETMQ_VERSION
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def namesrv(self) -> str:
        return f"{HOST}:{self.namesrv_port}"

    @property
    def broker(self) -> str:
        return f"{HOST}:{self.broker_port}"

    @property
    def pids(self) -> list[int]:
        return [p.proc.pid for p in (self.namesrv_proc, self.broker_proc) if p.proc is not None]

    def stop(self) -> None:
        try:
            self.broker_proc.stop()
        finally:
            self.namesrv_proc.stop()

    def restart_broker(self, timeout: float = 180.0) -> ApacheRocketMQ:
        """Stop and start the broker again (same port, same store)."""
        self.broker_proc.stop()
        self.broker_proc.start().wait_ready(lambda: _booted(self.broker_proc.log, "boot success"), timeout)
        return self


def _booted(log: Path, text: str) -> bool:
    try:
        return text in log.read_text(errors="replace")
    except OSError:
        return False


def broker_conf(workdir: Path, port: int, namesrv: str, overrides: Mapping[str, str] | None = None) -> str:
    store = workdir / "store"
    props = {
        "brokerClusterName": "DefaultCluster", "brokerName": "broker-a", "brokerId": "0",
        "deleteWhen": "04", "fileReservedTime": "48", "brokerRole": "ASYNC_MASTER", "flushDiskType": "ASYNC_FLUSH",
        "listenPort": str(port), "namesrvAddr": namesrv, "brokerIP1": HOST, "autoCreateTopicEnable": "true",
        "storePathRootDir": str(store), "storePathCommitLog": str(store / "commitlog"),
        **(overrides or {}),
    }
    return "".join(f"{k}={v}\n" for k, v in props.items())


def start_rocketmq(workdir: Path, overrides: Mapping[str, str] | None = None,
                   timeout: float = 180.0) -> ApacheRocketMQ:
    """Start an Apache RocketMQ name server, then a broker registered with it, on free ports."""
    if why := missing():
        raise AnchorError(why)
    workdir.mkdir(parents=True, exist_ok=True)
    home = _rocketmq_home(workdir)
    env = {**os.environ, "ROCKETMQ_HOME": str(home), "HOME": str(workdir)}
    cp = f"{ROCKETMQ_LIB}/*"
    jvm = ["java", *ROCKETMQ_JVM, f"-Duser.home={workdir}", f"-Drocketmq.home.dir={home}", "-cp", cp]
    ns_port = free_port()
    ns_conf = workdir / "namesrv.conf"
    ns_conf.write_text(f"listenPort={ns_port}\nkvConfigPath={workdir / 'namesrv' / 'kvConfig.json'}\n"
                       f"configStorePath={workdir / 'namesrv' / 'namesrv.properties'}\n")
    ns = JavaProcess("apache-rocketmq-namesrv",
                     [*jvm, "org.apache.rocketmq.namesrv.NamesrvStartup", "-c", str(ns_conf)],
                     workdir / "namesrv.out", env, workdir).start()
    ns.wait_ready(lambda: _booted(ns.log, "boot success"), timeout)
    port = free_port(neighbours=(-2, 1))
    conf = workdir / "broker.conf"
    conf.write_text(broker_conf(workdir, port, f"{HOST}:{ns_port}", overrides))
    broker = JavaProcess("apache-rocketmq-broker",
                         [*jvm, "org.apache.rocketmq.broker.BrokerStartup", "-c", str(conf)],
                         workdir / "broker.out", env, workdir)
    try:
        broker.start().wait_ready(lambda: _booted(broker.log, "boot success"), timeout)
    except BaseException:
        ns.stop()
        raise
    return ApacheRocketMQ(workdir, ns_port, port, ns, broker)
