"""The slave's HA client: connects to the master's HA port, appends what it streams.

Theory of operation
-------------------
Java's ``HAClient``: one connection at a time to the master's HA address
(``haMasterAddress`` from broker.conf, else the ``haServerAddr`` the name
server answers a slave's REGISTER_BROKER with; ``master_address`` is asked
before each attempt).  On connect the slave reports its CommitLog max
offset (the request offset: 0 for an empty store, where the master starts
at its last segment).  Frames from ``codec.TransferReader`` go to
``replica.ReplicaAppender`` (verify, write, dispatch ConsumeQueue/index);
after each read that moved the max offset, and every
``haSendHeartbeatInterval`` otherwise, the slave reports it again: that is
the ack SYNC_MASTER waits for.  A frame for another offset, bytes that do
not verify, silence for ``haHousekeepingInterval`` or a lost connection
close it; the slave reconnects with a back-off (1 s doubling to 30 s, reset
by a connection that delivered data) and starts again from its own max
offset, so a restarted slave (or master) catches up from where it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog
import trio
from rokka.core.storage import ReplicaAppender, ReplicaError
from rokka.gateway.ha.codec import HAProtocolError, TransferReader, encode_report

if TYPE_CHECKING:
    from rokka.core.storage import DiskStore
    from rokka.gateway.ha.master import HAParams

log = structlog.get_logger(__name__)

RECV_BYTES = 1 << 20
CONNECT_TIMEOUT_S = 5.0
BACKOFF_MIN_S = 1.0
BACKOFF_MAX_S = 30.0


def split_addr(addr: str) -> tuple[str, int]:
    host, _, port = addr.strip().rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"bad HA master address {addr!r}: expected host:port")
    return host, int(port)


class HASlave:
    """HA client of a slave broker over ``store`` (see the module docstring)."""

    def __init__(self, store: DiskStore, params: HAParams, master_address: Callable[[], str | None]) -> None:
        self.store = store
        self.params = params
        self.master_address = master_address
        self.appender = ReplicaAppender(store)
        self.connected_to: str | None = None
        self.local_addr = ""            # this end of the HA connection, "host:port" (the master sees it as the peer)
        self.connections = 0
        self.sync: Any = None           # the metadata sync (gateway/ha/sync.py), set by service.start_ha

    @property
    def max_offset(self) -> int:
        return self.appender.max_offset

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        backoff = BACKOFF_MIN_S
        while True:
            addr = self.master_address()
            if not addr:
                await trio.sleep(BACKOFF_MIN_S)
                continue
            got_data = False
            try:
                got_data = await self._session(addr)
            except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, ValueError) as exc:
                log.info("ha.master_unreachable", master=addr, error=str(exc))
            self.connected_to, self.local_addr = None, ""
            backoff = BACKOFF_MIN_S if got_data else min(backoff * 2, BACKOFF_MAX_S)
            await trio.sleep(backoff)

    async def _session(self, addr: str) -> bool:
        host, port = split_addr(addr)
        with trio.fail_after(CONNECT_TIMEOUT_S):
            stream = await trio.open_tcp_stream(host, port)
        got_data = False
        async with stream:
            self.appender.reset()
            self.connected_to = addr
            try:
                local = stream.socket.getsockname()
                self.local_addr = f"{local[0]}:{local[1]}"
            except OSError:
                self.local_addr = ""
            self.connections += 1
            reader = TransferReader()
            reported = self.appender.max_offset
            await stream.send_all(encode_report(reported))
            log.info("ha.slave_connected", master=addr, offset=reported)
            last_report = last_heard = trio.current_time()
            while True:
                wait = max(0.01, min(self.params.housekeeping_s,
                                     last_report + self.params.heartbeat_s - trio.current_time()))
                with trio.move_on_after(wait):
                    data = await stream.receive_some(RECV_BYTES)
                    if not data:
                        log.info("ha.master_closed", master=addr)
                        return got_data
                    if not self._apply(reader, data, addr):
                        return got_data
                    got_data = True
                    last_heard = trio.current_time()
                now = trio.current_time()
                if now - last_heard > self.params.housekeeping_s:
                    log.warning("ha.master_housekeeping_timeout", master=addr)
                    return got_data
                if self.appender.max_offset != reported or now - last_report >= self.params.heartbeat_s:
                    reported = self.appender.max_offset
                    await stream.send_all(encode_report(reported))
                    last_report = now

    def _apply(self, reader: TransferReader, data: bytes, addr: str) -> bool:
        """Feed one read; False (logged) when the connection must close."""
        try:
            for t in reader.feed(data, self.appender.expected_offset):
                if not t.heartbeat:
                    self.appender.append(t.offset, t.data)
        except (HAProtocolError, ReplicaError) as exc:
            log.warning("ha.slave_transfer_refused", master=addr, error=str(exc),
                        offset=self.appender.max_offset)
            return False
        return True
