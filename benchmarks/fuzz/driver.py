"""The fuzz run: a real ``rokka serve``, hostile frames on every port, steady clients, RSS watched.

Theory of operation
-------------------
``run_fuzz(FuzzConfig)`` makes a jail (``hostile.make_jail``: the data dir deep inside a private temp dir
with canaries beside it), starts ``rokka serve`` there on 127.0.0.1 (``interop/harness.py``), asks the
Kafka port which API versions it speaks, then runs, each in its own thread and each bounded in frame
count and time:

* one ``PortFuzzer`` per port (Kafka, broker remoting, name-server remoting): opens a connection, writes a
  burst of 1..16 generated frames (``KafkaFrames`` / ``RemotingFrames``), now and then reads the answers
  (capped), and closes with a reset (SO_LINGER 0: no TIME_WAIT pile-up over a million frames);
* ``SteadyKafka``: kafka-python, acks=all, produces one record at a time and a consumer reads them back;
* ``SteadyRocketMQ``: rokka's own RocketMQ client (trio) sends sync and pulls each message back;
* ``RssWatch``: samples the server's (and any child's) memory from /proc: VmRSS, and the part of it that
  is the process's own memory (RssAnon + RssShmem: heap, buffers).  The rest of VmRSS is file pages the
  store has mapped (CommitLog, ConsumeQueue, index): clean page cache that grows with the data written
  and that the kernel reclaims at will, so the strict ``rss_limit`` check bounds the process's own
  memory and the report shows both.  Above ``kill_rss_mib`` of its own memory it kills the server (the
  machine is shared) and the run fails; mapped store pages do not count there (a run that writes 9 GB
  maps 6 GiB of CommitLog while its own memory stays under 300 MiB).  A server that is gone (killed
  or crashed) ends the fuzzers at once: the checks then say what failed.

When the fuzzers are done the steady clients stop, every acknowledged record must have been read back,
the server must still answer on every port and exit 0 on SIGTERM.  ``FuzzResult.checks()`` lists what
failed; ``strict`` checks (``STRICT_CHECKS``) are the ones issue 19's fixes should turn green:
no traceback in the log, log bytes per frame bounded, nothing created outside the store.
"""

from __future__ import annotations

import collections
import os
import random
import signal
import socket
import struct
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.fuzz import hostile
from benchmarks.fuzz.kafka_frames import KafkaFrames, parse_api_versions_v0
from benchmarks.fuzz.remoting_frames import RemotingFrames
from benchmarks.fuzz.steady import SteadyKafka, SteadyRocketMQ

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "interop") not in sys.path:
    sys.path.insert(0, str(ROOT / "interop"))

import harness  # noqa: E402  (interop/harness.py)

PORTS = ("kafka", "broker", "namesrv")
STRICT_CHECKS = ("no_traceback", "log_bounded", "jail_intact", "sigterm_exit_0", "rss_limit")
READ_CAP = 4 << 20


@dataclass
class FuzzConfig:
    frames_per_port: int = 2000
    seed: int = 1
    families: frozenset[str] = frozenset(hostile.FAMILIES)
    bomb_bytes: int = 64 << 20
    time_limit_s: float = 600.0
    rss_limit_mib: int = 512           # the strict check (baseline main: ~590 MiB for one 256 MiB bomb)
    kill_rss_mib: int = 4096           # the machine's safety net: the server is killed when its own memory passes this
    log_bytes_per_frame: int = 400     # the strict log check
    ports: tuple[str, ...] = PORTS
    steady: bool = True
    workers: int = 4                   # concurrent connections per port
    workdir: Path | None = None
    conf: dict[str, str] = field(default_factory=dict)
    server_env: dict[str, str] = field(default_factory=dict)  # e.g. PYTHONPATH of another rokka tree
    avoid: frozenset[str] = frozenset()  # known bugs not to trigger (kafka_frames.KNOWN_BUGS)


@dataclass
class PortStats:
    port: str
    frames: int = 0
    connections: int = 0
    refused_writes: int = 0      # a write failed: the server had closed the connection (fine)
    connect_errors: int = 0      # could not connect at all (the server is gone or saturated)
    answered_bytes: int = 0
    answers: int = 0             # whole answer frames read back
    seconds: float = 0.0
    labels: dict[str, int] = field(default_factory=dict)


