"""One rule set for topic and group names, as RocketMQ and Kafka apply them (issue 19.1)."""

from __future__ import annotations

from pathlib import Path

import pytest
from rokka.core import names
from rokka.core.topics import TopicManager

HOSTILE = ["..", ".", "../commitlog", "/etc", "a/b", "g/../../../../X", "", " ", "a\x00b", "a b", "ä", "x\\y"]


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_names_are_refused_by_every_rule(name: str) -> None:
    assert names.topic_problem(name) is not None
    assert names.topic_problem(name, kafka=True) is not None
    assert names.group_problem(name) is not None
    assert names.consumer_group_problem(name) is not None
    assert names.store_topic_problem(name) is not None


@pytest.mark.parametrize("name", ["TopicA", "Topic_A-1%|", "%RETRY%group", "%DLQ%group", "kafka.topic.v1", "..."])
def test_names_users_already_use_stay_valid(name: str) -> None:
    assert names.topic_problem(name) is None
    assert names.store_topic_problem(name) is None


def test_rocketmq_remarks_and_limits() -> None:
    assert names.topic_problem(" ") == "The specified topic is blank."
    assert "illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$" in (names.topic_problem("a/b") or "")
    assert "reserved" in (names.topic_problem("..") or "")
    assert names.topic_problem("x" * 127) is None
    assert "longer than topic max length 127" in (names.topic_problem("x" * 128) or "")
    assert names.topic_problem("%RETRY%" + "g" * 248) is None       # RocketMQ 5.3: retry / DLQ topics <= 255
    assert names.topic_problem("%RETRY%" + "g" * 249) is not None
    assert "illegal" in (names.topic_problem("a.b", allow_dot=False) or "")
    assert names.group_problem("g" * 255) is None
    assert "group max length" in (names.group_problem("g" * 256) or "")
    assert names.group_problem("CID_orders.v2") is None
    assert names.consumer_group_problem("g" * 249) is not None         # its %RETRY% topic would be too long


def test_kafka_rules() -> None:
    assert names.topic_problem("a.b-c_D9", kafka=True) is None
    assert names.topic_problem("t" * 249, kafka=True) is None
    assert "longer than 249" in (names.topic_problem("t" * 250, kafka=True) or "")
    assert names.topic_problem("..", kafka=True) == 'Topic name cannot be "." or ".."'
    assert "%" in "%RETRY%g" and names.topic_problem("%RETRY%g", kafka=True) is not None
    assert names.store_topic_problem("t" * 200) is None                # a Kafka name: the table accepts it


def _manager(tmp_path: Path) -> TopicManager:
    return TopicManager(tmp_path, cluster="C", broker_name="b", auto_create=True, default_queue_nums=4,
                        delay_levels=18)


@pytest.mark.parametrize("name", ["..", ".", "../commitlog", "/tmp/x", "g/../../X"])
def test_the_topic_table_refuses_new_hostile_names(tmp_path: Path, name: str) -> None:
    topics = _manager(tmp_path)
    with pytest.raises(names.InvalidNameError):
        topics.ensure(name, 1)
    with pytest.raises(names.InvalidNameError):
        topics.create_from_default(name, "TBW102", 4)
    with pytest.raises(names.InvalidNameError):
        topics.ensure_retry("g/../../X")
    assert name not in topics


def test_refused_logs_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert names.refused("rocketmq", "topic", "..", "bad") == "bad"
    out = capsys.readouterr()
    assert (out.out + out.err).count("rocketmq.bad_name") == 1
