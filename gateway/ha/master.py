"""The master's HA service: listens on ``haListenPort``, streams CommitLog bytes to each slave.

Theory of operation
-------------------
One trio task pair per slave connection (Java's ``HAConnection`` with its
read and write socket services):

* the reader feeds what the slave sends into ``codec.SlaveReports``; the
  first report is the request offset, every later one the slave's ack.  An
  ack beyond the master's max offset closes the connection (the slave has
  bytes the master never wrote).  Nothing heard for ``haHousekeepingInterval``
  closes it too.
* the writer waits for the request offset, starts at
  ``codec.first_transfer_offset`` (an empty slave gets the master's last
  segment), then sends ``replica.read_transfer`` frames of at most
  ``haTransferBatchSize`` bytes as soon as the store has them (an arrival
  listener on the store wakes it; a short poll covers writes that dispatch
  nothing), and a heartbeat frame after ``haSendHeartbeatInterval`` of
  silence.

``wait_for_ack(offset, timeout_s)`` is SYNC_MASTER's wait: it returns
``"ok"`` once a connected slave acked ``offset``, ``"no_slave"`` at once when no
slave is connected or the best one is more than ``haSlaveFallbehindMax``
behind the master (RocketMQ's SLAVE_NOT_AVAILABLE), and ``"timeout"`` when
``timeout_s`` passes first (FLUSH_SLAVE_TIMEOUT).
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog
import trio
from rokka.core.storage import PutStatus, read_transfer
from rokka.gateway.ha.codec import HAProtocolError, SlaveReports, encode_frame, encode_header, first_transfer_offset

if TYPE_CHECKING:
    from rokka.core.storage import DiskStore

log = structlog.get_logger(__name__)

POLL_S = 0.05       # the writer's fallback poll for new bytes
RECV_BYTES = 64 * 1024


_RESULT = {"no_slave": PutStatus.SLAVE_NOT_AVAILABLE, "timeout": PutStatus.FLUSH_SLAVE_TIMEOUT}


def sync_result(outcome: str) -> PutStatus | None:
    """``HAMaster.wait_for_ack``'s outcome as the put status a SYNC_MASTER answers (None: acked)."""
    return _RESULT.get(outcome)


@dataclass
class HAParams:
    heartbeat_s: float = 5.0
    housekeeping_s: float = 20.0
    batch_bytes: int = 32768
    fallbehind_max: int = 256 << 20


class _Slave:
    def __init__(self, conn_id: int, peer: str) -> None:
        self.conn_id = conn_id
        self.peer = peer
        self.reports = SlaveReports()
        self.requested = trio.Event()


