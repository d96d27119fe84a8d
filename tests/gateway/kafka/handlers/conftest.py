"""Fixtures shared by the handler tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from rokka.core.broker import Broker
from rokka.core.config import BrokerConfig
from rokka.gateway.kafka.handlers import KafkaEnv


@pytest.fixture
def disk_env(tmp_path: Path) -> Iterator[KafkaEnv]:
    """A KafkaEnv on a Broker with its DiskStore (the production store), closed afterwards."""
    broker = Broker(BrokerConfig(store_path_root_dir=str(tmp_path)))
    try:
        yield KafkaEnv(broker, node_id=0, host="127.0.0.1", port=9092)
    finally:
        broker.close()
