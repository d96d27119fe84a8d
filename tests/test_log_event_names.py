"""Log events are dotted names (``area.what_happened``, details as key=value fields), as README promises.

Rate-limited lines (``limited(...)``, a channel's ``_note(...)``) count too.

A structlog call in core/gateway/compat/pipeline whose event is a literal must be dotted lower-case;
the few free-text events that clients of the logs match today (interop tests, README, the serve
contract, benchmarks) are listed here and the list may only shrink.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("core", "net", "gateway", "compat", "pipeline")
LEVELS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "msg"}
DOTTED = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)+$")

# (file, event) still free text because something outside the code matches it
KEPT = {
    ("gateway/cli/main.py", "unknown broker.conf key ignored"),       # tests/gateway/cli/test_serve_contract.py
    ("gateway/filewatch.py", "{what} not reloaded; the settings in force stay"),  # interop ACL / TLS / SASL tests
    ("gateway/filewatch.py", "{what} reloaded"),
    ("gateway/kafka/groups/membership.py", "kafka group generation"),  # interop/test_kafka_static_membership.py
    ("gateway/namesrv/handlers.py", "broker registered"),              # benchmarks/lib/apache.py
    ("gateway/rocketmq/acl.py", "acl refused"),                        # README
    ("gateway/rocketmq/server.py", "connection closed"),               # tests and interop
    ("gateway/rocketmq/server.py", "listening"),                       # benchmarks
    ("gateway/runtime.py", "cannot start"),                            # the serve contract (tests, soak driver)
    ("gateway/runtime.py", "ready"),
    ("gateway/runtime.py", "shutting down"),
    ("gateway/runtime.py", "stopped"),
    ("gateway/rocketmq/handlers/admin_stats.py", "{event}_done"),      # ``event`` is a dotted name
    ("core/names.py", "{protocol}.bad_name"),
}


def _event(arg: ast.expr) -> str | None:
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{" + ast.unparse(v.value) + "}"
                       for v in arg.values if isinstance(v, ast.Constant | ast.FormattedValue))
    return None


def _event_arg(node: ast.AST) -> ast.expr | None:
    """The event argument of a log call: ``log.<level>(event, ...)``, the rate-limited
    ``limited(logger, level, event, key, ...)`` and a channel's ``self._note(level, event, ...)``."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr in LEVELS and node.args \
            and "log" in ast.unparse(func.value).lower():
        return node.args[0]
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if name == "limited" and len(node.args) >= 3:
        return node.args[2]
    if name == "_note" and len(node.args) >= 2:
        return node.args[1]
    return None


def _free_text_events() -> set[tuple[str, str]]:
    found = set()
    for layer in LAYERS:
        for path in (ROOT / layer).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                arg = _event_arg(node)
                if arg is None:
                    continue
                event = _event(arg)
                if event is not None and not DOTTED.match(event):
                    found.add((str(path.relative_to(ROOT)), event))
    return found


def test_log_events_are_dotted_names() -> None:
    assert _free_text_events() - KEPT == set()
