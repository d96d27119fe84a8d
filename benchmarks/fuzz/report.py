"""The end of a harness run, shared by ``python -m benchmarks.fuzz`` and ``python -m benchmarks.soak``:
the checks line, the ``--json`` file (the result's fields plus ``failed``) and the exit status."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any


def finish(res: Any, failed: list[str], json_path: str | None) -> int:
    """Prints ``checks: all passed`` or the failed checks, writes ``json_path`` when given; 1 if any failed."""
    print("checks: " + ("all passed" if not failed else "FAILED\n  " + "\n  ".join(failed)))
    if json_path:
        with open(json_path, "w") as fh:
            json.dump(asdict(res) | {"failed": failed}, fh, indent=1, default=str)
    return 1 if failed else 0
