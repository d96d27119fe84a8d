"""The Java RocketMQ client driver (interop/java/rocketmq) from pytest and the matrix.

Theory of operation
-------------------
``interop/java/install.sh`` builds ``interop/java/rocketmq/target/<line>/rmq-java.jar`` (+ ``lib/``)
for each client line: ``v4`` = rocketmq-client 4.9.8, ``v5`` = rocketmq-client 5.3.1 (remoting).
``lib/`` also holds rocketmq-acl and rocketmq-tools, so mqadmin runs from it (``mqadmin_argv``).

A JVM start costs a second or more on this machine, so one ``run_scenarios`` call runs many
scenarios concurrently in one JVM; each prints one ``{"event": "result", "scenario": ...}`` line.
The JVMs get a private ``user.home`` (the Java client writes ``~/logs/rocketmqlogs`` and broadcast
offsets under it; Java ignores $HOME), C1-only JIT and the serial GC (start-up over peak speed),
and ``rocketmq.client.rebalance.waitInterval=2000`` (the client's periodic rebalance, 20 s by
default, is what retries an orderly queue whose lock was still held by the member giving it up).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import harness

JAVA_DIR = harness.INTEROP / "java" / "rocketmq"
LINES = {"4.9.8": "v4", "5.3.1": "v5"}
ROCKETMQ_HOME = JAVA_DIR / "home"   # conf/logback_tools.xml for mqadmin


def jar(line: str) -> Path:
    return JAVA_DIR / "target" / line / "rmq-java.jar"


def missing(line: str) -> str | None:
    """Why the driver of ``line`` cannot run here (None: it can)."""
    if shutil.which("java") is None:
        return "java is not installed (OpenJDK 17 expected; interop/java/install.sh needs it)"
    if not jar(line).exists():
        return f"{jar(line)} is not built (run interop/java/install.sh)"
    return None


def jvm_flags(home: Path) -> list[str]:
    return [f"-Duser.home={home}", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto",
            "-Drocketmq.client.rebalance.waitInterval=2000"]


def driver_argv(line: str, home: Path, *args: str) -> list[str]:
    return ["java", *jvm_flags(home), "-jar", str(jar(line)), *args]


def run_scenarios(line: str, scenarios: list[str], *, namesrv: str, workdir: Path, prefix: str = "J",
                  extra: dict[str, str] | None = None, timeout_s: int = 120) -> dict[str, dict[str, Any]]:
    """Run ``scenarios`` in one JVM; ``{scenario: result}`` (a result may carry ``error``)."""
    args = [",".join(scenarios), "--namesrv", namesrv, "--prefix", prefix, "--timeout-s", str(timeout_s)]
    for k, v in (extra or {}).items():
        args += [f"--{k}", v]
    name = f"rmq-java-{line}"
    events = harness.run_json(driver_argv(line, workdir / "home", *args), name=name, workdir=workdir,
                              timeout=timeout_s + 30)
    results = {e["scenario"]: e for e in events if e.get("event") == "result"}
    for res in results.values():
        if "error" in res:      # the client's own account (a failed write names no cause in the exception)
            res["error"] = f"{res['error']}\n--- Java client log (WARN/ERROR) ---\n{client_log(workdir / 'home')}"
    return results


def client_log(home: Path, lines: int = 40) -> str:
    """The last WARN/ERROR and exception lines of the Java client's logs under ``home/logs/rocketmqlogs``."""
    found: list[str] = []
    for log in sorted((home / "logs" / "rocketmqlogs").glob("*.log")):
        found += [ln for ln in log.read_text(errors="replace").splitlines()
                  if " WARN " in ln or " ERROR " in ln or (ln[:1] not in ("2", "\t") and "Exception" in ln)]
    return "\n".join(found[-lines:]) or "(nothing logged)"


def mqadmin_argv(line: str, home: Path, *args: str) -> list[str]:
    lib = JAVA_DIR / "target" / line / "lib"
    return ["java", *jvm_flags(home), "-cp", f"{lib}/*", "org.apache.rocketmq.tools.command.MQAdminStartup",
            *args]


def mqadmin_env(home: Path) -> dict[str, str]:
    """The environment of an mqadmin run with ``home`` as its HOME.  The client's log directory
    (``~/logs/rocketmqlogs``) is made here, once: JVMs started side by side with the same HOME each
    create it on first log with ``File.mkdirs``, which fails when another process makes a part of the
    path at the same moment (a FileNotFoundException for rocketmq_client.log in the tool's output)."""
    (home / "logs" / "rocketmqlogs").mkdir(parents=True, exist_ok=True)
    return dict(os.environ, ROCKETMQ_HOME=str(ROCKETMQ_HOME), HOME=str(home))
