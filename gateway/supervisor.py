"""``rokka serve --brokers N``: one name server and N brokers as child processes, one cluster.

Theory of operation
-------------------
A rokka broker is one trio event loop, so one core.  ``run_cluster`` (the supervisor) turns a
big machine into one cluster: it runs no listener itself, it starts

* one name server (``rokka namesrv``), its ``kvConfig.json`` in ``<data>/namesrv`` (as
  ``rokka serve`` keeps it), and
* N brokers (``rokka broker -n <namesrv>``) named ``broker-0`` .. ``broker-<N-1>``, each with
  its own store in ``<data>/broker-<i>``, all in the broker.conf's cluster, sharing
  ``<data>/cluster`` (Kafka ACLs: ``rokka.gateway.kafka.shared_acls``).

Ports are derived from the given ones: broker i listens on ``broker-port + 4*i`` (its VIP port
is that minus 2, its advertised HA port that plus 1, so a stride of 4 never overlaps) and on
Kafka port ``kafka-port + i``; the name server on ``namesrv-port``.  A port of 0 makes the
supervisor pick, at start, a base whose derived ports are all free; the ports are then fixed for
the supervisor's life, so a restarted child comes back where its clients knew it.

When every child printed its own ready line, and every broker's Kafka Metadata lists all N
brokers (each broker learns the others from the name server every 3 s; ``_formed``, bounded by
``FORM_S``; a listener that needs SASL or TLS is not asked: the name server must know every broker
and the brokers get one refresh period), the supervisor prints one line, in broker order:

    rokka ready namesrv=H:P broker=H:P,H:P,... kafka=H:P,H:P,...

A child that exits before its first ready line fails the start: the others are stopped and the
supervisor exits with the child's code (its own message is on the shared stderr).  A child that
dies later is logged (``supervisor.child_exited``) and started again after a back-off (0.5 s
doubling up to 30 s; back to 0.5 s once a child stayed up 60 s).  Children get SIGKILL if the
supervisor itself dies (``PR_SET_PDEATHSIG``): a killed supervisor is a killed cluster, as a
killed ``rokka serve`` is.  That signal follows the *thread* that forked the child, so children
are forked by the event loop's own thread (``_spawn``; ``trio.lowlevel.open_process`` forks in a
worker thread that exits when idle); their exits are awaited on a pidfd.  SIGTERM / SIGINT: the
brokers get SIGTERM together (each drains,
unregisters, flushes, exits 0), then the name server; exit 0 when every child stopped cleanly,
1 otherwise.  A child ignoring SIGTERM for ``STOP_S`` is killed.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import structlog
import trio

log = structlog.get_logger("rokka.supervisor")

PORT_STRIDE = 4
STOP_S = 30.0
BACKOFF_FIRST_S = 0.5
BACKOFF_MAX_S = 30.0
STABLE_S = 60.0
FORM_S = 60.0
_PR_SET_PDEATHSIG = 1


def broker_name(index: int) -> str:
    return f"broker-{index}"


def derived_ports(broker_port: int, kafka_port: int, n: int) -> list[tuple[int, int]]:
    """(broker port, Kafka port) of each broker i: broker-port + 4*i, kafka-port + i."""
    return [(broker_port + PORT_STRIDE * i, kafka_port + i) for i in range(n)]


def _free(host: str, port: int) -> bool:
    if not 0 < port < 65536:
        return False
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _any_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def pick_ports(host: str, namesrv_port: int, broker_port: int, kafka_port: int,
               n: int) -> tuple[int, int, int]:
    """Concrete ports for a port of 0: a base whose derived ports (and VIP ports) are all free."""
    taken: set[int] = set()
    if namesrv_port == 0:
        namesrv_port = _any_port(host)
    taken.add(namesrv_port)
    for _ in range(200):
        b = broker_port or _any_port(host)
        want = [p for i in range(n) for p in (b + PORT_STRIDE * i, b + PORT_STRIDE * i - 2)]
        if broker_port or (not taken.intersection(want) and all(_free(host, p) for p in want)):
            broker_port = b
            taken.update(want)
            break
    for _ in range(200):
        k = kafka_port or _any_port(host)
        want = [k + i for i in range(n)]
        if kafka_port or (not taken.intersection(want) and all(_free(host, p) for p in want)):
            kafka_port = k
            break
    if not broker_port or not kafka_port:
        raise OSError(f"no free block of ports for {n} brokers on {host}")
    return namesrv_port, broker_port, kafka_port


def _die_with_parent() -> None:  # pragma: no cover - runs in the forked child
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


@dataclass
class Child:
    """One supervised process: its argv (fixed ports), its ready parts, its restarts."""

    name: str
    argv: list[str]
    parts: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0
    ready: trio.Event = field(default_factory=trio.Event)


def _spawn(argv: list[str]) -> subprocess.Popen[bytes]:
    """Fork ``argv`` from this (the event loop's) thread: PR_SET_PDEATHSIG is tied to it."""
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,  # noqa: S603 - our argv
                            start_new_session=True, preexec_fn=_die_with_parent)


