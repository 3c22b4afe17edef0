"""The kept lines of an uncompressed local JSONL file copied as byte ranges (copy_file_range,
sendfile, pread + write): the same bytes, captures and errors as the line-by-line writer."""

from __future__ import annotations

import dataclasses
import errno
import io
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup.errors import InputError
from neardup.io import compiled, discover, write_kept
from neardup.io.compiled import compiled_loop
from neardup.io.formats import jsonl_kept, jsonl_ranges
from neardup.io.kept_rows import keep_array
from neardup.io.kernel_copy import RangeCopier
from neardup.stages.write import kept_rows

WAYS = ["copy_file_range", "sendfile", "rw"]


def _source(tmp_path, data: bytes, name: str = "a.jsonl"):
    p = tmp_path / name
    p.write_bytes(data)
    return discover([str(p)])[0]


def _reference(src, keep, capture=None) -> bytes:
    """What the line-by-line writer writes (a BytesIO has no descriptor: no byte ranges)."""
    out = io.BytesIO()
    jsonl_kept.write_kept_lines(src, keep_array(keep), out, None, capture=capture)
    return out.getvalue()


def _ranges(tmp_path, src, keep, way, block_bytes=None, capture=None) -> bytes:
    path = tmp_path / f"out-{way}-{block_bytes}.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        assert jsonl_ranges.copy_jsonl_ranges(src, keep_array(keep), fd, capture=capture, way=way,
                                              block_bytes=block_bytes) == len(keep)
    finally:
        os.close(fd)
    return path.read_bytes()


def _usable(way: str) -> bool:
    return way == "rw" or hasattr(os, way)


LINES = [b'{"text": "a", "z": 1,   "y": [1, 2]}', b'{"text":"\xc3\xa9\xf0\x9f\x98\x80","id":2}\r',
         b"", b'{"text": "c"}', b"   ", b'{"text": "d", "keep": "spacing"  }', b'{"text": "e"}',
         b'{"text": "' + b"x" * 300 + b'"}', b"\t\r", b'{"text": "f"}']


def _text_rows(lines):
    return [i for i, x in enumerate(lines) if x.strip(b" \t\r")]


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("block_bytes", [None, 16, 64, 1000])
@pytest.mark.parametrize("bom,final_newline", [(False, True), (False, False), (True, True), (True, False)])
def test_same_bytes_as_line_by_line(tmp_path, way, block_bytes, bom, final_newline):
    if not _usable(way):
        pytest.skip(f"no os.{way} here")
    data = (b"\xef\xbb\xbf" if bom else b"") + b"\n".join(LINES) + (b"\n" if final_newline else b"")
    src = _source(tmp_path, data)
    rows = _text_rows(LINES)
    for keep in [rows, rows[:1], rows[-1:], rows[1:-1], rows[::2], rows[1::2], [], [rows[-1]],
                 [r for r in rows if r != 3]]:
        want = _reference(src, keep)
        assert _ranges(tmp_path, src, keep, way, block_bytes) == want, keep
    # every line kept, the last one without its newline: one range, then the newline
    assert _ranges(tmp_path, src, rows, way, block_bytes).endswith(LINES[-1] + b"\n")


@pytest.mark.parametrize("block_bytes", [None, 8, 100])
def test_captures_the_same_lines(tmp_path, block_bytes):
    data = b"\xef\xbb\xbf" + b"\n".join(LINES)
    src = _source(tmp_path, data)
    rows = _text_rows(LINES)
    want = dict.fromkeys([0, 1, 3, 9, 2, 42])
    got = dict.fromkeys(want)
    _reference(src, rows[:-2], capture=want)
    _ranges(tmp_path, src, rows[:-2], "rw", block_bytes, capture=got)
    # the line-by-line pass may stop before a row after the last kept one; this one does not
    assert all(got[r] == x for r, x in want.items() if x is not None)
    assert got == {r: (LINES[r] if r < len(LINES) else None) for r in want}
    assert got[0] == LINES[0] and got[1] == LINES[1]


