"""How a new Kafka topic is spread over a cluster's brokers (``cluster.spread_counts``): Kafka's
round robin from a start that depends on the topic name only, so every broker computes the same."""

from __future__ import annotations

from rokka.gateway.kafka.cluster_topics import spread_counts


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


async def test_producer_id_ranges_are_disjoint_and_js_safe() -> None:
    from rokka.gateway.kafka.cluster_topics import producer_id_base
    from rokka.gateway.kafka.producers.state import ProducerStateManager

    names = [f"broker-{i}" for i in range(64)] + ["broker-a", "broker-b", "east-1"]
    bases = [producer_id_base(n) for n in names]
    assert len(set(bases)) == len(bases) and min(bases) >= 1 << 31
    assert all(b + (1 << 31) <= 1 << 53 for b in bases)        # exact as a JavaScript number
    assert producer_id_base("broker-0") == 1 << 31
    a = ProducerStateManager(None, id_base=producer_id_base("broker-0"))
    b = ProducerStateManager(None, id_base=producer_id_base("broker-1"))
    single = ProducerStateManager(None)
    assert (await a.init_producer_id(None, 60_000)).producer_id == 1 << 31
    assert (await b.init_producer_id(None, 60_000)).producer_id == 2 << 31
    assert (await single.init_producer_id(None, 60_000)).producer_id == 0   # rokka serve: from 0, as before
