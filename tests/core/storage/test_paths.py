"""The store never touches a path outside its directories, whatever topic name reaches it (issue 19.1)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from rokka.core.model import BatchBody
from rokka.core.storage.api import PutStatus
from rokka.core.storage.engine import DiskStore
from rokka.core.storage.layout import NATIVE
from rokka.core.storage.paths import UnsafePathError, child, is_safe_component
from storage_helpers import msg, small_config

HOSTILE = ["..", ".", "../commitlog", "a/../../b", "/tmp", "", "x\x00y", "..\\x"]


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.parametrize("name", HOSTILE)
def test_child_refuses_names_that_leave_the_base(tmp_path: Path, name: str) -> None:
    assert not is_safe_component(name)
    with pytest.raises(UnsafePathError):
        child(tmp_path / "consumequeue", name)


def test_child_accepts_ordinary_names_and_a_symlinked_base(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "store").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "store" / "consumequeue")
    base = tmp_path / "store" / "consumequeue"
    for name in ["orders", "kafka.topic.with.dots", "%RETRY%g", "a|b", "...", "x..y"]:
        assert child(base, name, "0") == base / name / "0"


def test_child_refuses_a_symlink_that_leads_out(tmp_path: Path) -> None:
    base = tmp_path / "consumequeue"
    base.mkdir()
    (tmp_path / "victim").mkdir()
    os.symlink(tmp_path / "victim", base / "evil")
    with pytest.raises(UnsafePathError):
        child(base, "evil")


@pytest.fixture
def disk(tmp_path: Path):  # noqa: ANN201
    s = DiskStore(small_config(tmp_path / "store"))
    s.open()
    yield s
    s.close()


def test_delete_topic_with_a_hostile_name_deletes_nothing(disk: DiskStore, tmp_path: Path) -> None:
    assert disk.put_messages([msg(i, topic="T") for i in range(3)]).status is PutStatus.PUT_OK
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("x")
    before = _tree(disk.root)
    for name in ["../commitlog", "..", ".", str(outside), "", "T/..", "../../outside"]:
        disk.delete_topic(name)
    assert _tree(disk.root) == before
    assert (outside / "keep").exists()
    assert disk.get_messages("T", 0, 0, 10).status.name == "FOUND"


def test_delete_topic_still_deletes_a_normal_topic(disk: DiskStore) -> None:
    disk.put_messages([msg(0, topic="gone.topic")])
    assert (disk.root / "consumequeue" / "gone.topic").is_dir()
    disk.delete_topic("gone.topic")
    assert not (disk.root / "consumequeue" / "gone.topic").exists()


@pytest.mark.parametrize("name", ["..", ".", "../x", "a/b"])
def test_put_refuses_a_topic_that_is_not_one_path_component(disk: DiskStore, tmp_path: Path, name: str) -> None:
    before = _tree(tmp_path)
    result = disk.put_messages([msg(0, topic=name)])
    assert result.status is PutStatus.MESSAGE_ILLEGAL
    assert _tree(tmp_path) == before     # nothing written, no directory anywhere
    if NATIVE:
        batch = BatchBody(name, 0, b"", {}, 0, 0, ("127.0.0.1", 1), 0)
        refused = disk.put_batch_body(batch)
        assert refused is not None and refused.status is PutStatus.MESSAGE_ILLEGAL


def test_a_queue_for_an_unsafe_name_stays_inside_the_store(disk: DiskStore, tmp_path: Path) -> None:
    """Records stored before names were checked may carry such a topic: their queue is quarantined."""
    q = disk._new_queue("..", 0)
    assert q.files.directory.resolve().is_relative_to((disk.root / "quarantine").resolve())
    assert not (disk.root / "0").exists() and not (tmp_path / "0").exists()