@pytest.mark.parametrize("way", WAYS)
def test_errors_as_line_by_line(tmp_path, way):
    if not _usable(way):
        pytest.skip(f"no os.{way} here")
    src = _source(tmp_path, b"\n".join(LINES))
    with pytest.raises(ValueError, match=r"^keep_rows has row 2, a blank line of .*a.jsonl$"):
        _ranges(tmp_path, src, [0, 2], way, 16)
    with pytest.raises(ValueError, match=r"^keep_rows has row 12 but .*a.jsonl has 10 lines$"):
        _ranges(tmp_path, src, [0, 12], way, 16)
    with pytest.raises(ValueError, match=r"^keep_rows has row 12 but .*a.jsonl has 10 lines$"):
        _reference(src, [0, 12])
    gone = dataclasses.replace(src, path=str(tmp_path / "gone.jsonl"))
    with pytest.raises(InputError, match="cannot read file"):
        _ranges(tmp_path, gone, [0], way)


def test_empty_and_bom_only_files(tmp_path):
    for data in [b"", b"\xef\xbb\xbf", b"\n\n", b"\xef\xbb\xbf\n"]:
        src = _source(tmp_path, data)
        assert _ranges(tmp_path, src, [], "rw") == b""
        with pytest.raises(ValueError):
            _ranges(tmp_path, src, [0], "rw")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.sampled_from([b"{}", b'{"a": 1}', b"", b" ", b'{"t": "\\r"}\r', b"{" + b"y" * 70 + b"}"]),
                      max_size=40),
       bom=st.booleans(), final_newline=st.booleans(), block=st.sampled_from([None, 4, 32, 128]),
       pick=st.integers(0, 2 ** 40))
def test_property_same_bytes(tmp_path, lines, bom, final_newline, block, pick):
    data = (b"\xef\xbb\xbf" if bom else b"") + b"\n".join(lines) + (b"\n" if final_newline and lines else b"")
    src = _source(tmp_path, data)
    # the rows the reader numbers: lines of the file (a final newline ends the last one)
    rows = _text_rows(lines)
    keep = [r for i, r in enumerate(rows) if (pick >> (i % 40)) & 1]
    want = _reference(src, keep)
    for way in WAYS:
        if _usable(way):
            assert _ranges(tmp_path, src, keep, way, block) == want


def test_fallbacks(tmp_path, monkeypatch):
    data = b"\n".join(LINES) + b"\n"
    src = _source(tmp_path, data)
    keep = _text_rows(LINES)[1:]
    want = _reference(src, keep)
    calls = []

    def no_cfr(*a, **k):
        calls.append("copy_file_range")
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    def no_sendfile(*a, **k):
        calls.append("sendfile")
        raise OSError(errno.EINVAL, "Invalid argument")

    monkeypatch.setattr(os, "copy_file_range", no_cfr, raising=False)
    monkeypatch.setattr(os, "sendfile", no_sendfile, raising=False)
    assert _ranges(tmp_path, src, keep, "copy_file_range", 16) == want
    assert calls == ["copy_file_range", "sendfile"]  # each tried once, then pread + write

    def other_error(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "copy_file_range", other_error, raising=False)
    with pytest.raises(OSError, match="No space left"):
        _ranges(tmp_path, src, keep, "copy_file_range")


