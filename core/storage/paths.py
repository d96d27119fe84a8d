"""Containment: every path the store builds from a name stays inside the directory meant for it.

Theory of operation
-------------------
The store turns topic names into directories (``consumequeue/<topic>/<queueId>``).  The gateways
validate names first (``rokka.core.names``); this module is the store's own defence, whatever
reached it: ``child(base, *parts)`` accepts each part only as one ordinary path component (not
empty, not "." or "..", no "/", "\\" or NUL byte) and then checks that the result, with symlinks
resolved, is still below ``base`` resolved (so a ``consumequeue`` that is itself a symlink to
another disk keeps working, while a topic directory that is a symlink leading out is refused).
A refusal raises ``UnsafePathError``; callers log it and do nothing on disk.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

_FORBIDDEN = ("/", "\\", "\x00")


class UnsafePathError(ValueError):
    """A name that would make the store touch a path outside its directory."""


def component_problem(part: str) -> str | None:
    """None when ``part`` is one ordinary path component, else why not."""
    if not isinstance(part, str) or not part:
        return "empty path component"
    if part in (".", ".."):
        return f"path component {part!r} is reserved"
    if any(c in part for c in _FORBIDDEN) or (os.altsep and os.altsep in part):
        return f"path component {part!r} contains a separator or NUL"
    return None


def is_safe_component(part: str) -> bool:
    return _safe_name(part) if type(part) is str else component_problem(part) is None


@functools.lru_cache(maxsize=4096)     # asked for the topic of every stored RocketMQ send
def _safe_name(part: str) -> bool:
    return component_problem(part) is None


def child(base: Path, *parts: str) -> Path:
    """``base / parts...``, refused (``UnsafePathError``) unless it stays inside ``base``."""
    for part in parts:
        if (why := component_problem(part)) is not None:
            raise UnsafePathError(f"{why} (under {base})")
    path = base.joinpath(*parts)
    root, resolved = base.resolve(), path.resolve()
    if resolved == root or not resolved.is_relative_to(root):
        raise UnsafePathError(f"{path} resolves outside {base}")
    return path