@dataclass
class FuzzResult:
    config: dict[str, Any]
    ports: list[PortStats]
    peak_rss_mib: float = 0.0       # VmRSS, file pages of the store's maps included
    start_rss_mib: float = 0.0
    peak_own_mib: float = 0.0       # RssAnon + RssShmem: what the strict rss_limit check bounds
    server_alive: bool = False
    answers_after: dict[str, bool] = field(default_factory=dict)
    sigterm_exit: int | None = None
    killed_for_rss: bool = False
    log_bytes: int = 0
    tracebacks: int = 0
    traceback_kinds: dict[str, int] = field(default_factory=dict)
    jail_problems: list[str] = field(default_factory=list)
    steady: dict[str, dict[str, Any]] = field(default_factory=dict)
    seconds: float = 0.0
    suspects: str | None = None    # the frames sent just before RSS passed the limit

    def checks(self, strict: bool = False) -> list[str]:
        """The failed checks (empty: passed).  ``strict`` adds ``STRICT_CHECKS``."""
        cfg = self.config
        bad = []
        if not self.server_alive or self.killed_for_rss:
            bad.append(f"server_up: alive={self.server_alive} killed_for_rss={self.killed_for_rss}")
        bad += [f"answers_after: {p} did not answer" for p, ok in self.answers_after.items() if not ok]
        for name, s in self.steady.items():
            if s.get("errors") or s.get("missing") or s.get("reread_missing"):
                bad.append(f"steady_{name}: {s.get('errors', [])[:3]} missing={s.get('missing')}")
        if self.killed_for_rss or self.peak_own_mib > cfg["kill_rss_mib"]:   # own memory, as RssWatch kills
            bad.append(f"rss_kill: own memory peak {self.peak_own_mib:.0f} MiB > {cfg['kill_rss_mib']} MiB")
        if strict:
            frames = sum(p.frames for p in self.ports) or 1
            if self.peak_own_mib > cfg["rss_limit_mib"]:
                bad.append(f"rss_limit: own memory peak {self.peak_own_mib:.0f} MiB > {cfg['rss_limit_mib']} MiB")
            if self.tracebacks:
                bad.append(f"no_traceback: {self.tracebacks} tracebacks in the server log")
            if self.log_bytes > frames * cfg["log_bytes_per_frame"]:
                bad.append(f"log_bounded: {self.log_bytes} log bytes for {frames} frames")
            if self.jail_problems:
                bad.append(f"jail_intact: {self.jail_problems[:5]}")
            if self.sigterm_exit != 0:
                bad.append(f"sigterm_exit_0: exit code {self.sigterm_exit}")
        return bad

    def table(self) -> str:
        rows = ["| port | frames | connections | refused writes | answers | answered MiB | frames/s |",
                "|---|---|---|---|---|---|---|"]
        for p in self.ports:
            rate = p.frames / p.seconds if p.seconds else 0
            rows.append(f"| {p.port} | {p.frames} | {p.connections} | {p.refused_writes} | {p.answers} | "
                        f"{p.answered_bytes / 2**20:.1f} | {rate:.0f} |")
        rows.append("")
        rows.append(f"server RSS: start {self.start_rss_mib:.0f} MiB, peak {self.peak_rss_mib:.0f} MiB "
                    f"(own memory, RssAnon + RssShmem, peak {self.peak_own_mib:.0f} MiB; the rest is mapped store "
                    f"file pages); "
                    f"alive={self.server_alive}; SIGTERM exit={self.sigterm_exit}; log {self.log_bytes / 2**20:.1f}"
                    f" MiB, {self.tracebacks} tracebacks; outside the store: {len(self.jail_problems)}; "
                    f"{self.seconds:.0f} s" + (f"; frames sent before the RSS limit: {self.suspects}"
                                               if self.suspects else ""))
        for kind, n in sorted(self.traceback_kinds.items(), key=lambda kv: -kv[1]):
            rows.append(f"traceback x{n}: {kind}")
        for name, s in self.steady.items():
            rows.append(f"steady {name}: {s.get('acked')} acked, {s.get('read')} read back, "
                        f"{len(s.get('errors', []))} errors, missing {s.get('missing')}, missing when re-read "
                        f"after the fuzz {s.get('reread_missing')}")
        return "\n".join(rows)