def test_short_copies_and_a_file_that_shrank(tmp_path, monkeypatch):
    data = b"\n".join(LINES) + b"\n"
    src = _source(tmp_path, data)
    keep = _text_rows(LINES)
    want = _reference(src, keep)
    if hasattr(os, "copy_file_range"):
        real = os.copy_file_range

        def short(fi, fo, count, off=None, *rest):
            return real(fi, fo, min(count, 3), off)

        monkeypatch.setattr(os, "copy_file_range", short)
        assert _ranges(tmp_path, src, keep, "copy_file_range") == want
        monkeypatch.undo()
    fd_in = os.open(tmp_path / "a.jsonl", os.O_RDONLY)
    fd_out = os.open(tmp_path / "o", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for way in WAYS:
            if _usable(way):
                with pytest.raises(InputError, match="got shorter"):
                    RangeCopier(fd_in, fd_out, "a.jsonl", way).copy([len(data) - 2], [len(data) + 5])
    finally:
        os.close(fd_in)
        os.close(fd_out)


@pytest.mark.parametrize("name,ranges", [("a.jsonl", True), ("a.json", True), ("a.jsonl.gz", False),
                                         ("a.jsonl.zst", False)])
def test_write_kept_takes_the_range_path_for_plain_local_files(tmp_path, monkeypatch, name, ranges):
    import gzip

    import zstandard

    data = b"\n".join(LINES)
    raw = gzip.compress(data, mtime=0) if name.endswith(".gz") else (
        zstandard.ZstdCompressor().compress(data) if name.endswith(".zst") else data)
    src = _source(tmp_path, raw, name)
    used = []
    real = jsonl_kept.copy_jsonl_ranges
    monkeypatch.setattr(jsonl_kept, "copy_jsonl_ranges", lambda *a, **k: used.append(1) or real(*a, **k))
    keep = _text_rows(LINES)
    out = tmp_path / "out" / name
    assert write_kept(src, keep, str(out)) == len(keep)
    assert bool(used) == ranges
    if ranges:
        assert out.read_bytes() == b"".join(LINES[r] + b"\n" for r in keep)
        assert not os.path.exists(str(out) + ".tmp")
        used.clear()
        assert write_kept(src, keep, str(tmp_path / "o2.jsonl"), output_format="jsonl") == len(keep)
        assert used and (tmp_path / "o2.jsonl").read_bytes() == out.read_bytes()


def test_write_kept_large_file_through_the_copy_thread(tmp_path, monkeypatch):
    monkeypatch.setattr(jsonl_ranges, "BLOCK_BYTES", 1 << 10)
    rng = np.random.default_rng(7)
    lines = [(b'{"text": "%d %s"}' % (i, b"z" * int(rng.integers(0, 200)))) if rng.random() > 0.05 else b""
             for i in range(3000)]
    src = _source(tmp_path, b"\n".join(lines) + b"\n")
    rows = np.array(_text_rows(lines))
    keep = rows[rng.random(len(rows)) > 0.2]
    want = b"".join(lines[r] + b"\n" for r in keep)
    assert write_kept(src, keep, str(tmp_path / "k.jsonl")) == len(keep)
    assert (tmp_path / "k.jsonl").read_bytes() == want
    # an error in the middle: nothing appears
    with pytest.raises(ValueError, match="blank line"):
        write_kept(src, np.sort(np.append(keep[:-5], int(np.flatnonzero([not x for x in lines])[-1]))),
                   str(tmp_path / "bad.jsonl"))
    assert not os.path.exists(tmp_path / "bad.jsonl") and not os.path.exists(tmp_path / "bad.jsonl.tmp")


def test_kept_rows_is_setdiff1d():
    rng = np.random.default_rng(0)
    for t in range(500):
        n = int(rng.integers(0, 50))
        rows = np.sort(rng.choice(100, n, replace=False)).astype(np.int64)
        if t % 3 == 0:
            rng.shuffle(rows)
        if t % 5 == 0:
            rows = rng.integers(0, 30, n).astype(np.int64)
        dropped = rng.integers(-5, 110, int(rng.integers(0, 30))).astype(np.int64)
        want = np.setdiff1d(rows, dropped)
        got = kept_rows(rows, dropped)
        assert got.dtype == want.dtype and np.array_equal(got, want)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_named_pipe_is_read_line_by_line(tmp_path, monkeypatch):
    import threading

    data = b"\n".join(LINES) + b"\n"
    fifo = tmp_path / "p.jsonl"
    os.mkfifo(fifo)
    (tmp_path / "x.jsonl").write_bytes(data)
    src = dataclasses.replace(discover([str(tmp_path / "x.jsonl")])[0], path=str(fifo))
    monkeypatch.setattr(jsonl_kept, "copy_jsonl_ranges", lambda *a, **k: pytest.fail("byte ranges of a pipe"))

    def feed():
        with open(fifo, "wb") as f:
            f.write(data)

    t = threading.Thread(target=feed)
    t.start()
    keep = _text_rows(LINES)
    assert write_kept(src, keep, str(tmp_path / "o.jsonl")) == len(keep)
    t.join()
    assert (tmp_path / "o.jsonl").read_bytes() == b"".join(LINES[r] + b"\n" for r in keep)


def test_a_read_error_while_copying_is_an_input_error(tmp_path, monkeypatch):
    src = _source(tmp_path, b"\n".join(LINES) + b"\n")

    def broken(*a, **k):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "pread", broken)
    with pytest.raises(InputError, match=r"cannot read file \(Input/output error\)"):
        _ranges(tmp_path, src, _text_rows(LINES), "rw")


