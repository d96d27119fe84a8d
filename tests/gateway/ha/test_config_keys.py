"""broker.conf HA keys (core/config.py): RocketMQ's names, defaults and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from rokka.core.config import BrokerConfig, load_broker_conf
from rokka.gateway.ha.service import params_from


def test_defaults_follow_rocketmq() -> None:
    cfg = BrokerConfig(listen_port=10911)
    assert cfg.broker_role == "" and not cfg.is_slave      # a plain master: no HA port unless asked for
    assert cfg.ha_port == 10912
    p = params_from(cfg)
    assert (p.heartbeat_s, p.housekeeping_s, p.batch_bytes, p.fallbehind_max) == (5.0, 20.0, 32768, 256 << 20)
    assert cfg.slave_read_enable is False and cfg.slave_timeout == 3000


def test_keys_from_broker_conf(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerRole=SLAVE\nbrokerId=1\nhaListenPort=20912\nhaMasterAddress=10.0.0.1:10912\n"
                    "haSendHeartbeatInterval=1000\nhaHousekeepingInterval=3000\nhaTransferBatchSize=65536\n"
                    "haSlaveFallbehindMax=1048576\nslaveReadEnable=true\nslaveTimeout=1500\n")
    cfg, unknown = load_broker_conf(conf)
    assert not unknown
    cfg.validate()
    assert cfg.is_slave and cfg.ha_port == 20912 and cfg.ha_master_address == "10.0.0.1:10912"
    assert cfg.slave_read_enable and params_from(cfg).batch_bytes == 65536 and cfg.slave_timeout == 1500


@pytest.mark.parametrize(("key", "value", "message"), [
    ("broker_role", "MASTER", "brokerRole"),
    ("ha_transfer_batch_size", 0, "haTransferBatchSize"),
    ("ha_slave_fallbehind_max", -1, "haSlaveFallbehindMax"),
])
def test_bad_values_are_named(key: str, value: object, message: str) -> None:
    cfg = BrokerConfig()
    setattr(cfg, key, value)
    with pytest.raises(ValueError, match=message):
        cfg.validate()


def test_a_slave_needs_a_non_zero_broker_id() -> None:
    with pytest.raises(ValueError, match="brokerId"):
        BrokerConfig(broker_role="SLAVE", broker_id=0).validate()
