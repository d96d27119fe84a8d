"""Fixtures for the interop scenarios: the real ``rokka`` server as a subprocess, and client gates.

Theory of operation
-------------------
* ``rokka``: one ``rokka serve`` process (name server + RocketMQ broker + Kafka listener) on
  127.0.0.1 with port 0 and a fresh data dir, per test.  The fixture yields a
  ``harness.ServerProcess``: ``.namesrv`` / ``.broker`` / ``.kafka`` are "H:P" strings,
  ``.data_dir`` the store, ``.restart(hard=False)`` (SIGTERM, or SIGKILL when hard) brings it back on
  the same ports and data dir, ``.kill9()``, ``.stop()``.  At teardown the server must exit 0 on
  SIGTERM (its contract); otherwise the test errors with the server's stderr.
* ``ROKKA_TEST_BROKERS`` (opt-in; e.g. ``3`` or ``1,3``): the ``rokka`` and ``configured_rokka``
  servers are ``rokka serve --brokers N``, once per listed N (test ids get ``[brokersN]``), so the
  Kafka client suites and the RocketMQ C++ suite run against a cluster without copies of the tests.
  Unset (``make test``): one broker, ids unchanged.
* ``configured_rokka``: the same with a broker.conf (and files such as a users or ACL file);
  ``quick_rokka``: one whose retention pass runs every 300 ms.
* ``rokka_cluster``: ``rokka namesrv`` plus brokers ``broker-a`` and ``broker-b`` (``harness.Cluster``).
* ``workdir``: a per-test directory for client scripts (each gets its own HOME inside it).
* Client gates: ``need_cpp`` / ``need_kcat`` fixtures and ``harness.skip_unless_node(module)`` skip a scenario, with the
  reason, only when its client is genuinely missing here.

Every scenario runs its clients in subprocesses (see ``harness``), so a client crash fails one test
and never takes pytest down.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import harness
import pytest

BROKER_COUNTS = [int(x) for x in os.environ.get("ROKKA_TEST_BROKERS", "1").split(",") if x.strip()] or [1]

if BROKER_COUNTS == [1]:
    @pytest.fixture
    def serve_brokers() -> int:
        """Brokers of the ``rokka`` fixtures' server (1; see ROKKA_TEST_BROKERS)."""
        return 1
else:
    @pytest.fixture(params=BROKER_COUNTS, ids=[f"brokers{n}" for n in BROKER_COUNTS])
    def serve_brokers(request: pytest.FixtureRequest) -> int:
        """Brokers of the ``rokka`` fixtures' server: each count of ROKKA_TEST_BROKERS."""
        return int(request.param)


def _teardown(procs: list[harness.ServerProcess]) -> None:
    errors: list[str] = []
    for proc in procs:
        # Shown by pytest under "Captured stdout teardown" when the test failed.
        print(f"--- {proc.name} stderr tail ({proc.stderr_path}) ---\n{proc.stderr_tail(40)}")
        try:
            proc.stop_clean()
        except harness.HarnessError as exc:
            errors.append(str(exc))
    if errors:
        pytest.fail("\n\n".join(errors), pytrace=False)


@pytest.fixture
def rokka(tmp_path: Path, serve_brokers: int) -> Iterator[harness.ServerProcess]:
    server_dir = tmp_path / "server"
    server_dir.mkdir()
    srv = harness.start_serve(server_dir, brokers=serve_brokers)
    try:
        yield srv
    finally:
        _teardown([srv])


def _write_conf(server_dir: Path, conf: dict[str, str], files: dict[str, str]) -> Path:
    """``files`` and a broker.conf of ``conf`` in a new ``server_dir`` (``{dir}`` in a value is it)."""
    server_dir.mkdir()
    for name, text in files.items():
        (server_dir / name).write_text(text)
    path = server_dir / "broker.conf"
    path.write_text("".join(f"{k}={v.format(dir=server_dir)}\n" for k, v in conf.items()))
    return path


@pytest.fixture
def configured_rokka(tmp_path: Path, serve_brokers: int,
                     ) -> Iterator[Callable[[dict[str, str], dict[str, str]], harness.ServerProcess]]:
    """``start(conf, files)``: ``rokka serve -c broker.conf`` with the ``conf`` keys, after writing
    ``files`` (name -> text) into the server directory (``{dir}`` in a conf value is that directory);
    torn down like ``rokka``."""
    server_dir = tmp_path / "server"
    started: list[harness.ServerProcess] = []

    def start(conf: dict[str, str], files: dict[str, str]) -> harness.ServerProcess:
        started.append(harness.start_serve(server_dir, conf=_write_conf(server_dir, conf, files),
                                           brokers=serve_brokers))
        return started[-1]

    try:
        yield start
    finally:
        _teardown(started)


@pytest.fixture
def quick_rokka(configured_rokka: Callable[[dict[str, str], dict[str, str]], harness.ServerProcess],
                ) -> harness.ServerProcess:
    """``rokka serve`` whose retention pass runs every 300 ms (``cleanResourceInterval=300``)."""
    return configured_rokka({"cleanResourceInterval": "300"}, {})


@pytest.fixture
def rokka_cluster(tmp_path: Path) -> Iterator[harness.Cluster]:
    server_dir = tmp_path / "cluster"
    server_dir.mkdir()
    cluster = harness.start_cluster(server_dir)
    try:
        yield cluster
    finally:
        _teardown(cluster.processes())


@pytest.fixture
def configured_cluster(tmp_path: Path) -> Iterator[Callable[[dict[str, str], dict[str, str]], harness.Cluster]]:
    """``start(conf, files)``: ``rokka_cluster`` with every broker reading one broker.conf of the
    ``conf`` keys, after writing ``files`` into the cluster directory (``{dir}`` in a value is it)."""
    server_dir = tmp_path / "cluster"
    started: list[harness.Cluster] = []

    def start(conf: dict[str, str], files: dict[str, str]) -> harness.Cluster:
        started.append(harness.start_cluster(server_dir, conf=_write_conf(server_dir, conf, files)))
        return started[-1]

    try:
        yield start
    finally:
        _teardown([p for c in started for p in c.processes()])


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    d = tmp_path / "clients"
    d.mkdir()
    return d


@pytest.fixture
def need_cpp() -> None:
    reason = harness.cpp_available()
    if reason:
        pytest.skip(reason)


@pytest.fixture
def need_kcat() -> str:
    path = harness.kcat_path()
    if path is None:
        pytest.skip("kcat is not installed (interop/install.sh installs the Debian package kcat)")
    return path
