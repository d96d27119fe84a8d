"""How a new Kafka topic is spread over a cluster's brokers (``cluster.spread_counts``): Kafka's
round robin from a start that depends on the topic name only, so every broker computes the same."""

from __future__ import annotations

from rokka.gateway.kafka.cluster import spread_counts


def test_round_robin_counts_and_stable_start() -> None:
    brokers = ["broker-2", "broker-0", "broker-1"]
    six = spread_counts("orders", 6, brokers)
    assert six == {"broker-0": 2, "broker-1": 2, "broker-2": 2}
    four = spread_counts("orders", 4, brokers)
    assert sorted(four.values()) == [1, 1, 2] and set(four) == set(brokers)
    assert spread_counts("orders", 4, list(reversed(brokers))) == four      # order of the input: no matter
    ones = {name: next(iter(spread_counts(name, 1, brokers))) for name in (f"t{i}" for i in range(60))}
    assert set(ones.values()) == set(brokers)       # one-partition topics land on every broker
    assert spread_counts("x", 5, ["only"]) == {"only": 5}
    assert spread_counts("x", 0, brokers) == {} and spread_counts("x", 3, []) == {}
