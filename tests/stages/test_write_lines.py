"""The kept lines of uncompressed local JSONL files copied from the lines the read stage saw
(neardup.stages.write_lines, read/block-B.lines): the same output bytes as the lines found again
(the way every other file is written), for files read whole or split into ranges, with a byte
order mark, CRLF, no last newline, blank and bad lines, next to compressed files; and a file
changed between the read and the write stages is written the old way (not from stale offsets)."""

from __future__ import annotations

import gzip
import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

import neardup
from neardup.stages import write, write_lines
from helpers import outputs

SPLIT = "NEARDUP_SPLIT_BYTES"


@pytest.fixture(autouse=True)
def files_old_enough(monkeypatch):
    """The files written here trusted at once (their times taken for racily clean otherwise:
    :data:`write_lines.TIMESTAMP_GRAIN_NS`), but one whose time is after the read stage saw it."""
    monkeypatch.setattr(write_lines, "TIMESTAMP_GRAIN_NS", 0)


def corpus(folder: Path, bom=False, crlf=False, last_newline=True) -> Path:
    """A folder: a plain JSONL file of near-duplicates with blank and bad lines, a small one, and
    a gzip one (its lines not known: found again)."""
    from neardup.testing.synth import generate_corpus
    folder.mkdir()
    texts = generate_corpus(300, seed=7, doc_words=40).texts
    lines = [json.dumps({"id": f"d{i}", "text": t}) for i, t in enumerate(texts)]
    lines[100:100] = ["", "  ", '{"id": "bad", "text": 7}']
    end = "\r\n" if crlf else "\n"
    data = (end.join(lines) + (end if last_newline else "")).encode()
    (folder / "b.jsonl").write_bytes((b"\xef\xbb\xbf" if bom else b"") + data)
    (folder / "a.jsonl").write_text('{"id": "a0", "text": "first file"}\n')
    with gzip.open(folder / "c.jsonl.gz", "wb") as g:
        g.write(data[:15000])
    return folder


def copied_and_found(tmp_path, monkeypatch, folder, **options):
    """The outputs with the kept lines copied from their known bounds, and found again; the
    number of files copied from their bounds in the first run."""
    copied = []
    real = write.copy_kept_lines

    def spy(src, *args, **kwargs):
        copied.append(Path(src.path).name)
        return real(src, *args, **kwargs)

    monkeypatch.setattr(write, "copy_kept_lines", spy)
    neardup.dedup([str(folder)], output=str(tmp_path / "copied"), on_error="skip", id_column="", **options)
    monkeypatch.setattr(write, "copies_lines", lambda *a: False)
    neardup.dedup([str(folder)], output=str(tmp_path / "found"), on_error="skip", id_column="", **options)
    return outputs(tmp_path / "copied"), outputs(tmp_path / "found"), copied


@pytest.mark.parametrize("bom,crlf,last_newline,split", [(False, False, True, False), (True, True, False, False),
                                                          (True, False, False, True), (False, True, True, True)])