@pytest.mark.skipif(not hasattr(os, "copy_file_range"), reason="no os.copy_file_range here")
def test_compiled_loop_copies_the_ranges_and_stops_where_a_call_does(tmp_path):
    """The compiled copy_file_range loop (what RangeCopier runs first): the bytes of the ranges,
    appended in order at the output's position; short where the input ends or a call fails,
    with how far it got."""
    from neardup.io import kernel_copy
    from neardup.kernels.filecopy import copy_file_ranges

    assert kernel_copy._compiled_loop() is copy_file_ranges  # the C library has copy_file_range
    rng = np.random.default_rng(3)
    data = rng.integers(0, 256, 200_000, dtype=np.uint8).tobytes()
    (tmp_path / "in").write_bytes(data)
    cuts = np.sort(rng.choice(len(data), 400, replace=False))
    starts, ends = cuts[0::2], cuts[1::2]
    fd_in = os.open(tmp_path / "in", os.O_RDONLY)
    fd_out = os.open(tmp_path / "out", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(fd_out, b"head")
        assert copy_file_ranges(fd_in, fd_out, starts, ends) == (len(starts), 0)
        assert os.lseek(fd_in, 0, os.SEEK_CUR) == 0  # the input's position untouched
        # past the end of the input: the whole ranges before, the part of the next one
        assert copy_file_ranges(fd_in, fd_out, [5, len(data) - 3], [9, len(data) + 4]) == (1, 3)
        assert copy_file_ranges(fd_in, -1, [0], [10]) == (0, 0)  # a call that fails
    finally:
        os.close(fd_in)
        os.close(fd_out)
    want = b"head" + b"".join(data[a:b] for a, b in zip(starts, ends)) + data[5:9] + data[-3:]
    assert (tmp_path / "out").read_bytes() == want


@pytest.mark.skipif(not hasattr(os, "copy_file_range"), reason="no os.copy_file_range here")
def test_range_copier_goes_on_in_python_where_the_compiled_loop_stops(tmp_path, monkeypatch):
    """RangeCopier hands the ranges to the compiled loop, and from where it stopped goes on with
    its own loop, which learns why (here: the output refuses the bytes, a bad descriptor)."""
    from neardup.io import kernel_copy

    data = bytes(range(256)) * 40
    (tmp_path / "in").write_bytes(data)
    seen = []
    real = kernel_copy._compiled_loop()

    def loop(fd_in, fd_out, starts, ends):
        seen.append(len(starts))
        return real(fd_in, fd_out, starts, ends)

    monkeypatch.setattr(kernel_copy, "_compiled_loop", lambda: loop)
    fd_in = os.open(tmp_path / "in", os.O_RDONLY)
    fd_out = os.open(tmp_path / "out", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        RangeCopier(fd_in, fd_out, "in").copy([0, 300, 5000], [100, 900, 5100])
        assert seen == [3]
        assert (tmp_path / "out").read_bytes() == data[:100] + data[300:900] + data[5000:5100]
        ro = os.open(tmp_path / "out", os.O_RDONLY)
        try:
            with pytest.raises(OSError):  # EBADF: not a copy_file_range matter; every way refuses
                RangeCopier(fd_in, ro, "in").copy([0], [10])
        finally:
            os.close(ro)
    finally:
        os.close(fd_in)
        os.close(fd_out)


def test_without_copy_file_range_in_the_c_library_the_python_loop_copies(tmp_path, monkeypatch):
    """Where the C library lacks copy_file_range the compiled loop is never compiled (a kernel
    calling a function the linker cannot find stops the process): RangeCopier's own loop copies."""
    from neardup.io import kernel_copy
    from neardup.kernels import filecopy

    called = []

    def never(*a, **k):
        called.append(a)
        return 0, 0

    monkeypatch.setattr(filecopy, "available", lambda: False)
    monkeypatch.setattr(filecopy, "copy_file_ranges", never)
    monkeypatch.setattr(kernel_copy, "_compiled_loop", compiled_loop("filecopy", "copy_file_ranges", "available"))
    assert kernel_copy._compiled_loop() is None and not called
    data = bytes(range(256)) * 8
    (tmp_path / "in").write_bytes(data)
    fd_in = os.open(tmp_path / "in", os.O_RDONLY)
    fd_out = os.open(tmp_path / "out", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        RangeCopier(fd_in, fd_out, "in").copy([3, 1000], [40, 2000])
    finally:
        os.close(fd_in)
        os.close(fd_out)
    assert (tmp_path / "out").read_bytes() == data[3:40] + data[1000:2000]


@pytest.mark.parametrize("block_bytes", [None, 8, 32, 64])
def test_last_block_shorter_than_the_buffer(tmp_path, block_bytes):
    # the buffer is reused: past the bytes of the file's last (short) read it holds the newlines
    # of an earlier block, which are not lines of the file (the last line has no newline here)
    rng = np.random.default_rng(1)
    for _ in range(40):
        lines = [b'{"t":"' + b"x" * int(rng.integers(0, 40)) + b'"}' for _ in range(int(rng.integers(1, 12)))]
        src = _source(tmp_path, b"\n".join(lines))
        keep = [i for i in range(len(lines)) if rng.integers(2)]
        assert _ranges(tmp_path, src, keep, "rw", block_bytes) == _reference(src, keep), (lines, keep)


def _piped_copy(tmp_path, monkeypatch, data: bytes, starts, ends, buffer: int = 1000, tail: bytes = b""):
    """RangeCopier.copy of ``starts``/``ends`` with the piped copy for any size, its buffers
    ``buffer`` bytes (so that a small file fills them many times over); returns what it wrote."""
    from neardup.io import kernel_copy

    monkeypatch.setattr(kernel_copy, "PIPED_BYTES", 1)
    monkeypatch.setattr(kernel_copy, "_PIPE_BUFFER", buffer)
    monkeypatch.setattr(kernel_copy, "_WRITE_PIECE", 7)
    (tmp_path / "in").write_bytes(data)
    fd_in = os.open(tmp_path / "in", os.O_RDONLY)
    fd_out = os.open(tmp_path / "out", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd_out, b"head")
        RangeCopier(fd_in, fd_out, "in").copy(list(starts), list(ends))
        if tail:
            os.write(fd_out, tail)
    finally:
        os.close(fd_in)
        os.close(fd_out)
    return (tmp_path / "out").read_bytes()


def _on_local_disk(path) -> bool:
    from neardup.io import kernel_copy

    fd = os.open(path, os.O_RDONLY)
    try:
        return kernel_copy.file_system(fd) in kernel_copy.PIPED_FILE_SYSTEMS
    finally:
        os.close(fd)

def _skip_without_direct_writes(tmp_path) -> None:
    """Skips the test where the piped copy does not run, or O_DIRECT cannot be opened, in tmp_path."""
    from neardup.io import kernel_copy

    if not _on_local_disk(tmp_path):
        pytest.skip(f"{tmp_path} is on a file system the piped copy does not use")
    probe = tmp_path / "probe"
    probe.write_bytes(b"")
    fd = os.open(probe, os.O_WRONLY)
    direct = kernel_copy._open_direct(fd)
    os.close(fd)
    if direct is None:
        pytest.skip(f"{tmp_path}: no O_DIRECT on this file system")
    os.close(direct)

def _random_ranges(seed: int):
    """400,000 random bytes, 200 ranges of them, and what a copy of those ranges after b"head" is."""
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, 400_000, dtype=np.uint8).tobytes()
    cuts = np.sort(rng.choice(len(data), 400, replace=False))
    starts, ends = cuts[0::2].tolist(), cuts[1::2].tolist()
    want = b"head" + b"".join(data[a:b] for a, b in zip(starts, ends))
    return data, starts, ends, want




@pytest.mark.skipif(not hasattr(os, "copy_file_range"), reason="no os.copy_file_range here")
def test_ranges_are_piped_only_between_files_on_local_disks(tmp_path, monkeypatch):
    """The two-thread copy only where both files are on a local disk or in memory: an output on
    another file system (here a pipe; on NFS or SMB the server copies for copy_file_range) gets
    the kernel's own call, and the same bytes."""
    from neardup.io import kernel_copy

    if not _on_local_disk(tmp_path):
        pytest.skip(f"{tmp_path} is on a file system the piped copy does not use")
    monkeypatch.setattr(kernel_copy, "PIPED_BYTES", 1)
    calls = []
    real = kernel_copy.RangeCopier.piped
    monkeypatch.setattr(kernel_copy.RangeCopier, "piped", lambda self, s, e: calls.append(1) or real(self, s, e))
    data = bytes(range(256)) * 12
    (tmp_path / "in").write_bytes(data)
    fd_in = os.open(tmp_path / "in", os.O_RDONLY)
    fd_out = os.open(tmp_path / "out", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    r, w = os.pipe()
    try:
        assert kernel_copy.pipes_here(fd_in, fd_out)
        assert not kernel_copy.pipes_here(fd_in, w) and kernel_copy.file_system(w) == 0x50495045  # pipefs
        RangeCopier(fd_in, w, "in").copy([0, 1000], [500, 2000])
        assert os.read(r, 10_000) == data[:500] + data[1000:2000]
        assert calls == []
        RangeCopier(fd_in, fd_out, "in").copy([0, 1000], [500, 2000])
        assert calls == [1]
    finally:
        for fd in (fd_in, fd_out, r, w):
            os.close(fd)
    assert (tmp_path / "out").read_bytes() == data[:500] + data[1000:2000]


@pytest.mark.skipif(not hasattr(os, "copy_file_range"), reason="no os.copy_file_range here")
def test_piped_copy_writes_the_ranges_in_order(tmp_path, monkeypatch):
    """Many megabytes of ranges are read by one thread into two buffers in turn and written by
    another: the bytes of the ranges in order at the output's position, whatever the buffers'
    size against the ranges' (a range across several buffers, several in one)."""
    from neardup.io import kernel_copy

    if not _on_local_disk(tmp_path):
        pytest.skip(f"{tmp_path} is on a file system the piped copy does not use")
    rng = np.random.default_rng(5)
    data = rng.integers(0, 256, 300_000, dtype=np.uint8).tobytes()
    cuts = np.sort(rng.choice(len(data), 600, replace=False))
    starts, ends = cuts[0::2].tolist(), cuts[1::2].tolist()
    ends[-1] = len(data)  # a range to the file's last byte
    calls = []
    real = kernel_copy.RangeCopier.piped
    monkeypatch.setattr(kernel_copy.RangeCopier, "piped", lambda self, s, e: calls.append(1) or real(self, s, e))
    for buffer in (1000, 1 << 16):
        got = _piped_copy(tmp_path, monkeypatch, data, starts, ends, buffer)
        assert got == b"head" + b"".join(data[a:b] for a, b in zip(starts, ends))
    assert len(calls) == 2
    assert kernel_copy._compiled_fill() is not None and kernel_copy._compiled_write() is not None


@pytest.mark.skipif(not hasattr(os, "copy_file_range"), reason="no os.copy_file_range here")
def test_piped_copy_hands_back_where_the_input_ends(tmp_path, monkeypatch):
    """A range past the input's end: the piped copy writes what it read and leaves the rest to
    RangeCopier's own loops, which say the file got shorter."""
    data = bytes(range(256)) * 40
    with pytest.raises(InputError, match="got shorter"):
        _piped_copy(tmp_path, monkeypatch, data, [0, 5000, len(data) - 10], [3000, 7000, len(data) + 5])
    assert (tmp_path / "out").read_bytes() == b"head" + data[:3000] + data[5000:7000] + data[-10:]


@pytest.mark.skipif(not hasattr(os, "copy_file_range"), reason="no os.copy_file_range here")
def test_piped_copy_raises_the_error_of_a_write_that_fails(tmp_path, monkeypatch):
    """A write the writing thread cannot make (here: an output opened for reading) is made again
    by os.write, whose error is raised; no thread is left waiting."""
    import threading

    from neardup.io import kernel_copy

    monkeypatch.setattr(kernel_copy, "PIPED_BYTES", 1)
    monkeypatch.setattr(kernel_copy, "_PIPE_BUFFER", 1000)
    data = bytes(range(256)) * 40
    (tmp_path / "in").write_bytes(data)
    (tmp_path / "out").write_bytes(b"")
    fd_in = os.open(tmp_path / "in", os.O_RDONLY)
    ro = os.open(tmp_path / "out", os.O_RDONLY)
    try:
        with pytest.raises(OSError) as e:
            RangeCopier(fd_in, ro, "in").copy([0], [len(data)])
        assert e.value.errno == errno.EBADF
    finally:
        os.close(fd_in)
        os.close(ro)
    assert not [t for t in threading.enumerate() if t.name == "neardup-range-writer"]


def test_file_system_loads_the_c_library_once(tmp_path, monkeypatch):
    """``file_system`` (asked twice a copier, :func:`pipes_here`) loads the C library at its
    first call only, and says the same: a file's file system, None for a descriptor not open."""
    import ctypes

    from neardup.io import kernel_copy

    loads = []
    real = ctypes.CDLL
    monkeypatch.setattr(ctypes, "CDLL", lambda *a, **k: loads.append(a) or real(*a, **k))
    kernel_copy._libc.cache_clear()
    (tmp_path / "f").write_bytes(b"x")
    fd = os.open(tmp_path / "f", os.O_RDONLY)
    try:
        first = kernel_copy.file_system(fd)
        assert kernel_copy.pipes_here(fd, fd) == (first in kernel_copy.PIPED_FILE_SYSTEMS)
        assert kernel_copy.file_system(fd) == first and first is not None
    finally:
        os.close(fd)
    assert kernel_copy.file_system(fd) is None
    assert len(loads) == 1
    kernel_copy._libc.cache_clear()


@pytest.mark.skipif(not hasattr(os, "O_DIRECT"), reason="no O_DIRECT here")
def test_piped_copy_goes_past_the_page_cache_after_slow_writes(tmp_path, monkeypatch):
    """Writes into the page cache that cost more than _SLOW_WRITE_S_PER_MIB (here: any) twice in
    a row send the rest of the piped copy past it (O_DIRECT, whole blocks at their place in the
    buffers, the bytes around them through the output): the same bytes, from an output position
    that is not a block's start, and the output's position after them (the next write follows)."""
    from neardup.io import kernel_copy

    _skip_without_direct_writes(tmp_path)
    monkeypatch.setattr(kernel_copy, "_SLOW_WRITE_S_PER_MIB", -1.0)
    monkeypatch.setattr(kernel_copy, "_DIRECT_SLOWER", float("inf"))  # the disk never the slower way
    opened, direct_bytes = [], []
    real_open, real_pwrite = kernel_copy._open_direct, os.pwrite

    def spy_open(fd):
        opened.append(real_open(fd))
        return opened[-1]

    def spy_pwrite(fd, data, at):
        n = real_pwrite(fd, data, at)
        if fd in opened:
            direct_bytes.append(n)
        return n

    monkeypatch.setattr(kernel_copy, "_open_direct", spy_open)
    monkeypatch.setattr(kernel_copy.os, "pwrite", spy_pwrite)
    data, starts, ends, want = _random_ranges(11)
    for buffer in (3 * 4096 + 5, 1 << 15):
        opened.clear()
        direct_bytes.clear()
        got = _piped_copy(tmp_path, monkeypatch, data, starts, ends, buffer, tail=b"tail")
        assert got == want + b"tail"
        assert len(opened) == 1 and sum(direct_bytes) > len(want) // 2, (buffer, opened, sum(direct_bytes))


def test_piped_copy_comes_back_to_the_page_cache_where_the_disk_is_slower(tmp_path, monkeypatch):
    """After the switch past the page cache, _SLOW_WRITES buffers in a row written there more
    slowly a MiB (here: any, _DIRECT_SLOWER 0) than the page cache's last write send the rest
    back through the page cache, for good: the same bytes, only those few buffers written past
    it, the descriptor past the page cache closed, and the output's position after the copy."""
    from neardup.io import kernel_copy

    _skip_without_direct_writes(tmp_path)
    monkeypatch.setattr(kernel_copy, "_SLOW_WRITE_S_PER_MIB", -1.0)
    monkeypatch.setattr(kernel_copy, "_DIRECT_SLOWER", 0.0)
    opened, direct_calls, closed = [], [], []
    real_open, real_pwrite, real_close = kernel_copy._open_direct, os.pwrite, os.close

    def spy_open(fd):
        opened.append(real_open(fd))
        return opened[-1]

    def spy_pwrite(fd, data, at):
        n = real_pwrite(fd, data, at)
        if fd in opened and fd not in closed:
            direct_calls.append(n)
        return n

    def spy_close(fd):
        if fd in opened:
            closed.append(fd)
        return real_close(fd)

    monkeypatch.setattr(kernel_copy, "_open_direct", spy_open)
    monkeypatch.setattr(kernel_copy.os, "pwrite", spy_pwrite)
    monkeypatch.setattr(kernel_copy.os, "close", spy_close)
    data, starts, ends, want = _random_ranges(12)
    buffer = 3 * 4096 + 5
    got = _piped_copy(tmp_path, monkeypatch, data, starts, ends, buffer, tail=b"tail")
    assert got == want + b"tail"
    assert len(opened) == 1 and closed == opened, (opened, closed)  # switched once, and back
    # the buffers written past the page cache: the two that were slower there, at most
    assert 0 < len(direct_calls) <= 2 * kernel_copy._SLOW_WRITES, direct_calls
