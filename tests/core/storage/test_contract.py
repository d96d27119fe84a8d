"""One contract suite for every MessageStore engine (DiskStore and MemoryStore).

Rules: each test uses the ``store`` fixture (parametrized over the engines)
and only the MessageStore interface, so both engines must agree.
"""

from __future__ import annotations

from dataclasses import replace

from rokka.core.model import TOPIC_SCHEDULE, Message
from rokka.core.storage import layout
from rokka.core.storage.api import GetStatus, MessageStore, PutStatus
from storage_helpers import msg


class TagFilter:
    def __init__(self, *tags: str, prop: tuple[str, str] | None = None) -> None:
        self.codes = {layout.java_hash(t) for t in tags}
        self.prop = prop

    def match_tags_code(self, tags_code: int) -> bool:
        return not self.codes or tags_code in self.codes

    def match_properties(self, properties: dict[str, str]) -> bool:
        return self.prop is None or properties.get(self.prop[0]) == self.prop[1]


def test_put_get_round_trip(store: MessageStore) -> None:
    res = store.put_messages([msg(i, TAGS="A", KEYS=f"k{i}") for i in range(5)])
    assert res.ok and [a.queue_offset for a in res.appended] == [0, 1, 2, 3, 4]
    offs = [a.commitlog_offset for a in res.appended]
    assert offs == sorted(offs) and offs[0] == 0 and res.end_offset == store.commitlog_max_offset
    got = store.get_messages("T", 0, 0, 32)
    assert got.status is GetStatus.FOUND and got.queue_offsets == (0, 1, 2, 3, 4)
    assert got.next_begin_offset == 5 and (got.min_offset, got.max_offset) == (0, 5)
    decoded = layout.iter_records(got.body)
    assert [m.body for m in decoded] == [f"body-{i}".encode() for i in range(5)]
    assert [m.commitlog_offset for m in decoded] == offs
    assert decoded[2].properties == {"TAGS": "A", "KEYS": "k2"}
    assert decoded[0].store_host == store.config.store_host
    assert store.read_record(offs[1]) == got.records[1]
    assert store.read_record(offs[1], res.appended[1].size) == got.records[1]
    assert store.read_message(offs[3]).queue_offset == 3  # type: ignore[union-attr]
    assert store.read_record(offs[1] + 1) is None and store.read_record(10**9) is None
    assert [u.commitlog_offset for u in store.cq_units("T", 0, 1, 2)] == offs[1:3]
    assert store.cq_units("T", 0, 0, 1)[0].tags_code == layout.java_hash("A")


def test_queue_offsets_per_queue_and_batches(store: MessageStore) -> None:
    res = store.put_messages([msg(0, queue_id=0), msg(1, queue_id=1), msg(2, queue_id=0)])
    assert [a.queue_offset for a in res.appended] == [0, 0, 1]
    res = store.put_messages([msg(3, queue_id=1)])
    assert res.appended[0].queue_offset == 1
    assert store.queues() == {"T": [0, 1]}
    assert store.max_offset("T", 1) == 2 and store.max_offset("nope", 0) == 0


def test_transaction_records_not_dispatched(store: MessageStore) -> None:
    prepared = replace(msg(0), sysflag=0x4)
    rollback = replace(msg(1), sysflag=0xC)
    commit = replace(msg(2), sysflag=0x8, properties={"UNIQ_KEY": "U2"})
    res = store.put_messages([prepared, rollback, commit, msg(3)])
    assert [a.queue_offset for a in res.appended] == [0, 0, 0, 1]
    assert store.max_offset("T", 0) == 2
    assert store.read_message(res.appended[0].commitlog_offset).sysflag == 0x4  # type: ignore[union-attr]
    assert store.query_by_key("T", "U2", 10, 0, 2**62) == [res.appended[2].commitlog_offset]