# --------------------------------------------------------------------------- RSS


def own_mib(pid: int) -> float:
    """RssAnon + RssShmem of ``pid`` plus its direct children, in MiB: its own memory, not file pages."""
    return rss_mib(pid, ("RssAnon:", "RssShmem:"))


def rss_mib(pid: int, fields: tuple[str, ...] = ("VmRSS:",)) -> float:
    """VmRSS (or the sum of ``fields`` of /proc/PID/status) of ``pid`` plus its direct children, in MiB
    (0 when gone)."""
    total = 0
    pids = [pid]
    try:
        for entry in os.listdir(f"/proc/{pid}/task"):
            children = Path(f"/proc/{pid}/task/{entry}/children")
            if children.exists():
                pids += [int(c) for c in children.read_text().split()]
    except OSError:
        pass
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith(fields):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


class RssWatch(threading.Thread):
    """Samples the server's RSS every 50 ms; the first time its own memory passes ``limit_mib`` it calls
    ``on_limit`` (the driver saves the frames just sent, to reproduce); own memory above ``kill_mib``
    kills the server."""

    def __init__(self, server: harness.ServerProcess, kill_mib: int, limit_mib: int,
                 on_limit: Any = None) -> None:
        super().__init__(daemon=True, name="rss-watch")
        self.server, self.kill_mib, self.limit_mib, self.on_limit = server, kill_mib, limit_mib, on_limit
        self.peak = 0.0
        self.peak_own = 0.0
        self.killed = False
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.wait(0.05):
            proc = self.server.proc
            if proc is None or proc.poll() is not None:
                continue
            now, own = rss_mib(proc.pid), own_mib(proc.pid)
            if own > self.limit_mib >= self.peak_own and self.on_limit is not None:
                self.on_limit()
            self.peak, self.peak_own = max(self.peak, now), max(self.peak_own, own)
            if own > self.kill_mib:
                self.killed = True
                os.kill(proc.pid, signal.SIGKILL)


# --------------------------------------------------------------------------- per-port fuzzer


def _addr(hp: str) -> tuple[str, int]:
    host, _, port = hp.rpartition(":")
    return host, int(port)


class PortFuzzer:
    """``workers`` threads share one port's frame budget; each has its own seeded generator."""

    def __init__(self, port: str, addr: str, gens: list[Any], frames: int, deadline: float, seed: int) -> None:
        self.addr, self.frames, self.deadline = _addr(addr), frames, deadline
        self.stats = PortStats(port)
        self.recent: collections.deque[tuple[float, str, bytes]] = collections.deque(maxlen=48)
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, args=(g, random.Random(seed * 31 + i)), daemon=True,
                                         name=f"fuzz-{port}-{i}") for i, g in enumerate(gens)]

    def start(self) -> None:
        self.t0 = time.monotonic()
        for t in self.threads:
            t.start()

    def is_alive(self) -> bool:
        alive = any(t.is_alive() for t in self.threads)
        if not alive and not self.stats.seconds:
            self.stats.seconds = time.monotonic() - self.t0
        return alive

    def take(self) -> bool:
        with self.lock:
            if self.stats.frames >= self.frames:
                return False
            self.stats.frames += 1
            return True

    def run(self, gen: Any, r: random.Random) -> None:
        st = self.stats
        while st.frames < self.frames and time.monotonic() < self.deadline:
            try:
                self.one_connection(gen, r)
            except OSError:
                with self.lock:
                    st.connect_errors += 1
                time.sleep(0.05)
                if st.connect_errors > 200 and st.connect_errors > st.connections:
                    break  # the server is gone: stop, the checks will say so

    def one_connection(self, gen: Any, r: random.Random) -> None:
        """A burst of frames, then the answers read until one per frame came, the server closed, or 0.5 s
        passed without a byte (capped at READ_CAP); then a reset."""
        st = self.stats
        sock = socket.create_connection(self.addr, timeout=2.0)
        sent = 0
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            with self.lock:
                st.connections += 1
            for _ in range(r.randint(1, 8)):
                if not self.take():
                    break
                frame, label = gen.frame()
                self.recent.append((time.monotonic(), label, frame))
                key = label.split(" mutated")[0]
                st.labels[key] = st.labels.get(key, 0) + 1
                try:
                    sock.sendall(frame)
                except OSError:
                    with self.lock:
                        st.refused_writes += 1
                    return
                sent += 1
            self.read_answers(sock, sent)
        finally:
            sock.close()

    def read_answers(self, sock: socket.socket, expected: int) -> None:
        sock.settimeout(0.5)
        got = frames = 0
        buf = b""
        try:
            while got < READ_CAP and frames < expected:
                chunk = sock.recv(1 << 16)
                if not chunk:
                    break
                got += len(chunk)
                buf += chunk
                while len(buf) >= 4 and len(buf) >= 4 + int.from_bytes(buf[:4], "big", signed=True) >= 4:
                    buf = buf[4 + int.from_bytes(buf[:4], "big", signed=True):]
                    frames += 1
                if len(buf) > READ_CAP:
                    buf = b""
        except OSError:
            pass
        with self.lock:
            self.stats.answered_bytes += got
            self.stats.answers += frames


