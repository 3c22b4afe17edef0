"""Discovery of a folder of many files: their stats taken by a compiled loop in a thread of its own
while the sources are made (:class:`neardup.io.discovery._StatsBeside`), with the result ``os.stat``
one file at a time gives; a file reached twice, and names that clash, decided as before."""

from __future__ import annotations

import os

import pytest

from neardup.errors import InputError
from neardup.io import discover
from neardup.io import discovery
from io_inputs import put


@pytest.fixture
def beside(monkeypatch):
    """Every walk of two files or more stat'ed beside; skipped where the compiled loop cannot run."""
    if discovery._compiled_stat() is None:
        pytest.skip("no compiled stat loop here")
    monkeypatch.setattr(discovery, "_STAT_BESIDE_FROM", 2)


def _folder(n: int = 30):
    for i in range(n):
        put(f"d/{i // 10}/{i:02d}.txt", f"text {i} " * i)  # 00.txt empty
    os.utime("d/0/03.txt", ns=(0, -1_500_000_001))  # before 1970, nanoseconds of its own
    os.utime("d/1/10.txt", ns=(0, 1_700_000_000_123_456_789))


def test_a_folders_files_are_stated_by_the_compiled_loop_as_os_stat_says(cwd, beside, monkeypatch):
    """(mutation: the seconds of stx_mtime times 10**6 in kernels.filestat -> the mtimes differ;
    ``each_once`` answering False -> os.stat is asked for each file)"""
    _folder()
    asked = []
    real = os.stat
    monkeypatch.setattr(discovery.os, "stat", lambda p, *a, **k: asked.append(p) or real(p, *a, **k))
    srcs = discover(["d"])
    files = [s.path for s in srcs]
    assert len(files) == 30 and not set(asked) & set(files)  # the folders stat'ed by the walk, no file
    assert srcs.file_stats == {p: (real(p).st_size, real(p).st_mtime_ns) for p in files}
    assert list(srcs.file_stats) == files


def test_the_same_sources_as_one_by_one(cwd, beside, monkeypatch):
    _folder()
    put("d/x.jsonl", '{"text": "a"}\n')
    fast = discover(["d"])
    monkeypatch.setattr(discovery, "_STAT_BESIDE_FROM", 10 ** 9)
    slow = discover(["d"])
    assert fast == slow and fast.file_stats == slow.file_stats and fast.links == slow.links


def test_hard_links_found_beside_are_decided_one_by_one(cwd, beside):
    """(mutation: drop the test of equal device and inode in discovery._regular_once -> both
    paths of the file are read)"""
    _folder(11)
    os.link("d/0/05.txt", "d/0/05b.txt")
    srcs = discover(["d"])
    assert [s.name for s in srcs].count("d/0/05.txt") == 1 and "d/0/05b.txt" not in [s.name for s in srcs]
    assert srcs.links == {"read_once": 0, "not_followed": 0, "hard_links": 1}


def test_a_file_gone_before_its_stat_says_so_before_a_clash(cwd, beside, monkeypatch):
    """A file that cannot be stat'ed is named, as the one-by-one loop names it, before names
    that clash (on a file system that tells case apart) are refused; names that clash alone are
    refused as before."""
    put("d/X.txt", "one")
    put("d/x.txt", "two")
    with pytest.raises(InputError, match="would be written to the same output name"):
        discover(["d"])
    real = discovery._walk_folder

    def walked_then_gone(*a, **k):  # the first file vanishes right after the walk met it
        found = real(*a, **k)
        os.remove("d/X.txt")
        return found

    monkeypatch.setattr(discovery, "_walk_folder", walked_then_gone)
    with pytest.raises(InputError, match=r"^cannot read d/X.txt \("):
        discover(["d"])


def test_the_warm_call_compiles_the_version_the_walk_uses(cwd, beside, monkeypatch):
    # guards: a warm call of other types than the real one's (the names writable: a second
    # version compiled at the first real call, ~1 CPU-s on a first run)
    from numba import typeof

    from neardup.kernels import filestat

    real, types = filestat._stat_files_kernel, []
    monkeypatch.setattr(filestat, "_stat_files_kernel", lambda *a: types.append(tuple(map(typeof, a))) or real(*a))
    discovery._compiled_stat.cache_clear()  # loaded again: its warm call goes through the recorder
    try:
        _folder(11)
        assert discovery._compiled_stat() is not None and len(discover(["d"])) == 11
    finally:
        discovery._compiled_stat.cache_clear()
    assert len(types) == 2 and len(set(types)) == 1, types


def test_a_walk_without_links_says_so_and_the_output_check_lists_no_folder(cwd, beside, monkeypatch, tmp_path):
    """Guard: discover marks its files as no symbolic links (``Sources.unlinked``) only where its
    walk saw each file and no link on its way (mutation: drop the ``via_link`` test -> a followed
    link is taken as none; drop the ``walked`` one -> files named one by one, which may be
    links, are), and refuse_overlaps then lists no folder for links and gives the same answer."""
    from neardup.errors import ConfigError
    from neardup.io.storage import paths as storage_paths
    from neardup.io.storage.folder import Folder, refuse_overlaps

    for i in range(40):  # two folders of 20: each listed for its links without the word
        put(f"d/{i // 20}/{i:02d}.txt", f"text {i}")
    srcs = discover(["d"])
    files = [s.path for s in srcs]
    assert srcs.unlinked == files
    assert storage_paths.prefix_form_groups(files, no_links=True) == storage_paths.prefix_form_groups(files)

    def no_listing(*a, **k):
        raise AssertionError("a folder listed")
    with monkeypatch.context() as m:
        m.setattr(storage_paths.os, "scandir", no_listing)
        refuse_overlaps([("output folder", Folder.of(str(tmp_path / "out")))], ["d"], files, srcs.unlinked)
        with pytest.raises(ConfigError, match="lies inside the input"):
            refuse_overlaps([("output folder", Folder.of("d/1/30.txt"))], ["d"], files, srcs.unlinked)
        with pytest.raises(AssertionError, match="a folder listed"):
            refuse_overlaps([("output folder", Folder.of(str(tmp_path / "out")))], ["d"], files, None)
    put("e/x.txt", "outside")
    os.symlink(os.path.abspath("e/x.txt"), "d/1/link.txt")
    linked = discover(["d"], follow_symlinks=True)
    assert "d/1/link.txt" in [s.path for s in linked] and linked.unlinked is None
    os.remove("d/1/link.txt")
    named = discover(["d/0/01.txt", "d/0/02.txt", "d/1/31.txt"])
    assert named.unlinked is None
