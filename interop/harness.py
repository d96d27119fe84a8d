"""Process harness for the interop scenarios: the real ``rokka`` server and real third-party clients.

Theory of operation
-------------------
Everything here runs in separate OS processes; pytest only starts them, reads what they print and
stops them, so a crash in a client library (the RocketMQ C++ client above all) or in the server can
never take pytest down with it.

* ``ServerProcess`` runs one ``rokka`` role (``serve``, ``namesrv`` or ``broker``) on 127.0.0.1, on
  free ports below the kernel's ephemeral port range (``fixed_ports``: a port inside it can be taken
  by any outgoing connection while the server is down for a restart).  The server prints exactly
  one line ``rokka ready k=H:P ...`` on stdout once every listener is up; ``start()`` waits for it
  (bounded) and parses the addresses.  After the first start the
  bound ports are remembered, so ``restart()`` brings the server back on the SAME ports and data
  dir and clients can reconnect.  stderr goes to a file whose tail is shown in every failure.
* ``JsonLinesProcess`` runs a client script (``interop/rocketmq_cpp/*.py`` or ``interop/node/*.js``)
  that prints one JSON object per line.  A reader thread collects them; ``wait_for()`` polls with a
  deadline.  Commands go to the script as JSON lines on stdin; closing stdin means "shut down".
* ``run_json()`` / ``run_node()`` / ``run_cpp()`` / ``run_kcat()`` are the one-shot forms.

Rules: every wait has a timeout and every failure message carries the process's stderr tail.
Client scripts get HOME set to a private temp dir (the C++ client writes ``~/logs/rocketmq-cpp``
and ``~/.rocketmq_offsets``; ali-ons writes local offsets under HOME too).
"""

from __future__ import annotations

import json
import os
import queue
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
INTEROP = ROOT / "interop"
NODE_DIR = INTEROP / "node"
CPP_DIR = INTEROP / "rocketmq_cpp"
VENV_BIN = Path(sys.executable).parent
HOST = "127.0.0.1"

READY_TIMEOUT = 30.0
RESTART_ATTEMPTS = 5       # a restart on fixed ports that finds one taken (see ServerProcess.start)
STOP_TIMEOUT = 15.0
_READY_RE = re.compile(r"^rokka ready((?:\s+\w+=\S+)+)\s*$")


class HarnessError(AssertionError):
    """A process did not behave (did not start, died, timed out); the message has its stderr tail."""


def rokka_executable() -> str:
    """The ``rokka`` console script of the venv running the tests (fallback: PATH)."""
    exe = VENV_BIN / "rokka"
    if exe.exists():
        return str(exe)
    found = shutil.which("rokka")
    if found is None:
        raise HarnessError("no rokka executable: run `make install`")
    return found


def tail(path: Path | None, n: int = 60) -> str:
    if path is None or not path.exists():
        return "<no stderr file>"
    lines = path.read_text(errors="replace").splitlines()
    return "\n".join(lines[-n:]) or "<empty>"


def parse_ready_line(line: str) -> dict[str, str] | None:
    """``rokka ready namesrv=H:P broker=H:P`` -> ``{"namesrv": "H:P", ...}``; None for other lines."""
    m = _READY_RE.match(line.strip())
    if m is None:
        return None
    return dict(part.split("=", 1) for part in m.group(1).split())


def port_of(addr: str) -> int:
    """The port of "H:P" (of the first of "H:P,H:P,...": a ``serve --brokers N`` list, whose other
    ports are derived from the first)."""
    return int(addr.split(",", 1)[0].rsplit(":", 1)[1])


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral (outgoing connection) range."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def fixed_ports(roles: Sequence[str] = ("namesrv", "broker", "kafka")) -> dict[str, int]:
    """Free ports on HOST below the ephemeral range, one per role, for a server that may be restarted.

    While a server is down, a port inside the ephemeral range can be taken by any outgoing
    connection -- even by a client retrying that very port, whose connect can pick it as its own
    local port and connect to itself (CI saw "Address already in use" for five restarts in a row
    while librdkafka retried the dead broker).  Below the range only an explicit bind takes it.
    The broker's VIP port (broker - 2) is checked free too."""
    low = _ephemeral_low()
    start = max(1026, low - 12000)
    if start + 2 >= low:
        start, low = 20000, 32000     # an unusual range: pick from a fixed window instead
    rng = random.Random()
    taken: set[int] = set()
    out: dict[str, int] = {}
    for role in roles:
        for _ in range(500):
            port = rng.randrange(start + 2, low)
            need = (port, port - 2) if role == "broker" else (port,)
            if not taken.intersection(need) and all(_free(x) for x in need):
                out[role] = port
                taken.update(need)
                break
        else:
            raise HarnessError(f"no free port for {role} in {start}-{low}")
    return out