def test_kept_lines_copied_from_their_bounds_same_bytes(tmp_path, monkeypatch, bom, crlf, last_newline, split):
    """Guards: the block's file offset (``bounds += at`` in io.formats.jsonl), the byte order
    mark's 3 bytes, the newline included (``b[:, 1] + 1``), the last line without one."""
    folder = corpus(tmp_path / "in", bom, crlf, last_newline)
    if split:
        monkeypatch.setenv(SPLIT, str((folder / "b.jsonl").stat().st_size // 5))
    else:
        monkeypatch.delenv(SPLIT, raising=False)
    a, b, copied = copied_and_found(tmp_path, monkeypatch, folder, keep="longest")
    assert sorted(copied) == ["a.jsonl", "b.jsonl"]  # not the gzip one: its lines are not known
    assert a["stats.json"]["counts"]["removed"] > 0 and a["stats.json"]["counts"]["rejected"] >= 1
    assert sorted(a) == sorted(b)
    assert [k for k in a if a[k] != b[k]] == []
    kept = a["kept/b.jsonl"].split(b"\n")
    assert kept[-1] == b"" and all(line.startswith(b"{") for line in kept[:-1])


def test_report_texts_caught_from_the_bounds(tmp_path, monkeypatch):
    """The texts of the report's largest clusters caught on the way (``capture``): the same
    texts_sample.parquet, none read again by ``fetch_texts``."""
    monkeypatch.delenv(SPLIT, raising=False)
    folder = corpus(tmp_path / "in")
    fetched = []
    real = write.fetch_texts
    monkeypatch.setattr(write, "fetch_texts", lambda s, c, wanted: fetched.append(wanted) or real(s, c, wanted))
    neardup.dedup([str(folder / "b.jsonl")], output=str(tmp_path / "out"), on_error="skip")
    assert all(not w for w in fetched)
    monkeypatch.setattr(write, "copies_lines", lambda *a: False)
    neardup.dedup([str(folder / "b.jsonl")], output=str(tmp_path / "found"), on_error="skip")
    assert (tmp_path / "out" / "texts_sample.parquet").read_bytes() == \
        (tmp_path / "found" / "texts_sample.parquet").read_bytes()


@pytest.mark.parametrize("how,split", [("same size", False), ("longer", False), ("mtime restored", False),
                                       ("mtime restored", True)])
def test_file_changed_after_the_read_stage_written_as_before(tmp_path, monkeypatch, how, split):
    """A file changed between the read and the write stages (same size, its modification time
    only; longer; the same size with its modification time set back, read whole or in ranges)
    is written the way it was before the lines were known: its lines found again in the file as
    it is, never copied from the stale offsets. Guards the stat checks of ``unchanged``
    (size only: the same-size case copies stale ranges; no change time: the restored ones do)."""
    folder = corpus(tmp_path / "in")
    f = folder / "b.jsonl"
    if split:
        monkeypatch.setenv(SPLIT, str(f.stat().st_size // 5))
    else:
        monkeypatch.delenv(SPLIT, raising=False)
    original = f.read_bytes()
    first, second, rest = original.split(b"\n", 2)
    assert len(first) != len(second)  # swapped: the same size, every line after the first where it was
    changed = second + b"\n" + first + b"\n" + rest if how != "longer" else b'{"id": "new", "text": "x"}\n' + original
    real_run = write.WriteStage.run

    def change_then_write(self, run, engine):
        before = f.stat()
        f.write_bytes(changed)
        if how == "mtime restored":
            os.utime(f, ns=(before.st_atime_ns, before.st_mtime_ns))
            while f.stat().st_ctime_ns == before.st_ctime_ns:  # a coarse clock: the change made visible
                os.utime(f, ns=(before.st_atime_ns, before.st_mtime_ns))
            assert (f.stat().st_size, f.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
        return real_run(self, run, engine)

    monkeypatch.setattr(write.WriteStage, "run", change_then_write)
    outs = []
    for name in ("now", "before"):
        f.write_bytes(original)
        try:
            neardup.dedup([str(f)], output=str(tmp_path / name), on_error="skip")
            outs.append(outputs(tmp_path / name)["kept/b.jsonl"])
        except Exception as e:  # noqa: BLE001 - the same error both ways
            outs.append(str(e).replace(name, ""))
        monkeypatch.setattr(write, "copies_lines", lambda *a: False)
    assert outs[0] == outs[1]
    assert isinstance(outs[0], bytes) and outs[0].startswith(changed.split(b"\n", 1)[0] + b"\n")


def test_file_unchanged_since_an_earlier_read_copied(tmp_path, monkeypatch):
    """A resumed run: the change times the read stage of an earlier run recorded are the ones
    compared (the files unchanged: their lines still copied), and a work dir without them (an
    earlier version's) gets its lines found again; the same outputs each time."""
    monkeypatch.delenv(SPLIT, raising=False)
    folder = corpus(tmp_path / "in")
    work = tmp_path / "work"
    neardup.dedup([str(folder)], output=str(tmp_path / "first"), work_dir=str(work), keep_work=True,
                  on_error="skip", id_column="")
    real = write.copy_kept_lines
    for name in ("again", "old"):
        if name == "old":
            for p in (work / "read").glob("*.lines-stat"):
                p.unlink()
        copied = []
        monkeypatch.setattr(write, "copy_kept_lines",
                            lambda src, *a, **k: copied.append(Path(src.path).name) or real(src, *a, **k))
        state = json.loads((work / "state.json").read_text())
        state["done"].pop("write", None)  # the write stage done again from the read stage's files
        (work / "state.json").write_text(json.dumps(state))
        neardup.dedup([str(folder)], output=str(tmp_path / name), work_dir=str(work), resume=True,
                      keep_work=True, on_error="skip", id_column="")
        assert sorted(copied) == ([] if name == "old" else ["a.jsonl", "b.jsonl"])
        assert outputs(tmp_path / name) == outputs(tmp_path / "first")


@pytest.mark.parametrize("options", [{"mark": True}, {"output_format": "parquet"}])
def test_no_lines_where_the_write_stage_does_not_copy_them(tmp_path, monkeypatch, options):
    """--mark or another output format: kept lines never copied from their bounds, so the read
    stage writes no ``lines`` (nor their stat) files. Guards ``copies_whole`` in read_block."""
    monkeypatch.delenv(SPLIT, raising=False)
    folder = corpus(tmp_path / "in")
    for opts, lines in ((options, 0), ({}, 2)):
        work = tmp_path / f"work{lines}"
        neardup.dedup([str(folder)], output=str(tmp_path / f"out{lines}"), work_dir=str(work), keep_work=True,
                      on_error="skip", id_column="", **opts)
        assert len(list((work / "read").glob("*.lines*"))) == lines


def _kept(rows, bounds, keep, size):
    """write_lines.kept_ranges as lists (it gives int64 arrays)."""
    starts, ends, newline = write_lines.kept_ranges(rows, bounds, keep, size)
    assert starts.dtype == ends.dtype == np.int64
    return starts.tolist(), ends.tolist(), newline


def test_kept_ranges_join_consecutive_lines():
    """Ranges of lines that follow each other joined; a gap (a blank or removed line) not; the
    file's last line without a newline said so."""
    rows = np.array([0, 1, 3, 4], np.int64)
    bounds = np.array([[0, 9], [10, 19], [21, 29], [30, 35]], np.int64)
    assert _kept(rows, bounds, np.array([0, 1, 3], np.int64), 35) == ([0, 21], [20, 30], False)
    assert _kept(rows, bounds, np.array([1, 4], np.int64), 35) == ([10, 30], [20, 35], True)
    assert _kept(rows, bounds, np.array([], np.int64), 35) == ([], [], False)


def test_kept_ranges_as_the_lines_say_whatever_the_gaps():
    """The compiled pass gives, for random files (blank lines between some documents, rows with
    gaps or without, the last line with or without its newline), each kept line with its
    newline, lines that touch joined: what the lines' bounds say, range by range."""
    rng = np.random.default_rng(7)
    for trial in range(40):
        n = int(rng.integers(1, 300))
        gaps = rng.integers(0, 2, n) * rng.integers(1, 3, n)  # blank lines before a document's line
        lens = rng.integers(1, 50, n)
        starts = np.cumsum(gaps + np.concatenate(([0], lens[:-1] + 1)))  # each line after the one before
        bounds = np.stack([starts, starts + lens], 1).astype(np.int64)
        size = int(bounds[-1, 1]) + int(rng.integers(0, 2))  # the last line's newline, or none
        rows = np.arange(n, dtype=np.int64) + (np.cumsum(rng.integers(0, 2, n)) if trial % 2 else 3)
        keep = np.sort(rng.choice(rows, int(rng.integers(1, n + 1)), replace=False))
        got_starts, got_ends, newline = _kept(rows, bounds, keep, size)
        lines = [(int(bounds[i, 0]), min(int(bounds[i, 1]) + 1, size)) for i in np.searchsorted(rows, keep)]
        want = [list(lines[0])]
        for a, e in lines[1:]:
            if want[-1][1] == a:
                want[-1][1] = e
            else:
                want.append([a, e])
        assert (got_starts, got_ends) == ([a for a, _ in want], [e for _, e in want])
        assert newline == (bounds[np.searchsorted(rows, keep[-1]), 1] >= size)


def test_kept_ranges_of_rows_without_gaps():
    """Rows that go on by one from a first row other than 0 (a split file's later range): each
    kept row's line found by its place, as the binary search finds it; rows with a gap, or a
    repeat, by the search."""
    bounds = np.array([[0, 9], [10, 19], [20, 29], [30, 35]], np.int64)
    keep = np.array([4, 6, 7], np.int64)
    assert _kept(np.array([4, 5, 6, 7], np.int64), bounds, keep, 36) == ([0, 20], [10, 36], False)
    assert _kept(np.array([4, 6, 7, 8], np.int64), bounds, keep[:2], 36) == ([0], [20], False)
    assert _kept(np.array([4, 6, 6, 7], np.int64), bounds, keep[1:], 36) == ([10, 30], [20, 36], False)


def test_read_stats_of_a_file_read_in_ranges(tmp_path):
    """A split file's lines copied only when every range's read saw the same file (one changed
    between two ranges' reads: found again), and a block without the record: found again."""
    from neardup.io.storage.folder import Folder
    from neardup.stages.workdir import LINE_STATS, block_name
    work = Folder(str(tmp_path))
    (tmp_path / "read").mkdir()
    for b, rows in enumerate([[(0, 1, 2, 30), (1, 1, 5, 40)], [(0, 1, 2, 30)], [(0, 1, 2, 31)], [(1, 1, 5, 40)]]):
        (tmp_path / block_name(b, LINE_STATS)).write_bytes(np.array(rows, np.int64).tobytes())
    expected = {0: (10, 20), 1: (11, 21)}
    assert write_lines.read_stats(work, {0: [0, 1], 1: [0, 3]}, expected) == {0: (10, 20, 1, 2, 30),
                                                                              1: (11, 21, 1, 5, 40)}
    assert write_lines.read_stats(work, {0: [0, 1, 2], 1: [0, 3]}, expected) == {1: (11, 21, 1, 5, 40)}
    assert write_lines.read_stats(work, {0: [0, 4], 1: [3]}, expected) == {1: (11, 21, 1, 5, 40)}


@pytest.mark.parametrize("how", ["within the grain", "modified later"])
def test_racily_clean_file_not_copied(tmp_path, monkeypatch, how):
    """A file whose change time is not a grain older than the moment the read stage saw it (a
    change after, within the same tick of a coarse clock, would leave its times as they were),
    or whose modification time is later than that moment (set ahead with os.utime), is not
    trusted: its lines found again, the same bytes. Guards the racily clean check of
    ``seen_stats``."""
    monkeypatch.delenv(SPLIT, raising=False)
    folder = corpus(tmp_path / "in")
    if how == "within the grain":
        monkeypatch.setattr(write_lines, "TIMESTAMP_GRAIN_NS", 3600 * 10**9)
    else:
        ahead = time.time_ns() + 3600 * 10**9
        os.utime(folder / "b.jsonl", ns=(ahead, ahead))
    a, b, copied = copied_and_found(tmp_path, monkeypatch, folder)
    assert sorted(copied) == ([] if how == "within the grain" else ["a.jsonl"])
    assert a == b


def test_file_replaced_as_it_is_opened_not_copied(tmp_path, monkeypatch):
    """The identity is checked on the file opened (fstat), not on its path before the open: a
    file renamed over the input as the copy opens it (the same size and modification time) is
    the new file, whose lines are found again, never the stale ranges copied from it."""
    from neardup.io.sources import Source
    f = tmp_path / "b.jsonl"
    f.write_bytes(b'{"text": "aa"}\n{"text": "b"}\n')
    st = f.stat()
    expected = (st.st_size, st.st_mtime_ns, st.st_dev, st.st_ino, st.st_ctime_ns)
    real_open = open

    def replaced_then_opened(path, *args, **kwargs):
        new = tmp_path / "new.jsonl"
        new.write_bytes(b'{"text": "b"}\n{"text": "aa"}\n')
        os.utime(new, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.replace(new, path)
        return real_open(path, *args, **kwargs)

    rows, bounds = np.array([0, 1], np.int64), np.array([[0, 14], [15, 28]], np.int64)
    src = Source(path=str(f), name="b.jsonl", relpath="b.jsonl", format="jsonl")
    out = tmp_path / "kept.jsonl"
    assert write_lines.copy_kept_lines(src, rows, bounds, np.array([0], np.int64), str(out), expected) == 1
    assert out.read_bytes() == b'{"text": "aa"}\n'
    monkeypatch.setattr(write_lines, "open", replaced_then_opened, raising=False)
    assert write_lines.copy_kept_lines(src, rows, bounds, np.array([1], np.int64), str(tmp_path / "k2"), expected) is None
    assert not (tmp_path / "k2").exists()


def test_no_lines_for_an_output_in_a_store(tmp_path, monkeypatch):
    """An output that is not a local folder (here fsspec's memory store): the kept lines are
    never copied there from their bounds, so the read stage writes no ``lines`` files. Guards
    ``records_lines``."""
    monkeypatch.delenv(SPLIT, raising=False)
    folder = corpus(tmp_path / "in")
    for out, lines in (("memory://neardup-tidy14/out", 0), (str(tmp_path / "out"), 2)):
        work = tmp_path / f"work{lines}"
        neardup.dedup([str(folder)], output=out, work_dir=str(work), keep_work=True, on_error="skip", id_column="")
        assert len(list((work / "read").glob("*.lines*"))) == lines
