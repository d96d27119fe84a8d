"""Delayed delivery: SCHEDULE_TOPIC_XXXX -> the real topic when due (RocketMQ ScheduleMessageService).

Theory of operation
-------------------
``Broker.prepare`` parks a message with ``DELAY=<level>`` in
``SCHEDULE_TOPIC_XXXX`` queue ``level - 1`` with its destination in
REAL_TOPIC/REAL_QID; the dispatcher stores the *delivery time*
(store time + ``delay_levels_ms[level - 1]``) as the ConsumeQueue tags code.
Within one level queue every message has the same delay, so due times are
in queue order and only the head of each queue matters.

``ScheduleService.run`` runs one trio task per level.  A level task:

1. reads the next units from its *delay offset* (next queue offset to
   deliver);
2. for each unit whose delivery time has passed (wall clock, re-checked
   after every sleep, so a message is never delivered early), reads the
   record, rewrites it (``timeup_message``: topic/queue from REAL_TOPIC /
   REAL_QID, everything else kept: body, flag, sysflag, born time/host,
   reconsumeTimes and *all* properties -- DELAY, WAIT, REAL_TOPIC and
   REAL_QID included, as RocketMQ 4.9's ``messageTimeup`` stores the parked
   record's properties string unchanged; the tags code is recomputed by the
   dispatcher from TAGS) and stores it with ``Broker.put(...,
   prepared=True)``, which does not park it again (only ``prepare`` reads
   DELAY, and only the SCHEDULE topic's tags code is a delivery time);
3. waits until the re-put bytes are durable, then persists the advanced
   offsets to ``config/delayOffset.json`` (``{"offsetTable": {"1": 12}}``;
   fastjson's unquoted-key form ``{1:12}`` written by a Java broker is read
   too);
4. sleeps until the head's delivery time, or, with an empty queue, until
   the arrival listener signals a newly parked message (1 s safety tick).

Exactly-once across restarts: the offset is persisted after each batch
(at most ``BATCH`` messages), after the batch is durable.  A crash between
the re-put and the offset write can leave up to one batch per level
delivered but not recorded; on start the first ``BATCH`` due messages of
each level are *reconciled*: if the real topic already holds a message with
the same UNIQ_KEY, born time and reconsumeTimes, stored after the parked
one (found through the index), it is skipped instead of re-delivered.  A
parked message without UNIQ_KEY (no client id) cannot be reconciled and may
be delivered twice after such a crash.

A parked message whose record is gone (retention) or is not a delay record
(no REAL_TOPIC) is skipped with a log line.  If the store refuses the re-put
the level retries after ``RETRY_S`` from the same offset.

Lateness (delivery time minus due time) is measured per delivery and
reported by ``statistics()``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog
import trio
from rokka.core.model import (
    PROP_REAL_QID,
    PROP_REAL_TOPIC,
    PROP_UNIQ_KEY,
    TOPIC_SCHEDULE,
    Message,
    StoredMessage,
)
from rokka.core.storage import PutStatus
from rokka.core.storage.metafile import MetadataCorrupt, read_json, write_json_atomic

if TYPE_CHECKING:
    from rokka.core.ports import ServicePorts

log = structlog.get_logger(__name__)

BATCH = 32
IDLE_TICK_S = 1.0
MAX_SLEEP_S = 1.0
RETRY_S = 1.0


def wall_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class ScheduleStatistics:
    delivered: int
    skipped: int
    reconciled: int           # deliveries skipped on restart because they had already happened
    lateness_max_ms: int
    lateness_mean_ms: float
    lateness_last_ms: int
    offsets: dict[int, int]   # level -> next queue offset to deliver
    pending: dict[int, int]   # level -> parked messages not yet delivered


def timeup_message(parked: StoredMessage) -> Message | None:
    """The message to store when a parked delay message is due; None if it is not one."""
    real_topic = parked.properties.get(PROP_REAL_TOPIC)
    try:
        real_qid = int(parked.properties.get(PROP_REAL_QID, ""))
    except ValueError:
        return None
    if not real_topic or real_qid < 0:
        return None
    # Java clears DELAY (and sets WAIT=false) on its in-memory copy only, after the properties string
    # was built from the parked record: the stored copy keeps every property of the parked one.
    props = dict(parked.properties)
    return Message(real_topic, real_qid, parked.body, props, parked.flag, parked.sysflag,
                   parked.born_timestamp, parked.born_host, parked.reconsume_times)


def read_offset_table(path: Path) -> dict[int, int]:
    """``delayOffset.json`` -> {level: offset}; accepts fastjson's unquoted integer keys."""
    try:
        data = read_json(path)
    except MetadataCorrupt:
        raw = path.read_text("utf-8", errors="replace") if path.exists() else ""
        found = re.search(r'"offsetTable"\s*:\s*\{([^}]*)\}', raw)
        if found is None:
            raise
        return {int(k): int(v) for k, v in re.findall(r'"?(\d+)"?\s*:\s*(\d+)', found.group(1))}
    return offset_table(data)


