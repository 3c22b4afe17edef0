"""Many small text files: read with one read call a file, copied with one sendfile call a file,
and the rules that make that safe (a read or a copy that stops short before the file's size goes
on; the first failing copy, in order, is the one raised; plain-text-ness decided as before)."""

from __future__ import annotations

import gzip
import os

import numpy as np
import pytest

from neardup.errors import InputError
from neardup.io import discover, kernel_copy, read_source
from neardup.io.formats import text as text_format
from neardup.io.formats.text import _is_text, copy_local_text_files, plain_text, read_local_file
from neardup.io.compressed import kind_of
from io_inputs import put


def test_a_small_file_is_read_with_one_read_call(cwd, monkeypatch):
    put("d/a.txt", "hello world")
    src = discover(["d/a.txt"])[0]
    calls = []
    real = os.read
    monkeypatch.setattr(text_format.os, "read", lambda fd, n: calls.append(n) or real(fd, n))
    assert read_local_file(src) == b"hello world"
    assert len(calls) == 1


def test_a_read_that_stops_short_of_the_size_goes_on(cwd, monkeypatch):
    data = bytes(range(256)) * 40
    put("d/a.bin", data)
    src = discover(["d/a.bin"])[0]
    real = os.read
    monkeypatch.setattr(text_format.os, "read", lambda fd, n: real(fd, min(n, 1000)))  # short reads
    assert read_local_file(src) == data


def test_a_file_longer_than_its_size_is_read_to_its_end(cwd, monkeypatch):
    put("d/a.txt", "x" * 5000)
    src = discover(["d/a.txt"])[0]
    real = text_format.open_regular
    monkeypatch.setattr(text_format, "open_regular", lambda s: (real(s)[0], 10))  # grew since fstat
    assert read_local_file(src) == b"x" * 5000


def test_a_large_binary_file_in_a_folder_is_skipped_without_reading_it_whole(cwd):
    # before: a 1 GiB disk image (a model's weights) in a folder of code was read whole, twice
    # its size in memory at once, only to be skipped for the NUL at its byte 0
    put("d/a.txt", "hello world")
    with open("d/disk.img", "wb") as f:
        f.truncate(1 << 30)  # sparse: no disk space taken
    src = discover(["d"])[1]
    assert len(read_local_file(src)) < 1 << 20
    assert [b.skipped for s in discover(["d"]) for b in read_source(s)] == [
        None, "binary file (a NUL byte at byte 0)"]
    gz = gzip.compress(b"text " * 20000)  # a compressed file is read whole: its data holds NULs
    put("d/t.gz", gz)
    assert read_local_file(discover(["d/t.gz"])[0]) == gz


def test_a_copy_that_stops_short_of_the_size_goes_on(cwd, monkeypatch):
    data = os.urandom(3000)
    put("a.bin", data)
    real = os.sendfile
    calls = []

    def short(out, inp, offset, count):  # as a write that stops partway (a disk filling up)
        calls.append(count)
        return real(out, inp, offset, min(count, 700))

    monkeypatch.setattr(kernel_copy.os, "sendfile", short)
    with open("a.bin", "rb") as fi, open("b.bin", "wb") as fo:
        assert kernel_copy.copy_fd(fi.fileno(), fo.fileno()) == 3000  # the bytes copied, every call's
    assert open("b.bin", "rb").read() == data
    assert len(calls) == 5  # 4 short ones up to 3000 bytes, then the end


def test_a_small_file_is_copied_with_one_sendfile_call(cwd, monkeypatch):
    put("a.txt", "hello")
    real = os.sendfile
    calls = []
    monkeypatch.setattr(kernel_copy.os, "sendfile", lambda *a: calls.append(a) or real(*a))
    with open("a.txt", "rb") as fi, open("b.txt", "wb") as fo:
        kernel_copy.copy_fd(fi.fileno(), fo.fileno())
    assert open("b.txt", "rb").read() == b"hello" and len(calls) == 1


def test_copies_of_many_files_raise_the_first_failure_in_order(cwd, monkeypatch):
    monkeypatch.setattr(text_format, "_COPIES_A_TASK", 4)
    for i in range(40):
        put(f"d/{i // 10}/{i:02d}.txt", f"text {i}")
    srcs = discover(["d"])
    copies = [(s, os.path.abspath(os.path.join("out", s.relpath))) for s in srcs]
    copy_local_text_files(copies, workers=4)
    assert all(open(dst).read() == open(s.path).read() for s, dst in copies)
    os.remove("d/0/07.txt")  # in the first thread's span
    os.remove("d/3/35.txt")  # in the last one's
    with pytest.raises(InputError, match=r"^d/0/07.txt: cannot read file"):
        copy_local_text_files([(s, d + ".2") for s, d in copies], workers=4)


