#!/usr/bin/env bash
# Builds the Java interop clients with Maven (called by interop/install.sh, so by `make install-test`).
#
# - Each block builds one Maven project under interop/java/ and is idempotent: it rebuilds only when a
#   source file or the pom is newer than the jars (a warm run takes well under a second).
# - Fails loudly: a missing java/mvn or a failed build stops the script with a non-zero exit.
# - Dependencies come from Maven Central into ~/.m2 (cached; later builds work offline).
set -euo pipefail
cd "$(dirname "$0")"
JAVA_ROOT=$PWD

die() { echo "interop/java/install.sh: ERROR: $*" >&2; exit 1; }
say() { echo "interop/java/install.sh: $*"; }

command -v java >/dev/null || die "java is not installed (OpenJDK 17 expected)"
command -v mvn >/dev/null || die "mvn is not installed (Maven expected)"

# is_stale DIR JAR...: true when a jar is missing or older than DIR's pom.xml or any file under DIR/src
is_stale() {
    local dir=$1; shift
    local j
    for j in "$@"; do
        [ -f "$j" ] || return 0
        [ -n "$(find "$dir/pom.xml" "$dir/src" -newer "$j" -print -quit)" ] && return 0
    done
    return 1
}

# ---------------------------------------------------------------- BEGIN kafka (Java Kafka client)
# interop/java/kafka: the driver against kafka-clients 4.x (target/k4) and 3.x (target/k3), and the
# Kafka CLI tools' main classes of 4.x and 3.x (target/tools4, target/tools3). Used by
# interop/test_kafka_java.py and the interop matrix (interop/matrix/java_role.py).
KAFKA_DIR=$JAVA_ROOT/kafka
for profile in k4 k3 tools4 tools3; do
    jar=$KAFKA_DIR/target/$profile/kafka-interop.jar
    if is_stale "$KAFKA_DIR" "$jar"; then
        say "mvn package -P $profile in interop/java/kafka"
        log=$KAFKA_DIR/target/mvn-$profile.log
        mkdir -p "$KAFKA_DIR/target"
        if ! (cd "$KAFKA_DIR" && mvn -q -B -Dstyle.color=never package -P "$profile") >"$log" 2>&1; then
            cat "$log" >&2
            die "maven build of interop/java/kafka ($profile) failed (log: $log)"
        fi
        touch "$jar"
    fi
    java -jar "$jar" version >/dev/null 2>&1 || die "$jar does not run"
done
# ---------------------------------------------------------------- END kafka

# ---------------------------------------------------------------- BEGIN rocketmq (Java RocketMQ client)
# interop/java/rocketmq: the scenario driver against rocketmq-client 4.9.x (target/v4) and 5.x
# (target/v5); each target/<line>/lib also holds rocketmq-acl and rocketmq-tools (mqadmin).
# Used by interop/test_rocketmq_java.py, interop/test_mqadmin_java.py and the matrix.
RMQ_DIR=$JAVA_ROOT/rocketmq
for line in v4 v5; do
    jar=$RMQ_DIR/target/$line/rmq-java.jar
    if is_stale "$RMQ_DIR" "$jar"; then
        say "mvn package -P $line in interop/java/rocketmq"
        (cd "$RMQ_DIR" && mvn -q -B -Dstyle.color=never package -P "$line") || die "maven build of interop/java/rocketmq ($line) failed"
        touch "$jar"
    fi
    java -cp "$jar:$RMQ_DIR/target/$line/lib/*" org.apache.rocketmq.tools.command.MQAdminStartup >/dev/null 2>&1 \
        || die "$jar: mqadmin (rocketmq-tools) does not start"
done
# ---------------------------------------------------------------- END rocketmq

# ---------------------------------------------------------------- BEGIN streams (Kafka Streams application)
# interop/java/streams: a Kafka Streams 4.x word count (exactly_once_v2, a state store, a repartition
# topic) -> target/streams-interop.jar. Used by interop/test_kafka_streams.py.
STREAMS_DIR=$JAVA_ROOT/streams
jar=$STREAMS_DIR/target/streams-interop.jar
if is_stale "$STREAMS_DIR" "$jar"; then
    say "mvn package in interop/java/streams"
    mkdir -p "$STREAMS_DIR/target"
    log=$STREAMS_DIR/target/mvn.log
    if ! (cd "$STREAMS_DIR" && mvn -q -B -Dstyle.color=never package) >"$log" 2>&1; then
        cat "$log" >&2
        die "maven build of interop/java/streams failed (log: $log)"
    fi
    touch "$jar"
fi
java -jar "$jar" version >/dev/null 2>&1 || die "$jar does not run"
# ---------------------------------------------------------------- END streams
