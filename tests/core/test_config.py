"""broker.conf parsing: RocketMQ key names, typed values, unknown keys, precedence."""

from pathlib import Path

import click
import pytest
from rokka.core.config import BrokerConfig, camel_to_snake, load_broker_conf
from rokka.core.storage.api import FlushDiskType
from rokka.gateway.cli.main import build_config

CONF = """\
# a RocketMQ broker.conf
brokerClusterName = ClusterX
brokerName=broker-b
brokerId=0
listenPort=20911
namesrvAddr=127.0.0.1:9876;127.0.0.1:9877
storePathRootDir=/tmp/rokka-x
mapedFileSizeCommitLog=1048576
flushDiskType=SYNC_FLUSH
fileReservedTime=48
deleteWhen=04;16
diskMaxUsedSpaceRatio=88
messageDelayLevel=1s 2s 3m
autoCreateTopicEnable=false
defaultTopicQueueNums=4
maxMessageSize=65536
brokerIP1=10.0.0.7
someFutureKey=whatever
"""


def test_rocketmq_keys_are_read_with_types(tmp_path: Path) -> None:
    path = tmp_path / "broker.conf"
    path.write_text(CONF)
    cfg, unknown = load_broker_conf(path)
    assert cfg.broker_cluster_name == "ClusterX"
    assert cfg.broker_name == "broker-b"
    assert cfg.listen_port == 20911 and cfg.vip_port == 20909
    assert cfg.namesrv_addrs == ["127.0.0.1:9876", "127.0.0.1:9877"]
    assert cfg.mapped_file_size_commit_log == 1048576
    assert cfg.flush_disk_type == "SYNC_FLUSH"
    assert cfg.file_reserved_time == 48 and cfg.delete_when == "04;16"
    assert cfg.disk_max_used_space_ratio == 88
    assert cfg.delay_levels_ms == [1000, 2000, 180000]
    assert cfg.auto_create_topic_enable is False
    assert cfg.default_topic_queue_nums == 4
    assert cfg.max_message_size == 65536
    assert cfg.advertised_host == "10.0.0.7"
    assert unknown == ["someFutureKey"]
    sc = cfg.store_config()
    assert sc.flush_disk_type is FlushDiskType.SYNC_FLUSH
    assert sc.commitlog_file_size == 1048576
    assert sc.store_host == ("10.0.0.7", 20911)


def test_bad_value_names_the_key(tmp_path: Path) -> None:
    path = tmp_path / "broker.conf"
    path.write_text("listenPort=abc\n")
    with pytest.raises(ValueError, match="listenPort"):
        load_broker_conf(path)


def test_flags_win_over_file(tmp_path: Path) -> None:
    path = tmp_path / "broker.conf"
    path.write_text(CONF)
    cfg = build_config(path, data_dir=tmp_path / "d", broker_port=0, broker_name="broker-z")
    assert cfg.store_path_root_dir == str(tmp_path / "d")
    assert cfg.listen_port == 0
    assert cfg.broker_name == "broker-z"
    assert cfg.broker_cluster_name == "ClusterX"  # not overridden


def test_invalid_settings_are_usage_errors(tmp_path: Path) -> None:
    path = tmp_path / "broker.conf"
    path.write_text("messageDelayLevel=1x\n")
    with pytest.raises(click.UsageError, match="messageDelayLevel"):
        build_config(path)
    path.write_text("flushDiskType=SOMETIMES\n")
    with pytest.raises(click.UsageError):
        build_config(path)


def test_camel_to_snake() -> None:
    assert camel_to_snake("brokerClusterName") == "broker_cluster_name"
    assert camel_to_snake("mapedFileSizeCommitLog") == "mapped_file_size_commit_log"
    assert camel_to_snake("brokerIP1") == "broker_ip1"
    assert BrokerConfig().vip_port == 10909
