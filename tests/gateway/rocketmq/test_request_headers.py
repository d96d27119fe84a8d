"""Declared RocketMQ request headers: golden extFields (Java field names) decode to the typed header and
encode back identically; a missing required field or a bad number is the protocol's error."""

from __future__ import annotations

import ast
import dataclasses
import pathlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rokka.net.remoting.codec import namesrv_headers as nh
from rokka.net.remoting.codec import request_headers as rh
from rokka.net.remoting.codec import response_headers as resp_h
from rokka.net.remoting.codec.codes import RequestCode, ResponseCode
from rokka.net.remoting.codec.errors import HeaderFieldError
from rokka.net.remoting.codec.header_decl import RequestHeader
from rokka.net.remoting.codec.headers import INT32_MAX, INT32_MIN, Header, normalize_send_header, parse_int
from rokka.net.remoting.codec.remoting import RemotingCommand

# Golden extFields, written by hand from the Java classes' field names (every declared field set).
GOLDEN: dict[type[RequestHeader], dict[str, str]] = {
    # sending, pulling, replies
    rh.SendMessageRequestHeader: {
        "producerGroup": "pg", "topic": "T", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4", "queueId": "3",
        "sysFlag": "0", "bornTimestamp": "1700000000000", "flag": "0", "properties": "TAGS\x01a\x02",
        "reconsumeTimes": "0", "unitMode": "false", "batch": "true", "maxReconsumeTimes": "16", "brokerName": "b"},
    rh.PullMessageRequestHeader: {
        "consumerGroup": "cg", "topic": "T", "queueId": "1", "queueOffset": "9000000000", "maxMsgNums": "32",
        "sysFlag": "6", "commitOffset": "0", "suspendTimeoutMillis": "15000", "subscription": "a || b",
        "subVersion": "1700000000000", "expressionType": "TAG"},
    rh.ConsumerSendMsgBackRequestHeader: {
        "offset": "123456", "group": "cg", "delayLevel": "0", "originMsgId": "ID", "originTopic": "T",
        "unitMode": "false", "maxReconsumeTimes": "16"},
    rh.ReplyMessageRequestHeader: {
        "producerGroup": "pg", "topic": "c_REPLY_TOPIC", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
        "queueId": "0", "sysFlag": "0", "bornTimestamp": "1", "flag": "0", "properties": "", "reconsumeTimes": "0",
        "unitMode": "false", "bornHost": "127.0.0.1:5000", "storeHost": "127.0.0.1:10911", "storeTimestamp": "2"},
    # clients and offsets
    rh.UnregisterClientRequestHeader: {"clientID": "1.2.3.4@1", "producerGroup": "pg", "consumerGroup": "cg"},
    rh.GetConsumerListByGroupRequestHeader: {"consumerGroup": "cg"},
    rh.QueryConsumerOffsetRequestHeader: {"consumerGroup": "cg", "topic": "T", "queueId": "2",
                                          "setZeroIfNotFound": "false"},
    rh.UpdateConsumerOffsetRequestHeader: {"consumerGroup": "cg", "topic": "T", "queueId": "2", "commitOffset": "77",
                                           "kafkaMetadata": "m", "kafkaLeaderEpoch": "5"},
    rh.GetMaxOffsetRequestHeader: {"topic": "T", "queueId": "0"},
    rh.GetMinOffsetRequestHeader: {"topic": "T", "queueId": "0"},
    rh.SearchOffsetRequestHeader: {"topic": "T", "queueId": "0", "timestamp": "1700000000000"},
    rh.GetEarliestMsgStoretimeRequestHeader: {"topic": "T", "queueId": "0"},
    rh.ResetOffsetRequestHeader: {"topic": "T", "group": "cg", "timestamp": "1700000000000", "isForce": "true"},
    # topics, groups, messages (admin)
    rh.CreateTopicRequestHeader: {
        "topic": "T", "defaultTopic": "TBW102", "readQueueNums": "8", "writeQueueNums": "8", "perm": "6",
        "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"},
    rh.TopicRequestHeader: {"topic": "T"},
    rh.GetConsumeStatsRequestHeader: {"consumerGroup": "cg", "topic": "T"},
    rh.DeleteSubscriptionGroupRequestHeader: {"groupName": "cg", "cleanOffset": "true"},
    rh.GetConsumerConnectionListRequestHeader: {"consumerGroup": "cg"},
    rh.GetProducerConnectionListRequestHeader: {"producerGroup": "pg"},
    rh.ViewMessageRequestHeader: {"offset": "4294967296"},
    rh.QueryMessageRequestHeader: {"topic": "T", "key": "k", "maxNum": "32", "beginTimestamp": "0",
                                   "endTimestamp": "1700000000000", "_UNIQUE_KEY_QUERY": "true"},
    rh.QueryConsumeTimeSpanRequestHeader: {"topic": "T", "group": "cg"},
    rh.CloneGroupOffsetRequestHeader: {"srcGroup": "a", "destGroup": "b", "topic": "T", "offline": "false"},
    rh.ViewBrokerStatsDataRequestHeader: {"statsName": "TOPIC_PUT_NUMS", "statsKey": "T"},
    rh.GetConsumeStatsInBrokerHeader: {"isOrder": "true"},
    rh.QueryConsumeQueueRequestHeader: {"topic": "T", "queueId": "1", "index": "0", "count": "10",
                                        "consumerGroup": "cg"},
    rh.ResumeCheckHalfMessageRequestHeader: {"msgId": "7F00000100002A9F0000000000000000"},
    rh.GetConsumerRunningInfoRequestHeader: {"consumerGroup": "cg", "clientId": "c@1", "jstackEnable": "false"},
    rh.ConsumeMessageDirectlyResultRequestHeader: {"consumerGroup": "cg", "clientId": "c@1", "msgId": "ID",
                                                   "brokerName": "b"},
    rh.GetConsumerStatusRequestHeader: {"topic": "T", "group": "cg", "clientAddr": "c@1"},
    # transactions
    rh.EndTransactionRequestHeader: {
        "producerGroup": "pg", "tranStateTableOffset": "3", "commitLogOffset": "4096", "commitOrRollback": "8",
        "fromTransactionCheck": "true", "msgId": "ID", "transactionId": "TX"},
    rh.CheckTransactionStateRequestHeader: {"tranStateTableOffset": "3", "commitLogOffset": "4096", "msgId": "U",
                                            "transactionId": "U", "offsetMsgId": "O"},
    # ACL
    rh.CreateAccessConfigRequestHeader: {
        "accessKey": "RocketMQ", "secretKey": "12345678", "whiteRemoteAddress": "192.168.0.*",
        "defaultTopicPerm": "DENY", "defaultGroupPerm": "SUB", "topicPerms": "a=PUB,b=SUB", "groupPerms": "g=SUB",
        "admin": "false"},
    rh.DeleteAccessConfigRequestHeader: {"accessKey": "RocketMQ"},
    rh.UpdateGlobalWhiteAddrsConfigRequestHeader: {"globalWhiteAddrs": "10.10.103.*", "aclFileFullPath": "/x.yml"},
    rh.QueryCorrectionOffsetHeader: {"topic": "T", "compareGroup": "a", "filterGroups": "b,c"},
    # name server
    nh.RegisterBrokerRequestHeader: {
        "brokerName": "b", "brokerAddr": "1.2.3.4:10911", "clusterName": "c", "haServerAddr": "1.2.3.4:10912",
        "brokerId": "0", "compressed": "false", "bodyCrc32": "-12345"},
    nh.UnRegisterBrokerRequestHeader: {"brokerName": "b", "brokerAddr": "1.2.3.4:10911", "clusterName": "c",
                                       "brokerId": "1"},
    nh.QueryDataVersionRequestHeader: {"brokerAddr": "1.2.3.4:10911"},
    nh.GetRouteInfoRequestHeader: {"topic": "T", "acceptStandardJsonOnly": "true"},
    nh.GetTopicsByClusterRequestHeader: {"cluster": "c"},
    nh.DeleteTopicFromNamesrvRequestHeader: {"topic": "T", "clusterName": "c"},
    nh.BrokerNameRequestHeader: {"brokerName": "b"},
    nh.PutKVConfigRequestHeader: {"namespace": "ns", "key": "k", "value": "v"},
    nh.KVConfigRequestHeader: {"namespace": "ns", "key": "k"},
    nh.GetKVListByNamespaceRequestHeader: {"namespace": "ns"},
}