class HAMaster:
    """HA service of a master broker over ``store`` (see the module docstring)."""

    def __init__(self, store: DiskStore, params: HAParams) -> None:
        self.store = store
        self.params = params
        self.slaves: dict[int, _Slave] = {}
        self.address: tuple[str, int] = ("", 0)
        self._ids = itertools.count(1)
        self._data = trio.Event()
        self._waiters: list[tuple[int, int, trio.Event]] = []   # heap of (offset, seq, event) of sync waits
        self._seq = itertools.count()
        store.add_arrival_listener(self._on_arrival)

    # -- state ------------------------------------------------------------------------
    @property
    def ack_offset(self) -> int:
        """The best ack of the connected slaves (-1 = none)."""
        return max((s.reports.ack_offset for s in self.slaves.values()), default=-1)

    def in_sync_peers(self) -> set[str]:
        """The peer addresses of the connected slaves acked within ``haSlaveFallbehindMax`` of the end
        (the Kafka ISR besides this master: ``rokka.gateway.kafka.replicas``)."""
        end = self.store.clog.write_offset
        return {s.peer for s in self.slaves.values()
                if s.reports.ack_offset >= 0 and end - s.reports.ack_offset <= self.params.fallbehind_max}

    def _on_arrival(self, *_: Any) -> None:
        self._data.set()

    def notify_written(self) -> None:
        """Wake the writers (new CommitLog bytes)."""
        self._data.set()

    async def wait_for_ack(self, offset: int, timeout_s: float) -> str:
        """SYNC_MASTER: wait until a slave acked ``offset``: ``"ok"``, ``"no_slave"`` or ``"timeout"``.

        Each waiter sleeps on its own event in a heap by offset; an ack wakes only the waiters it
        satisfies (a lost slave wakes them all to look again)."""
        self.notify_written()
        with trio.move_on_after(timeout_s):
            while True:
                best = self.ack_offset
                if best >= offset:
                    return "ok"
                if best < 0 or self.store.clog.write_offset - best > self.params.fallbehind_max:
                    return "no_slave"
                event = trio.Event()
                heapq.heappush(self._waiters, (offset, next(self._seq), event))
                await event.wait()
        return "timeout"

    # -- serving ----------------------------------------------------------------------
    async def serve(self, host: str, port: int, *, task_status: trio.TaskStatus[tuple[str, int]] =
                    trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(port, host=host)
        sockname = listeners[0].socket.getsockname()
        self.address = (sockname[0], sockname[1])
        log.info("ha.master_listening", host=self.address[0], port=self.address[1])
        task_status.started(self.address)
        await trio.serve_listeners(self._handle, listeners)

    async def _handle(self, stream: trio.SocketStream) -> None:
        try:
            host, port = stream.socket.getpeername()[:2]
            peer = f"{host}:{port}"
        except OSError:
            peer = "?"
        slave = _Slave(next(self._ids), peer)
        self.slaves[slave.conn_id] = slave
        log.info("ha.slave_connected", peer=peer)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._read, stream, slave, nursery.cancel_scope)
                nursery.start_soon(self._write, stream, slave, nursery.cancel_scope)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            log.info("ha.slave_connection_lost", peer=peer, error=str(exc))
        finally:
            self.slaves.pop(slave.conn_id, None)
            self._wake_ack(everyone=True)
            with trio.move_on_after(1) as cs:
                cs.shield = True
                await stream.aclose()
            log.info("ha.slave_disconnected", peer=peer, ack=slave.reports.ack_offset)

    def _wake_ack(self, everyone: bool = False) -> None:
        best = self.ack_offset
        waiters = self._waiters
        while waiters and (everyone or waiters[0][0] <= best):
            heapq.heappop(waiters)[2].set()

    async def _read(self, stream: trio.SocketStream, slave: _Slave, scope: trio.CancelScope) -> None:
        while True:
            with trio.move_on_after(self.params.housekeeping_s) as cs:
                data = await stream.receive_some(RECV_BYTES)
            if cs.cancelled_caught:
                log.warning("ha.slave_housekeeping_timeout", peer=slave.peer, seconds=self.params.housekeeping_s)
                break
            if not data:
                break
            try:
                offset = slave.reports.feed(data)
            except HAProtocolError as exc:
                log.warning("ha.slave_protocol_error", peer=slave.peer, error=str(exc))
                break
            if offset is None:
                continue
            if offset > self.store.clog.write_offset:
                log.warning("ha.slave_ahead_of_master", peer=slave.peer, slave_offset=offset,
                            master_offset=self.store.clog.write_offset)
                break
            slave.requested.set()
            self._wake_ack()
        scope.cancel()

    async def _write(self, stream: trio.SocketStream, slave: _Slave, scope: trio.CancelScope) -> None:
        await slave.requested.wait()
        request = slave.reports.request_offset or 0
        clog = self.store.clog
        offset = first_transfer_offset(request, clog.write_offset, clog.segment_size)
        offset = max(offset, clog.min_offset) if request == 0 else offset
        log.info("ha.transfer_starts", peer=slave.peer, request=request, offset=offset)
        last_sent = trio.current_time()
        while True:
            data = read_transfer(self.store, offset, self.params.batch_bytes)
            if data is None:
                seg_end = offset - offset % clog.segment_size + clog.segment_size
                if clog.files.find(offset) is None and clog.min_offset <= seg_end <= clog.write_offset \
                        and offset < clog.write_offset:
                    offset = seg_end      # past a segment's last byte: the next segment
                    continue
                log.warning("ha.slave_offset_not_in_commitlog", peer=slave.peer, offset=offset,
                            min=clog.min_offset, max=clog.write_offset)
                break
            if data:
                await stream.send_all(encode_frame(offset, data))
                offset += len(data)
                last_sent = trio.current_time()
                continue
            if trio.current_time() - last_sent >= self.params.heartbeat_s:
                await stream.send_all(encode_header(offset, 0))
                last_sent = trio.current_time()
            data_event = self._data
            if data_event.is_set():
                self._data = data_event = trio.Event()
                continue
            with trio.move_on_after(min(POLL_S, self.params.heartbeat_s)):
                await data_event.wait()
        scope.cancel()
