"""Many small text files: read with one read call a file, copied with one sendfile call a file,
and the rules that make that safe (a read or a copy that stops short before the file's size goes
on; the first failing copy, in order, is the one raised; plain-text-ness decided as before)."""

from __future__ import annotations

import gzip
import os

import pytest

from neardup.errors import InputError
from neardup.io import discover, kernel_copy
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
        kernel_copy.copy_fd(fi.fileno(), fo.fileno())
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
    copy_local_text_files(copies, workers=2)
    assert all(open(dst, "rb").read() == open(s.path, "rb").read() for s, dst in copies)
    assert opened == []  # every file copied by the compiled loop


def test_files_after_one_the_compiled_loop_cannot_copy_are_copied_one_by_one(cwd, monkeypatch):
    copies = _folder_of_files()
    calls = []

    def fails_at_third(items):  # as a file system where the compiled loop's copy fails
        calls.append(len(items))
        for src, dst in items[:2]:
            text_format._copy_file(src, dst)
        return min(2, len(items))

    monkeypatch.setattr(text_format, "_copier", [fails_at_third])
    copy_local_text_files(copies, workers=1)
    assert calls == [len(copies)]  # tried once, not again for each file after the third
    assert all(open(dst, "rb").read() == open(s.path, "rb").read() for s, dst in copies)
