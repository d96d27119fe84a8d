"""Controller mode pieces: the controller codec and the epoch file."""

from __future__ import annotations

from pathlib import Path

from rokka.core.namesrv.controller import Heartbeat, ReplicaInfo
from rokka.gateway.controller.codec import decode_heartbeat, decode_info, encode_heartbeat, encode_info
from rokka.gateway.ha.controlled import EpochFile


def test_heartbeat_and_replica_info_round_trip_as_ext_fields() -> None:
    hb = Heartbeat("C", "bs", "1.2.3.4:10911", "1.2.3.4:10912", 1, 123456789012, 7, 99, 3000)
    ext = encode_heartbeat(hb)
    assert ext["brokerName"] == "bs" and ext["maxOffset"] == "123456789012" and ext["heartbeatTimeoutMills"] == "3000"
    assert decode_heartbeat(ext) == hb
    info = ReplicaInfo("1.2.3.4:10911", "1.2.3.4:10912", 3, 2, ((1, 0), (3, 500)), ("1.2.3.4:10911", "5.6.7.8:1"))
    ext = encode_info(info)
    assert ext["masterAddress"] == "1.2.3.4:10911" and ext["masterEpoch"] == "3" and ext["epochs"] == "1:0,3:500"
    assert decode_info(ext) == info
    assert decode_info({}) == ReplicaInfo(None, None, 0, -1, ())


def test_epoch_file_keeps_ascending_entries_and_survives_a_reload(tmp_path: Path) -> None:
    f = EpochFile(tmp_path / "epochFileCheckpoint")
    assert (f.last_epoch, f.last_start) == (0, -1)
    f.append(1, 0)
    f.append(3, 800)
    f.append(2, 500)            # a lower epoch replaces what came after it
    again = EpochFile(tmp_path / "epochFileCheckpoint")
    assert again.entries == [(1, 0), (2, 500)]
    assert (tmp_path / "epochFileCheckpoint").read_text() == "1-0\n2-500\n"
