"""Self-test of the process harness (no rokka needed): ready-line parsing, start / restart on the same
ports / SIGKILL / stderr in failures, and the JSON-lines client runner.

The stand-in server below only binds listeners and prints the ready line: it exercises the
harness's process handling, never a protocol.
"""

from __future__ import annotations

import signal
import socket
import sys
import textwrap
from pathlib import Path

import harness
import pytest

STAND_IN = textwrap.dedent("""
    import signal, socket, sys
    ports = [int(p) for p in sys.argv[1:]]
    socks = []
    for p in ports:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", p))
        s.listen()
        socks.append(s)
    if "--fail" in sys.argv[0]:
        sys.exit(3)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    print("some log line", flush=True)
    print("stand-in stderr", file=sys.stderr, flush=True)
    print("rokka ready " + " ".join(f"{k}=127.0.0.1:{s.getsockname()[1]}"
                                    for k, s in zip(["namesrv", "broker", "kafka"], socks)), flush=True)
    signal.pause()
""")


def _stand_in(tmp_path: Path, name: str = "stand_in.py") -> harness.ServerProcess:
    script = tmp_path / name
    script.write_text(STAND_IN)

    def build(ports: dict[str, int]) -> list[str]:
        return [sys.executable, str(script)] + [str(ports.get(k, 0)) for k in ("namesrv", "broker", "kafka")]

    return harness.ServerProcess("stand-in", build, tmp_path)


def test_parse_ready_line() -> None:
    assert harness.parse_ready_line("rokka ready namesrv=127.0.0.1:1 broker=127.0.0.1:2 kafka=127.0.0.1:3\n") == {
        "namesrv": "127.0.0.1:1", "broker": "127.0.0.1:2", "kafka": "127.0.0.1:3"}
    assert harness.parse_ready_line("rokka ready broker=h:2 kafka=h:3") == {"broker": "h:2", "kafka": "h:3"}
    assert harness.parse_ready_line("rokka ready") is None
    assert harness.parse_ready_line("2024 INFO rokka ready soon") is None


def test_restart_keeps_ports(tmp_path: Path) -> None:
    srv = _stand_in(tmp_path).start(timeout=20)
    try:
        first = dict(srv.addrs)
        assert set(first) == {"namesrv", "broker", "kafka"}
        srv.restart()
        assert srv.addrs == first
        srv.restart(hard=True)
        assert srv.addrs == first
        assert srv.exit_codes == [0, -signal.SIGKILL]
        assert "stand-in stderr" in srv.stderr_tail()
    finally:
        srv.stop_clean()


def test_fixed_ports_are_free_and_below_the_ephemeral_range() -> None:
    low = harness._ephemeral_low()
    for _ in range(20):
        ports = harness.fixed_ports()
        values = [*ports.values(), ports["broker"] - 2]          # the broker's VIP port too
        assert len(set(values)) == 4 and all(1024 < p < low for p in values)
        assert all(harness._free(p) for p in values)


def test_a_first_start_on_a_taken_port_tries_other_ports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        picks = iter([{"namesrv": taken}, harness.fixed_ports()])
        monkeypatch.setattr(harness, "fixed_ports", lambda: next(picks))
        srv = _stand_in(tmp_path).start(timeout=20)
        try:
            assert srv.starts == 2 and harness.port_of(srv.namesrv) != taken
            assert "Address already in use" in (tmp_path / "stand-in.stderr.1.log").read_text()
        finally:
            srv.stop_clean()


def test_start_failure_shows_stderr(tmp_path: Path) -> None:
    srv = _stand_in(tmp_path, "stand_in--fail.py")
    with pytest.raises(harness.HarnessError, match="exited before it was ready"):
        srv.start(timeout=20)


def test_json_lines_runner(tmp_path: Path) -> None:
    script = tmp_path / "echo.py"
    script.write_text(textwrap.dedent("""
        import json, sys
        params = json.loads(sys.stdin.readline())
        print(json.dumps({"event": "echo", "value": params["x"]}), flush=True)
        print("not json", flush=True)
        for line in sys.stdin:
            pass
        print(json.dumps({"event": "bye"}), flush=True)
    """))
    events = harness.run_json([sys.executable, str(script)], name="echo", workdir=tmp_path / "w",
                              params={"x": 41}, timeout=20)
    assert events == [{"event": "echo", "value": 41}, {"event": "raw", "line": "not json"}, {"event": "bye"}]
