"""Atomic state files under concurrent writers (issue 19, item 5: the shutdown race).

Before: every writer of ``<name>`` used ``<name>.tmp`` and linked ``<name>.bak`` directly, so two
writers (the periodic snapshot on a worker thread and the shutdown snapshot) failed with
"File exists" or "No such file" and the server exited 2.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable
from pathlib import Path

from rokka.core.storage import checkpoint, metafile, packfile
from rokka.core.storage.checkpoint import Checkpoint

WRITERS = 8
ROUNDS = 40


def _hammer(path: str, writer: int, rounds: int) -> None:
    for i in range(rounds):
        packfile.write_msgpack_atomic(Path(path), {"writer": writer, "round": i, "pad": "x" * (writer * 100)})


def _versions() -> set[tuple[int, int]]:
    return {(w, i) for w in range(WRITERS) for i in range(ROUNDS)}


def _check_final(path: Path) -> None:
    for candidate in (path, path.with_name(path.name + ".bak")):
        data = packfile.read_msgpack(candidate)
        assert data is not None
        assert (data["writer"], data["round"]) in _versions()
        assert data["pad"] == "x" * (data["writer"] * 100)
    assert not [p.name for p in path.parent.iterdir() if metafile.is_temp_name(p.name)]


def _in_threads(run: Callable[[int], None]) -> None:
    """``run(w)`` in WRITERS threads at once (w = 0 ..); none of them may raise."""
    errors: list[BaseException] = []

    def guarded(w: int) -> None:
        try:
            run(w)
        except BaseException as exc:   # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(w,)) for w in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors


def test_concurrent_threads_never_fail(tmp_path: Path) -> None:
    path = tmp_path / "config" / "producerState.msgpack"
    _in_threads(lambda w: _hammer(str(path), w, ROUNDS))
    _check_final(path)


def test_concurrent_processes_never_fail(tmp_path: Path) -> None:
    path = tmp_path / "config" / "state.msgpack"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_hammer, args=(str(path), w, ROUNDS // 2)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0] * 4
    data = packfile.read_msgpack(path)
    assert data is not None and data["writer"] in range(4) and data["round"] in range(ROUNDS // 2)
    assert not [p.name for p in path.parent.iterdir() if metafile.is_temp_name(p.name)]


def test_older_ticket_never_replaces_newer(tmp_path: Path) -> None:
    path = tmp_path / "s.msgpack"
    old, new = packfile.take_ticket(), packfile.take_ticket()
    assert packfile.write_msgpack_atomic(path, {"v": "new"}, ticket=new)
    assert not packfile.write_msgpack_atomic(path, {"v": "old"}, ticket=old)   # the slow snapshot lands late
    assert packfile.read_msgpack(path) == {"v": "new"}


def test_concurrent_checkpoint_writers(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint"

    def run(w: int) -> None:
        for i in range(ROUNDS):
            checkpoint.write_checkpoint(path, Checkpoint(w, i, 0, w * 1000 + i, 0))

    _in_threads(run)
    cp = checkpoint.read_checkpoint(path)
    assert cp is not None and cp.physic_offset == cp.physic_msg_timestamp * 1000 + cp.logics_msg_timestamp


def test_stale_temps_removed_at_start_and_ignored_by_readers(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.mkdir()
    metafile.write_json_atomic(config / "topics.json", {"a": 1})
    (config / "topics.json.tmp").write_text("{torn")                  # the old naming
    (config / "topics.json.tmp.k2j3h4").write_text("{torn")           # a crash mid-write
    assert metafile.read_json(config / "topics.json") == {"a": 1}
    assert metafile.remove_stale_temps(config) == 2
    assert sorted(p.name for p in config.iterdir()) == ["topics.json"]
