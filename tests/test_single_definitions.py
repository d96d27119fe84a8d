"""Issue 22's small duplications stay gone: each of these is defined once in core/gateway/compat/pipeline
(the permission bits, RETRY_PREFIX, QueueData, the OffsetStore protocol, Java's String.hashCode and
the atomic fsync-then-rename file write and its
.bak-falling-back read), and the users share the one definition."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("core", "net", "gateway", "compat", "pipeline")

# what defines each thing -> the one module allowed to define it
SINGLE = {
    r"^PERM_(READ|WRITE|INHERIT|PRIORITY)\s*=": "core/routing.py",
    r"^RETRY_PREFIX\s*=": "core/model.py",
    r"^class QueueData\b": "core/routing.py",
    r"^class OffsetStore\b": "core/offsets.py",
    r"^def java_(string_)?hash\(|\(31 \* h \+": "core/model.py",
    r"os\.fsync\(f\.fileno\(\)\)": "core/storage/metafile.py",
    r"for candidate in \(path, bak\)": "core/storage/metafile.py",     # the read with .bak fallback
}


def _sources() -> list[Path]:
    return [p for layer in LAYERS for p in (ROOT / layer).rglob("*.py") if "build" not in p.parts]


@pytest.mark.parametrize("pattern", list(SINGLE))
def test_defined_once(pattern: str) -> None:
    rx = re.compile(pattern, re.M)
    where = sorted({str(p.relative_to(ROOT)) for p in _sources() if rx.search(p.read_text(encoding="utf-8"))})
    assert where == [SINGLE[pattern]]


def test_users_share_the_definitions() -> None:
    from rokka.core import model, offsets, routing, topics
    from rokka.core.namesrv import routes
    from rokka.core.storage import index, layout
    from rokka.gateway.kafka import routed_offsets
    from rokka.gateway.kafka.groups import coordinator
    from rokka.gateway.rocketmq import acl
    from rokka.net.remoting.client import types

    assert routes.QueueData is types.QueueData is routing.QueueData
    assert (topics.PERM_READ, topics.PERM_WRITE, topics.PERM_INHERIT) == (4, 2, 1) == (
        routing.PERM_READ, routing.PERM_WRITE, routing.PERM_INHERIT)
    assert acl.RETRY_PREFIX is model.RETRY_PREFIX
    assert routed_offsets.OffsetStore is coordinator.OffsetStore is offsets.OffsetStore
    assert layout.java_hash is index.java_hash is model.java_hash is model.java_string_hash
    assert model.tags_code("TagA") == layout.tags_hash("TagA") == 2598919


def test_namesrv_perm_edits_replace_the_frozen_queue_data() -> None:
    from rokka.core.namesrv.routes import RouteInfoManager
    from rokka.core.routing import PERM_READ, PERM_WRITE

    r = RouteInfoManager(clock=lambda: 0)
    r.register_broker("C", "b", "127.0.0.1:1", 0, "127.0.0.1:2", {"T": {"readQueueNums": 2, "writeQueueNums": 2,
                                                                       "perm": 6}}, {"counter": 1}, "ch")
    before = r.topic_queues["T"]["b"]
    assert r.wipe_write_perm("b") == 1
    assert r.topic_queues["T"]["b"].perm == PERM_READ and before.perm == PERM_READ | PERM_WRITE
    assert r.add_write_perm("b") == 1 and r.topic_queues["T"]["b"].perm == PERM_READ | PERM_WRITE
