"""Kafka commit metadata and leader epochs in the shared offset table (core/offsets.py)."""

from __future__ import annotations

import json
from pathlib import Path

from rokka.core.offsets import EXTRAS_KEY, ConsumerOffsetManager


def test_metadata_round_trips_and_survives_a_reload(tmp_path: Path) -> None:
    om = ConsumerOffsetManager(tmp_path)
    om.commit("g", "t", 0, 5, metadata="ckpt-5 ünï", leader_epoch=3, durable=True)
    om.commit("g", "t", 1, 7, metadata="", leader_epoch=-1, durable=True)
    assert om.commit_metadata("g", "t", 0) == ("ckpt-5 ünï", 3)
    assert om.commit_metadata("g", "t", 1) == ("", -1)
    assert om.commit_metadata("g", "t", 2) == ("", -1)
    again = ConsumerOffsetManager(tmp_path)
    assert again.query("g", "t", 0) == 5 and again.commit_metadata("g", "t", 0) == ("ckpt-5 ünï", 3)


def test_file_stays_rocketmq_readable(tmp_path: Path) -> None:
    om = ConsumerOffsetManager(tmp_path)
    om.commit("g", "t", 0, 5, durable=True)
    data = json.loads((tmp_path / "consumerOffset.json").read_text())
    assert data == {"offsetTable": {"t@g": {"0": 5}}}          # no extras: RocketMQ's exact layout
    om.commit("g", "t", 0, 6, metadata="m", leader_epoch=0, durable=True)
    data = json.loads((tmp_path / "consumerOffset.json").read_text())
    assert data["offsetTable"] == {"t@g": {"0": 6}} and data[EXTRAS_KEY] == {"t@g": {"0": [6, "m", 0]}}


def test_an_old_file_and_a_damaged_side_table_load(tmp_path: Path) -> None:
    path = tmp_path / "consumerOffset.json"
    path.write_text(json.dumps({"offsetTable": {"t@g": {"0": 9}}}))
    assert ConsumerOffsetManager(tmp_path).commit_metadata("g", "t", 0) == ("", -1)
    path.write_text(json.dumps({"offsetTable": {"t@g": {"0": 9}}, EXTRAS_KEY: {"t@g": {"0": "junk"}}}))
    om = ConsumerOffsetManager(tmp_path)
    assert om.query("g", "t", 0) == 9 and om.commit_metadata("g", "t", 0) == ("", -1)


def test_a_rocketmq_commit_of_another_offset_clears_the_metadata(tmp_path: Path) -> None:
    om = ConsumerOffsetManager(tmp_path)
    om.commit("g", "t", 0, 5, metadata="m", leader_epoch=1)
    om.commit("g", "t", 0, 5)                       # RocketMQ commits the same position: still ours
    assert om.commit_metadata("g", "t", 0) == ("m", 1)
    om.commit("g", "t", 0, 8)                       # RocketMQ moves on
    assert om.commit_metadata("g", "t", 0) == ("", -1)
    assert EXTRAS_KEY not in om.serialize()


def test_staged_transactional_metadata_applies_with_its_offset(tmp_path: Path) -> None:
    om = ConsumerOffsetManager(tmp_path)
    om.stage_metadata("g", "t", 0, 10, "txn", 2)
    om.commit("g", "t", 0, 9)                        # another commit does not consume it
    assert om.commit_metadata("g", "t", 0) == ("", -1)
    om.commit("g", "t", 0, 10)                       # the transaction applies its offset
    assert om.commit_metadata("g", "t", 0) == ("txn", 2)


def test_deletes_drop_the_metadata(tmp_path: Path) -> None:
    om = ConsumerOffsetManager(tmp_path)
    om.commit("g", "t", 0, 5, metadata="a")
    om.commit("g", "t", 1, 5, metadata="b")
    om.commit("g", "u", 0, 5, metadata="c")
    om.delete_queues("g", "t", [0])
    assert om.commit_metadata("g", "t", 1) == ("b", -1)
    om.commit("g", "t", 0, 5)
    assert om.commit_metadata("g", "t", 0) == ("", -1)
    om.delete_topic("u")
    om.delete_group("g")
    assert EXTRAS_KEY not in om.serialize()