# --------------------------------------------------------------------------- probes


def _one_answer(addr: str, request: bytes, timeout: float) -> bytes | None:
    """Sends ``request`` on a fresh connection and reads one length-prefixed answer frame (its 4-byte
    length included); None when the server closes first."""
    with socket.create_connection(_addr(addr), timeout=timeout) as s:
        s.sendall(request)
        raw = b""
        while len(raw) < 4 or len(raw) < 4 + struct.unpack(">i", raw[:4])[0]:
            chunk = s.recv(65536)
            if not chunk:
                return None
            raw += chunk
    return raw


def kafka_api_versions(addr: str, timeout: float = 5.0) -> dict[int, tuple[int, int]] | None:
    """ApiVersions v0 on a fresh connection: {api key: (min, max)}, None without an answer."""
    payload = struct.pack(">hhih", 18, 0, 1, 5) + b"probe"
    try:
        raw = _one_answer(addr, struct.pack(">i", len(payload)) + payload, timeout)
        return None if raw is None else parse_api_versions_v0(raw[4:])
    except (OSError, struct.error):
        return None


def remoting_answers(addr: str, code: int, timeout: float = 5.0) -> bool:
    """A JSON request with ``code`` (topic fz-probe) gets a well-formed answer."""
    import json

    header = json.dumps({"code": code, "flag": 0, "language": "JAVA", "opaque": 7, "version": 407,
                         "extFields": {"topic": "fz-probe"}}).encode()
    try:
        raw = _one_answer(addr, struct.pack(">ii", 4 + len(header), len(header)) + header, timeout)
        if raw is None:
            return False
        hl = struct.unpack(">i", raw[4:8])[0] & 0xFFFFFF
        return json.loads(raw[8:8 + hl]).get("opaque") == 7
    except (OSError, ValueError, struct.error):
        return False


# --------------------------------------------------------------------------- the run


def traceback_kinds(log: bytes) -> dict[str, int]:
    """Tracebacks in a JSON-lines server log, grouped by event + innermost frame + exception line."""
    import json

    kinds: dict[str, int] = {}
    for line in log.splitlines():
        if b"Traceback" not in line:
            continue
        try:
            e = json.loads(line)
        except ValueError:
            continue
        lines = [x.strip(" |") for x in str(e.get("exception", "")).splitlines() if x.strip(" |+-")]
        where = [x for x in lines if x.startswith("File ")]
        key = f"{e.get('event')}: {where[-1] if where else '?'}: {lines[-1] if lines else '?'}"[:300]
        kinds[key] = kinds.get(key, 0) + 1
    return kinds


def _start_server(jail: hostile.Jail, conf: dict[str, str], env: dict[str, str]) -> harness.ServerProcess:
    srv_dir = jail.data_dir.parent
    conf_path = None
    if conf:
        conf_path = srv_dir / "broker.conf"
        conf_path.write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
    return harness.ServerProcess("rokka-serve", harness.serve_argv(jail.data_dir, "json", conf_path), srv_dir,
                                 data_dir=jail.data_dir, env=env or None).start()


