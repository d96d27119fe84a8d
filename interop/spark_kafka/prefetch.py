"""Pre-fetches Spark's Kafka connector (spark-sql-kafka-0-10) into interop/spark_kafka/.ivy.

Theory of operation
-------------------
Called by ``interop/install.sh`` (so by ``make install-test``).  Spark resolves ``spark.jars.packages``
with Ivy when a session starts; this starts one throw-away ``local[1]`` session per candidate version
with the same Ivy settings and cache as the test driver (``driver.py``), which downloads the connector
and its dependencies from Maven Central into ``.ivy`` (ignored by git).  The version that resolved is
written to ``.ivy/VERSION``; the test driver reads it, and Ivy then resolves from the cache, offline.

Candidates: the installed PySpark's own version first, then ``FALLBACK`` -- the connector reaches
Maven Central some time after PySpark reaches PyPI, and the 4.2 connector works with PySpark 4.3
(interop/test_spark_kafka.py is the check).  Idempotent: a recorded version whose jar is in
``.ivy/jars`` is kept without starting Spark.  Exit status 1 (with the last Ivy error) when no
candidate resolves.
"""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from driver import IVY_DIR, VERSION_FILE  # noqa: E402

FALLBACK = "4.2.0"
ARTIFACT = "spark-sql-kafka-0-10_2.13"
PROBE = """
import sys
sys.path.insert(0, {here!r})
from driver import session
session("rokka-spark-kafka-prefetch", {pkg!r}).stop()
"""


def cached(v: str) -> bool:
    return (IVY_DIR / "jars" / f"org.apache.spark_{ARTIFACT}-{v}.jar").exists()


def main() -> int:
    if VERSION_FILE.exists() and cached(VERSION_FILE.read_text().strip()):
        return 0
    candidates = list(dict.fromkeys([version("pyspark"), FALLBACK]))
    IVY_DIR.mkdir(exist_ok=True)
    err = ""
    for v in candidates:
        pkg = f"org.apache.spark:{ARTIFACT}:{v}"
        print(f"interop/spark_kafka/prefetch.py: resolving {pkg}", flush=True)
        code = PROBE.format(here=str(Path(__file__).resolve().parent), pkg=pkg)
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
        if run.returncode == 0 and cached(v):
            VERSION_FILE.write_text(v + "\n")
            return 0
        err = "\n".join(line for line in (run.stderr or "").splitlines()
                        if "download failed" in line or "not found" in line or "ERROR" in line)[-3000:]
    print(f"interop/spark_kafka/prefetch.py: none of {candidates} resolved:\n{err}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