# Which fields a request must carry (the error names the Java field), per declaration.
REQUIRED: dict[type[RequestHeader], set[str]] = {
    rh.SendMessageRequestHeader: {"producerGroup", "topic", "queueId", "sysFlag", "bornTimestamp", "flag"},
    rh.PullMessageRequestHeader: {"consumerGroup", "topic", "queueId", "queueOffset", "maxMsgNums", "sysFlag"},
    rh.ConsumerSendMsgBackRequestHeader: {"offset", "group", "delayLevel"},
    rh.ReplyMessageRequestHeader: {"producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId",
                                   "sysFlag", "bornTimestamp", "flag", "bornHost", "storeHost", "storeTimestamp"},
    rh.UnregisterClientRequestHeader: {"clientID"},
    rh.GetConsumerListByGroupRequestHeader: {"consumerGroup"},
    rh.QueryConsumerOffsetRequestHeader: {"consumerGroup", "topic", "queueId"},
    rh.UpdateConsumerOffsetRequestHeader: {"consumerGroup", "topic", "queueId", "commitOffset"},
    rh.GetMaxOffsetRequestHeader: {"topic", "queueId"},
    rh.GetMinOffsetRequestHeader: {"topic", "queueId"},
    rh.SearchOffsetRequestHeader: {"topic", "queueId", "timestamp"},
    rh.GetEarliestMsgStoretimeRequestHeader: {"topic", "queueId"},
    rh.ResetOffsetRequestHeader: {"topic", "group", "timestamp"},
    rh.CreateTopicRequestHeader: {"topic", "readQueueNums", "writeQueueNums"},
    rh.TopicRequestHeader: {"topic"},
    rh.GetConsumeStatsRequestHeader: {"consumerGroup"},
    rh.DeleteSubscriptionGroupRequestHeader: {"groupName"},
    rh.GetConsumerConnectionListRequestHeader: {"consumerGroup"},
    rh.GetProducerConnectionListRequestHeader: {"producerGroup"},
    rh.ViewMessageRequestHeader: {"offset"},
    rh.QueryMessageRequestHeader: {"topic", "key", "maxNum", "beginTimestamp", "endTimestamp"},
    rh.QueryConsumeTimeSpanRequestHeader: {"topic", "group"},
    rh.CloneGroupOffsetRequestHeader: {"srcGroup", "destGroup"},
    rh.ViewBrokerStatsDataRequestHeader: {"statsName", "statsKey"},
    rh.GetConsumeStatsInBrokerHeader: set(),
    rh.QueryConsumeQueueRequestHeader: {"topic", "queueId", "index", "count"},
    rh.ResumeCheckHalfMessageRequestHeader: set(),
    rh.GetConsumerRunningInfoRequestHeader: {"consumerGroup", "clientId"},
    rh.ConsumeMessageDirectlyResultRequestHeader: {"consumerGroup", "clientId", "msgId"},
    rh.GetConsumerStatusRequestHeader: {"topic", "group"},
    rh.EndTransactionRequestHeader: {"producerGroup", "tranStateTableOffset", "commitLogOffset", "commitOrRollback"},
    rh.CheckTransactionStateRequestHeader: {"tranStateTableOffset", "commitLogOffset"},
    rh.CreateAccessConfigRequestHeader: set(),
    rh.DeleteAccessConfigRequestHeader: set(),
    rh.UpdateGlobalWhiteAddrsConfigRequestHeader: set(),
    rh.QueryCorrectionOffsetHeader: {"topic"},
    nh.RegisterBrokerRequestHeader: {"brokerName", "brokerAddr", "clusterName", "haServerAddr", "brokerId"},
    nh.UnRegisterBrokerRequestHeader: {"brokerName", "brokerAddr", "clusterName", "brokerId"},
    nh.QueryDataVersionRequestHeader: {"brokerAddr"},
    nh.GetRouteInfoRequestHeader: {"topic"},
    nh.GetTopicsByClusterRequestHeader: {"cluster"},
    nh.DeleteTopicFromNamesrvRequestHeader: {"topic"},
    nh.BrokerNameRequestHeader: {"brokerName"},
    nh.PutKVConfigRequestHeader: {"namespace", "key", "value"},
    nh.KVConfigRequestHeader: {"namespace", "key"},
    nh.GetKVListByNamespaceRequestHeader: {"namespace"},
}

