"""Fixtures for ``rokka admin`` tests: one real ``rokka serve`` subprocess and a CliRunner helper.

Rules: the server is the real ``rokka`` console script on 127.0.0.1 with ports 0 and a temp data
dir (started through ``interop.harness``); every wait is bounded; the admin CLI is invoked in
process through click's CliRunner (stdout and stderr kept apart) or as a subprocess.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import structlog
from click.testing import CliRunner
from rokka.gateway.cli.main import main

from interop import harness


@dataclass
class AdminResult:
    exit_code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        assert self.exit_code == 0, f"exit {self.exit_code}: {self.stderr}"
        return json.loads(self.stdout)


AdminFn = Callable[..., AdminResult]


@pytest.fixture(autouse=True)
def _keep_structlog_config() -> Iterator[None]:
    """The admin group configures structlog (stderr of the CliRunner); restore it afterwards."""
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[harness.ServerProcess]:
    srv = harness.start_serve(tmp_path_factory.mktemp("rokka-admin"), log_format="plain")
    try:
        yield srv
    finally:
        srv.stop_clean()


def run_admin(namesrv: str, *args: str) -> AdminResult:
    r = CliRunner().invoke(main, ["admin", "-n", namesrv, *args])
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise r.exception
    return AdminResult(r.exit_code, r.stdout, r.stderr)


@pytest.fixture
def admin(server: harness.ServerProcess) -> AdminFn:
    def call(*args: str) -> AdminResult:
        return run_admin(server.namesrv, *args)
    return call


def wait_for(pred: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.1)


def create_topic(admin: AdminFn, topic: str, queues: int = 2) -> dict[str, Any]:
    doc = admin("updateTopic", "-t", topic, "-c", "DefaultCluster", "-r", str(queues), "-w", str(queues),
                "--json").json()
    wait_for(lambda: admin("topicRoute", "-t", topic, "--json").exit_code == 0, f"route of {topic}")
    return doc


def data_dir_of(server: harness.ServerProcess) -> Path:
    assert server.data_dir is not None
    return server.data_dir
