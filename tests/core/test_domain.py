"""Topic, subscription-group, offset and consumer tables: behaviour and persistence."""

from pathlib import Path

import pytest
from rokka.core.filter import ExpressionFilter, SubscriptionParseError, build_subscription
from rokka.core.groups import ClientInfo, ConsumerRegistry, SubscriptionGroupManager
from rokka.core.model import java_string_hash, tags_code
from rokka.core.offsets import ConsumerOffsetManager
from rokka.core.topics import PERM_INHERIT, TopicConfig, TopicManager, validate_topic_name


def _topics(path: Path, auto: bool = True) -> TopicManager:
    return TopicManager(path, cluster="C", broker_name="b", auto_create=auto, default_queue_nums=8,
                        delay_levels=18)


def test_system_topics_and_auto_create(tmp_path: Path) -> None:
    tm = _topics(tmp_path)
    tbw = tm.get("TBW102")
    assert tbw is not None and tbw.perm == 7 and tbw.write_queue_nums == 8
    assert tm.get("SCHEDULE_TOPIC_XXXX").read_queue_nums == 18  # type: ignore[union-attr]
    created = tm.create_from_default("Orders", "TBW102", 4)
    assert created is not None and created.write_queue_nums == 4 and not created.perm & PERM_INHERIT
    assert tm.create_from_default("Other", "NoSuchDefault", 4) is None
    tm2 = _topics(tmp_path)  # reload from config/topics.json
    assert tm2.get("Orders") == created
    assert tm2.data_version.counter >= tm.data_version.counter


def test_auto_create_disabled_has_no_tbw102(tmp_path: Path) -> None:
    tm = _topics(tmp_path, auto=False)
    assert tm.get("TBW102") is None
    assert tm.create_from_default("Orders", "TBW102", 4) is None


def test_topic_name_rules() -> None:
    assert validate_topic_name("Topic_A-1%|") is None
    assert "blank" in (validate_topic_name(" ") or "")
    assert "illegal" in (validate_topic_name("a b") or "")
    assert "illegal" in (validate_topic_name("a.b") or "")
    assert validate_topic_name("a.b", allow_dot=True) is None
    assert "longer" in (validate_topic_name("x" * 128) or "")


def test_topic_json_round_trip() -> None:
    tc = TopicConfig("T", 3, 5, 6, "MULTI_TAG", 1, True)
    assert TopicConfig.from_json(tc.to_json()) == tc


def test_offsets_persist_and_query(tmp_path: Path) -> None:
    om = ConsumerOffsetManager(tmp_path)
    assert om.query("g", "t", 0) is None
    om.commit("g", "t", 0, 12)
    om.commit("g", "t", 1, 7, durable=True)
    om2 = ConsumerOffsetManager(tmp_path)
    assert om2.offsets("g", "t") == {0: 12, 1: 7}
    assert om2.groups() == {"g"} and om2.groups_of_topic("t") == {"g"}
    raw = (tmp_path / "consumerOffset.json").read_text()
    assert '"t@g"' in raw


def test_subscription_groups_auto_create(tmp_path: Path) -> None:
    sg = SubscriptionGroupManager(tmp_path)
    cfg = sg.get("g1")
    assert cfg is not None and cfg.retry_max_times == 16 and cfg.retry_queue_nums == 1
    assert SubscriptionGroupManager(tmp_path).get("g1", create=False) == cfg
    assert SubscriptionGroupManager(tmp_path, auto_create=False).get("nope") is None


def test_consumer_registry_membership() -> None:
    reg = ConsumerRegistry()
    sub = build_subscription("T", "A || B")
    h1, h2 = object(), object()
    kw = dict(consume_type="CONSUME_PASSIVELY", message_model="CLUSTERING",
              consume_from_where="CONSUME_FROM_LAST_OFFSET", subscriptions=[sub])
    assert reg.register("g", ClientInfo("c1", h1), now_ms=0, **kw)
    assert not reg.register("g", ClientInfo("c1", h1), now_ms=1000, **kw)
    assert reg.register("g", ClientInfo("c2", h2), now_ms=1000, **kw)
    assert reg.get("g").client_ids() == ["c1", "c2"]  # type: ignore[union-attr]
    assert reg.drop_handle(h1) == ["g"]
    assert reg.scan_expired(1000 + 120_001) == ["g"]
    assert not reg.is_live("g")


def test_consumer_registry_keeps_the_newest_sub_version() -> None:
    """The Java push consumer bumps subVersion at each rebalance and pulls with it: a heartbeat with
    the same expression and a newer version must update the stored one (else every pull answers
    SUBSCRIPTION_NOT_LATEST), and an older member's heartbeat must not lower it."""
    reg = ConsumerRegistry()
    h1, h2 = object(), object()
    kw = dict(consume_type="CONSUME_PASSIVELY", message_model="CLUSTERING",
              consume_from_where="CONSUME_FROM_LAST_OFFSET")
    reg.register("g", ClientInfo("c1", h1), now_ms=0, subscriptions=[build_subscription("T", "*", None, 100)], **kw)
    assert not reg.register("g", ClientInfo("c1", h1), now_ms=1,
                            subscriptions=[build_subscription("T", "*", None, 200)], **kw)
    assert reg.get("g").subscriptions["T"].sub_version == 200  # type: ignore[union-attr]
    reg.register("g", ClientInfo("c2", h2), now_ms=2, subscriptions=[build_subscription("T", "*", None, 150)], **kw)
    assert reg.get("g").subscriptions["T"].sub_version == 200  # type: ignore[union-attr]


def test_tag_subscription_and_filter() -> None:
    sub = build_subscription("T", "TagA || TagB")
    assert sub.tags_set == ["TagA", "TagB"] and sub.code_set == [2598919, 2598920]
    f = ExpressionFilter(sub)
    assert f.match_tags_code(tags_code("TagA")) and not f.match_tags_code(tags_code("TagC"))
    assert not f.match_tags_code(0)  # a message without tags does not match a tag filter
    assert ExpressionFilter(build_subscription("T", "*")).match_tags_code(0)
    with pytest.raises(SubscriptionParseError):
        build_subscription("T", "||")


@pytest.mark.parametrize("tag,code", [("TagA", 2598919), ("*", 42), ("tag1", 3552215), ("中文", 646394),
                                      ("TagOrderCreated", -2082041772), ("payment_success", -374754614)])
def test_java_hash_vectors(tag: str, code: int) -> None:
    assert java_string_hash(tag) == code
