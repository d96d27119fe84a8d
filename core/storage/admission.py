"""The put-path gate of ``DiskStore``: refuse puts on a full disk or after a failed write, resume by itself.

Theory of operation
-------------------
``check_space`` sets ``store.disk_full`` / ``store.space_low`` from the disk's state (``statvfs``;
the limits are RocketMQ's, see ``retention``'s doc, which runs this check on every pass too);
``not_accepting`` runs it on the put path every ``SPACE_CHECK_BYTES`` appended, before
every put while space is low, and once every ``RECHECK_INTERVAL_S`` while refusing, so writes
resume without a restart once there is room.  A failed commit (``write_failed``) rolls the
CommitLog back to the start of the put and refuses until a check finds room (``resume_writes``);
only when the rollback itself fails does the store stay read-only until a restart.  Refusals
answer RocketMQ's SERVICE_NOT_AVAILABLE remark and are logged at most every
``REFUSAL_LOG_INTERVAL_S``.  The state lives on the store (plain attributes, read by other threads
as flags); these functions are its only writers.  This module imports nothing of ``retention``:
retention depends on the gate, never the other way round.

What a put may contain is checked here too: ``validate`` (each message of a batch: body, properties,
topic name, queue id, room in a segment) and ``validate_run``, the same rules for a uniform run from
its longest body and properties (no message is built; a topic name found storable is remembered).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import structlog
from rokka.core.storage import layout, paths
from rokka.core.storage.api import PutResult, PutStatus, StoreConfig

if TYPE_CHECKING:
    from rokka.core.model import Message
    from rokka.core.storage.engine import DiskStore

log = structlog.get_logger(__name__)

#: Disk use (%) above which puts are refused (RocketMQ diskSpaceWarningLevelRatio).
WARNING_RATIO = 90.0
#: Bytes that must stay available (capped at 5 % of the filesystem), else puts are refused.
RESERVE_BYTES = 8 << 20
#: Appended CommitLog bytes between two space checks on the put path.
SPACE_CHECK_BYTES = 4 << 20
#: Seconds between two ``store.write_refused`` log lines.
REFUSAL_LOG_INTERVAL_S = 10.0
#: Seconds between two space checks on the put path while writes are refused.
RECHECK_INTERVAL_S = 1.0
#: RocketMQ's SERVICE_NOT_AVAILABLE remark for a put the store refused (SendMessageProcessor).
DISK_FULL_REMARK = ("service not available now. It may be caused by one of the following reasons: the broker's "
                    "disk is full [{}], messages are put to the slave, message store has been shut down, etc.")


def not_accepting(store: DiskStore) -> PutResult | None:
    """Why no put can be taken now (closed, failed write, full disk), or None."""
    if not store._writable:
        return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark="store is not writable")
    if store.replica_only:      # a SLAVE's store takes only the master's bytes (RocketMQ: putMessage on a slave)
        return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark=DISK_FULL_REMARK.format(disk_util(store)))
    refusing = store.disk_full or store.write_error is not None
    if store.space_low or store.clog.write_offset - store._space_checked_at >= SPACE_CHECK_BYTES or (
            refusing and time.monotonic() >= store._recheck_at):
        store._space_checked_at = store.clog.write_offset
        store._recheck_at = time.monotonic() + RECHECK_INTERVAL_S
        check_space(store)
        refusing = store.disk_full or store.write_error is not None
    return refused(store) if refusing else None


def refused(store: DiskStore) -> PutResult:
    remark = DISK_FULL_REMARK.format(disk_util(store))
    now = time.monotonic()
    if now - store._refusal_logged_at >= REFUSAL_LOG_INTERVAL_S:
        store._refusal_logged_at = now
        log.warning("store.write_refused", reason="write failed" if store.write_error else "disk full",
                    error=store.write_error, disk=disk_util(store), path=str(store.clog.files.directory))
    return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark=remark)


def disk_util(store: DiskStore) -> str:
    """RocketMQ's ``diskUtil()``: the used share of the CommitLog, ConsumeQueue and index disks."""
    parts = []
    for name, path in (("CL", store.clog.files.directory), ("CQ", store.root / "consumequeue"),
                       ("INDEX", store.root / "index")):
        try:
            ratio = path_used_ratio(path if path.exists() else store.root)[0] / 100
        except OSError:
            ratio = -1.0
        parts.append(f"{name}: {ratio:5.2f}")
    return " ".join(parts)


def write_failed(store: DiskStore, exc: OSError, start: int) -> PutResult:
    """A commit failed (``start``: the CommitLog offset of the put): roll back, refuse until there is room."""
    store._recheck_at = time.monotonic() + RECHECK_INTERVAL_S
    try:
        store.clog.rollback(start)
    except OSError as clear_exc:
        store._writable = False
        log.error("store.write_failed_read_only", error=str(exc), clear_error=str(clear_exc), offset=start,
                  path=str(store.clog.files.directory), action="read-only until restart")
        return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark=f"write failed: {exc}")
    store.write_error = str(exc)
    log.error("store.write_failed", error=str(exc), offset=start, path=str(store.clog.files.directory),
              action="writes refused until the disk has room again; nothing of this put was kept")
    return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark=DISK_FULL_REMARK.format(disk_util(store)))


def resume_writes(store: DiskStore, used_percent: float) -> None:
    """Accept puts again after a failed write (``check_space`` found room)."""
    if store.write_error is not None:
        log.warning("store.writes_resumed", after_error=store.write_error, used_percent=round(used_percent, 1))
        store.write_error = None


