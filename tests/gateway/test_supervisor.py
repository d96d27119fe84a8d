"""``rokka serve --brokers N`` outside the happy path: derived ports, bad --brokers values, a broker
that cannot start (the supervisor stops the others and exits non-zero, saying why).  The happy path
(ready line, restarts, SIGTERM) is interop/test_cluster_serve.py."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from rokka.gateway.supervisor import PORT_STRIDE, derived_ports, pick_ports, resolve_brokers

ROKKA = str(Path(sys.executable).parent / "rokka")


def test_derived_ports_and_free_picks() -> None:
    assert derived_ports(10911, 9092, 3) == [(10911, 9092), (10915, 9093), (10919, 9094)]
    ns, b, k = pick_ports("127.0.0.1", 0, 0, 0, 4)
    wanted = {ns, *(b + PORT_STRIDE * i for i in range(4)), *(b + PORT_STRIDE * i - 2 for i in range(4)),
              *(k + i for i in range(4))}
    assert len(wanted) == 1 + 8 + 4          # no port used twice, VIP ports included
    assert pick_ports("127.0.0.1", 9876, 10911, 9092, 2) == (9876, 10911, 9092)   # given ports are kept


def test_brokers_values() -> None:
    assert resolve_brokers("3") == 3 and resolve_brokers("auto") >= 1
    for bad in ("0", "-2", "many", ""):
        with pytest.raises(ValueError):
            resolve_brokers(bad)


@pytest.mark.parametrize("args, why", [(["--brokers", "many"], "not a number of brokers"),
                                       (["--brokers", "2", "--broker-name", "x"], "--broker-name")])
def test_usage_errors(tmp_path: Path, args: list[str], why: str) -> None:
    r = subprocess.run([ROKKA, "serve", "--data-dir", str(tmp_path / "d"), *args], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and why in r.stderr and not r.stdout


def test_a_broker_that_cannot_start_stops_the_cluster(tmp_path: Path) -> None:
    with socket.socket() as taken:          # broker-1's Kafka port is in use
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        kafka = taken.getsockname()[1] - 1
        r = subprocess.run([ROKKA, "serve", "--brokers", "2", "--data-dir", str(tmp_path / "d"),
                            "--namesrv-port", "0", "--broker-port", "0", "--kafka-port", str(kafka),
                            "--log-format", "json"], capture_output=True, text=True, timeout=120)
    assert r.returncode not in (0, None) and "rokka ready" not in r.stdout
    assert re.search(r"rokka: cannot start: broker-\d exited with", r.stderr), r.stderr[-2000:]