def run_fuzz(cfg: FuzzConfig, log: Any = print) -> FuzzResult:
    t0 = time.monotonic()
    base = Path(tempfile.mkdtemp(prefix="rokka-fuzz-", dir=cfg.workdir))
    jail = hostile.make_jail(base / "jail")
    server = _start_server(jail, cfg.conf, cfg.server_env)
    result = FuzzResult(config={**asdict(cfg), "families": sorted(cfg.families), "workdir": str(base)}, ports=[])
    fuzzers: list[PortFuzzer] = []
    suspects = base / "suspects"

    def save_suspects() -> None:
        """The frames each port sent last (files ``<port>-<n>-<label>.bin``: replay one with ``nc``)."""
        suspects.mkdir(exist_ok=True)
        for f in fuzzers:
            for n, (_, label, frame) in enumerate(list(f.recent)):
                (suspects / f"{f.stats.port}-{n:02d}-{label.replace(' ', '_')}.bin").write_bytes(frame)
        result.suspects = str(suspects)

    watch = RssWatch(server, cfg.kill_rss_mib, cfg.rss_limit_mib, save_suspects)
    watch.start()
    steadies: list[Any] = []
    try:
        assert server.proc is not None
        result.start_rss_mib = rss_mib(server.proc.pid)
        supported = kafka_api_versions(server.kafka) or {}
        if cfg.steady:
            steadies = [SteadyKafka(server.kafka), SteadyRocketMQ(server.namesrv)]
            for s in steadies:
                s.start()
            for s in steadies:
                s.wait_started(60)
        deadline = time.monotonic() + cfg.time_limit_s
        for port in cfg.ports:
            gens = []
            for w in range(cfg.workers):
                h = hostile.Hostile(random.Random(cfg.seed * 1000 + PORTS.index(port) * 100 + w), jail,
                                    frozenset(cfg.families), avoid=cfg.avoid)
                gens.append(KafkaFrames(h, supported=supported, bomb_bytes=cfg.bomb_bytes, avoid=cfg.avoid)
                            if port == "kafka"
                            else RemotingFrames(h, role=port, bomb_bytes=cfg.bomb_bytes))
            fuzzers.append(PortFuzzer(port, getattr(server, port), gens, cfg.frames_per_port, deadline,
                                      cfg.seed * 7 + PORTS.index(port)))
        for f in fuzzers:
            f.start()
        last = 0.0
        while any(f.is_alive() for f in fuzzers):
            time.sleep(1.0)
            if not server.running():        # killed or crashed: nothing left to fuzz (the checks say so)
                for f in fuzzers:
                    f.deadline = 0.0
            if time.monotonic() - last >= 10:  # a progress line every 10 s
                last = time.monotonic()
                done = sum(f.stats.frames for f in fuzzers)
                log(f"fuzz: {done} frames, server RSS {watch.peak:.0f} MiB peak (own memory {watch.peak_own:.0f}"
                    f" MiB peak), alive={server.running()}")
        result.ports = [f.stats for f in fuzzers]
        for s in steadies:
            s.finish(60)
            s.verify(60)
            result.steady[s.name] = s.report()
        result.server_alive = server.running()
        result.answers_after = {"kafka": kafka_api_versions(server.kafka) is not None,
                                "broker": remoting_answers(server.broker, 30),
                                "namesrv": remoting_answers(server.namesrv, 105)}
    finally:
        for s in steadies:
            s.stop()
        watch.stop_event.set()
        watch.join(5)
        result.peak_rss_mib, result.peak_own_mib, result.killed_for_rss = watch.peak, watch.peak_own, watch.killed
        try:
            result.sigterm_exit = server.stop(signal.SIGTERM, timeout=60)
        except harness.HarnessError:
            result.sigterm_exit = None
        if server.stderr_path is not None and server.stderr_path.exists():
            text = server.stderr_path.read_bytes()
            result.log_bytes = len(text)
            result.tracebacks = text.count(b"Traceback")
            result.traceback_kinds = traceback_kinds(text)
        result.jail_problems = hostile.jail_intact(jail)
        result.seconds = time.monotonic() - t0
    return result