def test_get_status_table(store: MessageStore) -> None:
    g = store.get_messages("T", 0, 0, 32)
    assert (g.status, g.next_begin_offset) == (GetStatus.NO_MESSAGE_IN_QUEUE, 0)
    g = store.get_messages("T", 0, 7, 32)
    assert (g.status, g.next_begin_offset) == (GetStatus.NO_MESSAGE_IN_QUEUE, 0)
    store.put_messages([msg(i) for i in range(10)])
    g = store.get_messages("T", 0, 10, 32)
    assert (g.status, g.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_ONE, 10)
    g = store.get_messages("T", 0, 15, 32)   # Java: min offset 0 -> next = min
    assert (g.status, g.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, 0)
    store.set_min_offset("T", 0, 4)
    assert store.min_offset("T", 0) == 4
    g = store.get_messages("T", 0, 2, 32)
    assert (g.status, g.next_begin_offset, g.min_offset) == (GetStatus.OFFSET_TOO_SMALL, 4, 4)
    g = store.get_messages("T", 0, 15, 32)
    assert (g.status, g.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, 10)
    store.set_min_offset("T", 0, 2)          # never moves back
    assert store.min_offset("T", 0) == 4
    assert [u.queue_offset for u in store.cq_units("T", 0, 0, 2)] == [4, 5]


def test_batch_limits(store: MessageStore) -> None:
    res = store.put_messages([msg(i, body=bytes(100)) for i in range(10)])
    size = res.appended[0].size
    g = store.get_messages("T", 0, 0, 3)
    assert len(g.records) == 3 and g.next_begin_offset == 3
    g = store.get_messages("T", 0, 0, 32, max_bytes=size * 2 + 1)
    assert len(g.records) == 2 and g.next_begin_offset == 2
    g = store.get_messages("T", 0, 5, 32, max_bytes=1)   # always at least one
    assert len(g.records) == 1 and g.next_begin_offset == 6


def test_filters_and_scan_limit(store: MessageStore) -> None:
    store.put_messages([msg(i, TAGS="A") for i in range(900)])
    store.put_messages([msg(900, TAGS="B", color="red"), msg(901, TAGS="B", color="blue")])
    g = store.get_messages("T", 0, 0, 1, message_filter=TagFilter("B"))
    assert g.status is GetStatus.NO_MATCHED_MESSAGE and g.next_begin_offset == 800  # 16000 / 20
    g = store.get_messages("T", 0, 800, 32, message_filter=TagFilter("B"))
    assert g.status is GetStatus.FOUND and g.queue_offsets == (900, 901)
    g = store.get_messages("T", 0, 800, 32, message_filter=TagFilter("B", prop=("color", "blue")))
    assert g.queue_offsets == (901,) and g.next_begin_offset == 902
    g = store.get_messages("T", 0, 0, 1000, message_filter=TagFilter("B"))  # 20*1000 bytes scanned
    assert g.queue_offsets == (900, 901)


def test_offset_by_time(store: MessageStore) -> None:
    assert store.offset_by_time("T", 0, 5) == 0
    assert store.earliest_store_time("T", 0) == -1
    times = [100, 200, 300, 300, 400]
    store.put_messages([replace(msg(i), store_timestamp=t) for i, t in enumerate(times)])
    assert store.offset_by_time("T", 0, 200) == 1
    assert store.offset_by_time("T", 0, 300) == 2
    assert store.offset_by_time("T", 0, 240) == 1     # nearer left
    assert store.offset_by_time("T", 0, 260) == 2     # nearer right
    assert store.offset_by_time("T", 0, 250) == 1     # tie -> left
    assert store.offset_by_time("T", 0, 50) == 0      # only a right neighbour
    assert store.offset_by_time("T", 0, 999) == 4     # only a left neighbour
    assert store.earliest_store_time("T", 0) == 100
    assert store.store_time_at("T", 0, 4) == 400 and store.store_time_at("T", 0, 5) is None


