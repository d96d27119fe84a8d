"""The Java Kafka client (kafka-clients 4.x, interop/java/kafka) as a role of the interop matrix.

The role itself is Java (``rokka.interop.MatrixRole`` in ``target/k4/kafka-interop.jar``, built by
interop/java/install.sh) and speaks the protocol of ``_role.py``; this module only says how to start it
and why it cannot run here.
"""

from __future__ import annotations

import shutil
from pathlib import Path

JAR = Path(__file__).resolve().parents[1] / "java" / "kafka" / "target" / "k4" / "kafka-interop.jar"
JVM_FLAGS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx256m"]


def missing() -> str | None:
    if shutil.which("java") is None:
        return "java is not installed"
    if not JAR.is_file():
        return f"{JAR} is missing (interop/java/install.sh builds it)"
    return None


def argv(role: str) -> list[str]:
    return ["java", *JVM_FLAGS, "-jar", str(JAR), "matrix", role]
