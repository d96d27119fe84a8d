"""Process allocator settings for a long-running broker (glibc ``mallopt``).

Theory of operation
-------------------
Every produce request and fetch response is a buffer of up to a few MiB.
With glibc's defaults such a buffer is either ``mmap``-ed on its own (fresh
zero pages, unmapped again on free) or carved from the top of the heap,
which ``free`` trims back to the kernel as soon as more than 128 KiB sit
unused there.  Either way the next request touches fresh pages: a page
fault and a page clear per 4 KiB, measured at ~17 % of the broker's CPU
under a 1 KiB Kafka produce stream (``perf``; see BENCHMARKS.md).  The
fix is the one mallopt(3) describes: serve buffers below 32 MiB (our frame
limit is 16 MiB) from the heap and keep up to 128 MiB of free heap top
instead of trimming it, so the same pages are reused request after
request.  ``tune()`` is a no-op where glibc is absent (musl, macOS); an
operator's ``MALLOC_*_`` environment variables win.
"""

from __future__ import annotations

import ctypes
import os

import structlog

log = structlog.get_logger(__name__)

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
TRIM_THRESHOLD = 128 << 20
MMAP_THRESHOLD = 32 << 20      # glibc's upper bound for this setting on 64-bit


def tune() -> bool:
    """Apply the settings above; True if glibc accepted them."""
    if any(k in os.environ for k in ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_")):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt     # the process's own symbols: no library search at start-up
    except (OSError, AttributeError):
        return False
    ok = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    if not ok:
        log.warning("allocator.mallopt_refused")
    return ok