# --------------------------------------------------------------------------- the rokka server


@dataclass
class ServerProcess:
    """One ``rokka`` role as a subprocess.

    ``build_argv(ports)`` turns the remembered ports (``{}`` on the first start, then the bound ones)
    into the full argv, so a restart reuses the same ports.
    """

    name: str
    build_argv: Callable[[dict[str, int]], list[str]]
    workdir: Path
    data_dir: Path | None = None
    env: dict[str, str] | None = None
    addrs: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[str] | None = None
    starts: int = 0
    exit_codes: list[int] = field(default_factory=list)
    _stderr_path: Path | None = None
    _lines: queue.Queue[str | None] = field(default_factory=queue.Queue)

    # ----- addresses
    @property
    def namesrv(self) -> str:
        return self.addrs["namesrv"]

    @property
    def broker(self) -> str:
        """The RocketMQ broker address (of ``serve --brokers N``: the first broker's; all: ``brokers``)."""
        return self.addrs["broker"].split(",", 1)[0]

    @property
    def brokers(self) -> list[str]:
        return self.addrs["broker"].split(",")

    @property
    def kafka(self) -> str:
        return self.addrs["kafka"]

    @property
    def stderr_path(self) -> Path | None:
        return self._stderr_path

    def stderr_tail(self, n: int = 60) -> str:
        return tail(self._stderr_path, n)

    # ----- lifecycle
    def start(self, timeout: float = READY_TIMEOUT) -> ServerProcess:
        """Start (again, on the same ports after the first start; the first on ``fixed_ports``).

        A restart on fixed ports can find one of them briefly taken: a killed server's port is free
        for any socket, and an outgoing connection elsewhere on the machine may get it as its local
        port (``fixed_ports`` keeps that rare).  Such a start is retried (bounded; a first start with
        other ports) instead of failing the test on a machine accident."""
        attempts = 0
        while True:
            first = not self.addrs
            try:
                return self._start_once(timeout, fixed_ports() if first else None)
            except HarnessError as exc:
                attempts += 1
                if attempts >= RESTART_ATTEMPTS or "Address already in use" not in str(exc):
                    raise
                if not first:
                    time.sleep(1.0)

    def _start_once(self, timeout: float, ports: dict[str, int] | None = None) -> ServerProcess:
        if self.proc is not None and self.proc.poll() is None:
            raise HarnessError(f"{self.name} is already running")
        if ports is None:
            ports = {k: port_of(v) for k, v in self.addrs.items()}
        argv = self.build_argv(ports)
        self.starts += 1
        self._stderr_path = self.workdir / f"{self.name}.stderr.{self.starts}.log"
        stderr = open(self._stderr_path, "w")  # noqa: SIM115 - closed by the child's exit
        # HOME = the workdir: a name server keeps ~/namesrv/kvConfig.json (Java's default), which
        # must not leak from one test's servers into the next.
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "HOME": str(self.workdir), **(self.env or {})}
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=stderr, stdin=subprocess.DEVNULL,
                                     text=True, cwd=self.workdir, env=env, start_new_session=True)
        stderr.close()
        self._lines = queue.Queue()
        threading.Thread(target=self._drain, args=(self.proc, self._lines), daemon=True).start()
        self.addrs = self._wait_ready(argv, timeout)
        return self

    @staticmethod
    def _drain(proc: subprocess.Popen[str], lines: queue.Queue[str | None]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    def _wait_ready(self, argv: list[str], timeout: float) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        seen: list[str] = []
        while True:
            left = deadline - time.monotonic()
            try:
                line = self._lines.get(timeout=max(left, 0.01)) if left > 0 else None
            except queue.Empty:
                line = None
            if line is not None:
                parsed = parse_ready_line(line)
                if parsed is not None:
                    return parsed
                seen.append(line.rstrip())
                continue
            # EOF or timeout
            proc = self.proc
            self.kill9()
            why = "exited before it was ready" if left > 0 else f"was not ready within {timeout:.0f}s"
            raise HarnessError(
                f"{self.name} {why}: {' '.join(argv)}\nexit code: {proc and proc.returncode}\n"
                f"stdout:\n{chr(10).join(seen[-20:]) or '<empty>'}\nstderr tail:\n{self.stderr_tail()}")

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = STOP_TIMEOUT) -> int | None:
        """Signal the server and wait for it; returns its exit code (None if it was not running).

        If it does not exit within ``timeout`` it is SIGKILLed and HarnessError is raised.
        """
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=STOP_TIMEOUT)
                self._finish(proc)
                raise HarnessError(f"{self.name} ignored signal {sig} for {timeout:.0f}s; killed.\n"
                                   f"stderr tail:\n{self.stderr_tail()}") from None
        self._finish(proc)
        return proc.returncode

    def _finish(self, proc: subprocess.Popen[str]) -> None:
        if proc.stdout is not None:
            proc.stdout.close()
        self.exit_codes.append(proc.returncode)
        self.proc = None

    def stop_clean(self) -> None:
        """SIGTERM and insist on exit code 0 (the server's contract)."""
        code = self.stop(signal.SIGTERM)
        if code not in (None, 0):
            raise HarnessError(f"{self.name} exited with {code} after SIGTERM (want 0)\n"
                               f"stderr tail:\n{self.stderr_tail()}")

    def kill9(self) -> None:
        self.stop(signal.SIGKILL)

    def restart(self, *, hard: bool = False, timeout: float = READY_TIMEOUT) -> ServerProcess:
        """Stop (SIGTERM, or SIGKILL when ``hard``) and start again on the same ports and data dir."""
        if hard:
            self.kill9()
        else:
            self.stop_clean()
        return self.start(timeout=timeout)


