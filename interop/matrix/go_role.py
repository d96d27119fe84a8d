"""The Go clients of the matrix (franz-go, sarama, rocketmq-client-go v2): ``interop/go/bin/rokka-go``.

The roles themselves are Go (``interop/go/cmd/rokka-go/matrix.go``: ``rokka-go matrix-<client>
<producer|consumer>``, same JSON-lines protocol as ``_role``); this module only says how to start them
and whether the binary is built (``interop/go/install.sh``).
"""

from __future__ import annotations

from pathlib import Path

GO_BIN = Path(__file__).resolve().parent.parent / "go" / "bin" / "rokka-go"
GO_CLIENTS = {"franz-go": "franz", "sarama": "sarama", "rocketmq-client-go": "rmq"}


def missing() -> str | None:
    return None if GO_BIN.exists() else f"{GO_BIN} is not built (interop/go/install.sh)"


def argv(client: str, role: str) -> list[str]:
    return [str(GO_BIN), f"matrix-{GO_CLIENTS[client]}", role]