@pytest.mark.parametrize("data", [b"", b"plain words", b"a\0b", "caf\u00e9".encode(), "caf\xe9".encode("latin-1"),
                                  b"\0", "\u00e9\0".encode(), gzip.compress(b"x"), b"BZh91AY&SY",
                                  b"\xfd7zXZ\x00", b"(\xb5/\xfd", b"\x1f\x8b"])
def test_plain_text_decides_as_the_rule_says(data):
    assert plain_text(data) == (kind_of(data) is None and _is_text(data))


def _folder_of_files(n: int = 12):
    for i in range(n):
        put(f"d/{i // 5}/{i:02d}.txt", f"text {i} " * i)  # 00.txt empty
    put("d/big.txt", "y" * (3 << 20))  # more than one sendfile call of the compiled loop
    srcs = discover(["d"])
    return [(s, os.path.abspath(os.path.join("out", s.relpath))) for s in srcs]


def test_copies_run_in_the_compiled_loop_without_a_python_call_a_file(cwd, monkeypatch):
    copies = _folder_of_files()
    if text_format._compiled_copier() is None:
        pytest.skip("no compiled copy loop here")
    opened = []
    real = os.open
    monkeypatch.setattr(text_format.os, "open", lambda *a, **k: opened.append(a[0]) or real(*a, **k))
    copied = copy_local_text_files(copies, workers=2)
    assert all(open(dst, "rb").read() == open(s.path, "rb").read() for s, dst in copies)
    assert opened == []  # every file copied by the compiled loop
    assert copied == sum(os.path.getsize(s.path) for s, _ in copies)  # 3 MiB of one in several calls


def test_files_after_one_the_compiled_loop_cannot_copy_are_copied_one_by_one(cwd, monkeypatch):
    copies = _folder_of_files()
    calls = []

    def fails_at_third(items):  # as a file system where the compiled loop's copy fails
        calls.append(len(items))
        return min(2, len(items)), sum(text_format._copy_file(src, dst) for src, dst in items[:2])

    monkeypatch.setattr(text_format, "_compiled_copier", lambda: "the loop")
    monkeypatch.setattr(text_format, "_copy_compiled", lambda loop, items, sizes: fails_at_third(items))
    copied = copy_local_text_files(copies, workers=1)
    assert calls == [len(copies)]  # tried once, not again for each file after the third
    assert all(open(dst, "rb").read() == open(s.path, "rb").read() for s, dst in copies)
    assert copied == sum(os.path.getsize(s.path) for s, _ in copies)  # the loop's bytes and the others'


def _reads_and_opens(monkeypatch):
    """The files Python's own ``os.open`` opens for reading (the compiled loop opens none)."""
    opened = []
    real = os.open
    monkeypatch.setattr(text_format.os, "open", lambda p, *a, **k: opened.append(p) or real(p, *a, **k))
    return opened


def test_plain_files_are_read_by_the_compiled_loop_not_one_by_one(cwd, monkeypatch):
    from neardup.io import reader

    if not text_format._compiled_reader():
        pytest.skip("no compiled read loop here")
    for i in range(30):
        put(f"d/{i // 10}/{i:02d}.txt", f"text {i} " * (i + 1))
    put("d/3/cafe.txt", "caf\u00e9 au lait")  # UTF-8 beyond ASCII: read by the loop, Python's rule decides
    srcs = discover(["d"])
    opened = _reads_and_opens(monkeypatch)
    batches = list(reader.read_sources(srcs, range(len(srcs)), group_files=True))
    assert [t for b in batches for t in b.text.to_pylist()] == [open(s.path, encoding="utf-8").read() for s in srcs]
    assert opened == []


