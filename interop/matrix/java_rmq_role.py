"""The Java RocketMQ client (rocketmq-client 4.9.8, remoting) as a matrix producer and consumer.

argv: ``java_rmq_role.py <producer|consumer>``: execs the JVM of interop/java/rocketmq
(``rmq-java.jar matrix-<role>``), whose roles speak ``_role``'s JSON-lines protocol.  The producer is
a TransactionMQProducer (plain ``send`` for plain jobs, ``sendMessageInTransaction`` committing or
rolling back for ``txn`` jobs; KEYS, TAGS, user properties and the delay level from the spec).  The
consumer is a clustering DefaultMQPushConsumer subscribed to every job's topic with its tag
expression, from the first offset; it persists its offsets when it shuts down.

Java takes ``user.home`` from the password file, not $HOME: the JVM gets ``-Duser.home=$HOME`` so
the client's logs and local offsets stay in the role's private home.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import rmq_java  # noqa: E402 - interop/rmq_java.py

LINE = "v4"


def missing() -> str | None:
    return rmq_java.missing(LINE)


def main() -> None:
    role = sys.argv[1]
    home = Path(os.environ.get("HOME") or ".")
    argv = rmq_java.driver_argv(LINE, home, f"matrix-{role}")
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main()
