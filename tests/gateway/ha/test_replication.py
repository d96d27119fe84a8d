"""HA master + slave over real sockets on 127.0.0.1 (gateway/ha/master.py, slave.py)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from functools import partial
from pathlib import Path

import pytest
import trio
from rokka.core.model import Message
from rokka.core.storage.engine import DiskStore
from rokka.gateway.ha.codec import encode_frame, encode_report
from rokka.gateway.ha.master import HAMaster, HAParams
from rokka.gateway.ha.slave import HASlave

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "core" / "storage"))
from storage_helpers import small_config  # noqa: E402

PARAMS = HAParams(heartbeat_s=0.5, housekeeping_s=10.0, batch_bytes=4000, fallbehind_max=256 << 20)


def _put(store: DiskStore, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        m = Message(topic="T", queue_id=i % 2, body=b"b%05d" % i + b"x" * 200, properties={"KEYS": f"k{i}"},
                    born_timestamp=1000 + i, born_host=("10.0.0.1", 4000))
        assert store.put_messages([m]).status.name == "PUT_OK"


def _records(store: DiskStore, qid: int) -> list[bytes]:
    lo, hi = store.min_offset("T", qid), store.max_offset("T", qid)
    return list(store.get_messages("T", qid, lo, hi - lo, 1 << 30).records)


@pytest.fixture
async def master(tmp_path: Path) -> AsyncIterator[tuple[DiskStore, HAMaster, str]]:
    store = DiskStore(small_config(tmp_path / "m")).open()
    ha = HAMaster(store, PARAMS)
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(ha.serve, "127.0.0.1", 0)
        yield store, ha, f"{host}:{port}"
        nursery.cancel_scope.cancel()
    store.close()


def _slave_store(tmp_path: Path, name: str = "s") -> DiskStore:
    store = DiskStore(small_config(tmp_path / name)).open()
    store.replica_only = True
    return store


async def _until(cond: Callable[[], bool]) -> None:
    with trio.fail_after(20):
        for _ in range(2000):       # a bounded poll of state the HA tasks change
            if cond():
                return
            await trio.sleep(0.02)
        raise AssertionError("condition never held")


async def test_slave_catches_up_acks_and_resumes_after_restart(
        master: tuple[DiskStore, HAMaster, str], tmp_path: Path) -> None:
    mstore, ha, addr = master
    _put(mstore, 400)                       # several 64 KiB segments
    sstore = _slave_store(tmp_path)
    try:
        async with trio.open_nursery() as nursery:
            slave = HASlave(sstore, PARAMS, lambda: addr)
            await nursery.start(slave.run)
            await _until(lambda: sstore.clog.write_offset == mstore.clog.write_offset)
            assert sstore.clog.min_offset == mstore.clog.files.segments[-1].base > 0
            _put(mstore, 100, 400)
            assert await ha.wait_for_ack(mstore.clog.write_offset, 20) == "ok"
            for qid in (0, 1):
                got = _records(sstore, qid)
                assert got and got == _records(mstore, qid)[-len(got):]
            nursery.cancel_scope.cancel()
        sstore.close()
        _put(mstore, 50, 500)               # written while the slave is away
        sstore = _slave_store(tmp_path)
        before = sstore.clog.write_offset
        assert before > 0
        async with trio.open_nursery() as nursery:
            await nursery.start(HASlave(sstore, PARAMS, lambda: addr).run)
            await _until(lambda: ha.ack_offset >= before)   # connected and reported its own offset
            assert await ha.wait_for_ack(mstore.clog.write_offset, 20) == "ok"
            assert sstore.clog.write_offset == mstore.clog.write_offset
            assert _records(sstore, 0)[-1] == _records(mstore, 0)[-1]
            nursery.cancel_scope.cancel()
    finally:
        sstore.close()


async def test_sync_wait_without_a_slave_and_timeout(master: tuple[DiskStore, HAMaster, str]) -> None:
    mstore, ha, addr = master
    _put(mstore, 3)
    assert await ha.wait_for_ack(mstore.clog.write_offset, 5) == "no_slave"
    # A peer that reports offset 0 and never acks anything newer: the wait times out.
    host, port = addr.split(":")
    with trio.fail_after(20):
        async with await trio.open_tcp_stream(host, int(port)) as s:
            await s.send_all(encode_report(0))
            await _until(lambda: ha.ack_offset == 0)
            assert await ha.wait_for_ack(mstore.clog.write_offset, 0.3) == "timeout"


async def test_master_closes_a_slave_ahead_of_it(master: tuple[DiskStore, HAMaster, str]) -> None:
    mstore, ha, addr = master
    _put(mstore, 3)
    host, port = addr.split(":")
    with trio.fail_after(20):
        async with await trio.open_tcp_stream(host, int(port)) as s:
            await s.send_all(encode_report(mstore.clog.write_offset + 1000))
            while await s.receive_some(65536):
                pass                        # the master closes: receive_some returns b""
    assert not ha.slaves


async def test_slave_closes_on_an_offset_mismatch_and_keeps_its_data(
        master: tuple[DiskStore, HAMaster, str], tmp_path: Path) -> None:
    mstore, ha, addr = master
    _put(mstore, 20)
    sstore = _slave_store(tmp_path)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(HASlave(sstore, PARAMS, lambda: addr).run)
            await _until(lambda: sstore.clog.write_offset == mstore.clog.write_offset)
            nursery.cancel_scope.cancel()
        have = sstore.clog.write_offset
        # A master that pushes bytes for another offset than the slave's max offset: the slave closes.
        reports: list[bytes] = []

        async def bad_master(stream: trio.SocketStream) -> None:
            reports.append(await stream.receive_some(8))
            await stream.send_all(encode_frame(have + 100, b"\0" * 64))
            reports.append(await stream.receive_some(8))     # b"": the slave closed
            await stream.aclose()

        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(partial(trio.serve_tcp, bad_master, 0, host="127.0.0.1"))
            port = listeners[0].socket.getsockname()[1]
            slave = HASlave(sstore, PARAMS, lambda: f"127.0.0.1:{port}")
            await nursery.start(slave.run)
            await _until(lambda: len(reports) == 2)
            nursery.cancel_scope.cancel()
        assert reports == [encode_report(have), b""]
        assert sstore.clog.write_offset == have
    finally:
        sstore.close()
