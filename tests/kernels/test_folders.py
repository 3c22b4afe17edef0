"""Files opened by their name in their folder (:mod:`neardup.kernels.folders`): the folder opened
once for the files that follow one another in it, another folder (of the same path length too)
opened in its turn, a path without a folder or whose folder does not open given whole; and the
compiled loops that copy, read and stat files through it give each file's own bytes and leave no
descriptor open."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from neardup.kernels import folders

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the compiled loops of files: Linux")


@pytest.fixture
def cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _blob(paths):
    """The paths as the compiled loops take them: NUL-terminated one after another, and where each starts."""
    raw = [os.fsencode(p) for p in paths]
    blob = np.frombuffer(b"\0".join(raw) + b"\0", np.uint8)
    return blob, np.cumsum([0] + [len(p) + 1 for p in raw[:-1]]).astype(np.int64)


def _open_descriptors():
    return sorted(os.listdir("/proc/self/fd"))


def _put(path, text):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def test_a_folder_is_opened_once_for_its_files_in_a_row_and_each_folder_is_its_own(cwd):
    paths = ["d/a/1.txt", "d/a/2.txt", "d/b/1.txt", "d/a/3.txt", "top.txt", "nope/x.txt", "/x"]
    for p in ("d/a", "d/b"):
        os.makedirs(p)
    blob, at = _blob(paths)
    state = folders.folder_state()
    seen = []
    for start in at:
        fd, name = folders.in_folder(blob, start, state)
        where = "." if fd == folders.AT_FDCWD else os.readlink(f"/proc/self/fd/{fd}")
        seen.append((os.path.relpath(where) if where != "/" else "/",
                     blob[name:blob.tobytes().index(b"\0", name)].tobytes().decode(), int(state[3])))
    folders.release(state)
    assert seen == [("d/a", "1.txt", 1), ("d/a", "2.txt", 1),  # the same folder: opened once
                    ("d/b", "1.txt", 2),  # of the same length, another folder: its own
                    ("d/a", "3.txt", 3),
                    (".", "top.txt", 3), (".", "nope/x.txt", 3),  # no folder, or one that does not open: whole
                    ("/", "x", 4)]
    assert state[0] == -1


def test_copies_reads_and_stats_through_folders_give_each_file_its_own_and_close_every_folder(cwd):
    from neardup.kernels.filecopy import copy_files, files_available
    from neardup.kernels.fileread import read_files, reading_available
    from neardup.kernels.filestat import stat_available, stat_files

    if not (files_available() and reading_available() and stat_available()):
        pytest.skip("no compiled loops of files here")
    names = [f"in/{d}/{i}.txt" for i in range(3) for d in ("a", "b")] + ["in/a/c/0.txt", "in/b/missing.txt"]
    for k, p in enumerate(names[:-1]):
        _put(p, f"{p} " * (k + 1))
    before = _open_descriptors()

    blob, at = _blob(names[:-1])
    data, ends, clean = read_files(blob, at, os.O_RDONLY | os.O_CLOEXEC, 1 << 16)
    assert [data[a:b].tobytes().decode() for a, b in zip([0] + ends[:-1].tolist(), ends.tolist())] == \
        [open(p).read() for p in names[:-1]]
    mode, size, _, _, ino = stat_files(blob, at)
    assert size.tolist() == [os.stat(p).st_size for p in names[:-1]]
    assert ino.tolist() == [os.stat(p).st_ino for p in names[:-1]]

    outs = [p.replace("in/", "out/", 1) for p in names]
    for p in outs:
        os.makedirs(os.path.dirname(p), exist_ok=True)
    blob, at = _blob(names + outs)
    n = len(names)
    done, copied = copy_files(blob, at[:n], at[n:], os.O_RDONLY | os.O_CLOEXEC,
                              os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC)
    assert done == n - 1  # stopped at the missing last file, for the caller to learn why
    assert [open(q).read() for q in outs[:-1]] == [open(p).read() for p in names[:-1]]
    assert copied == sum(os.path.getsize(p) for p in names[:-1])
    assert _open_descriptors() == before  # every folder closed, a loop stopped short too
