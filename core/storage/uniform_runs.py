"""Runs of records that share everything but body and born timestamp: ``DiskStore.put_uniform(s)``.

Theory of operation
-------------------
A ``UniformBatch`` (a Kafka batch mapped natively, a plain run) is checked as a whole
(``_uniform_plan``: the longest body and properties stand for all), encoded in one native pass with
its ConsumeQueue units (``_encode_uniform``), committed with one write and dispatched as one run
(``_dispatch_uniform``: units, index keys, one arrival).  ``put_uniforms`` does this for the runs of
a Kafka Produce request, each to a queue of its own: encoded back to back, committed with one
``pwritev`` (``CommitLog.write_runs``), then dispatched one by one.  Runs the path does not serve
(prepared/rollback records, own keys beside shared KEYS) or that would cross a segment end take the
general path (``put_messages``).  A mixin of ``DiskStore``: it uses the store's CommitLog, queues,
dispatcher and commit helper.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rokka.core.model import (
    PROP_KEYS,
    PROP_UNIQ_KEY,
    TRANSACTION_MASK,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    Message,
    UniformBatch,
)
from rokka.core.storage import admission, layout
from rokka.core.storage.api import PutResult, PutStatus, StoreConfig, UnitsAppended

if TYPE_CHECKING:
    from rokka.core.storage.commitlog import CommitLog
    from rokka.core.storage.consumequeue import ConsumeQueue
    from rokka.core.storage.dispatch import Dispatcher


class UniformRuns:
    """``put_uniform`` / ``put_uniforms`` for ``DiskStore`` (module doc)."""

    clog: CommitLog
    cqs: dict[tuple[str, int], ConsumeQueue]
    dispatcher: Dispatcher
    config: StoreConfig
    _host: tuple[str, int]
    _last_store_ts: int

    if TYPE_CHECKING:   # DiskStore's
        def put_messages(self, messages: Sequence[Message]) -> PutResult: ...
        def _commit_runs(self, parts: Sequence[bytes]) -> PutResult | None: ...

    def put_uniform(self, batch: UniformBatch) -> PutResult:
        """One run of records that differ only in body and born timestamp (see ``UniformBatch``).

        Validated as a whole (the largest body stands for all), encoded by ``layout.encode_uniform``
        (native when built) with its ConsumeQueue units, committed with one ``pwrite`` and
        dispatched as one run.  Runs that are not dispatched (prepared/rollback) or cross a
        segment end take the general path.
        """
        if (refused := admission.not_accepting(self)) is not None:
            return refused
        plan = self._uniform_plan(batch)
        if plan is None:
            return self.put_messages(batch.messages())
        if isinstance(plan, PutResult):
            return plan
        now = int(time.time() * 1000) if batch.store_timestamp is None else batch.store_timestamp
        data, units, qoff, code = self._encode_uniform(batch, plan, self.clog.stage_end, now)
        if not self.clog.fits(len(data)):
            return self.put_messages(batch.messages())
        if failed := self._commit_runs((data,)):
            return failed
        self._last_store_ts = now
        return self._dispatch_uniform(batch, qoff, units, code, now)

    def put_uniforms(self, batches: Sequence[UniformBatch]) -> list[PutResult]:
        """``put_uniform`` of each batch, each to a queue of its own (a Kafka Produce request's
        partitions): the runs are encoded back to back and committed with one ``pwritev``, then
        dispatched one by one.  A batch ``put_uniform`` would send down the general path goes there
        after the runs; when the runs together would cross the segment end, each batch is put on
        its own.  A failed write fails every run of it."""
        if len(batches) == 1 or len({(b.topic, b.queue_id) for b in batches}) != len(batches) or any(
                b.store_timestamp is not None for b in batches):
            return [self.put_uniform(b) for b in batches]   # one, a queue twice, or own store times: one by one
        if (refused := admission.not_accepting(self)) is not None:
            return [refused] * len(batches)
        results: list[PutResult | None] = [None] * len(batches)
        general: list[int] = []
        runs: list[tuple[int, bytes, bytes, int, int]] = []     # (batch index, data, units, queue offset, code)
        now = int(time.time() * 1000)
        start = pos = self.clog.stage_end
        for i, batch in enumerate(batches):
            plan = self._uniform_plan(batch)
            if plan is None:
                general.append(i)
            elif isinstance(plan, PutResult):
                results[i] = plan
            else:
                data, units, qoff, code = self._encode_uniform(batch, plan, pos, now)
                runs.append((i, data, units, qoff, code))
                pos += len(data)
        if runs and not self.clog.fits(pos - start):
            for i, *_ in runs:
                results[i] = self.put_uniform(batches[i])
        elif runs:
            failed = self._commit_runs([r[1] for r in runs])
            if not failed:
                self._last_store_ts = now
            for i, _, units, qoff, code in runs:
                results[i] = failed or self._dispatch_uniform(batches[i], qoff, units, code, now)
        for i in general:
            results[i] = self.put_messages(batches[i].messages())
        return results  # type: ignore[return-value]

    def _uniform_plan(self, batch: UniformBatch) -> tuple[bytes, Sequence[bytes] | None] | PutResult | None:
        """``put_uniform``'s checks: (shared properties encoded, per-record property prefixes) for a
        run the run path takes, a PutResult for an empty or refused one, None for the general path
        (prepared or rollback records, or records with keys of their own beside shared KEYS)."""
        bodies = batch.bodies
        if not bodies:
            return PutResult(PutStatus.PUT_OK)
        t = batch.sysflag & TRANSACTION_MASK
        keys, own = batch.keys, batch.record_props
        if t == TRANSACTION_PREPARED_TYPE or t == TRANSACTION_ROLLBACK_TYPE or (
                (keys is not None or own is not None)
                and (PROP_KEYS in batch.properties or PROP_UNIQ_KEY in batch.properties)):
            return None
        # The longest body and the longest properties stand for all (only lengths are checked): a
        # record's own part is "KEYS 0x01 key" (or its packed properties), 0x02, then the shared ones.
        props = layout.encode_properties(batch.properties)
        props_len = len(props)
        if own is not None or keys is not None:
            longest = own.longest if own is not None else len(max(keys, key=len).encode("utf-8"))  # type: ignore[arg-type]
            props_len = len(PROP_KEYS) + 1 + longest + (props_len + 1 if props_len else 0)
        if (refused := admission.validate_run(batch.topic, batch.queue_id, batch.longest(), props_len,
                                              self.config)) is not None:
            return refused
        prefixes: Sequence[bytes] | None = own
        if own is not None:
            if props and min(own.spans[1::2]) > 0:     # every record has its own: 0x02 opens the shared part
                props = b"\x02" + props
            elif props:     # a record with no properties of its own gets the shared ones alone
                prefixes = [bytes(p) + b"\x02" if p else b"" for p in own]
        elif keys is not None:    # "KEYS 0x01 key", then 0x02 before the shared properties (none after the last)
            head, sep = b"KEYS\x01", b"\x02" if props else b""
            prefixes = [head + k.encode("utf-8") + sep for k in keys]
        return props, prefixes

    def _encode_uniform(self, batch: UniformBatch, plan: tuple[bytes, Sequence[bytes] | None], start: int,
                        now: int) -> tuple[bytes, bytes, int, int]:
        """(record bytes, ConsumeQueue units, first queue offset, tags code) of a planned run at
        CommitLog offset ``start``."""
        q = self.cqs.get((batch.topic, batch.queue_id))
        qoff = q.max_offset if q is not None else 0
        code = self.dispatcher.tags_code(batch.topic, batch.properties, now)
        data, units = layout.encode_uniform(
            batch.topic, batch.queue_id, batch.bodies, batch.born_timestamps, plan[0], flag=batch.flag,
            sysflag=batch.sysflag, born_host=batch.born_host, store_timestamp=now, store_host=self._host,
            queue_offset=qoff, commitlog_offset=start, tags_code=code, prefixes=plan[1],
            prepared_offsets=batch.prepared_offsets)
        return data, units, qoff, code

    def _dispatch_uniform(self, batch: UniformBatch, qoff: int, units: bytes, code: int, now: int) -> PutResult:
        """Dispatch a committed run (its units, index keys, arrival) and answer for it."""
        keys, own = batch.keys, batch.record_props
        self.dispatcher.dispatch_run(batch.topic, batch.queue_id, qoff, units, code, batch.properties, now,
                                     keys if own is None or keys is not None else ())
        return PutResult(PutStatus.PUT_OK, UnitsAppended(units, qoff, now))