DECLARED = sorted(set(rh.BY_CODE.values()) | set(nh.BY_CODE.values()), key=lambda c: c.__name__)
PY_TYPES = {"str": str, "int32": int, "int64": int, "bool": bool}


def test_every_declaration_has_a_golden_header_and_its_required_set() -> None:
    assert set(GOLDEN) == set(DECLARED) == set(REQUIRED)


@pytest.mark.parametrize("cls", DECLARED, ids=lambda c: c.__name__)
def test_golden_decodes_typed_and_encodes_back_identically(cls: type[RequestHeader]) -> None:
    golden = GOLDEN[cls]
    assert {f.name for f in cls.FIELDS} == set(golden), "golden sets every declared field"
    header = cls.decode(golden)
    for f in cls.FIELDS:
        assert type(getattr(header, f.attr)) is PY_TYPES[f.kind], f.name
    assert header.encode() == golden
    assert cls.decode(RemotingCommand(0, ext_fields=dict(golden))) == header
    assert cls(**{f.attr: getattr(header, f.attr) for f in cls.FIELDS}) == header      # frozen value object
    with pytest.raises(AttributeError):
        header.__setattr__(cls.FIELDS[0].attr, None)


@pytest.mark.parametrize("cls", DECLARED, ids=lambda c: c.__name__)
def test_required_fields_missing_give_the_protocol_error(cls: type[RequestHeader]) -> None:
    assert {f.name for f in cls.FIELDS if f.required} == REQUIRED[cls]
    for name in REQUIRED[cls]:
        ext = {k: v for k, v in GOLDEN[cls].items() if k != name}
        with pytest.raises(HeaderFieldError, match=f"the custom field <{name}> is null") as info:
            cls.decode(ext)
        assert info.value.hint == ResponseCode.SYSTEM_ERROR
    optional = {f.name: f for f in cls.FIELDS if not f.required}
    only_required = cls.decode({k: v for k, v in GOLDEN[cls].items() if k in REQUIRED[cls]})
    for f in optional.values():
        assert getattr(only_required, f.attr) == f.default