def path_used_ratio(path: os.PathLike[str] | str) -> tuple[float, int]:
    """(percent of ``path``'s filesystem in use as df shows it, bytes available to us)."""
    st = os.statvfs(path)
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    usable = st.f_bavail * st.f_frsize
    return (100.0 * used / (used + usable) if used + usable > 0 else 0.0), usable


def check_space(store: DiskStore) -> float:
    """Set ``store.disk_full`` from the disk's state, resume writes after a failed one when there is
    room again; returns the percent in use (0 when it cannot be read)."""
    try:
        st = os.statvfs(store.clog.files.directory)
    except OSError:
        return 0.0
    used_bytes = (st.f_blocks - st.f_bfree) * st.f_frsize
    usable = st.f_bavail * st.f_frsize
    used = 100.0 * used_bytes / (used_bytes + usable) if used_bytes + usable > 0 else 0.0
    reserve = min(RESERVE_BYTES, st.f_blocks * st.f_frsize // 20)
    full = used > WARNING_RATIO or usable < reserve
    store.space_low = usable < 4 * reserve     # then every put checks (a statvfs), not every few MiB
    if full != store.disk_full:
        store.disk_full = full
        if full:
            log.error("store.disk_full", used_percent=round(used, 1), limit_percent=WARNING_RATIO,
                      available_bytes=usable, reserve_bytes=reserve, action="refusing writes until space returns")
        else:
            log.warning("store.disk_space_returned", used_percent=round(used, 1), available_bytes=usable)
    if not full and store.write_error is not None:
        resume_writes(store, used)
    return used


# -- what a put may contain (checked before anything is written) ----------------------------------

def validate(messages: Sequence[Message], cfg: StoreConfig) -> list[bytes] | PutResult:
    """Encoded properties of each message, or why the batch is refused (nothing is written)."""
    props_list = []
    max_body = cfg.max_message_size
    max_props = layout.MAX_PROPERTIES_BYTES
    room = cfg.commitlog_file_size - layout.BLANK_SIZE - layout.FIXED_SIZE[0x30]
    encode_props = layout.encode_properties
    topic, tlen = None, 0
    for m in messages:
        props = encode_props(m.properties)
        if m.topic != topic:
            topic = m.topic
            try:
                tlen = len(layout.topic_blob(topic)) - 1
            except layout.RecordError:
                tlen = room + 1     # refused below, with the reason
            if not paths.is_safe_component(topic):
                return PutResult(PutStatus.MESSAGE_ILLEGAL, remark=f"topic {topic!r} is not a valid name")
        body_len = len(m.body)
        if (body_len > max_body or len(props) > max_props or m.queue_id < 0
                or body_len + tlen + len(props) > room):
            return _refusal(m.topic, body_len, len(props), cfg.max_message_size)
        props_list.append(props)
    return props_list


#: topic -> its TOPICLENGTH + TOPIC bytes less one, for topics ``validate_run`` found storable (a
#: name is checked once, not once per run); cleared when it grows past ``_TOPICS_MAX``.
_topic_lens: dict[str, int] = {}
_TOPICS_MAX = 4096


def validate_run(topic: str, queue_id: int, body_len: int, props_len: int, cfg: StoreConfig) -> PutResult | None:
    """``validate`` of one message with a body of ``body_len`` bytes and ``props_len`` bytes of encoded
    properties -- a run's largest, standing for all of it (``DiskStore.put_uniform``) --, without
    building it: None when it may be stored, else the same refusal ``validate`` gives."""
    tlen = _topic_lens.get(topic)
    if tlen is None:
        try:
            tlen = len(layout.topic_blob(topic)) - 1
        except layout.RecordError:
            tlen = -1
        if not paths.is_safe_component(topic):
            return PutResult(PutStatus.MESSAGE_ILLEGAL, remark=f"topic {topic!r} is not a valid name")
        if tlen >= 0:
            if len(_topic_lens) >= _TOPICS_MAX:
                _topic_lens.clear()
            _topic_lens[topic] = tlen
    room = cfg.commitlog_file_size - layout.BLANK_SIZE - layout.FIXED_SIZE[0x30]
    if tlen < 0:
        tlen = room + 1     # refused below, with the reason
    if (body_len > cfg.max_message_size or props_len > layout.MAX_PROPERTIES_BYTES or queue_id < 0
            or body_len + tlen + props_len > room):
        return _refusal(topic, body_len, props_len, cfg.max_message_size)
    return None


def _refusal(topic: str, body_len: int, props_len: int, max_body: int) -> PutResult:
    """Why a message cannot be stored (checks in order: body, properties, topic, queue id / size)."""
    if body_len > max_body:
        return PutResult(PutStatus.MESSAGE_ILLEGAL,
                         remark=f"body {body_len} bytes > maxMessageSize {max_body}")
    if props_len > layout.MAX_PROPERTIES_BYTES:
        return PutResult(PutStatus.PROPERTIES_SIZE_EXCEEDED,
                         remark=f"properties {props_len} bytes > {layout.MAX_PROPERTIES_BYTES}")
    try:
        layout.topic_blob(topic)
    except layout.RecordError as exc:
        return PutResult(PutStatus.MESSAGE_ILLEGAL, remark=str(exc))
    return PutResult(PutStatus.MESSAGE_ILLEGAL, remark="bad queue id or record larger than a segment")
