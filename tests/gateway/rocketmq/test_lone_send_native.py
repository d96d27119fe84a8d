"""A lone SEND_MESSAGE(_V2) that stays where it was sent takes the native batch pass as a one-element batch
(``Broker.stays_in_place``); hypothesis: for any body, flag, properties (WAIT, CLUSTER, KEYS, UNIQ_KEY,
TAGS, delay and transaction markers, anything else) and born host, it writes the CommitLog bytes, the
ConsumeQueue unit and the index keys of the message path (``Broker.put``), and answers the same."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rokka.core.broker import Broker
from rokka.core.config import BrokerConfig
from rokka.core.model import TRANSACTION_MASK
from rokka.core.record import encode_properties
from rokka.gateway.rocketmq.handlers.context import BrokerEnv
from rokka.gateway.rocketmq.handlers.send import _handle_send
from rokka.net.remoting.codec.remoting import RemotingCommand
from rokka.net.remoting.codec.request_headers import SendMessageRequestHeader

_text = st.text(st.characters(blacklist_characters="\x00\x01\x02", blacklist_categories=("Cs",)), min_size=1,
                max_size=8)
_props = st.dictionaries(
    st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "WAIT", "CLUSTER", "DELAY", "TRAN_MSG", "a", "b"]),
    _text, max_size=5)


def _request(i: int, topic: str, body: bytes, props: dict[str, str], flag: int, sysflag: int) -> RemotingCommand:
    ext = SendMessageRequestHeader(
        producer_group="PG", topic=topic, default_topic="TBW102", default_topic_queue_nums=4, queue_id=1,
        sys_flag=sysflag, born_timestamp=1_700_000_000_123, flag=flag,
        properties=encode_properties(props).decode() if props else None, reconsume_times=0, unit_mode=False,
        batch=None).encode_v2()
    return RemotingCommand(310, opaque=i, ext_fields=ext, body=body)


def _broker(root: Path, native: bool) -> Broker:
    broker = Broker(BrokerConfig(store_path_root_dir=str(root)))
    broker.topics.ensure("T", 4)
    if not native:      # the message path for every send
        broker.stays_in_place = lambda props, sysflag: False  # type: ignore[method-assign]
    return broker


def _view(broker: Broker) -> tuple[list[bytes], list[tuple[int, int, int]]]:
    store = broker.store
    records, units = [], []
    for qid in range(4):
        res = store.get_messages("T", qid, 0, 1000, 1 << 30)
        records += [bytes(r) for r in res.records]
        units += [(u.commitlog_offset, u.size, u.tags_code) for u in store.cq_units("T", qid, 0, 1000)]
    return records, units


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sends=st.lists(st.tuples(st.binary(max_size=200), _props, st.integers(-(1 << 31), (1 << 31) - 1),
                                st.sampled_from([0, 2, 4, 8, 12])), min_size=1, max_size=6),
       peer=st.sampled_from([("10.0.0.7", 4242), ("::1", 9), ("::ffff:192.0.2.1", 80)]))
def test_lone_send_native_equals_message_path(tmp_path_factory: pytest.TempPathFactory,
                                              sends: list[tuple[bytes, dict[str, str], int, int]],
                                              peer: tuple[str, int]) -> None:
    root = tmp_path_factory.mktemp("lone")
    native, plain = _broker(root / "native", True), _broker(root / "plain", False)
    channel = SimpleNamespace(peer=peer)
    took: list[int] = []
    batch_put = native.store.put_batch_body
    native.store.put_batch_body = lambda batch, props=None: took.append(1) or batch_put(batch, props)  # type: ignore[method-assign]
    answers: dict[bool, list[tuple[int, dict[str, str]]]] = {True: [], False: []}

    async def run() -> None:
        for broker in (native, plain):
            env = BrokerEnv(broker, "127.0.0.1:10911")
            for i, (body, props, flag, sysflag) in enumerate(sends):
                resp = await _handle_send(env, channel, _request(i, "T", body, dict(props), flag, sysflag))
                answers[broker is native].append((resp.code, dict(resp.ext_fields)))

    try:
        with mock.patch("time.time", return_value=1_700_000_001.5):
            trio.run(run)
        assert answers[True] == answers[False]
        eligible = [p for _b, p, _f, sf in sends
                    if "DELAY" not in p and "TRAN_MSG" not in p and not sf & TRANSACTION_MASK]
        assert len(took) == len(eligible)       # the native pass was taken by every send that stays in place
        assert _view(native) == _view(plain)
        for _body, props, _flag, sysflag in sends:
            if "DELAY" in props or "TRAN_MSG" in props or sysflag & TRANSACTION_MASK:
                continue
            for key in [k for k in props.get("KEYS", "").split(" ") if k] + [props.get("UNIQ_KEY", "")]:
                if key:
                    assert native.store.query_by_key("T", key, 1000, 0, 1 << 62) == \
                        plain.store.query_by_key("T", key, 1000, 0, 1 << 62)
    finally:
        native.close()
        plain.close()