@pytest.mark.parametrize("cls", DECLARED, ids=lambda c: c.__name__)
def test_bad_numbers_and_booleans_are_refused_but_peek_is_lenient(cls: type[RequestHeader]) -> None:
    for f in cls.FIELDS:
        if f.kind == "str":
            continue
        bad = {**GOLDEN[cls], f.name: "x1" if f.kind != "int32" else "2147483648"}
        with pytest.raises(HeaderFieldError, match=f"<{f.name}>"):
            cls.decode(bad)
        peeked = cls.peek(bad)
        assert getattr(peeked, f.attr) is None
        others = [g for g in cls.FIELDS if g.attr != f.attr]
        assert all(getattr(peeked, g.attr) == getattr(cls.decode(GOLDEN[cls]), g.attr) for g in others)
    assert all(getattr(cls.peek({}), f.attr) is None for f in cls.FIELDS)


def test_quirks_kept_from_the_string_helper() -> None:
    # C++ 1.2.x sends booleans as 0/1; a C++ UNREGISTER_CLIENT sends "" for the unused group
    h = rh.QueryConsumerOffsetRequestHeader.decode({"consumerGroup": "g", "topic": "t", "queueId": "0",
                                                    "setZeroIfNotFound": "0"})
    assert h.set_zero_if_not_found is False
    u = rh.UnregisterClientRequestHeader.decode({"clientID": "c", "producerGroup": "", "consumerGroup": "g"})
    assert (u.producer_group, u.consumer_group) == (None, "g")
    assert u.encode() == {"clientID": "c", "consumerGroup": "g"}
    # defaults rokka always applied
    t = rh.CreateTopicRequestHeader.decode({"topic": "t", "readQueueNums": "1", "writeQueueNums": "2"})
    assert (t.perm, t.topic_filter_type, t.order, t.default_topic) == (6, "SINGLE_TAG", False, None)
    assert rh.ResumeCheckHalfMessageRequestHeader.decode({}).msg_id == ""