async def _wait_exit(proc: subprocess.Popen[bytes]) -> int:
    """The child's exit code, awaited on a pidfd (no thread, no SIGCHLD handler)."""
    if proc.returncode is not None:
        return proc.returncode
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):        # pragma: no cover - pre-5.3 kernels
        return await trio.to_thread.run_sync(proc.wait, abandon_on_cancel=True)
    try:
        await trio.lowlevel.wait_readable(fd)
    finally:
        os.close(fd)
    return proc.wait()


class StartFailed(Exception):
    def __init__(self, child: str, code: int) -> None:
        super().__init__(f"{child} exited with {code} before it was ready")
        self.child, self.code = child, code


async def _read_ready(stdout: trio.lowlevel.FdStream) -> dict[str, str] | None:
    """The child's ready-line parts, or None at EOF (it died)."""
    buf = b""
    while True:
        data = await stdout.receive_some(4096)
        if not data:
            return None
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            text = line.decode("utf-8", "replace").strip()
            if text.startswith("rokka ready "):
                return dict(p.split("=", 1) for p in text.split()[2:] if "=" in p)


async def _drain(stdout: trio.lowlevel.FdStream) -> None:
    async with stdout:
        while await stdout.receive_some(4096):
            pass


class Supervisor:
    def __init__(self, namesrv: Child, brokers: list[Child]) -> None:
        self.namesrv, self.brokers = namesrv, brokers
        self.stopping = False
        self.failed: StartFailed | None = None
        self.stop = trio.Event()

    async def _start(self, child: Child, nursery: trio.Nursery) -> bool:
        child.starts += 1
        proc = child.process = _spawn(child.argv)
        assert proc.stdout is not None
        stdout = trio.lowlevel.FdStream(os.dup(proc.stdout.fileno()))
        proc.stdout.close()
        parts = await _read_ready(stdout)
        if parts is None:
            await stdout.aclose()
            await _wait_exit(proc)
            return False
        child.parts = parts
        nursery.start_soon(_drain, stdout)
        return True

    async def keep(self, child: Child) -> None:
        """Start ``child`` and restart it whenever it dies, until the supervisor stops."""
        backoff = BACKOFF_FIRST_S
        async with trio.open_nursery() as nursery:
            while True:
                began = trio.current_time()
                ok = await self._start(child, nursery)
                if not ok and not child.ready.is_set() and not self.stopping:
                    assert child.process is not None
                    self.failed = StartFailed(child.name, child.process.returncode or 2)
                    self.stop.set()
                    return
                if ok and not child.ready.is_set():
                    child.ready.set()
                elif ok:
                    log.info("supervisor.child_restarted", child=child.name, pid=child.process.pid,
                             starts=child.starts)
                assert child.process is not None
                code = await _wait_exit(child.process)
                if self.stopping:
                    return
                if trio.current_time() - began >= STABLE_S:
                    backoff = BACKOFF_FIRST_S
                log.warning("supervisor.child_exited", child=child.name, code=code, restart_in_s=backoff)
                await trio.sleep(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_S)
                if self.stopping:
                    return

    async def terminate(self, children: list[Child]) -> bool:
        """SIGTERM to ``children`` together, SIGKILL after STOP_S; True when all exited 0."""
        clean = True

        async def one(child: Child) -> None:
            nonlocal clean
            proc = child.process
            if proc is None:
                return
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            with trio.move_on_after(STOP_S) as scope:
                await _wait_exit(proc)
            if scope.cancelled_caught:
                log.error("supervisor.child_killed", child=child.name, reason=f"ignored SIGTERM for {STOP_S}s")
                proc.kill()
                await _wait_exit(proc)
            if proc.returncode != 0:
                clean = False
                log.warning("supervisor.child_unclean_exit", child=child.name, code=proc.returncode)

        async with trio.open_nursery() as nursery:
            for child in children:
                nursery.start_soon(one, child)
        return clean

    def ready_line(self) -> str:
        joined = {k: ",".join(b.parts.get(k, "") for b in self.brokers) for k in ("broker", "kafka")}
        line = f"rokka ready namesrv={self.namesrv.parts.get('namesrv', '')} broker={joined['broker']} " \
               f"kafka={joined['kafka']}"
        if all("metrics" in b.parts for b in self.brokers):
            line += " metrics=" + ",".join(b.parts["metrics"] for b in self.brokers)
        return line

    async def run(self) -> int:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._watch_signals)
            nursery.start_soon(self.keep, self.namesrv)
            await self._wait(self.namesrv)
            if self.failed is None and not self.stopping:
                for b in self.brokers:
                    nursery.start_soon(self.keep, b)
                for b in self.brokers:
                    await self._wait(b)
            if self.failed is None and not self.stopping:
                with trio.move_on_after(FORM_S) as formed:
                    await _formed(self.namesrv.parts.get("namesrv", ""),
                                  [b.parts.get("kafka", "") for b in self.brokers])
                if formed.cancelled_caught:
                    log.warning("supervisor.cluster_incomplete", waited_s=FORM_S,
                                reason="a broker's Kafka Metadata does not list every broker yet")
            if self.failed is None and not self.stopping:
                print(self.ready_line(), flush=True)
                log.info("supervisor.ready", brokers=len(self.brokers))
            await self.stop.wait()
            self.stopping = True
            log.info("supervisor.stopping")
            clean = await self.terminate(self.brokers)
            clean = await self.terminate([self.namesrv]) and clean
            nursery.cancel_scope.cancel()
        if self.failed is not None:
            print(f"rokka: cannot start: {self.failed}", file=sys.stderr, flush=True)
            return self.failed.code
        log.info("supervisor.stopped", clean=clean)
        return 0 if clean else 1

    async def _wait(self, child: Child) -> None:
        async with trio.open_nursery() as n:
            async def ready() -> None:
                await child.ready.wait()
                n.cancel_scope.cancel()

            async def stopped() -> None:
                await self.stop.wait()
                n.cancel_scope.cancel()
            n.start_soon(ready)
            n.start_soon(stopped)

    async def _watch_signals(self) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for _ in signals:
                self.stopping = True
                self.stop.set()
                return


