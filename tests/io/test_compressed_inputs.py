"""Compressed input anywhere (gzip, zstd, bz2, xz: a text file by its magic bytes, a data file
by its name), walked data files without the text field skipped and counted, and the runs that
find no document: what they say, and that the same command runs again."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup.errors import InputError
from neardup.io import discover, read_source, write_kept
from neardup.io.sources import detect_format
from helpers import fail_message, run_in_process as neardup
from io_inputs import compress, put, read_all


def words(i: int, n: int = 80) -> str:
    return " ".join(f"w{i}x{j}" for j in range(n))


def near(i: int) -> str:
    """A near duplicate of ``words(i)``: one word of 80 changed."""
    return words(i).replace(f"w{i}x40", "changed")


_PACK = {"gzip": lambda b: gzip.compress(b, mtime=0), "zstd": lambda b: compress(b, "zstd"),
         "bz2": bz2.compress, "xz": lzma.compress}


def test_gz_man_pages_in_two_languages_deduplicated_with_the_defaults(cwd):
    """A folder of .gz man pages (as /usr/share/man) is a folder of text documents: the near
    duplicates across the two languages' folders removed, ids the path below the common folder
    with the compressed name as it stands, kept files the compressed files as they were; a .gz
    holding a binary is skipped as binary, a .gz cut short as compressed and unreadable."""
    for i in range(6):
        put(f"man/en/man1/p{i}.1.gz", gzip.compress(words(i).encode(), mtime=0))
    for i in range(3):  # near duplicates of p0..p2 in the other language's folder
        put(f"man/de/man1/p{i}.1.gz", gzip.compress(near(i).encode(), mtime=0))
    put("man/de/man1/q.1.gz", gzip.compress(words(9).encode(), mtime=0))
    put("man/en/man1/bin.gz", gzip.compress(b"\x7fELF\x00\x01", mtime=0))
    put("man/en/man1/cut.1.gz", gzip.compress(words(8).encode(), mtime=0)[:30])
    ran = neardup("dedup", "man", "-o", "out")
    assert ran.returncode == 0, ran.stderr
    stats = json.load(open("out/stats.json"))
    assert stats["counts"]["input"] == 10 and stats["counts"]["removed"] == 3
    assert stats["files"]["skipped_binary"] == 1 and stats["files"]["skipped_compressed"] == 1
    assert "1 unreadable compressed file skipped (cut short or damaged)" in ran.stderr
    removed = pq.read_table("out/removed.parquet").to_pylist()
    assert sorted(r["id"] for r in removed) == ["en/man1/p0.1.gz", "en/man1/p1.1.gz", "en/man1/p2.1.gz"]
    assert open("out/kept/de/man1/p0.1.gz", "rb").read() == open("man/de/man1/p0.1.gz", "rb").read()
    inputs = {i["name"]: i.get("skipped") for i in stats["inputs"]}
    assert inputs["man/en/man1/bin.gz"] == "binary file (a NUL byte at byte 4 of its gzip data)"
    assert inputs["man/en/man1/cut.1.gz"].startswith("compressed and unreadable (truncated gzip stream")
    # named on its own: read (no "only .jsonl.gz is decompressed"), or an error naming the file
    assert read_all(discover(["man/de/man1/q.1.gz"])[0])[0] == [words(9)]
    assert fail_message(discover(["man/en/man1/cut.1.gz"])[0]).startswith(
        "man/en/man1/cut.1.gz: compressed and unreadable (truncated gzip stream")


@pytest.mark.parametrize("kind,ext", [("zstd", ".txt.zst"), ("bz2", ".txt.bz2"), ("xz", ".txt.xz"),
                                      ("gzip", "")])
def test_compressed_text_files_are_read_by_their_magic_bytes(cwd, kind, ext):
    """``x.txt.zst``, ``.bz2``, ``.xz``: text documents, decompressed; a gzip file without a
    compressed name too (the content decides); the name is the id, as it stands."""
    put(f"d/a{ext}", _PACK[kind](words(1).encode()))
    put(f"d/b{ext}", _PACK[kind](near(1).encode()))
    srcs = discover(["d"])
    assert [s.format for s in srcs] == ["text", "text"]
    texts, _, ids, _, _ = read_all(srcs[0], id_column="id")
    assert texts == [words(1)] and ids == [f"a{ext}"]


def test_a_text_that_starts_like_bz2_is_a_text(cwd):
    text = "BZh91AY is how a bz2 stream starts"
    assert read_all(discover([put("bz.txt", text)])[0])[0] == [text]
    write_kept(discover(["bz.txt"])[0], [0], "out/bz.jsonl", output_format="jsonl")
    assert json.loads(open("out/bz.jsonl").read())["text"] == text


@pytest.mark.parametrize("kind,ext", [("bz2", ".bz2"), ("xz", ".xz")])
def test_jsonl_and_csv_compressed_with_bz2_and_xz(cwd, kind, ext):
    """``x.jsonl.bz2`` is JSONL, ``x.csv.xz`` CSV (the standard library's decoders); the kept
    lines are written back in the same compression; a stream cut short is an error saying so."""
    assert detect_format(f"x.jsonl{ext}") == ("jsonl", kind) and detect_format(f"x.csv{ext}") == ("csv", kind)
    lines = b"".join(json.dumps({"text": words(i)}).encode() + b"\n" for i in range(3))
    src = discover([put(f"a.jsonl{ext}", _PACK[kind](lines))])[0]
    assert read_all(src)[0] == [words(i) for i in range(3)]
    write_kept(src, [0, 2], f"out/a.jsonl{ext}")
    opener = bz2.open if kind == "bz2" else lzma.open
    assert opener(f"out/a.jsonl{ext}").read() == b"".join(lines.splitlines(True)[i] for i in (0, 2))
    csv = discover([put(f"b.csv{ext}", _PACK[kind](f"id,text\n1,{words(1)}\n2,{words(2)}\n".encode()))])[0]
    assert read_all(csv)[0] == [words(1), words(2)]
    cut = discover([put(f"c.jsonl{ext}", _PACK[kind](lines * 50)[:-20])])[0]
    assert f"truncated {kind} stream" in fail_message(cut)


def test_walked_data_files_without_the_text_field_are_skipped_and_counted(cwd):
    """A code tree's data files (a CSV, Parquet or JSONL test fixture without a ``text`` column)
    are skipped and counted as a walked non-JSONL ``.json`` is; named on its own, such a file is
    still an error naming it."""
    put("tree/a.py", words(1))
    put("tree/b.py", near(1))
    put("tree/tests/data.csv", "x,y\n1,2\n")
    put("tree/tests/rows.jsonl", json.dumps({"name": "n"}) + "\n")
    os.makedirs("tree/tests", exist_ok=True)
    pq.write_table(pa.table({"a": [1]}), "tree/tests/t.parquet")
    ran = neardup("dedup", "tree", "-o", "out")
    assert ran.returncode == 0, ran.stderr
    assert "3 data files without the text field skipped (--text-column names another)" in ran.stderr
    stats = json.load(open("out/stats.json"))
    assert stats["files"]["skipped_no_text_field"] == 3 and stats["counts"]["removed"] == 1
    reasons = {i["name"]: i.get("skipped") for i in stats["inputs"]}
    assert reasons["tree/tests/data.csv"].startswith("data file without the text field (no column 'text'")
    for name in ("tree/tests/data.csv", "tree/tests/t.parquet"):
        with pytest.raises(InputError, match=rf"^{name}: no column 'text'"):
            list(read_source(discover([name])[0]))
    with pytest.raises(InputError, match=r"^tree/tests/rows.jsonl:1: "):
        list(read_source(discover(["tree/tests/rows.jsonl"])[0]))


def test_empty_file_named_alone_is_named_and_the_same_command_runs_again(cwd):
    """A run stopped by its input leaves no work behind: the same command says the same thing
    (not "the work dir holds an interrupted run"), and the fixed input runs."""
    put("empty.jsonl", b"")
    for _ in range(2):
        ran = neardup("dedup", "empty.jsonl", "-o", "out")
        assert ran.returncode == 2
        assert ran.stderr.strip().splitlines()[-1] == (
            "neardup: error: no documents in the input: empty.jsonl: empty file (no records)")
    put("empty.csv", b"")
    ran = neardup("dedup", "empty.csv", "-o", "out2")
    assert ran.stderr.strip().splitlines()[-1] == (
        "neardup: error: no documents in the input: empty.csv: empty file (no records)")
    put("empty.jsonl", json.dumps({"id": "a", "text": words(1)}) + "\n")
    ran = neardup("dedup", "empty.jsonl", "-o", "out", "-q")
    assert ran.returncode == 0, ran.stderr


def test_one_skipped_file_is_named_with_the_hint_that_helps(cwd):
    put("doc/x.json", '{\n  "a": 1\n}\n')
    ran = neardup("dedup", "doc", "-o", "out")
    assert ran.stderr.strip().splitlines()[-1] == (
        "neardup: error: no documents in the input: doc/x.json: not JSON Lines records (line 1 is not a JSON "
        "object: one JSON document?) (--input-format text reads every file as a document)")