def offset_table(data: Any) -> dict[int, int]:
    """``{"offsetTable": {"1": 12}}`` (delayOffset.json, a GET_ALL_DELAY_OFFSET body) -> {level: offset};
    entries that are not numbers are left out with a warning."""
    if not isinstance(data, dict) or not isinstance(data.get("offsetTable"), dict):
        return {}
    out = {}
    for k, v in data["offsetTable"].items():
        try:
            out[int(k)] = int(v)
        except (TypeError, ValueError):
            log.warning("delay.bad_offset_entry_ignored", key=k, value=v)
    return out


class ScheduleService:
    """Delivers parked delay messages when due.  ``run`` until cancelled."""

    def __init__(self, ports: ServicePorts, levels_ms: Sequence[int], config_dir: Path, *,
                 clock: Callable[[], int] = wall_ms) -> None:
        self.ports = ports
        self.path = config_dir / "delayOffset.json"
        self.clock = clock
        self.levels_ms = list(levels_ms)
        self.offsets: dict[int, int] = {}
        for level, off in read_offset_table(self.path).items():
            if 1 <= level <= len(self.levels_ms):
                self.offsets[level] = off
        self._persisted = dict(self.offsets)
        self._wakeups = {lv: trio.Event() for lv in self.levels()}
        self._suspect = {lv: BATCH for lv in self.levels()}  # restart reconciliation budget
        self._persist_lock = trio.Lock()
        self._delivered = self._skipped = self._reconciled = 0
        self._late_max = self._late_last = 0
        self._late_sum = 0

    def levels(self) -> range:
        return range(1, len(self.levels_ms) + 1)

    # -- public ----------------------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        tokens = [self.ports.arrivals.subscribe(TOPIC_SCHEDULE, lv - 1, self._waker(lv))
                  for lv in self.levels()]
        try:
            async with trio.open_nursery() as nursery:
                for lv in self.levels():
                    nursery.start_soon(self._level_loop, lv)
                task_status.started()
        finally:
            for t in tokens:
                self.ports.arrivals.unsubscribe(t)

    def statistics(self) -> ScheduleStatistics:
        store = self.ports.store
        pending = {}
        for lv in self.levels():
            mx = store.max_offset(TOPIC_SCHEDULE, lv - 1)
            if mx:
                pending[lv] = max(0, mx - self._start_offset(lv))
        n = self._delivered
        return ScheduleStatistics(n, self._skipped, self._reconciled, self._late_max,
                                  self._late_sum / n if n else 0.0, self._late_last,
                                  dict(self.offsets), pending)

    def persist(self) -> None:
        """Write delayOffset.json now (blocking; the service does it after each durable batch)."""
        self._write(dict(self.offsets))

    async def adopt_offsets(self, table: dict[int, int]) -> int:
        """Take another broker's level offsets (a slave syncing its master's, ``rokka.gateway.ha.sync``):
        levels this broker has, offsets >= 0, the ones that differ; written to delayOffset.json (off the
        event loop, as after a delivery) when any changed.  Returns how many changed."""
        changed = 0
        for level, offset in table.items():
            if 1 <= level <= len(self.levels_ms) and offset >= 0 and self.offsets.get(level) != offset:
                self.offsets[level] = offset
                changed += 1
        if changed:
            await self._make_durable(0)
        return changed

    # -- the level loop --------------------------------------------------------------
    def _waker(self, level: int) -> Callable[[int, int | None, dict[str, str] | None], None]:
        def wake(queue_offset: int, tags_code: int | None, props: dict[str, str] | None) -> None:
            self._wakeups[level].set()
        return wake

    def _start_offset(self, level: int) -> int:
        store = self.ports.store
        qid = level - 1
        off = self.offsets.get(level, 0)
        lo, hi = store.min_offset(TOPIC_SCHEDULE, qid), store.max_offset(TOPIC_SCHEDULE, qid)
        if off < lo:
            off = lo
        elif off > hi:
            log.warning("delay.offset_clamped", level=level, offset=off, max=hi)
            off = hi
        return off

    async def _level_loop(self, level: int) -> None:
        while True:
            self._wakeups[level] = trio.Event()
            delay_s = await self._deliver_due(level)
            if delay_s is None:
                with trio.move_on_after(IDLE_TICK_S):
                    await self._wakeups[level].wait()
            elif delay_s > 0:
                await trio.sleep(min(delay_s, MAX_SLEEP_S))

    async def _deliver_due(self, level: int) -> float | None:
        """Deliver every due message of one level.

        Returns seconds until the head is due, 0 to go again at once, None if the queue is drained."""
        store = self.ports.store
        if store.replica_only:      # a slave: its master delivers (Java runs ScheduleMessageService on a master
            return None             # only); offsets come from the master's (gateway.ha.sync); resumes when promoted
        qid = level - 1
        offset = self._start_offset(level)
        units = store.cq_units(TOPIC_SCHEDULE, qid, offset, BATCH)
        if not units:
            self.offsets[level] = offset
            return None
        moved = False
        end = 0
        wait: float | None = 0.0
        for unit in units:
            now = self.clock()
            due = unit.tags_code
            if due > now + self.levels_ms[level - 1]:
                due = now  # clock went backwards (Java correctDeliverTimestamp): deliver now
            if due > now:
                wait = (due - now) / 1000
                break
            outcome = await self._deliver_one(level, unit.commitlog_offset, due)
            if outcome is None:
                wait = RETRY_S
                break
            end = max(end, outcome)
            offset = unit.queue_offset + 1
            self.offsets[level] = offset
            moved = True
        if moved:
            await self._make_durable(end)
        return wait

    async def _deliver_one(self, level: int, commitlog_offset: int, due: int) -> int | None:
        """Re-put one parked message.

        Returns the offset that must be durable (0 if nothing was written), None on failure."""
        parked = self.ports.store.read_message(commitlog_offset)
        msg = timeup_message(parked) if parked is not None else None
        if parked is None or msg is None:
            self._skipped += 1
            log.warning("delay.parked_message_skipped",
                        level=level, commitlog_offset=commitlog_offset)
            return 0
        if self._suspect[level] > 0:
            self._suspect[level] -= 1
            if self._already_delivered(parked):
                self._reconciled += 1
                log.info("delay.already_delivered", level=level,
                         uniq_key=parked.properties.get(PROP_UNIQ_KEY))
                return 0
        result = await self.ports.put_prepared([msg])
        if not result.ok and result.status is PutStatus.MESSAGE_ILLEGAL:
            # the real message can never be stored (e.g. a retry topic past 127 characters): retrying it
            # would stop the level for good; it stays in the schedule topic, readable by its offset
            self._skipped += 1
            log.error("delay.undeliverable_skipped", level=level, commitlog_offset=commitlog_offset,
                      topic=msg.topic[:200], remark=result.remark)
            return 0
        if not result.ok:
            log.warning("delay.delivery_refused_will_retry", level=level,
                        status=result.status.value, remark=result.remark)
            return None
        late = max(0, self.clock() - due)
        self._delivered += 1
        self._late_sum += late
        self._late_last = late
        self._late_max = max(self._late_max, late)
        return result.end_offset

    def _already_delivered(self, parked: StoredMessage) -> bool:
        uniq = parked.properties.get(PROP_UNIQ_KEY)
        real_topic = parked.properties.get(PROP_REAL_TOPIC, "")
        if not uniq:
            return False
        store = self.ports.store
        for off in store.query_by_key(real_topic, uniq, 64, parked.store_timestamp, self.clock() + 60_000):
            m = store.read_message(off)
            if (m is not None and m.topic == real_topic and m.commitlog_offset > parked.commitlog_offset
                    and m.reconsume_times == parked.reconsume_times
                    and m.born_timestamp == parked.born_timestamp):
                return True
        return False

    async def _make_durable(self, end_offset: int) -> None:
        if end_offset:
            await self._wait_flushed(end_offset)
        async with self._persist_lock:
            if self.offsets != self._persisted:
                snapshot = dict(self.offsets)
                await trio.to_thread.run_sync(self._write, snapshot)

    async def _wait_flushed(self, offset: int) -> None:
        """The re-put bytes must be on disk before the offset that skips them is (any flush policy)."""
        await self.ports.wait_durable(offset)

    def _write(self, table: dict[int, int]) -> None:
        write_json_atomic(self.path, {"offsetTable": {str(k): v for k, v in sorted(table.items())}})
        self._persisted = table