async def _kafka_broker_count(addr: str) -> int | None:
    """How many brokers the Kafka listener at ``addr`` lists in Metadata v1 (no topics); None when
    it does not answer plainly (SASL or TLS listener, closed connection)."""
    from rokka.gateway.kafka.codec import APIS
    from rokka.gateway.kafka.codec.framing import decode_response_frame, encode_request_frame

    api = APIS[3]
    host, port = addr.rsplit(":", 1)
    try:
        with trio.fail_after(5):
            stream = await trio.open_tcp_stream(host, int(port))
            async with stream:
                await stream.send_all(encode_request_frame(api, 1, 1, api.request.make(topics=[]),
                                                           client_id="rokka-supervisor"))
                buf = b""
                while len(buf) < 4 or len(buf) < 4 + int.from_bytes(buf[:4], "big"):
                    data = await stream.receive_some(65536)
                    if not data:
                        return None
                    buf += data
        _, body = decode_response_frame(api, 1, buf[4:4 + int.from_bytes(buf[:4], "big")])
        return len(body.brokers)
    except (OSError, trio.TooSlowError, ValueError) as exc:
        log.info("supervisor.metadata_probe_skipped", kafka=addr, error=str(exc) or type(exc).__name__)
        return None


async def _cluster_formed(addr: str, n: int) -> bool:
    """Wait until the broker at ``addr`` lists ``n`` brokers; False when it cannot be asked plainly."""
    while True:
        count = await _kafka_broker_count(addr)
        if count is None:
            return False
        if count >= n:
            return True
        await trio.sleep(0.2)