def test_send_v2_one_letter_names_decode_and_encode() -> None:
    v1 = GOLDEN[rh.SendMessageRequestHeader]
    h = rh.SendMessageRequestHeader.decode(v1)
    v2 = h.encode_v2()
    assert v2 == {"a": "pg", "b": "T", "c": "TBW102", "d": "4", "e": "3", "f": "0", "g": "1700000000000", "h": "0",
                  "i": "TAGS\x01a\x02", "j": "0", "k": "false", "m": "true", "l": "16", "n": "b"}
    assert rh.SendMessageRequestHeader.decode_send(v2) == h
    assert rh.SendMessageRequestHeader.decode_send(RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=v2)) == h
    assert rh.SendMessageRequestHeader.peek_send({"b": "X"}).topic == "X"
    with pytest.raises(HeaderFieldError, match="<topic>"):
        rh.SendMessageRequestHeader.decode_send({k: v for k, v in v2.items() if k != "b"})


def _decoded(fn, *args):  # noqa: ANN001, ANN201
    try:
        return fn(*args)
    except HeaderFieldError as exc:
        return str(exc)


_SEND_V1 = GOLDEN[rh.SendMessageRequestHeader]
_SEND_V2 = rh.SendMessageRequestHeader.decode(_SEND_V1).encode_v2()


@given(st.lists(st.sampled_from(sorted(_SEND_V2)), unique=True),
       st.lists(st.sampled_from(sorted(_SEND_V1)), unique=True, max_size=3),
       st.dictionaries(st.sampled_from(sorted(_SEND_V2)), st.sampled_from(["", "x", "-1", "true", "99999999999"]),
                       max_size=2))
def test_send_v2_read_in_place_is_the_renamed_decode(dropped: list[str], v1_names: list[str],
                                                     junk: dict[str, str]) -> None:
    """decode_send reads a V2 header under its one-letter names without renaming it; whatever the header
    (fields dropped, junk values, V1 names mixed in, both spellings of a field), the outcome, error message
    included, is that of renaming it first."""
    ext = {k: v for k, v in _SEND_V2.items() if k not in dropped} | junk
    ext |= {name: _SEND_V1[name] for name in v1_names}
    send = rh.SendMessageRequestHeader
    assert _decoded(send.decode_send, ext) == _decoded(send.decode, normalize_send_header(ext))


@pytest.mark.parametrize("cls", DECLARED, ids=lambda c: c.__name__)
@settings(max_examples=40)
@given(data=st.data())
def test_compiled_decode_is_the_loop(cls: type[RequestHeader], data: st.DataObject) -> None:
    """Each declaration's ``decode`` is generated straight-line code; it gives exactly what the base class's
    loop gives (value or error message), whatever fields are dropped or junk."""
    golden = GOLDEN[cls]
    dropped = data.draw(st.lists(st.sampled_from(sorted(golden)), unique=True))
    junk = data.draw(st.dictionaries(st.sampled_from(sorted(golden)),
                                     st.sampled_from(["", "x", "-1", "0", "TRUE", "2147483648", "٣", " 7"]),
                                     max_size=3))
    ext = {k: v for k, v in golden.items() if k not in dropped} | junk
    assert cls.decode.__func__ is not RequestHeader.decode.__func__
    assert _decoded(cls.decode, ext) == _decoded(RequestHeader.decode.__func__, cls, ext)


def test_send_v2_errors_name_the_java_field() -> None:
    with pytest.raises(HeaderFieldError, match="<queueId> is not a number"):
        rh.SendMessageRequestHeader.decode_send({**_SEND_V2, "e": "x"})
    with pytest.raises(HeaderFieldError, match="<producerGroup> is null"):
        rh.SendMessageRequestHeader.decode_send({k: v for k, v in _SEND_V2.items() if k != "a"})


