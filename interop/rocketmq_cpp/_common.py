"""Shared bits of the RocketMQ C++ client scripts (run as subprocesses by ``interop/harness.py``).

Protocol with the harness: the first stdin line is a JSON object of parameters; the script prints one
JSON object per stdout line (``{"event": ...}``); for long-running roles, EOF on stdin means "shut down
cleanly".  Scripts end with ``os._exit`` after an explicit shutdown, because the wheel's ``__del__``
methods shut the C++ objects down a second time at interpreter exit.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import Any

from rocketmq.ffi import dll  # the wheel's ctypes handle on librocketmq

_out_lock = threading.Lock()


def read_params() -> dict[str, Any]:
    line = sys.stdin.readline()
    if not line:
        emit("error", error="no parameters on stdin")
        finish(2)
    return json.loads(line)


def emit(event: str, **fields: Any) -> None:
    with _out_lock:
        sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
        sys.stdout.flush()


def finish(code: int = 0) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def log_dir() -> bytes:
    """Where the C++ library should write its logs: a dir inside the (per-test) HOME."""
    d = os.path.join(os.environ.get("HOME", "/tmp"), "logs", "rocketmq-cpp")
    os.makedirs(d, exist_ok=True)
    return d.encode()


def set_log(kind: str, handle: Any) -> None:
    """Point the C++ logger at ``log_dir()`` (the wheel does not wrap SetXxxLogPath)."""
    setter = {"producer": dll.SetProducerLogPath, "push": dll.SetPushConsumerLogPath,
              "pull": dll.SetPullConsumerLogPath}[kind]
    setter(handle, log_dir())


def to_str(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, bytes):
        return v.decode("utf-8", errors="replace")
    return str(v)


def describe(msg: Any, props: list[str]) -> dict[str, Any]:
    """A received ``RecvMessage`` as plain JSON."""
    return {
        "topic": to_str(msg.topic), "tags": to_str(msg.tags), "keys": to_str(msg.keys),
        "body": to_str(msg.body), "msg_id": to_str(msg.id), "queue_id": msg.queue_id,
        "queue_offset": msg.queue_offset, "reconsume_times": msg.reconsume_times,
        "props": {p: to_str(msg.get_property(p)) for p in props},
    }


def build_message(spec: dict[str, Any]) -> Any:
    from rocketmq.client import Message

    m = Message(spec["topic"])
    m.set_body(spec["body"])
    if spec.get("tags"):
        m.set_tags(spec["tags"])
    if spec.get("keys"):
        m.set_keys(spec["keys"])
    for k, v in (spec.get("props") or {}).items():
        m.set_property(k, v)
    return m