async def _registered(namesrv: str, n: int) -> None:
    """Wait until the name server knows ``n`` brokers with a published Kafka endpoint."""
    from rokka.gateway.kafka.cluster import KV_NAMESPACE
    from rokka.net.remoting.channel import ChannelClosedError, RequestTimeoutError
    from rokka.net.remoting.client import NamesrvClient, RemotingClient
    from rokka.net.remoting.client.remoting import ClientError

    async with RemotingClient() as rc:
        ns = NamesrvClient(rc, [namesrv])
        while True:
            try:
                kv = await ns.kv_list(KV_NAMESPACE)
                live = (await ns.cluster_info()).get("brokerAddrTable") or {}
                if len(kv) >= n and len(live) >= n:
                    return
            except (ClientError, RequestTimeoutError, ChannelClosedError, OSError, ValueError) as exc:
                log.debug("supervisor.namesrv_probe_failed", error=str(exc))
            await trio.sleep(0.2)


async def _formed(namesrv: str, kafkas: list[str]) -> None:
    """Every broker's Kafka Metadata lists all brokers; where a listener needs SASL or TLS, the name
    server knows them all and every broker had time for one refresh of its view (``TTL_S``)."""
    from rokka.gateway.kafka.cluster import TTL_S

    for addr in kafkas:
        if not await _cluster_formed(addr, len(kafkas)):
            await _registered(namesrv, len(kafkas))
            await trio.sleep(TTL_S + 0.5)
            return


@dataclass
class ClusterSpec:
    """What ``rokka serve --brokers N`` was given (ports already concrete or 0)."""

    brokers: int
    data_dir: Path
    host: str
    namesrv_port: int
    broker_port: int
    kafka_port: int
    broker_args: list[str] = field(default_factory=list)   # passed to every broker (-c, --cluster, ...)
    log_args: list[str] = field(default_factory=list)


def _rokka() -> list[str]:
    return [sys.executable, "-m", "rokka.gateway.cli.main"]


def build_children(spec: ClusterSpec) -> tuple[Child, list[Child]]:
    ns_port, b_port, k_port = pick_ports(spec.host, spec.namesrv_port, spec.broker_port, spec.kafka_port,
                                         spec.brokers)
    ns_dir = spec.data_dir / "namesrv"
    ns_dir.mkdir(parents=True, exist_ok=True)
    props = ns_dir / "namesrv.properties"
    if not props.exists():      # kvConfig.json beside the stores, as `rokka serve` keeps it
        props.write_text(f"kvConfigPath={ns_dir / 'kvConfig.json'}\n", encoding="utf-8")
    namesrv = Child("namesrv", [*_rokka(), "namesrv", "--host", spec.host, "--port", str(ns_port),
                                "-c", str(props), *spec.log_args])
    ns_addr = f"{'127.0.0.1' if spec.host in ('', '0.0.0.0', '::') else spec.host}:{ns_port}"
    brokers = []
    for i, (bp, kp) in enumerate(derived_ports(b_port, k_port, spec.brokers)):
        name = broker_name(i)
        brokers.append(Child(name, [*_rokka(), "broker", "-n", ns_addr, "--broker-name", name,
                                    "--data-dir", str(spec.data_dir / name), "--host", spec.host,
                                    "--broker-port", str(bp), "--kafka-port", str(kp),
                                    "--shared-config-dir", str(spec.data_dir / "cluster"),
                                    *spec.broker_args, *spec.log_args]))
    return namesrv, brokers


def resolve_brokers(value: str) -> int:
    """``--brokers``: a positive count, or ``auto`` = the cores this process may run on."""
    if value.strip().lower() == "auto":
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except AttributeError:  # pragma: no cover - not Linux
            return max(1, os.cpu_count() or 1)
    try:
        n = int(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a number of brokers (a positive integer, or auto)") from None
    if n < 1:
        raise ValueError(f"{n} brokers: at least 1 (or auto)")
    return n


def run_cluster(spec: ClusterSpec) -> int:
    """Run the supervisor until SIGTERM/SIGINT; the process exit code (see the module docstring)."""
    try:
        namesrv, brokers = build_children(spec)
    except OSError as exc:
        print(f"rokka: cannot start: {exc}", file=sys.stderr, flush=True)
        return 2
    log.info("supervisor.starting", brokers=len(brokers), data_dir=str(spec.data_dir))
    try:
        return trio.run(Supervisor(namesrv, brokers).run)
    except KeyboardInterrupt:  # pragma: no cover - SIGINT before the handler was installed
        return 0