def test_query_by_key(store: MessageStore) -> None:
    a = store.put_messages([replace(msg(0, KEYS="order-1 order-2", UNIQ_KEY="U0"), store_timestamp=10_000)])
    b = store.put_messages([replace(msg(1, KEYS="order-1", UNIQ_KEY="U1"), store_timestamp=20_000)])
    store.put_messages([replace(msg(2, topic="Other", KEYS="order-1"), store_timestamp=20_000)])
    o0, o1 = a.appended[0].commitlog_offset, b.appended[0].commitlog_offset
    assert sorted(store.query_by_key("T", "order-1", 10, 0, 10**9)) == [o0, o1]
    assert store.query_by_key("T", "order-2", 10, 0, 10**9) == [o0]
    assert store.query_by_key("T", "U1", 10, 0, 10**9) == [o1]
    assert store.query_by_key("T", "order-1", 10, 15_000, 30_000) == [o1]
    assert len(store.query_by_key("T", "order-1", 1, 0, 10**9)) == 1
    assert store.query_by_key("T", "nope", 10, 0, 10**9) == []


def test_schedule_topic_tags_code_is_delivery_time(store: MessageStore) -> None:
    levels = store.config.delay_levels_ms
    m = [replace(msg(0, topic=TOPIC_SCHEDULE, DELAY="3", TAGS="x"), store_timestamp=1_000_000),
         replace(msg(1, topic=TOPIC_SCHEDULE, DELAY="99"), store_timestamp=1_000_000),
         replace(msg(2, topic=TOPIC_SCHEDULE, TAGS="x"), store_timestamp=1_000_000)]
    store.put_messages(m)
    codes = [u.tags_code for u in store.cq_units(TOPIC_SCHEDULE, 0, 0, 3)]
    assert codes == [1_000_000 + levels[2], 1_000_000 + levels[-1], layout.java_hash("x")]


def test_arrival_listeners(store: MessageStore) -> None:
    seen: list[tuple[str, int, int, int, dict[str, str]]] = []

    def boom(*_: object) -> None:
        raise RuntimeError("listener bug")

    store.add_arrival_listener(boom)
    store.add_arrival_listener(lambda *a: seen.append(a))  # type: ignore[arg-type]
    store.put_messages([msg(0, TAGS="A"), replace(msg(1), sysflag=0x4)])
    assert seen == [("T", 0, 0, layout.java_hash("A"), {"TAGS": "A"})]


def test_illegal_batches_write_nothing(store: MessageStore) -> None:
    before = store.commitlog_max_offset
    cases = [([msg(0), msg(1, topic="t" * 128)], PutStatus.MESSAGE_ILLEGAL),
             ([msg(0, body=bytes(store.config.max_message_size + 1))], PutStatus.MESSAGE_ILLEGAL),
             ([msg(0), msg(1, big="v" * 33000)], PutStatus.PROPERTIES_SIZE_EXCEEDED)]
    for batch, status in cases:
        res = store.put_messages(batch)
        assert res.status is status and res.remark and not res.appended
    assert store.commitlog_max_offset == before and store.max_offset("T", 0) == 0


def test_delete_topic(store: MessageStore) -> None:
    store.put_messages([msg(0), msg(1, topic="Keep")])
    store.delete_topic("T")
    assert store.queues() == {"Keep": [0]}
    assert store.get_messages("T", 0, 0, 32).status is GetStatus.NO_MESSAGE_IN_QUEUE
    assert store.put_messages([msg(2)]).appended[0].queue_offset == 0


def test_flush_and_ipv6_born_host(store: MessageStore) -> None:
    res = store.put_messages([Message("T", 0, b"v6", born_host=("::1", 9))])
    assert store.flush() >= res.end_offset and store.flushed_offset >= res.end_offset
    m = store.read_message(res.appended[0].commitlog_offset)
    assert m is not None and m.born_host == ("::1", 9) and m.sysflag & 0x10
    store.checkpoint()


def test_empty_put(store: MessageStore) -> None:
    assert store.put_messages([]).ok