def test_namesrv_response_headers_encode_as_the_dicts_they_replace() -> None:
    assert nh.RegisterBrokerResponseHeader(ha_server_addr="h:1", master_addr=None).encode() == {"haServerAddr": "h:1"}
    assert nh.RegisterBrokerResponseHeader().encode() == {}
    assert nh.QueryDataVersionResponseHeader(changed=False).encode() == {"changed": "false"}
    assert nh.WipeWritePermOfBrokerResponseHeader(wipe_topic_count=3).encode() == {"wipeTopicCount": "3"}
    assert nh.AddWritePermOfBrokerResponseHeader(add_topic_count=0).encode() == {"addTopicCount": "0"}


def test_controller_headers_encode_as_before_and_refuse_a_missing_field() -> None:
    from rokka.core.namesrv.controller import Heartbeat, ReplicaInfo
    from rokka.gateway.controller.codec import decode_heartbeat, decode_info, encode_heartbeat, encode_info

    ext = encode_heartbeat(Heartbeat("C", "bs", "1.2.3.4:10911", "", 1, 5, 0))
    assert ext == {"clusterName": "C", "brokerName": "bs", "brokerAddr": "1.2.3.4:10911", "haServerAddr": "",
                   "brokerId": "1", "maxOffset": "5", "epoch": "0", "epochStartOffset": "-1",
                   "heartbeatTimeoutMills": "3000"}
    with pytest.raises(HeaderFieldError, match="<maxOffset> is null"):
        decode_heartbeat({k: v for k, v in ext.items() if k != "maxOffset"})
    minimal = {k: ext[k] for k in ("clusterName", "brokerName", "brokerAddr", "brokerId", "maxOffset")}
    assert decode_heartbeat(minimal) == Heartbeat("C", "bs", "1.2.3.4:10911", "", 1, 5, 0)
    unknown = encode_info(ReplicaInfo(None, None, 0, -1, ()))
    assert unknown == {"masterEpoch": "0", "brokerId": "-1", "epochs": "", "syncStateSet": ""}
    assert encode_info(ReplicaInfo("a:1", "a:2", 2, 0, ((2, 7),)))["masterBrokerId"] == "0"
    assert decode_info({**unknown, "masterAddress": "", "masterHaAddress": ""}) == ReplicaInfo(None, None, 0, -1, ())


def test_command_carries_the_encoded_header() -> None:
    cmd = nh.KVConfigRequestHeader(namespace="ns", key="k").command(RequestCode.GET_KV_CONFIG, b"x")
    assert (cmd.code, cmd.ext_fields, cmd.body) == (RequestCode.GET_KV_CONFIG, {"namespace": "ns", "key": "k"}, b"x")


def test_by_code_names_a_declaration_for_every_code_it_lists() -> None:
    assert all(isinstance(code, int) for code in [*rh.BY_CODE, *nh.BY_CODE])
    assert not set(rh.BY_CODE) & set(nh.BY_CODE)
    assert rh.BY_CODE[RequestCode.SEND_MESSAGE_V2] is rh.SendMessageRequestHeader


texts = st.one_of(st.text(max_size=25), st.integers(-(1 << 70), 1 << 70).map(str),
                  st.text(alphabet="0123456789²٣ -+_", max_size=21))


def _outcome(fn, *args):  # noqa: ANN001, ANN201
    try:
        return fn(*args)
    except HeaderFieldError:
        return "error"


@given(texts, texts)
def test_typed_numbers_parse_as_the_string_helper(raw32: str, raw64: str) -> None:
    ext = {"topic": "t", "queueId": raw32, "timestamp": raw64}
    typed = _outcome(lambda: (lambda h: (h.queue_id, h.timestamp))(rh.SearchOffsetRequestHeader.decode(ext)))
    old = Header(ext)
    q, t = _outcome(old.int, "queueId"), _outcome(old.long, "timestamp")
    assert typed == ("error" if "error" in (q, t) else (q, t))
    assert q == _outcome(parse_int, raw32, "queueId", INT32_MIN, INT32_MAX)


