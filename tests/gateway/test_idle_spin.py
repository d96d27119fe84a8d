"""The idle spin (``rokka.net.spin``): after a RocketMQ response the event loop polls instead of sleeping,
for a bounded time, only on a CPU nothing else wants, and less when requests come too far apart.

Servers on 127.0.0.1 port 0, peers are raw sockets; what is checked is the loop's own behaviour, seen by a
trio instrument (an ``epoll_wait`` with timeout 0 is a poll, one with a timeout > 0 may sleep) and the
spinner's counters -- never how long something took.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import pytest
import structlog
import trio
from rokka.core.config import BrokerConfig, apply_settings
from rokka.gateway.kafka import KafkaServer, Route
from rokka.gateway.rocketmq.server import RemotingServer
from rokka.gateway.runtime import budget_from
from rokka.net import spin as spin_module
from rokka.net.budget import Budget, Limits
from rokka.net.spin import MISS_LIMIT, PROBE_EVERY, IdleSpin

from tests.gateway.test_budgets import _describe, echo, kafka_describe, rocketmq_echo

WINDOW_S = 0.010
#: The spinner of tests that are not about CPU contention never gives up its CPU (a loaded test machine
#: would make it, and the counts below would depend on the load).
PATIENT = 10**15


class Polls(trio.abc.Instrument):
    """Counts the scheduler's waits for I/O that cannot sleep (timeout 0)."""

    def __init__(self) -> None:
        self.polls = 0

    def before_io_wait(self, timeout: float) -> None:
        if timeout == 0:
            self.polls += 1


async def polls_during(instrument: Polls, seconds: float) -> int:
    before = instrument.polls
    await trio.sleep(seconds)
    return instrument.polls - before


@asynccontextmanager
async def rocketmq_serving(budget: Budget) -> AsyncIterator[tuple[str, int]]:
    """An echo RemotingServer on ``budget`` with ``budget.run`` (the spinner) running: its address."""
    rmq = RemotingServer({10: echo}, name="broker", budget=budget)
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(budget.run)
            yield (await nursery.start(rmq.serve, "127.0.0.1", [0]))[0]
            nursery.cancel_scope.cancel()


@contextmanager
def counting_polls() -> Iterator[Polls]:
    polls = Polls()
    trio.lowlevel.add_instrument(polls)
    try:
        yield polls
    finally:
        trio.lowlevel.remove_instrument(polls)


async def test_after_a_response_the_loop_polls_for_the_window_then_may_sleep_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the spinner's yields are not what this counts: on a loaded machine each would give a whole time slice away
    monkeypatch.setattr(spin_module, "_yield_cpu", lambda: None)
    budget = Budget(Limits(idle_spin_s=WINDOW_S))
    budget.spin = IdleSpin(WINDOW_S, crowded_ns=PATIENT)
    with counting_polls() as polls:
        async with rocketmq_serving(budget) as addr:
            assert await polls_during(polls, 0.2) < 20         # idle: nothing spins
            assert budget.spin.spins == 0
            assert await rocketmq_echo(addr) == b"ping"
            spun = polls.polls
            await trio.sleep(0.2)
            assert budget.spin.spins == 1 and polls.polls - spun > 20   # it polled after the answer
            assert await polls_during(polls, 0.2) < 20         # and stopped once the window passed


async def test_kafka_responses_do_not_spin() -> None:
    """The Kafka listener leaves the spin alone (net/spin.py: no gain measured there, CPU per record spent)."""
    budget = Budget(Limits(idle_spin_s=WINDOW_S))
    budget.spin = IdleSpin(WINDOW_S, crowded_ns=PATIENT)
    kafka = KafkaServer({60: Route(_describe, 0, 1, quick=True)}, budget=budget)
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(budget.run)
            addr = await nursery.start(kafka.serve, "127.0.0.1", 0)
            assert await kafka_describe(addr) == "c"
            await trio.sleep(0.1)
            assert budget.spin.spins == 0
            nursery.cancel_scope.cancel()