def serve_argv(data_dir: Path, log_format: str | None = None,
               conf: Path | None = None, brokers: int = 1) -> Callable[[dict[str, int]], list[str]]:
    def build(ports: dict[str, int]) -> list[str]:
        argv = [rokka_executable(), "serve", "--data-dir", str(data_dir), "--host", HOST,
                "--namesrv-port", str(ports.get("namesrv", 0)), "--broker-port", str(ports.get("broker", 0)),
                "--kafka-port", str(ports.get("kafka", 0))]
        if brokers != 1:
            argv += ["--brokers", str(brokers)]
        if log_format:
            argv += ["--log-format", log_format]
        if conf is not None:
            argv += ["-c", str(conf)]
        return argv
    return build


def namesrv_argv(log_format: str | None = None) -> Callable[[dict[str, int]], list[str]]:
    def build(ports: dict[str, int]) -> list[str]:
        argv = [rokka_executable(), "namesrv", "--host", HOST, "--port", str(ports.get("namesrv", 0))]
        if log_format:
            argv += ["--log-format", log_format]
        return argv
    return build


def broker_argv(namesrv: str, broker_name: str, data_dir: Path, log_format: str | None = None,
                conf: Path | None = None) -> Callable[[dict[str, int]], list[str]]:
    def build(ports: dict[str, int]) -> list[str]:
        argv = [rokka_executable(), "broker", "-n", namesrv, "--broker-name", broker_name,
                "--data-dir", str(data_dir), "--host", HOST,
                "--broker-port", str(ports.get("broker", 0)), "--kafka-port", str(ports.get("kafka", 0))]
        if log_format:
            argv += ["--log-format", log_format]
        if conf is not None:
            argv += ["-c", str(conf)]
        return argv
    return build


