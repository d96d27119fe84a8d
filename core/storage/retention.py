"""Retention: delete expired whole files (RocketMQ CleanCommitLogService et al.).

Theory of operation
-------------------
A CommitLog segment is *expired* when its file mtime + ``fileReservedTime``
hours <= now.  Deletion runs when one of these holds:

  * ``force`` (an operator request), or
  * the local hour of ``now`` is one of ``deleteWhen`` ("04" or "04;10"), or
  * the store's disk is more than ``diskMaxUsedSpaceRatio`` % full (expired
    segments go at any hour).  Above ``FORCIBLY_RATIO`` % (RocketMQ's
    ``diskSpaceCleanForciblyRatio``, 85) the oldest segment goes even if not
    yet expired, one per call, after the expired ones -- only with
    ``cleanFileForciblyEnable=true`` (RocketMQ's default; rokka's is false,
    and a loud warning is logged at start when it is on): that data may not
    have been consumed yet.  By default nothing unexpired is deleted; writes
    are refused instead (below) until space returns.  "Full" is counted as ``df`` and
    RocketMQ's ``UtilAll.getDiskPartitionSpaceUsedPercent`` count it: used /
    (used + available to us), used = total - free blocks.  Blocks reserved
    for root are neither (on a filesystem reserving a big share, total minus
    available would read as full while df shows it half empty).

Above ``WARNING_RATIO`` % (RocketMQ's ``diskSpaceWarningLevelRatio``, 90),
or with less than ``RESERVE_BYTES`` available (the ConsumeQueue and index
files are written through maps: a page fault on a full disk would kill the
process), the store is marked disk-full (``DiskStore.disk_full``: puts are
refused with SERVICE_NOT_AVAILABLE before a write can fail half way).
``admission.check_space`` (the put gate owns that state) decides it; it runs
on every retention pass, from the put
path every ``SPACE_CHECK_BYTES`` appended (before every put once less than
four reserves are left), and at most once a second while writes are
refused, so writes resume by themselves once space returns -- also after a
write that did fail (ENOSPC from another process filling the disk:
``DiskStore`` clears the failed bytes and waits for room).

Rules: never the active (last) segment; only whole segments, oldest first,
stopping at the first one that must stay (so the CommitLog stays contiguous).
Then every ConsumeQueue drops whole files whose units all point below the
new CommitLog minimum (never its last file) and corrects its min offset;
index files whose newest entry is below the minimum go too (never the
last).  Min offsets only move forward.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import structlog
from rokka.core.storage import admission

if TYPE_CHECKING:
    from rokka.core.storage.engine import DiskStore

log = structlog.get_logger(__name__)

#: Disk use (%) above which not-yet-expired segments go too (RocketMQ diskSpaceCleanForciblyRatio).
FORCIBLY_RATIO = 85.0
#: Seconds between two "still keeping unexpired data" warnings.
WARN_INTERVAL_S = 60.0


def delete_hours(spec: str) -> set[int]:
    out = set()
    for part in spec.split(";"):
        part = part.strip()
        if part.isdigit():
            out.add(int(part))
    return out


def disk_used_ratio(store: DiskStore) -> float:
    """Percent of the store's filesystem in use, as df shows it (see module doc)."""
    return admission.path_used_ratio(store.clog.files.directory)[0]


def run(store: DiskStore, now_ms: int, force: bool = False) -> int:
    """Delete what is due; returns the number of files removed."""
    cfg = store.config
    hour = time.localtime(now_ms / 1000).tm_hour
    used = admission.check_space(store)
    pressure = used > cfg.disk_max_used_space_ratio
    if not (force or pressure or hour in delete_hours(cfg.delete_when)):
        return 0
    forcibly = used > max(FORCIBLY_RATIO, cfg.disk_max_used_space_ratio)
    if forcibly and not cfg.clean_file_forcibly_enable:
        _warn_kept(store, used)
        forcibly = False
    removed = _delete_segments(store, now_ms, forcibly)
    if removed:
        new_min = store.clog.min_offset
        for q in tuple(store.cqs.values()):
            removed += q.delete_below(new_min)
        removed += store.index.delete_below(new_min)
        log.info("store.retention_deleted_files", files=removed, commitlog_min=new_min,
                 disk_used_percent=round(used, 1), disk_pressure=pressure)
    return removed


_last_kept_warning = -WARN_INTERVAL_S


def _warn_kept(store: DiskStore, used: float) -> None:
    global _last_kept_warning
    now = time.monotonic()
    if now - _last_kept_warning >= WARN_INTERVAL_S:
        _last_kept_warning = now
        log.warning("store.disk_nearly_full", used_percent=round(used, 1), forcibly_percent=FORCIBLY_RATIO,
                    refuse_percent=admission.WARNING_RATIO, path=str(store.clog.files.directory),
                    action="keeping unexpired data (cleanFileForciblyEnable=false); writes are refused above "
                           "the refuse level until space is freed")


def _delete_segments(store: DiskStore, now_ms: int, forcibly: bool) -> int:
    files = store.clog.files
    keep_ms = store.config.file_reserved_time_hours * 3_600_000
    removed = 0
    while len(files.segments) > 1:
        seg = files.segments[0]
        if seg.end > store.clog.flushed_offset:
            break           # never delete data that is not yet durable elsewhere in order
        expired = seg.path.stat().st_mtime * 1000 + keep_ms <= now_ms
        if not expired and not (forcibly and removed == 0):
            break
        if expired:
            log.info("store.expired_segment_deleting", path=str(seg.path))
        else:   # its records may not have been read yet: say so loudly
            log.warning("store.disk_full_deleting_unexpired_segment", path=str(seg.path))
        files.drop_first()
        removed += 1
    return removed
