"""The column-wise PULL body decoder gives exactly the reference rows (``rokka.pipeline.rows``).

No Spark needed: records are encoded with ``rokka.core.storage.layout.encode_record`` (the CommitLog
format the broker returns in PULL bodies) and both paths' RecordBatches are compared.
"""

from __future__ import annotations

import zlib

import pytest

pytest.importorskip("pyarrow", reason="pyarrow is needed: pip install -e '.[pipeline]'")

from rokka.compat.kafka_records import message_from_record  # noqa: E402
from rokka.core.model import COMPRESSED_FLAG, Message  # noqa: E402
from rokka.core.storage.layout import encode_record  # noqa: E402
from rokka.net.remoting.client import decode_messages  # noqa: E402
from rokka.pipeline.columns import PullBatchBuilder  # noqa: E402
from rokka.pipeline.rows import BatchBuilder  # noqa: E402

TOPIC = "ColTopic"


def body_of(msgs: list[Message], first_offset: int = 0,
            store_host: tuple[str, int] = ("10.0.0.7", 10911)) -> bytes:
    out, phys = [], 4096
    for i, m in enumerate(msgs):
        rec = encode_record(m, queue_offset=first_offset + i, commitlog_offset=phys,
                            store_timestamp=1_700_000_000_000 + i, store_host=store_host)
        out.append(rec)
        phys += len(rec)
    return b"".join(out)


def rmq(i: int, **props: str) -> Message:
    p = {"UNIQ_KEY": f"{i:032X}", "TAGS": "T" + str(i % 3), **props}
    return Message(TOPIC, 1, f"body-{i}".encode(), p, born_timestamp=1_699_999_999_000 + i,
                   born_host=("192.168.1.2", 5000 + i))


def both(bodies: list[tuple[bytes, int]]) -> tuple[object, object, bool]:
    fast = PullBatchBuilder("broker-x")
    ref = BatchBuilder("broker-x")
    for body, stop in bodies:
        fast.add(body, stop)
        ref.extend(m for m in decode_messages(body) if m.queue_offset < stop)
    assert len(fast) == len(ref)
    batch = fast.build()
    return batch, ref.build(), fast.last_vectorised


def test_rocketmq_records_take_the_vectorised_path_with_the_reference_values() -> None:
    msgs = [rmq(i, KEYS="k1 k2") if i % 2 else rmq(i, color="red", z="1") for i in range(50)]
    a, b, vectorised = both([(body_of(msgs[:30]), 1000), (body_of(msgs[30:], 30), 45)])
    assert vectorised
    assert a.num_rows == 45 and a.equals(b)
    row = a.slice(3, 1).to_pylist()[0]
    assert row["msg_id"] == f"{3:032X}" and row["keys"] == "k1 k2" and row["tags"] == "T0"
    assert row["properties"] == [("UNIQ_KEY", f"{3:032X}"), ("TAGS", "T0"), ("KEYS", "k1 k2")]
    assert a.slice(0, 1).to_pylist()[0]["keys"] is None


def test_empty_input_builds_an_empty_batch() -> None:
    a, b, _ = both([(body_of([rmq(0)]), 0)])
    assert a.num_rows == 0 and a.equals(b)


@pytest.mark.parametrize("odd", [
    "kafka", "no_uniq_key", "compressed", "ipv6_store_host", "empty_value", "no_separator", "bad_utf8",
    "duplicate_key", "kafka_property",
])
def test_other_records_give_the_reference_rows(odd: str) -> None:
    msgs = [rmq(i) for i in range(10)]
    host = ("10.0.0.7", 10911)
    props_override: bytes | None = None
    if odd == "kafka":
        msgs[4] = message_from_record(TOPIC, 1, key=b"key", value=b"value",
                                      headers=(("h", b"v"), ("n", None)),
                                      timestamp=1_700_000_000_004, log_append_time=False)
    elif odd == "no_uniq_key":
        del msgs[4].properties["UNIQ_KEY"]
    elif odd == "compressed":
        msgs[4] = Message(TOPIC, 1, zlib.compress(b"inflated"), {"UNIQ_KEY": "AB" * 16},
                          sysflag=COMPRESSED_FLAG)
    elif odd == "ipv6_store_host":
        host = ("::1", 10911)
    elif odd == "kafka_property":
        msgs[4].properties["KAFKA_TS_TYPE"] = "1"
    else:
        props_override = {"empty_value": b"UNIQ_KEY\x01" + b"C" * 32 + b"\x02a\x01",
                          "no_separator": b"UNIQ_KEY\x01" + b"C" * 32 + b"\x02lonely",
                          "bad_utf8": b"UNIQ_KEY\x01" + b"C" * 32 + b"\x02a\x01\xff\xfe",
                          "duplicate_key": b"UNIQ_KEY\x01" + b"C" * 32 + b"\x02a\x011\x02a\x012"}[odd]
    body = body_of(msgs, store_host=host)
    if props_override is not None:
        rec = encode_record(msgs[4], queue_offset=4, commitlog_offset=1, store_timestamp=1, store_host=host,
                            props=props_override)
        parts = [encode_record(m, queue_offset=i, commitlog_offset=1, store_timestamp=1, store_host=host)
                 for i, m in enumerate(msgs)]
        parts[4] = rec
        body = b"".join(parts)
    a, b, vectorised = both([(body_of([rmq(100 + i) for i in range(3)], 100), 10**6), (body, 10**6)])
    assert not vectorised
    assert a.num_rows == 13 and a.equals(b)