CONVERTED = ["gateway/rocketmq/handlers/client.py", "gateway/rocketmq/handlers/reset.py",
             "gateway/rocketmq/handlers/admin.py", "gateway/rocketmq/handlers/admin_stats.py",
             "gateway/rocketmq/handlers/admin_consumer.py", "gateway/rocketmq/handlers/admin_acl.py",
             "gateway/rocketmq/handlers/txn.py", "gateway/rocketmq/handlers/reply.py", "gateway/rocketmq/acl.py",
             "net/remoting/client/admin.py", "net/remoting/client/consumer.py", "net/remoting/client/producer.py",
             "net/remoting/client/tools.py", "net/remoting/client/namesrv.py", "gateway/rocketmq/handlers/send.py",
             "gateway/rocketmq/handlers/pull.py", "gateway/namesrv/handlers.py", "gateway/controller/codec.py",
             "gateway/controller/service.py", "gateway/kafka/cluster.py", "gateway/kafka/cluster_topics.py",
             "pipeline/rmq.py"]


@pytest.mark.parametrize("path", CONVERTED)
def test_converted_modules_use_no_untyped_lookups(path: str) -> None:
    """The handlers, the client and the ACL read and write request headers through the declarations."""
    root = pathlib.Path(__file__).resolve().parents[3]      # the repository
    tree = ast.parse((root / path).read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert not names & {"Header", "to_ext", "get_str", "get_int", "get_long", "get_bool", "normalize_send_header"}


def test_pick_is_peek_of_the_named_fields() -> None:
    golden = GOLDEN[rh.PullMessageRequestHeader]
    assert rh.PullMessageRequestHeader.pick(golden, "topic", "consumer_group", "queue_offset") == (
        "T", "cg", 9000000000)
    assert rh.PullMessageRequestHeader.pick({**golden, "queueOffset": "x"}, "queue_offset") == (None,)
    assert rh.SendMessageRequestHeader.pick_send({"b": "X", "e": "1"}, "topic", "queue_id") == ("X", 1)
    with pytest.raises(KeyError):
        rh.PullMessageRequestHeader.pick(golden, "queueOffset")        # attribute names, not wire names


@pytest.mark.parametrize("code", sorted(rh.BY_CODE), ids=lambda c: RequestCode(c).name)
def test_acl_resources_read_the_declared_fields(code: int) -> None:
    """acl.resources() names the topic and group a request carries (golden header), with either send spelling."""
    from rokka.gateway.rocketmq.acl import resources

    cls = rh.BY_CODE[code]
    ext = dict(GOLDEN[cls])
    got = resources(RemotingCommand(code, ext_fields=ext), topic_at=lambda offset: f"at{offset}")
    topic, group = ext.get("topic"), ext.get("consumerGroup") or ext.get("group")
    expected: dict[str, int] = {}
    if code in (RequestCode.CONSUMER_SEND_MSG_BACK, RequestCode.VIEW_MESSAGE_BY_ID):
        expected[f"at{ext['offset']}"] = 4
    if cls is rh.SendMessageRequestHeader:
        expected[topic] = 2
        assert resources(RemotingCommand(code, ext_fields=rh.SendMessageRequestHeader.decode(ext).encode_v2())) == {
            topic: 2}
    elif code in (RequestCode.GET_CONSUME_STATS, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, RequestCode.PULL_MESSAGE,
                  RequestCode.LITE_PULL_MESSAGE, RequestCode.UPDATE_CONSUMER_OFFSET,
                  RequestCode.QUERY_CONSUMER_OFFSET):
        expected.update({topic: 4, f"%RETRY%{group}": 4})
    elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
        expected[f"%RETRY%{group}"] = 4
    elif code in (RequestCode.QUERY_MESSAGE, RequestCode.GET_TOPIC_CONFIG):
        expected[topic] = 4
    elif code in (RequestCode.UNREGISTER_CLIENT, RequestCode.GET_CONSUMER_LIST_BY_GROUP):
        expected[f"%RETRY%{ext['consumerGroup']}"] = 4
    assert got == expected


RESPONSES = [c for c in vars(resp_h).values()
             if isinstance(c, type) and issubclass(c, resp_h.ResponseHeader) and c is not resp_h.ResponseHeader]


@pytest.mark.parametrize("cls", DECLARED, ids=lambda c: c.__name__)
@settings(max_examples=20)
@given(data=st.data())
def test_compiled_encode_is_the_loop(cls: type[RequestHeader], data: st.DataObject) -> None:
    """Each declaration's ``encode`` is generated straight-line code too; it gives exactly the base loop's
    dict, whichever optional fields are None."""
    header = cls.decode(GOLDEN[cls])
    optional = [f.attr for f in cls.FIELDS if not f.required]
    blank = data.draw(st.lists(st.sampled_from(optional), unique=True)) if optional else []
    header = dataclasses.replace(header, **dict.fromkeys(blank))
    assert cls.encode is not RequestHeader.encode
    assert header.encode() == RequestHeader.encode(header)


@pytest.mark.parametrize("cls", DECLARED + RESPONSES, ids=lambda c: c.__name__)
@settings(max_examples=20)
@given(data=st.data())
def test_compiled_encode_values_is_encode_of_an_instance(cls: type[RequestHeader], data: st.DataObject) -> None:
    """``encode_values(**fields)`` (no instance built: the send path's answer) gives ``cls(**fields).encode()``
    whichever optional fields are left out, None or set, and refuses what the constructor refuses."""
    full = cls.decode(GOLDEN[cls]) if cls in GOLDEN else None
    values = {f.attr: getattr(full, f.attr) if full is not None else data.draw(_value_of(f.kind)) for f in cls.FIELDS}
    optional = [f.attr for f in cls.FIELDS if not f.required]
    for attr in data.draw(st.lists(st.sampled_from(optional), unique=True)) if optional else []:
        if data.draw(st.booleans()):
            values[attr] = None
        else:
            del values[attr]
    assert cls.encode_values is not RequestHeader.encode_values
    assert cls.encode_values(**values) == cls(**values).encode()
    required = [f.attr for f in cls.FIELDS if f.required]
    if required:
        missing = {k: v for k, v in values.items() if k != required[0]}
        with pytest.raises(TypeError):
            cls(**missing)
        with pytest.raises(TypeError):
            cls.encode_values(**missing)


def _value_of(kind: str) -> st.SearchStrategy[object]:
    return {"str": st.text(max_size=8), "int32": st.integers(-(1 << 31), (1 << 31) - 1),
            "int64": st.integers(-(1 << 63), (1 << 63) - 1), "bool": st.booleans()}.get(kind, st.text(max_size=8))


def test_response_headers_encode_as_the_dicts_they_replace_and_decode_back() -> None:
    send = resp_h.SendMessageResponseHeader(msg_id="7F00000100002A9F0000000000000000", queue_id=1, queue_offset=5,
                                            msg_region="DefaultRegion", trace_on=True)
    assert send.encode() == {"msgId": "7F00000100002A9F0000000000000000", "queueId": "1", "queueOffset": "5",
                             "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}
    pull = resp_h.PullMessageResponseHeader(suggest_which_broker_id=0, next_begin_offset=3, min_offset=0,
                                            max_offset=9)
    assert pull.encode() == {"suggestWhichBrokerId": "0", "nextBeginOffset": "3", "minOffset": "0", "maxOffset": "9"}
    assert resp_h.QueryConsumerOffsetResponseHeader(offset=4).encode() == {"offset": "4"}
    assert resp_h.GetEarliestMsgStoretimeResponseHeader(timestamp=12).encode() == {"timestamp": "12"}
    for header in (send, pull, resp_h.QueryConsumerOffsetResponseHeader(offset=4, kafka_metadata="m",
                                                                         kafka_leader_epoch=2)):
        assert type(header).decode(header.encode()) == header
        assert header.encode() == RequestHeader.encode(header)
    with pytest.raises(HeaderFieldError, match="<offset> is null"):
        resp_h.GetMaxOffsetResponseHeader.decode({})
    assert {c.__name__ for c in RESPONSES} >= {"SendMessageResponseHeader", "PullMessageResponseHeader"}
