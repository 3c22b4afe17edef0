"""The steps a folder of many files takes at once where they took one Python step a file (issue
32): the file names' format by their one ending (:func:`neardup.io.discovery._one_ending`), the
read plan's blocks of whole files (:func:`neardup.stages.workdir._whole_files`), a block's
documents per source (:class:`neardup.stages.read._PerSource`), the stat thread's check of
regular files reached once (:func:`neardup.io.discovery._regular_once`): each the same as the
loop it stands for."""

from __future__ import annotations

import random
import stat
from types import SimpleNamespace

import numpy as np

from neardup.io import discovery
from neardup.io.sources import Sources, detect_format
from neardup.stages import read, workdir


def _each_alone(paths):
    return [detect_format(p.rpartition("/")[2]) for p in paths]


def test_formats_told_at_once_are_those_of_each_name():
    """(mutation: ``first.count(".") == 2`` -> ``>= 1`` in _one_ending -> ``x.b.txt`` is taken as
    ``.txt`` text; the column loop's ``bounded.all()`` -> ``True`` likewise)"""
    cases = [["/a/b.txt", "/a/c.txt"], ["/a/x.b.txt", "/a/c.txt"], ["/a/c.txt", "/a/x.jsonl"],
             ["/a/.txt", "/a/c.txt"], ["a.txt"], ["/a/README", "/b/README"], ["/a/x.jsonl.gz", "/b/y.JSONL.gz"],
             ["/a/x.y.jsonl.gz", "/b/y.jsonl.gz"], ["/a/" + "x" * 40 + ".txt", "/a/b.txt"],
             ["/a/b.txt", "/a/" + "x" * 27 + ".txt"], ["/a/b.txt", "/a/x." + "x" * 26 + ".txt"],
             ["/a/..txt", "/a/b.txt"], ["/a/.b.c", "/a/d.b.c"], ["/a/b.", "/a/c."], ["x.gz", "y.gz"],
             ["/a/c.gz", "/a/x.jsonl.gz"], ["/a/c.gz", "/a/" + "x" * 30 + ".jsonl.gz"]]
    rng = random.Random(5)
    parts = ["a", "b", ".", "/", ".gz", ".jsonl", ".csv"]
    for _ in range(3000):  # names of letters, dots, slashes and endings that change the format, short and long
        cases.append(["".join(rng.choice(parts) for _ in range(rng.randint(1, rng.choice([6, 30]))))
                      for _ in range(rng.randint(1, 4))])
    told_at_once = 0
    for paths in cases:
        assert discovery._formats(paths) == _each_alone(paths), paths
        told_at_once += discovery._one_ending("\0".join(paths), len(paths)) is not None
    assert told_at_once > 100
    assert discovery._one_ending("/a/x.b.txt\0/a/c.txt", 2) is None
    assert discovery._one_ending("/a/b.txt\0/a/c.txt", 2) == ".txt"


def _plan_one_by_one(sizes, block_bytes):
    blocks, acc = [], 0
    for si, size in enumerate(sizes):
        if not blocks or (blocks[-1] and acc + size > block_bytes):
            blocks.append([])
            acc = 0
        blocks[-1].append(si)
        acc += size
    return blocks


def test_blocks_of_whole_files_are_the_loops():
    """(mutation: ``side="right"`` -> ``"left"`` in _whole_files -> a block that fills its bytes
    exactly ends one file early)"""
    rng = random.Random(7)
    for _ in range(2000):
        sizes = [rng.choice([0, 1, 5, 10, 50, 200]) for _ in range(rng.randint(1, 30))]
        sources = [SimpleNamespace(format="text", path=str(i)) for i in range(len(sizes))]
        block_bytes = rng.choice([1, 10, 50, 100])
        assert workdir.plan_reads(sources, block_bytes, sizes, split=10 ** 9) == (
            _plan_one_by_one(sizes, block_bytes), {})
    assert workdir._whole_files([5, 5, 5, 5], 10) == [[0, 1], [2, 3]]


def _batch(source_index=None, sources=None, n=0):
    return SimpleNamespace(source_index=source_index, text=[""] * (n if sources is None else len(sources)),
                           sources=None if sources is None else np.asarray(sources, np.int32))


def test_documents_per_source_counted_at_once_as_one_by_one():
    """(mutation: ``- self.first`` dropped in _PerSource.add -> counts of the wrong sources)"""
    for members in ([4, 5, 6, 7], [4, 6, 7]):  # a run (counted in numpy), and not one (in the dict)
        counted = read._PerSource(members)
        counted.add(_batch(sources=[4, 6, 6, 7]))
        counted.add(_batch(source_index=7, n=3))
        want = {str(si): 0 for si in members}
        want.update({"4": 1, "6": 2, "7": 4})
        got = counted.counts()
        assert got == want and list(got) == [str(si) for si in members]
        assert all(type(v) is int for v in got.values())


def test_regular_once_as_the_one_by_one_check():
    """(mutation: drop the inodes' own test -> a file reached twice read twice)"""
    mode = np.full(4, stat.S_IFREG | 0o644, np.int64)
    size = mtime = np.zeros(4, np.int64)
    dev, ino = np.array([1, 1, 2, 2], np.int64), np.array([10, 11, 10, 12], np.int64)
    assert discovery._regular_once(mode, size, mtime, dev, ino)  # inode 10 twice, on two devices
    dev2 = np.ones(4, np.int64)
    assert not discovery._regular_once(mode, size, mtime, dev2, ino)  # inode 10 twice on one device
    links = mode.copy()
    links[2] = stat.S_IFDIR | 0o755
    assert not discovery._regular_once(links, size, mtime, dev, ino)


def test_file_stats_made_when_first_read():
    out = Sources()
    out.stats_of(["a", "b"], [1, 2], [30, 40])
    assert out._stats_later is not None
    assert out.file_stats == {"a": (1, 30), "b": (2, 40)} and out._stats_later is None


def test_the_programs_sources_moved_out_of_the_collectors_sight(tmp_path, monkeypatch):
    """In the neardup program (``_last_work``), a folder of many files' sources are frozen
    (gc.freeze) once found; a library call's are not. (mutation: ``and _last_work()`` dropped
    in discover -> the library call freezes them too)"""
    import gc

    import pytest

    if gc.get_freeze_count():
        pytest.skip("objects frozen before the test")
    for i in range(3):
        (tmp_path / f"{i}.txt").write_text(f"text {i}")
    monkeypatch.setattr(discovery, "_STAT_BESIDE_FROM", 2)
    try:
        found = discovery.discover([str(tmp_path)])
        assert len(found) == 3 and gc.get_freeze_count() == 0
        monkeypatch.setattr(discovery, "_last_work", lambda: True)
        found = discovery.discover([str(tmp_path)])
        assert gc.get_freeze_count() > 0 and gc.isenabled()
    finally:
        gc.unfreeze()
