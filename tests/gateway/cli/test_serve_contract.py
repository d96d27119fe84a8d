"""The `rokka serve` contract: ready line, abort marker, clean SIGTERM, broker.conf handling, corrupt stores."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from rokka.core.model import Message
from rokka.core.storage.api import StoreConfig
from rokka.core.storage.engine import DiskStore

ROKKA = str(Path(sys.executable).parent / "rokka")


def _start(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen([ROKKA, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_ready_line_abort_marker_and_clean_sigterm(tmp_path: Path) -> None:
    data = tmp_path / "data"
    proc = _start(["serve", "--data-dir", str(data), "--namesrv-port", "0", "--broker-port", "0",
                   "--kafka-port", "0", "--log-format", "json"])
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        parts = dict(p.split("=", 1) for p in line.split()[2:])
        assert line.startswith("rokka ready ") and set(parts) == {"namesrv", "broker", "kafka"}
        assert all(":" in v and int(v.rsplit(":", 1)[1]) > 0 for v in parts.values())
        assert (data / "abort").exists()  # marker while running
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-2000:]
    assert not (data / "abort").exists() and (data / "checkpoint").exists()
    assert (data / "config" / "topics.json").exists()


def test_broker_conf_unknown_key_warns_and_bad_value_refuses(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=broker-x\nnoSuchKey=1\nlistenPort=0\n")
    proc = _start(["serve", "-c", str(conf), "--data-dir", str(tmp_path / "d"), "--namesrv-port", "0",
                   "--kafka-port", "0", "--log-format", "json"])
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("rokka ready ")
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and "noSuchKey" in err and "unknown broker.conf key" in err
    conf.write_text("mapedFileSizeCommitLog=lots\n")
    bad = subprocess.run([ROKKA, "serve", "-c", str(conf)], capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "mapedFileSizeCommitLog" in bad.stderr and "Traceback" not in bad.stderr


def test_corrupt_store_is_refused_clearly(tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = DiskStore(StoreConfig(root_dir=data, commitlog_file_size=1 << 20)).open()
    store.put_messages([Message("T", 0, b"x" * 200, {"KEYS": f"k{i}"}) for i in range(50)])
    store.close()
    segment = data / "commitlog" / ("0" * 20)
    raw = bytearray(segment.read_bytes())
    raw[5000:5010] = b"\xee" * 10  # damage a record in the middle, good records follow
    segment.write_bytes(bytes(raw))
    (data / "abort").write_text("")  # as after a crash
    env = dict(os.environ)
    conf = tmp_path / "broker.conf"
    conf.write_text("mapedFileSizeCommitLog=1048576\n")
    res = subprocess.run([ROKKA, "serve", "-c", str(conf), "--data-dir", str(data), "--namesrv-port", "0",
                          "--broker-port", "0", "--kafka-port", "0"], capture_output=True, text=True,
                         timeout=60, env=env, input="")
    assert res.returncode == 2, res.stderr[-2000:]
    assert "cannot start" in res.stderr and "commitlog" in res.stderr
    assert "Traceback" not in res.stderr and res.stdout == ""
    assert segment.read_bytes() == bytes(raw)  # nothing was truncated or rewritten


def test_repair_flag_truncates_at_the_damage(tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = DiskStore(StoreConfig(root_dir=data, commitlog_file_size=1 << 20)).open()
    store.put_messages([Message("T", 0, b"x" * 200) for _ in range(50)])
    store.close()
    segment = data / "commitlog" / ("0" * 20)
    raw = bytearray(segment.read_bytes())
    raw[5000:5010] = b"\xee" * 10
    segment.write_bytes(bytes(raw))
    (data / "abort").write_text("")
    conf = tmp_path / "broker.conf"
    conf.write_text("mapedFileSizeCommitLog=1048576\n")
    proc = _start(["serve", "--repair", "-c", str(conf), "--data-dir", str(data), "--namesrv-port", "0",
                   "--broker-port", "0", "--kafka-port", "0"])
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("rokka ready ")
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    reopened = DiskStore(StoreConfig(root_dir=data, commitlog_file_size=1 << 20)).open()
    try:
        assert 0 < reopened.max_offset("T", 0) < 50  # the good prefix is kept, the damaged tail cut
    finally:
        reopened.close()


def test_other_segment_size_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = DiskStore(StoreConfig(root_dir=data, commitlog_file_size=1 << 20)).open()
    store.put_messages([Message("T", 0, b"x")])
    store.close()
    res = subprocess.run([ROKKA, "serve", "--data-dir", str(data), "--namesrv-port", "0", "--broker-port", "0",
                          "--kafka-port", "0"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "mapedFileSizeCommitLog=1048576" in res.stderr
    assert (data / "commitlog" / ("0" * 20)).stat().st_size == 1 << 20  # not grown
