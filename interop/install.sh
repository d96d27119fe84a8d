#!/usr/bin/env bash
# Installs every third-party client the interop tests use. Called by `make install-test`.
#
# - Idempotent and fast when everything is already there: each step first checks, then installs
#   only what is missing (a warm run takes about a second).
# - Fails loudly: any client that cannot be installed, or installs but does not load, stops the
#   script with a non-zero exit and a line saying which one.
#
# What it installs:
#   .venv (PyPI):   rocketmq==0.4.4 (wheel bundling the C++ client librocketmq), confluent-kafka,
#                   aiokafka, kafka-python (these three also sit in pyproject's [test] extra),
#                   python-snappy, lz4, zstandard (kafka-python's optional compression codecs)
#   apt (Debian):   kcat (falls back to the older package name kafkacat)
#   npm:            interop/node/ from its committed package-lock.json (kafkajs 2.2.4, ali-ons 3.12.0)
#   Maven (Ivy):    spark-sql-kafka-0-10 for the installed PySpark into interop/spark_kafka/.ivy
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=$ROOT/.venv/bin/python

die() { echo "interop/install.sh: ERROR: $*" >&2; exit 1; }
say() { echo "interop/install.sh: $*"; }

[ -x "$PY" ] || die ".venv is missing; run 'make install' first"

# ---------------------------------------------------------------- Python clients (PyPI)
# python-snappy / lz4 / zstandard: kafka-python's optional codecs (aiokafka uses cramjam).
PY_REQS=("rocketmq==0.4.4" "confluent-kafka>=2.5" "aiokafka>=0.14" "kafka-python>=3.0"
         "python-snappy>=0.7" "lz4>=4.0" "zstandard>=0.22")
missing=$("$PY" - "${PY_REQS[@]}" <<'EOF'
import sys
from importlib.metadata import PackageNotFoundError, version
import re
for req in sys.argv[1:]:
    name, op, want = re.match(r"([A-Za-z0-9_.-]+)(==|>=)(.+)", req).groups()
    try:
        have = version(name)
    except PackageNotFoundError:
        print(req)
        continue
    key = lambda v: tuple(int(x) for x in re.findall(r"\d+", v)[:3])
    if (op == "==" and have != want) or (op == ">=" and key(have) < key(want)):
        print(req)
EOF
)
if [ -n "$missing" ]; then
    say "pip install: $(echo $missing)"
    # shellcheck disable=SC2086
    "$ROOT/.venv/bin/pip" install -q $missing || die "pip install failed for: $missing"
fi

# The rocketmq wheel is a ctypes wrapper around a bundled librocketmq.so: check that the library
# loads (all its system libraries resolve) and that a Producer can be created. HOME points to a
# temp dir because the C++ library writes logs and local offsets under $HOME.
tmp_home=$(mktemp -d)
trap 'rm -rf "$tmp_home"' EXIT
HOME=$tmp_home "$PY" -c '
import rocketmq.client as c
p = c.Producer("ROKKA_INSTALL_CHECK")
del p
import confluent_kafka, aiokafka, kafka, kafka.codec as kc
assert kc.has_snappy() and kc.has_lz4() and kc.has_zstd(), "kafka-python codecs missing"
' || die "a Python client does not load (see the traceback above); for rocketmq check 'ldd .venv/lib/python3.11/site-packages/rocketmq/librocketmq.so'"

# ---------------------------------------------------------------- kcat (Debian package)
APT_UPDATED=0
apt_install() {
    command -v apt-get >/dev/null || die "apt-get not found; install $* by hand"
    if [ "$APT_UPDATED" = 0 ]; then
        say "apt-get update"
        apt-get update -qq || die "apt-get update failed"
        APT_UPDATED=1
    fi
    say "apt-get install $*"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null || return 1
}
if ! command -v kcat >/dev/null && ! command -v kafkacat >/dev/null; then
    apt_install kcat || apt_install kafkacat || die "could not install kcat (Debian packages kcat / kafkacat)"
fi
KCAT=$(command -v kcat || command -v kafkacat) || die "kcat is not on PATH after installing it"
"$KCAT" -V >/dev/null 2>&1 || die "$KCAT does not run"

# ---------------------------------------------------------------- node clients (npm)
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    apt_install nodejs npm || die "node/npm missing and could not be installed"
fi
NODE_DIR=$ROOT/interop/node
STAMP=$NODE_DIR/node_modules/.rokka-lock-sha256
want=$(sha256sum "$NODE_DIR/package-lock.json" | cut -d' ' -f1)
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$want" ]; then
    say "npm ci in interop/node"
    (cd "$NODE_DIR" && npm ci --no-audit --no-fund --loglevel=error) || die "npm ci failed in interop/node"
    echo "$want" >"$STAMP"
fi
(cd "$NODE_DIR" && node -e "require('kafkajs'); require('ali-ons')") \
    || die "kafkajs / ali-ons installed but cannot be required under $(node --version)"
# ---------------------------------------------------------------- Spark's Kafka connector (Maven Central, via Ivy)
# spark-sql-kafka-0-10 and its dependencies into interop/spark_kafka/.ivy (ignored), so that
# interop/test_spark_kafka.py resolves spark.jars.packages offline. Only with the [pipeline] extra (pyspark).
if "$PY" -c "import pyspark" 2>/dev/null; then
    "$PY" "$ROOT/interop/spark_kafka/prefetch.py" || die "could not pre-fetch Spark's Kafka connector (interop/spark_kafka/prefetch.py)"
fi
bash "$ROOT/interop/go/install.sh" || die "the Go clients (franz-go, sarama, rocketmq-client-go) did not build: interop/go/install.sh"
bash "$ROOT/interop/java/install.sh" || die "the Java clients did not build: interop/java/install.sh"