def test_files_the_compiled_loop_does_not_read_whole_are_read_one_by_one(cwd, monkeypatch):
    monkeypatch.setattr(text_format, "_TASK_BYTES", 100)  # the buffer holds the first files only
    put("d/a.txt", "a" * 40)
    put("d/b.txt", "")  # empty: one by one
    put("d/c.txt", "BZh91 is a text")  # starts as bz2 does: the rule decides
    put("d/d.txt", "d" * 30)  # fits in what is left
    put("d/e.txt", "e" * 50)  # does not: one by one
    put("d/f.bin", b"\0binary")  # read by the loop: not plain text, given back as it is
    srcs = discover(["d"])
    opened = _reads_and_opens(monkeypatch)
    read = text_format.read_local_files(list(srcs))
    starts = [0] + read.ends[:-1].tolist()
    got = [read.others[i] if i in read.others else read.data[starts[i]:read.ends[i]].tobytes()
           for i in range(len(srcs))]
    assert got == [open(s.path, "rb").read() for s in srcs]
    assert set(read.others) == ({1, 2, 4, 5} if text_format._compiled_reader() else set(range(6)))
    if text_format._compiled_reader():
        assert opened == ["d/b.txt", "d/e.txt"]


@pytest.mark.parametrize("sizes", [[5, 5, 5, 5, 5, 5, 5], [1, 30, 2, 2, 2, 40, 0, 3, 3, 3, 3, 3], [50, 50, 1, 1], [6, 6, 4, 8, 4, 0]])
def test_plain_files_end_a_batch_at_its_size_or_its_bytes_as_one_by_one(cwd, monkeypatch, sizes):
    from neardup.io import reader

    monkeypatch.setattr(reader, "_GROUP_BYTES", 12)
    monkeypatch.setattr(reader, "_FILES_A_TASK", 3)
    for i, n in enumerate(sizes):
        put(f"d/{i:02d}.txt", "x" * n)
    srcs = discover(["d"])
    expected, batch, size = [], [], 0  # the rule: a batch ends at its 4th file, or at the file that brings it to 12 bytes
    for i, n in enumerate(sizes):
        batch.append(i)
        size += n
        if len(batch) >= 4 or size >= 12:
            expected.append(batch)
            batch, size = [], 0
    expected += [batch] if batch else []
    batches = list(reader.read_sources(srcs, range(len(srcs)), group_files=True, batch_size=4))
    assert [b.sources.tolist() for b in batches] == expected
    assert [len(t) for b in batches for t in b.text.to_pylist()] == sizes


def test_the_compiled_loop_leaves_what_is_no_regular_file_of_its_size_to_the_caller(cwd):
    from neardup.kernels.fileread import read_files, reading_available

    if not reading_available():
        pytest.skip("no compiled read loop here")
    put("a.txt", "plain")
    put("b.txt", "BZh9")
    os.mkfifo("pipe")
    put("c.txt", "caf\u00e9")
    put("e.txt", "")
    names = [b"a.txt", b"missing", b"pipe", b"b.txt", b"c.txt", b"e.txt", b"."]
    blob = np.frombuffer(b"\0".join(names) + b"\0", np.uint8)
    at = np.cumsum([0] + [len(p) + 1 for p in names[:-1]])
    data, ends, clean = read_files(blob, at, text_format._OPEN_READ, 100)
    assert data.tobytes() == b"plainBZh9caf\xc3\xa9"
    assert ends.tolist() == [5, 5, 5, 9, 14, 14, 14]
    assert clean.tolist() == [True, False, False, False, False, False, False]


@pytest.mark.parametrize("loaded, module, name", [("_compiled_reader", "fileread", "_read_files_kernel"),
                                                  ("_compiled_copier", "filecopy", "_copy_files_kernel")])
def test_the_warm_call_compiles_the_version_the_files_use(cwd, monkeypatch, loaded, module, name):
    # guards: the warm calls' names read-only, as _path_blob gives them: with a writable array
    # each loop compiled a second version at the first real call (~1.5 CPU-s on a first run)
    from numba import typeof

    from neardup.io.compiled import kernels

    loops = kernels(module)
    real, types = getattr(loops, name), []
    monkeypatch.setattr(loops, name, lambda *a: types.append(tuple(typeof(x) for x in a)) or real(*a))
    getattr(text_format, loaded).cache_clear()  # loaded again: its warm call goes through the recorder
    try:
        if getattr(text_format, loaded)() is None:
            pytest.skip("no compiled loop here")
        copies = _folder_of_files()
        text_format.read_local_files([s for s, _ in copies])
        copy_local_text_files(copies, workers=1)
    finally:
        getattr(text_format, loaded).cache_clear()
    assert len(types) >= 2 and len(set(types)) == 1, types