def start_serve(workdir: Path, log_format: str | None = "json", conf: Path | None = None,
                brokers: int = 1) -> ServerProcess:
    """``rokka serve`` on free ports; ``conf`` = a broker.conf passed with ``-c``; ``brokers`` > 1:
    ``rokka serve --brokers N`` (``.broker`` / ``.kafka`` are then comma-separated lists, in broker
    order: ``.kafka`` is a bootstrap list as it stands; ``cluster_children`` finds the processes)."""
    data_dir = workdir / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    srv = ServerProcess("rokka-serve", serve_argv(data_dir, log_format, conf, brokers), workdir,
                        data_dir=data_dir)
    return srv.start()


def cluster_children(srv: ServerProcess) -> dict[str, int]:
    """The child processes of a ``serve --brokers N`` supervisor: {"namesrv" | "broker-<i>": pid}."""
    assert srv.proc is not None
    out: dict[str, int] = {}
    for task in Path(f"/proc/{srv.proc.pid}/task").iterdir():
        try:
            pids = (task / "children").read_text().split()
        except OSError:
            continue
        for pid in pids:
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            words = [a.decode(errors="replace") for a in argv]
            if "namesrv" in words:
                out["namesrv"] = int(pid)
            elif "--broker-name" in words:
                out[words[words.index("--broker-name") + 1]] = int(pid)
    return out


@dataclass
class Cluster:
    """A name server plus two brokers (broker-a, broker-b), each its own process."""

    namesrv: ServerProcess
    brokers: dict[str, ServerProcess]

    @property
    def namesrv_addr(self) -> str:
        return self.namesrv.namesrv

    def kafka_bootstrap(self) -> str:
        return ",".join(b.kafka for b in self.brokers.values())

    def processes(self) -> list[ServerProcess]:
        return [*self.brokers.values(), self.namesrv]


def start_cluster(workdir: Path, names: Sequence[str] = ("broker-a", "broker-b"),
                  log_format: str | None = "json", conf: Path | None = None) -> Cluster:
    """A name server and one broker per name; ``conf``: a broker.conf every broker reads (``-c``)."""
    ns = ServerProcess("rokka-namesrv", namesrv_argv(log_format), workdir).start()
    brokers: dict[str, ServerProcess] = {}
    try:
        for name in names:
            data_dir = workdir / name
            data_dir.mkdir(parents=True, exist_ok=True)
            brokers[name] = ServerProcess(f"rokka-{name}", broker_argv(ns.namesrv, name, data_dir, log_format, conf),
                                          workdir, data_dir=data_dir).start()
    except BaseException:
        for b in brokers.values():
            b.kill9()
        ns.kill9()
        raise
    return Cluster(ns, brokers)


# --------------------------------------------------------------------------- client processes


def client_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ, HOME=str(home), PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTEST_CURRENT_TEST", None)
    env.update(extra or {})
    return env