async def test_off_spins_never() -> None:
    budget = Budget(Limits(idle_spin_s=0.0))
    with counting_polls() as polls:
        async with rocketmq_serving(budget) as addr:
            assert await rocketmq_echo(addr) == b"ping"
            assert await polls_during(polls, 0.2) < 20
            assert budget.spin.spins == 0


async def test_requests_too_far_apart_are_spun_for_only_now_and_then() -> None:
    spin = IdleSpin(0.010, crowded_ns=PATIENT)
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(spin.run)
            await trio.sleep(0.01)
            for _ in range(MISS_LIMIT):            # each window passes with no request: a miss
                spin.kick()
                await trio.sleep(0.1)
            assert spin.spins == MISS_LIMIT
            for _ in range(PROBE_EVERY):           # then only every PROBE_EVERY-th kick spins
                spin.kick()
                await trio.lowlevel.checkpoint()
            await trio.sleep(0.05)
            assert spin.spins == MISS_LIMIT
            spin.kick()
            for _ in range(10):                     # requests inside the probe's window: a hit
                await trio.sleep(0.0005)
                spin.kick()
            await trio.sleep(0.1)
            assert spin.spins == MISS_LIMIT + 1
            spin.kick()                             # after a hit every response spins again
            await trio.sleep(0.1)
            assert spin.spins == MISS_LIMIT + 2
            nursery.cancel_scope.cancel()


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or not os.path.exists("/proc/thread-self/schedstat"),
                    reason="needs Linux CPU affinity and schedstat")
def test_a_spin_gives_its_cpu_up_to_other_work() -> None:
    """A busy process pinned to the spinner's CPU: the spin notices it waited for its CPU and stops."""
    spin = IdleSpin(0.010)
    mine = os.sched_getaffinity(0)
    cpu = min(mine)
    burn = "import time\nend = time.time() + 20\nwhile time.time() < end: pass"
    busy = subprocess.Popen([sys.executable, "-c", burn])

    async def kick_until_held() -> None:
        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(spin.run)
                await trio.sleep(0.01)
                for _ in range(20):
                    spin.kick()
                    await trio.sleep(0.03)
                    if spin.held:
                        break
                nursery.cancel_scope.cancel()

    try:
        os.sched_setaffinity(busy.pid, {cpu})
        os.sched_setaffinity(0, {cpu})
        trio.run(kick_until_held)
    finally:
        os.sched_setaffinity(0, mine)
        busy.kill()
        busy.wait(10)
    assert spin.held >= 1 and spin.spins >= 1


async def test_a_failing_spin_turns_itself_off_and_the_listeners_go_on(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> None:
        raise OSError("no yield here")

    monkeypatch.setattr(spin_module, "_yield_cpu", broken)
    budget = Budget(Limits(idle_spin_s=WINDOW_S))
    with structlog.testing.capture_logs() as captured:
        async with rocketmq_serving(budget) as addr:
            assert await rocketmq_echo(addr) == b"ping"
            await trio.sleep(0.1)
            assert budget.spin.window_s == 0.0 and budget.spin.spins == 1
            assert await rocketmq_echo(addr) == b"ping"        # served as before, no spin
            assert budget.spin.spins == 1
    assert [e["log_level"] for e in captured if e["event"] == "net.idle_spin_failed"] == ["error"]


def test_idle_spin_micros_reaches_the_budget_and_is_bounded() -> None:
    cfg = BrokerConfig()
    assert cfg.idle_spin_micros == 200
    assert apply_settings(cfg, {"idleSpinMicros": "350"}) == []
    cfg.validate()
    assert budget_from(cfg).spin.window_s == pytest.approx(350e-6)
    for bad in ("-1", "10001"):
        cfg = BrokerConfig()
        apply_settings(cfg, {"idleSpinMicros": bad})
        with pytest.raises(ValueError, match="idleSpinMicros"):
            cfg.validate()
    with pytest.raises(ValueError, match="idle spin window"):
        IdleSpin(0.5)
