"""RouteInfoManager as pure data, with an injected clock."""

from __future__ import annotations

import pytest
from rokka.core.namesrv.routes import RouteInfoManager


def tc(read: int = 4, write: int = 4, perm: int = 6) -> dict:
    return {"readQueueNums": read, "writeQueueNums": write, "perm": perm, "topicFilterType": "SINGLE_TAG"}


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def test_two_brokers_route_and_expiry() -> None:
    clock = Clock()
    m = RouteInfoManager(clock)
    assert m.register_broker("C1", "a", "10.0.0.1:10911", 0, "10.0.0.1:10912", {"T": tc(), "TA": tc()},
                             {"counter": 1}, "ch-a") == (None, None)
    m.register_broker("C2", "b", "10.0.0.2:10911", 0, "10.0.0.2:10912", {"T": tc(8, 8)}, {"counter": 1}, "ch-b")
    route = m.get_route("T")
    assert route is not None
    assert [b["brokerName"] for b in route["brokerDatas"]] == ["a", "b"]
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": "10.0.0.1:10911"}
    assert [q["writeQueueNums"] for q in route["queueDatas"]] == [4, 8]
    assert "orderTopicConf" not in route
    assert m.topics_by_cluster("C2") == ["T"] and m.all_topics() == ["T", "TA"]
    info = m.cluster_info()
    assert info["clusterAddrTable"] == {"C1": ["a"], "C2": ["b"]}
    # Slave registration learns its master.
    res = m.register_broker("C1", "a", "10.0.0.3:10911", 1, "", {"T": tc()}, {"counter": 1}, "ch-s")
    assert res == ("10.0.0.1:10911", "10.0.0.1:10912")
    # b keeps registering, a goes silent.
    clock.now += 100_000
    m.register_broker("C2", "b", "10.0.0.2:10911", 0, "", {"T": tc(8, 8)}, {"counter": 1}, "ch-b")
    clock.now += 21_000
    assert sorted(m.scan_expired()) == ["10.0.0.1:10911", "10.0.0.3:10911"]
    assert m.get_route("TA") is None
    route = m.get_route("T")
    assert route is not None and [b["brokerName"] for b in route["brokerDatas"]] == ["b"]
    assert m.cluster_info()["clusterAddrTable"] == {"C2": ["b"]}


def test_channel_close_and_unregister() -> None:
    m = RouteInfoManager(Clock())
    m.register_broker("C", "a", "h:1", 0, "", {"T": tc()}, {"counter": 1}, "ch")
    m.register_broker("C", "b", "h:2", 0, "", {"T": tc()}, {"counter": 1}, "ch2")
    assert m.on_channel_closed("ch") == ["h:1"]
    m.unregister_broker("C", "b", "h:2", 0)
    assert m.get_route("T") is None and m.brokers == {} and m.clusters == {}


def test_new_data_version_replaces_topic_set() -> None:
    m = RouteInfoManager(Clock())
    m.register_broker("C", "a", "h:1", 0, "", {"T1": tc(), "T2": tc()}, {"counter": 1}, "ch")
    m.register_broker("C", "a", "h:1", 0, "", {"T1": tc(2, 2)}, {"counter": 1}, "ch")  # same version: ignored
    assert m.all_topics() == ["T1", "T2"]
    m.register_broker("C", "a", "h:1", 0, "", {"T1": tc(2, 2)}, {"counter": 2}, "ch")
    assert m.all_topics() == ["T1"]
    route = m.get_route("T1")
    assert route is not None and route["queueDatas"][0]["readQueueNums"] == 2


def test_delete_topic_wipe_perm_kv() -> None:
    m = RouteInfoManager(Clock())
    m.register_broker("C1", "a", "h:1", 0, "", {"T": tc(), "U": tc()}, {"counter": 1}, "ch")
    m.register_broker("C2", "b", "h:2", 0, "", {"T": tc()}, {"counter": 1}, "ch2")
    m.delete_topic("T", "C1")
    route = m.get_route("T")
    assert route is not None and [q["brokerName"] for q in route["queueDatas"]] == ["b"]
    m.delete_topic("T")
    assert m.get_route("T") is None
    assert m.wipe_write_perm("a") == 1
    route = m.get_route("U")
    assert route is not None and route["queueDatas"][0]["perm"] == 4
    m.put_kv("NS", "k", "v")
    assert m.get_kv("NS", "k") == "v" and m.kv_list("NS") == {"k": "v"}
    m.delete_kv("NS", "k")
    assert m.get_kv("NS", "k") is None and m.kv_list("NS") is None


def test_the_kv_table_is_bounded_in_entries_and_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Anyone may PUT_KV_CONFIG, and every change rewrites kvConfig.json: past the bounds a put is refused,
    while replacing a value with one no longer, and deleting, still work."""
    from rokka.core.namesrv import routes as routes_mod

    monkeypatch.setattr(routes_mod, "KV_MAX_ENTRIES", 3)
    monkeypatch.setattr(routes_mod, "KV_MAX_BYTES", 40)
    r = RouteInfoManager()
    r.put_kv("ns", "a", "1234")                     # 7 bytes
    r.put_kv("ns", "b", "12345678")                 # 11
    with pytest.raises(routes_mod.KVTableFull, match="full"):
        r.put_kv("ns", "c", "x" * 30)               # past 40 bytes
    r.put_kv("ns", "c", "1")                        # 4: 22 bytes, 3 entries
    with pytest.raises(routes_mod.KVTableFull):
        r.put_kv("ns2", "d", "")                    # a 4th entry
    r.put_kv("ns", "b", "123")                      # shorter: always fine
    r.delete_kv("ns", "a")
    r.put_kv("ns2", "d", "v")
    assert r.kv == {"ns": {"b": "123", "c": "1"}, "ns2": {"d": "v"}}
    fresh = RouteInfoManager()
    fresh.load_kv({"ns": {"b": "123", "c": "1"}, "ns2": {"d": "v"}})
    with pytest.raises(routes_mod.KVTableFull):
        fresh.put_kv("ns", "e", "")                 # the loaded table counts
