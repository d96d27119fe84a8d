#!/usr/bin/env bash
# Fetches the real brokers that `make bench` and `make conformance` hold rokka against ("anchors"), from Maven
# Central with Maven, into benchmarks/anchors/target/<anchor>/lib (git-ignored):
#   kafka     Apache Kafka 4.4.0 (org.apache.kafka:kafka_2.13 and its runtime dependencies; KRaft)
#   rocketmq  Apache RocketMQ 4.9.7 name server + broker (rocketmq-namesrv, rocketmq-broker)
# and builds rmq-java-bench (the Java RocketMQ client 4.9.8 as a load generator for bench_anchor_rocketmq).
# Idempotent: a profile is fetched again only when its lib/ is missing or older than pom.xml (a warm run takes
# well under a second). Fails loudly (non-zero exit) when java/mvn are missing or a fetch fails.
# Called by the Makefile target `anchors` (never by `make test`). benchmarks/lib/apache.py starts the brokers.
set -euo pipefail
cd "$(dirname "$0")"

die() { echo "benchmarks/anchors/install.sh: ERROR: $*" >&2; exit 1; }
say() { echo "benchmarks/anchors/install.sh: $*"; }

command -v java >/dev/null || die "java is not installed (OpenJDK 17 expected)"
command -v mvn >/dev/null || die "mvn is not installed (Maven expected)"

# one jar each anchor must hold once fetched
declare -A MARKER=([kafka]=kafka_2.13-4.4.0.jar [rocketmq]=rocketmq-broker-4.9.7.jar)

for anchor in kafka rocketmq; do
    lib=target/$anchor/lib
    stamp=target/$anchor/.fetched
    if [ ! -f "$stamp" ] || [ pom.xml -nt "$stamp" ] || [ ! -f "$lib/${MARKER[$anchor]}" ]; then
        say "mvn package -P $anchor (Maven Central -> benchmarks/anchors/$lib)"
        rm -rf "$lib"
        mkdir -p "target/$anchor"
        log=target/mvn-$anchor.log
        if ! mvn -q -B -Dstyle.color=never package -P "$anchor" >"$log" 2>&1; then
            cat "$log" >&2
            die "fetching the $anchor anchor failed (log: benchmarks/anchors/$log)"
        fi
        [ -f "$lib/${MARKER[$anchor]}" ] || die "$lib/${MARKER[$anchor]} is missing after the fetch"
        touch "$stamp"
    fi
done
# the Java RocketMQ client load generator: rebuilt when a source or its pom is newer than the jar
bench_dir=rmq-java-bench
jar=$bench_dir/target/rmq-bench.jar
if [ ! -f "$jar" ] || [ -n "$(find "$bench_dir/pom.xml" "$bench_dir/src" -newer "$jar" -print -quit)" ]; then
    say "mvn package in benchmarks/anchors/$bench_dir"
    log=target/mvn-rmq-java-bench.log
    if ! (cd "$bench_dir" && mvn -q -B -Dstyle.color=never package) >"$log" 2>&1; then
        cat "$log" >&2
        die "building $bench_dir failed (log: benchmarks/anchors/$log)"
    fi
    touch "$jar"
fi
say "anchors ready: $(ls target/kafka/lib | wc -l) Kafka jars, $(ls target/rocketmq/lib | wc -l) RocketMQ jars"
