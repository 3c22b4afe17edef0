"""bench/small_files.py waits, before its runs, for the inodes that its last run's deleted outputs
freed (:func:`settle`, :func:`empty_trash`): ext4 without a journal makes each file created
step over those freed in the last 300 s, and the runs measured that."""

import sys
import time

from helpers import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import small_files  # noqa: E402  (bench/small_files.py)


def _emptied(base, docs, monkeypatch):
    (base / "trash" / "out-files-0").mkdir(parents=True)
    (base / "trash" / "out-files-0" / "a.txt").write_text("kept")
    small_files.empty_trash(base, docs)
    assert not (base / "trash").exists()
    slept = []
    monkeypatch.setattr(small_files.time, "sleep", slept.append)
    return small_files.settle(base), slept


def test_a_run_after_a_large_one_waits_until_its_freed_inodes_settled(tmp_path, monkeypatch):
    waited, slept = _emptied(tmp_path, small_files.SETTLE_FROM_DOCS, monkeypatch)
    assert small_files.FREED_SETTLE_S - 30 < waited <= small_files.FREED_SETTLE_S
    assert len(slept) == 1 and abs(slept[0] - waited) < 0.1


def test_a_run_after_a_small_one_does_not_wait(tmp_path, monkeypatch):
    assert _emptied(tmp_path, small_files.SETTLE_FROM_DOCS - 1, monkeypatch) == (0.0, [])


def test_a_run_long_after_does_not_wait(tmp_path, monkeypatch):
    (tmp_path / small_files.EMPTIED).write_text(str(time.time() - small_files.FREED_SETTLE_S - 1))
    monkeypatch.setattr(small_files.time, "sleep", lambda s: (_ for _ in ()).throw(AssertionError(s)))
    assert small_files.settle(tmp_path) == 0.0
    assert small_files.settle(tmp_path / "never-ran") == 0.0