class JsonLinesProcess:
    """A client script printing one JSON object per stdout line; commands are JSON lines on stdin."""

    def __init__(self, argv: Sequence[str], *, name: str, workdir: Path, env: dict[str, str] | None = None,
                 cwd: Path | None = None) -> None:
        self.name = name
        self.argv = list(argv)
        workdir.mkdir(parents=True, exist_ok=True)
        home = workdir / "home"
        home.mkdir(exist_ok=True)
        self.stderr_path = workdir / f"{name}.stderr.log"
        self.home = home
        self.events: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._eof = False
        stderr = open(self.stderr_path, "w")  # noqa: SIM115 - closed right after Popen
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                     text=True, cwd=cwd or workdir, env=client_env(home, env),
                                     start_new_session=True)
        stderr.close()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                obj = {"event": "raw", "line": line}
            if not isinstance(obj, dict):
                obj = {"event": "raw", "value": obj}
            with self._cond:
                self.events.append(obj)
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def describe(self) -> str:
        code = self.proc.poll()
        last = self.events[-5:]
        text = (f"{self.name} ({' '.join(self.argv)}) exit={code}\nlast events: {last}\n"
                f"stderr tail:\n{tail(self.stderr_path)}")
        logs = sorted((self.home / "logs").rglob("*.log*"), key=lambda f: f.stat().st_mtime)
        if logs:  # the C++ client's own log (~/logs/rocketmq-cpp/<pid>_rocketmq-cpp.log.N)
            text += f"\nclient log {logs[-1].name} tail:\n{tail(logs[-1], 25)}"
            try:  # the first errors and warnings say why; the tail is mostly shutdown
                lines = logs[-1].read_text(errors="replace").splitlines()
            except OSError:
                lines = []
            bad = [ln for ln in lines if "(error)" in ln or "(warn" in ln][:20]
            if bad:
                text += "\nclient log errors/warnings (first 20):\n" + "\n".join(bad)
        return text

    def of(self, event: str) -> list[dict[str, Any]]:
        with self._cond:
            return [e for e in self.events if e.get("event") == event]

    def wait_for(self, pred: Callable[[list[dict[str, Any]]], bool], timeout: float, what: str) -> None:
        """Wait until ``pred(events)`` holds; HarnessError (with stderr) on timeout or early exit."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not pred(self.events):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise HarnessError(f"timed out after {timeout:.0f}s waiting for {what}\n{self.describe()}")
                if self._eof:
                    raise HarnessError(f"{self.name} ended before {what}\n{self.describe()}")
                self._cond.wait(min(left, 0.5))

    def wait_event(self, event: str, timeout: float, count: int = 1) -> list[dict[str, Any]]:
        self.wait_for(lambda evs: sum(e.get("event") == event for e in evs) >= count, timeout,
                      f"{count} x {event!r}")
        return self.of(event)

    def send(self, obj: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(obj) + "\n")
        self.proc.stdin.flush()

    def close(self, timeout: float = 30.0) -> int:
        """Close stdin (the script's cue to shut down cleanly) and wait; kill on timeout."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise HarnessError(f"{self.name} did not exit within {timeout:.0f}s of closing stdin\n"
                               f"{self.describe()}") from None
        with self._cond:
            self._cond.wait_for(lambda: self._eof, timeout=5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=STOP_TIMEOUT)

    def terminate(self, timeout: float = 30.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise HarnessError(f"{self.name} ignored SIGTERM for {timeout:.0f}s\n{self.describe()}") from None


def run_json(argv: Sequence[str], *, name: str, workdir: Path, params: Any = None, timeout: float = 60.0,
             env: dict[str, str] | None = None, cwd: Path | None = None) -> list[dict[str, Any]]:
    """Run a one-shot client script: ``params`` as one JSON line on stdin, JSON lines back.

    Raises HarnessError (with stderr) on timeout or non-zero exit.
    """
    p = JsonLinesProcess(argv, name=name, workdir=workdir, env=env, cwd=cwd)
    try:
        if params is not None:
            p.send(params)
        code = p.close(timeout=timeout)
    finally:
        p.kill()
    if code != 0:
        raise HarnessError(f"{name} failed\n{p.describe()}")
    errors = p.of("error")
    if errors:
        raise HarnessError(f"{name} reported errors: {errors}\n{p.describe()}")
    return p.events


# ----- RocketMQ C++ client (the `rocketmq` wheel), one subprocess per role


def cpp_available() -> str | None:
    """None when the wheel loads here, else the reason."""
    try:
        import rocketmq.client  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - any load failure means "client missing"
        return f"rocketmq C++ client (rocketmq==0.4.4) does not load: {exc!r}"
    return None


def cpp_argv(script: str) -> list[str]:
    return [sys.executable, str(CPP_DIR / f"{script}.py")]


def run_cpp(script: str, params: dict[str, Any], *, workdir: Path, timeout: float = 60.0) -> list[dict[str, Any]]:
    return run_json(cpp_argv(script), name=f"cpp-{script}", workdir=workdir, params=params, timeout=timeout)


def start_cpp(script: str, params: dict[str, Any], *, name: str, workdir: Path) -> JsonLinesProcess:
    p = JsonLinesProcess(cpp_argv(script), name=name, workdir=workdir)
    p.send(params)
    return p


# ----- node (kafkajs, ali-ons)


def node_available(module: str) -> str | None:
    if shutil.which("node") is None:
        return "node is not installed"
    if not (NODE_DIR / "node_modules" / module).is_dir():
        return f"node module {module} is not installed (run interop/install.sh)"
    r = subprocess.run(["node", "-e", f"require({module!r})"], cwd=NODE_DIR, capture_output=True, text=True,
                       timeout=30)
    if r.returncode != 0:
        return f"node module {module} cannot be required: {r.stderr.strip()[-300:]}"
    return None


def skip_unless_node(module: str) -> None:
    """pytest.skip (with the reason) unless ``module`` can be required by node here."""
    import pytest

    reason = node_available(module)
    if reason:
        pytest.skip(reason)


def node_argv(script: str) -> list[str]:
    return ["node", str(NODE_DIR / f"{script}.js")]


def run_node(script: str, params: dict[str, Any], *, workdir: Path, timeout: float = 60.0) -> list[dict[str, Any]]:
    return run_json(node_argv(script), name=f"node-{script}", workdir=workdir, params=params, timeout=timeout,
                    cwd=NODE_DIR)


def start_node(script: str, params: dict[str, Any], *, name: str, workdir: Path) -> JsonLinesProcess:
    p = JsonLinesProcess(node_argv(script), name=name, workdir=workdir, cwd=NODE_DIR)
    p.send(params)
    return p


# ----- kcat


def kcat_path() -> str | None:
    return shutil.which("kcat") or shutil.which("kafkacat")


@dataclass
class KcatResult:
    returncode: int
    stdout: str
    stderr: str


def run_kcat(args: Sequence[str], *, input: str | bytes | None = None, timeout: float = 30.0,
             check: bool = True) -> KcatResult:
    """Run kcat once (bounded).  ``-e`` style invocations exit by themselves; others hit ``timeout``."""
    exe = kcat_path()
    if exe is None:
        raise HarnessError("kcat is not installed")
    data = input.encode() if isinstance(input, str) else input
    try:
        r = subprocess.run([exe, *args], input=data, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise HarnessError(f"kcat {' '.join(args)} timed out after {timeout:.0f}s\n"
                           f"stderr:\n{(exc.stderr or b'').decode(errors='replace')[-3000:]}") from None
    res = KcatResult(r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace"))
    if check and r.returncode != 0:
        raise HarnessError(f"kcat {' '.join(args)} exited {r.returncode}\nstderr:\n{res.stderr[-3000:]}")
    return res


def start_kcat(args: Sequence[str], *, name: str, workdir: Path) -> subprocess.Popen[bytes]:
    exe = kcat_path()
    if exe is None:
        raise HarnessError("kcat is not installed")
    workdir.mkdir(parents=True, exist_ok=True)
    stderr = open(workdir / f"{name}.stderr.log", "wb")  # noqa: SIM115 - closed after Popen
    p = subprocess.Popen([exe, *args], stdout=subprocess.PIPE, stderr=stderr, stdin=subprocess.DEVNULL,
                         start_new_session=True)
    stderr.close()
    return p


def create_rocketmq_topic(srv: ServerProcess, topic: str, queues: int = 4, timeout: float = 30.0) -> None:
    """UPDATE_AND_CREATE_TOPIC on the broker with rokka's own trio client, then wait for the route.

    For clients that cannot create topics themselves (ali-ons: see test_ali_ons.py).
    """
    import trio
    from rokka.net.remoting.client import Admin, NamesrvClient, RemotingClient

    async def create() -> None:
        with trio.fail_after(timeout):
            async with RemotingClient() as rc:
                ns = NamesrvClient(rc, [srv.namesrv])
                await Admin(rc, ns).create_topic(srv.broker, topic, read_queue_nums=queues,
                                                 write_queue_nums=queues)
                while await ns.get_route(topic) is None:
                    await trio.sleep(0.1)

    trio.run(create)


def wait_until(pred: Callable[[], bool], timeout: float, what: str, interval: float = 0.2) -> None:
    """Poll ``pred`` until true; HarnessError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise HarnessError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def new_workdir(base: Path | None = None, prefix: str = "rokka-interop-") -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix, dir=base))
