"""neardup.io: reading every format, honest errors, writing kept records."""

from __future__ import annotations

import gzip
import json
import os
import zlib

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup.errors import ConfigError, InputError
from neardup.io import Source, discover, output_relpath, read_source, table_source, write_kept
from neardup.io import _streams
from helpers import fail_message, jsonl
from io_inputs import compress, one, put, read_all


# --------------------------------------------------------------------------- JSONL


@pytest.mark.parametrize("fname,comp", [("a.jsonl", None), ("a.json", None), ("a.jsonl.gz", "gzip"),
                                        ("a.json.gz", "gzip"), ("a.jsonl.zst", "zstd"),
                                        ("a.jsonl.zstd", "zstd")])
def test_jsonl_formats(cwd, fname, comp):
    recs = [{"text": f"doc {i} é😀日本", "id": i, "q": i / 2, "other": {"x": [i]}} for i in range(5)]
    put(fname, compress(jsonl(recs), comp))
    src = one(fname)
    assert src.compression == comp
    texts, rows, ids, scores, rej = read_all(src, id_column="id", score_column="q")
    assert texts == [r["text"] for r in recs]
    assert rows == list(range(5)) and ids == [str(i) for i in range(5)]
    assert scores == [i / 2 for i in range(5)] and rej == []


def test_jsonl_blank_lines_rows_crlf_bom_no_final_newline(cwd):
    data = ('\ufeff{"text": "a"}\n\n   \n{"text": "b"}\r\n\t\r\n{"text": ""}\n \n{"text": "c"}').encode()
    src = one(put("a.jsonl", data))
    texts, rows, _, _, rej = read_all(src)
    assert texts == ["a", "b", "", "c"]
    assert rows == [0, 3, 5, 7]
    assert rej == []


def test_jsonl_unicode_and_escapes(cwd):
    strings = ["naïve café", "日本語のテキスト", "emoji 😀👍🏽", "line\nbreak\ttab", "quote \" back \\",
               "nul \x00 char", "", "\u2028 separator", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢"]
    data = b"".join(json.dumps({"text": s}, ensure_ascii=a).encode() + b"\n"
                    for s in strings for a in (True, False))
    texts, rows, _, _, _ = read_all(one(put("u.jsonl", data)))
    assert texts == [s for s in strings for _ in range(2)]
    assert rows == list(range(2 * len(strings)))


def test_jsonl_ids_and_scores(cwd):
    recs = [{"text": "a", "id": 7, "q": 1}, {"text": "b", "id": "x-1", "q": 2.5},
            {"text": "c", "id": 12345678901234567890123, "q": None}, {"text": "d", "id": 1.5, "q": -3}]
    texts, rows, ids, scores, rej = read_all(one(put("a.jsonl", jsonl(recs))),
                                             id_column="id", score_column="q", on_error="skip")
    assert ids == ["7", "x-1", "12345678901234567890123"]  # a float id is refused (1.0 and 1 would be two ids)
    assert scores[:2] == [1.0, 2.5] and np.isnan(scores[2])
    assert rej == [(3, "id field 'id' is not a string or an integer (got float 1.5)")]
    # int ids on the fast path (all ints: pyarrow parses them as int64)
    ids = read_all(one(put("b.jsonl", jsonl({"text": "t", "id": i} for i in range(20)))), id_column="id")[2]
    assert ids == [str(i) for i in range(20)]
    # no id_column / score_column: None
    b = next(read_source(one("b.jsonl")))
    assert b.ids is None and b.scores is None and b.source_index == 0
    assert next(read_source(one("b.jsonl"), 3)).source_index == 3


def test_batch_size_splits(cwd):
    src = one(put("a.jsonl", b"\n" + jsonl({"text": str(i)} for i in range(10))))
    batches = list(read_source(src, batch_size=3))
    assert [len(b) for b in batches] == [3, 3, 3, 1]
    assert [b.rows.tolist() for b in batches] == [[1, 2, 3], [4, 5, 6], [7, 8, 9], [10]]
    assert sum((b.text.to_pylist() for b in batches), []) == [str(i) for i in range(10)]
    with pytest.raises(ConfigError):
        read_source(src, batch_size=0)
    with pytest.raises(ConfigError):
        read_source(src, on_error="ignore")


def test_small_blocks_cross_line_boundaries(cwd, monkeypatch):
    """Many tiny blocks: rows, blank lines and bad lines stay right across block edges."""
    monkeypatch.setattr(_streams, "BLOCK_BYTES", 37)
    monkeypatch.setattr(_streams, "_READ_BYTES", 11)
    lines = []
    for i in range(60):
        lines.append(json.dumps({"text": "x" * (i % 13) + str(i)}) if i % 7 else "")
    lines[30] = '{"text": broken'
    data = ("\n".join(lines) + "\n").encode()
    for comp, name in [(None, "a.jsonl"), ("gzip", "a.jsonl.gz"), ("zstd", "a.jsonl.zst")]:
        src = one(put(name, compress(data, comp)))
        texts, rows, _, _, rej = read_all(src, on_error="skip", batch_size=4)
        want = [i for i in range(60) if i % 7 and i != 30]
        assert rows == want
        assert texts == [json.loads(lines[i])["text"] for i in want]
        assert rej == [(30, "broken JSON (Expecting value at column 10)")]
        assert fail_message(src) == f"{name}:31: broken JSON (Expecting value at column 10)"


def test_long_line_bigger_than_parser_block(cwd):
    big = "w " * (1 << 20)  # 2 MB: longer than pyarrow's default 1 MB block
    src = one(put("a.jsonl", jsonl([{"text": "a"}, {"text": big}, {"text": "c"}])))
    texts, rows, _, _, _ = read_all(src)
    assert rows == [0, 1, 2] and texts[1] == big


# every way a JSONL record can be bad: (line bytes, reason, read kwargs)
BAD_RECORDS = [
    (b'{"text": "a", "b": 1 "c": 2}', "broken JSON (Expecting ',' delimiter at column 22)", {}),
    (b'{"text": "a"', "broken JSON (Expecting ',' delimiter at column 13)", {}),
    (b'{"text": "a"} {"text": "b"}', "broken JSON (Extra data at column 15)", {}),
    (b"{'text': 'a'}", "broken JSON (Expecting property name enclosed in double quotes at column 2)", {}),
    (b'[1, 2]', "not a JSON object (got list)", {}),
    (b'"just a string"', "not a JSON object (got str)", {}),
    (b'42', "not a JSON object (got int)", {}),
    (b'null', "not a JSON object (got NoneType)", {}),
    (b'{"text": "abc", "x": "\xff\xfe"}', "invalid UTF-8 at byte 22", {}),
    (b'{"body": "a"}', "text field 'text' is missing (fields: body; name the text field with --text-column body)", {}),
    (b'{"text": null}', "text field 'text' is null", {}),
    (b'{"text": 5}', "text field 'text' is not a string (got int)", {}),
    (b'{"text": 2.5}', "text field 'text' is not a string (got float)", {}),
    (b'{"text": true}', "text field 'text' is not a string (got bool)", {}),
    (b'{"text": ["a"]}', "text field 'text' is not a string (got list)", {}),
    (b'{"text": {"a": 1}}', "text field 'text' is not a string (got dict)", {}),
    (b'{"text": "\\ud800"}', "text field 'text' is not valid Unicode (an unpaired surrogate \\u escape)", {}),
    (b'{"text": "a"}', "id field 'id' is missing", {"id_column": "id"}),
    (b'{"text": "a", "id": null}', "id field 'id' is null", {"id_column": "id"}),
    (b'{"text": "a", "id": [1]}', "id field 'id' is not a string or an integer (got list)", {"id_column": "id"}),
    (b'{"text": "a", "id": true}', "id field 'id' is not a string or an integer (got bool True)", {"id_column": "id"}),
    (b'{"text": "a", "id": 1.5}', "id field 'id' is not a string or an integer (got float 1.5)", {"id_column": "id"}),
    (b'{"text": "a", "id": 2.0}', "id field 'id' is not a string or an integer (got float 2.0)", {"id_column": "id"}),
    (b'{"text": "a", "id": 1e3}', "id field 'id' is not a string or an integer (got float 1000.0)", {"id_column": "id"}),
    (b'{"text": "a"}', "score column 'q' is missing", {"score_column": "q"}),
    (b'{"text": "a", "q": "0.5"}', "score column 'q' is not a number (got str)", {"score_column": "q"}),
    (b'{"text": "a", "q": false}', "score column 'q' is not a number (got bool)", {"score_column": "q"}),
]


@pytest.mark.parametrize("line,reason,kw", BAD_RECORDS, ids=[r for _, r, _ in BAD_RECORDS])
def test_bad_record_both_modes(cwd, line, reason, kw):
    good = [json.dumps({"text": f"t{i}", "id": i, "q": 0.5}).encode() for i in range(20)]
    lines = good[:16] + [line] + good[16:]  # the bad record is line 17
    src = one(put("data/a.jsonl", b"\n".join(lines) + b"\n"))
    assert fail_message(src, **kw) == f"data/a.jsonl:17: {reason}"
    texts, rows, _, _, rej = read_all(src, on_error="skip", **kw)
    assert rej == [(16, reason)]
    assert rows == [i for i in range(21) if i != 16]
    assert texts == [f"t{i}" for i in range(20)]


def test_null_score_is_nan_missing_score_is_bad(cwd):
    src = one(put("a.jsonl", b'{"text": "a", "q": null}\n{"text": "b"}\n{"text": "c", "q": 1}\n'))
    texts, rows, _, scores, rej = read_all(src, score_column="q", on_error="skip")
    assert texts == ["a", "c"] and np.isnan(scores[0]) and scores[1] == 1.0
    assert rej == [(1, "score column 'q' is missing")]


def test_json_array_file_gets_a_hint(cwd):
    src = one(put("a.json", b'[\n  {"text": "a"},\n  {"text": "b"}\n]\n'))
    msg = fail_message(src)
    assert msg.startswith("a.json:1: broken JSON (Expecting value at column 2)")
    assert "JSON array" in msg
    src = one(put("b.json", b'{\n  "text": "a"\n}\n'))
    assert "one JSON document spread over several lines" in fail_message(src)
    assert fail_message(one(put("c.json", b'{"text": 1}\n'))) == "c.json:1: text field 'text' is not a string (got int)"


def test_many_bad_lines_skip_keeps_count(cwd):
    lines = []
    for i in range(300):
        lines.append([b'{"text": "ok %d"}' % i, b"{bad", b"", b'{"text": 1}', b"\xc3\x28"][i % 5])
    src = one(put("a.jsonl", b"\n".join(lines)))
    texts, rows, _, _, rej = read_all(src, on_error="skip")
    nonblank = [i for i, ln in enumerate(lines) if ln.strip()]
    assert sorted(rows + [r for r, _ in rej]) == nonblank
    assert len(texts) == 60 and len(rej) == 180


@pytest.mark.parametrize("name,data", [
    ("a.jsonl", b""), ("b.jsonl", b"\n  \n\r\n"), ("c.jsonl.gz", gzip.compress(b"", mtime=0)),
    ("d.jsonl.gz", b""), ("e.jsonl.zst", zstandard.ZstdCompressor().compress(b"\n")),
])
def test_empty_file(cwd, name, data):
    # an empty data file (Spark writes them) holds no records: no error, a note
    src = one(put(name, data))
    for on_error in ("fail", "skip"):
        batches = list(read_source(src, on_error=on_error))
        assert [(len(b), b.rejected, b.skipped) for b in batches] == [(0, [], "empty file (no records)")]


def _lines_for_truncation(n=4000):
    rng = np.random.default_rng(5)
    return [json.dumps({"text": rng.bytes(60).hex(), "i": i}).encode() for i in range(n)]


@pytest.mark.parametrize("comp,ext", [("gzip", "gz"), ("zstd", "zst")])
def test_truncated_stream_both_modes(cwd, comp, ext):
    lines = _lines_for_truncation()
    full = compress(b"\n".join(lines) + b"\n", comp)
    cut = full[: len(full) * 2 // 3]
    # what an independent decoder gets out of the cut stream
    if comp == "gzip":
        partial = zlib.decompressobj(31).decompress(cut)
    else:
        partial = zstandard.ZstdDecompressor().decompressobj().decompress(cut)
    complete = partial.count(b"\n")
    assert 0 < complete < len(lines) and not partial.endswith(b"\n")  # a partial last line
    name = f"data/a.jsonl.{ext}"
    src = one(put(name, cut))
    reason = f"truncated {comp} stream after line {complete}"
    assert fail_message(src) == f"{name}: {reason}"
    texts, rows, _, _, rej = read_all(src, on_error="skip")
    assert rows == list(range(complete))
    assert texts == [json.loads(x)["text"] for x in lines[:complete]]
    assert rej == [(None, reason)]  # the partial line is not a broken-JSON record


@pytest.mark.parametrize("comp,ext", [("gzip", "gz"), ("zstd", "zst")])
def test_tiny_truncation_and_concatenated_streams(cwd, comp, ext):
    data = jsonl({"text": f"t{i}"} for i in range(50))
    full = compress(data, comp)
    src = one(put(f"a.jsonl.{ext}", full[:-1]))
    msg = fail_message(src)
    assert msg.startswith(f"a.jsonl.{ext}: truncated {comp} stream")
    # several gzip members / zstd frames make one stream
    src = one(put(f"b.jsonl.{ext}", full + full))
    assert read_all(src)[1] == list(range(100))


@pytest.mark.parametrize("comp,ext", [("gzip", "gz"), ("zstd", "zst")])
def test_not_compressed_though_named_so(cwd, comp, ext):
    name = f"a.jsonl.{ext}"
    src = one(put(name, b'{"text": "plain"}\n'))
    reason = f"not a {comp} file (the name ends in .{ext} but the data does not start with a {comp} header)"
    assert fail_message(src) == f"{name}: {reason}"
    assert read_all(src, on_error="skip")[4] == [(None, reason)]


def test_corrupt_gzip(cwd):
    data = gzip.compress(jsonl({"text": f"t{i}"} for i in range(100)), mtime=0)
    bad_crc = bytearray(data)
    bad_crc[-6] ^= 0xFF
    src = one(put("a.jsonl.gz", bytes(bad_crc)))
    # the CRC is checked at the stream's end: no place is named (was "before the first complete
    # line" for this small file, "after line 82114" for one of 100,000 lines, both untrue)
    assert fail_message(src) == ("a.jsonl.gz: corrupt gzip stream (incorrect data check): the checksum at its end "
                                 "does not match its data, which may be damaged anywhere")
    src = one(put("b.jsonl.gz", data + b"garbage"))
    msg = fail_message(src)
    assert msg == "b.jsonl.gz: corrupt gzip stream after line 100 (unexpected data after the end of the gzip stream)"
    texts, rows, _, _, rej = read_all(src, on_error="skip")
    assert rows == list(range(100)) and len(rej) == 1 and rej[0][0] is None
    src = one(put("c.jsonl.gz", data + b"\0\0\0\0"))  # zero padding is fine, as for gzip(1)
    assert read_all(src)[1] == list(range(100))


def test_unreadable_file(cwd):
    src = Source(path="gone.jsonl", name="gone.jsonl", relpath="gone.jsonl", format="jsonl")
    assert fail_message(src).startswith("gone.jsonl: cannot read file (")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(docs=st.lists(st.tuples(st.text(max_size=40), st.booleans(), st.integers(0, 2)), max_size=30),
       block=st.sampled_from([13, 64, 16 << 20]))
def test_property_jsonl_reads_back_exact_strings(tmp_path, monkeypatch, docs, block):
    monkeypatch.setattr(_streams, "BLOCK_BYTES", block)
    lines, want_rows, want = [], [], []
    for text, ascii_only, blanks in docs:
        lines += [b"", b"  \t"][:blanks]
        line = json.dumps({"text": text, "n": len(text)}, ensure_ascii=ascii_only).encode("utf-8")
        want_rows.append(len(lines))
        want.append(json.loads(line)["text"])
        lines.append(line)
    path = put(tmp_path / "p.jsonl", b"\n".join(lines) + b"\n")
    src = Source(path=path, name="p.jsonl", relpath="p.jsonl", format="jsonl")
    if not want:
        assert [b.skipped for b in read_source(src)] == ["empty file (no records)"]
        return
    texts, rows, _, _, rej = read_all(src, batch_size=7)
    assert texts == want and rows == want_rows and rej == []


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.one_of(st.binary(max_size=12), st.sampled_from(
    [b'{"text": "x"}', b'{"text": 1}', b"", b"[]", b'{"text": "\xe6\x97\xa5"}'])), max_size=40))
def test_property_nothing_silently_dropped(tmp_path, lines):
    lines = [ln.replace(b"\n", b" ") for ln in lines]
    path = put(tmp_path / "g.jsonl", b"\n".join(lines))
    src = Source(path=path, name="g.jsonl", relpath="g.jsonl", format="jsonl")
    texts, rows, _, _, rej = read_all(src, on_error="skip")
    if lines and lines[0].startswith(b"\xef\xbb\xbf"):
        lines[0] = lines[0][3:]  # a byte order mark starts the file, not the first record
    nonblank = [i for i, ln in enumerate(lines) if ln.strip(b" \t\r")]
    if nonblank:
        assert sorted(rows + [r for r, _ in rej]) == nonblank
    else:
        assert rej == [] and [b.skipped for b in read_source(src)] == ["empty file (no records)"]
    for r, t in zip(rows, texts):
        assert json.loads(lines[r].decode("utf-8"))["text"] == t


# --------------------------------------------------------------------------- Parquet and tables


def test_parquet_read(cwd):
    n = 25
    table = pa.table({"a": list(range(n)), "text": [f"doc {i} ü" for i in range(n)],
                      "id": list(range(100, 100 + n)), "q": [float(i) if i % 5 else None for i in range(n)]})
    pq.write_table(table, put("x.parquet", b""), row_group_size=10)
    src = one("x.parquet")
    batches = list(read_source(src, id_column="id", score_column="q", batch_size=4))
    assert all(len(b) <= 4 for b in batches)
    texts, rows, ids, scores, rej = read_all(src, id_column="id", score_column="q", batch_size=4)
    assert texts == table.column("text").to_pylist() and rows == list(range(n))
    assert ids == [str(100 + i) for i in range(n)]
    assert np.isnan(scores[0]) and scores[1] == 1.0 and rej == []


@pytest.mark.parametrize("arr", [
    pa.array(["a", "b", "a"], pa.string()), pa.array(["a", "b", "a"], pa.large_string()),
    pa.array(["a", "b", "a"], pa.string_view()), pa.array(["a", "b", "a"]).dictionary_encode(),
])
def test_string_column_types(cwd, arr):
    table = pa.table({"text": arr})
    try:
        pq.write_table(table, "s.parquet")
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
        pytest.skip("this pyarrow cannot write the type to Parquet")
    assert read_all(one("s.parquet"))[0] == ["a", "b", "a"]
    assert read_all(table_source(table))[0] == ["a", "b", "a"]


def test_parquet_bad_rows_and_files(cwd):
    pq.write_table(pa.table({"text": ["a", None, "c", None], "id": [1, 2, None, 4]}), "n.parquet")
    src = one("n.parquet")
    assert fail_message(src) == "n.parquet: row 1: text field 'text' is null"
    texts, rows, _, _, rej = read_all(src, on_error="skip")
    assert (texts, rows) == (["a", "c"], [0, 2])
    assert rej == [(1, "text field 'text' is null"), (3, "text field 'text' is null")]
    texts, rows, ids, _, rej = read_all(src, on_error="skip", id_column="id")
    assert (rows, ids) == ([0], ["1"]) and rej[1] == (2, "id field 'id' is null")

    pq.write_table(pa.table({"a": [1], "b": ["x"]}), "m.parquet")
    cases = [
        ("m.parquet", {}, "no column 'text' (columns: a, b; name the text column with --text-column b)"),
        ("m.parquet", {"text_column": "a"}, "text column 'a' is not a string column (type int64)"),
        ("m.parquet", {"text_column": "b", "score_column": "q"}, "no column 'q' (columns: a, b)"),
        ("m.parquet", {"text_column": "b", "score_column": "b2"}, "no column 'b2' (columns: a, b)"),
    ]
    put("junk.parquet", b"this is not parquet at all")
    pq.write_table(pa.table({"text": pa.array([], pa.string())}), "empty.parquet")
    pq.write_table(pa.table({"text": ["a"], "q": ["high"]}), "q.parquet")
    cases += [("q.parquet", {"score_column": "q"}, "score column 'q' is not numeric (type string)")]
    assert [(len(b), b.skipped) for b in read_source(one("empty.parquet"))] == [(0, "empty file (no records)")]
    # an empty file without the columns (as Spark writes one) holds no records either
    pq.write_table(pa.table({"other": pa.array([], pa.int64())}), "empty2.parquet")
    assert [(len(b), b.skipped) for b in read_source(one("empty2.parquet"))] == [(0, "empty file (no records)")]
    for name, kw, reason in cases:
        assert fail_message(one(name), **kw) == f"{name}: {reason}"
        assert read_all(one(name), on_error="skip", **kw)[4] == [(None, reason)]
    msg = fail_message(one("junk.parquet"))
    assert msg.startswith("junk.parquet: not a readable Parquet file (")


def test_table_sources():
    t = pa.table({"text": ["x", "y", None, "z"], "k": [3, 1, 2, 9]})
    src = table_source(t, name="mem")
    assert (src.format, src.name, src.path) == ("table", "mem", "<table>")
    texts, rows, ids, scores, rej = read_all(src, on_error="skip", id_column="k", batch_size=2)
    assert (texts, rows, ids) == (["x", "y", "z"], [0, 1, 3], ["3", "1", "9"])
    assert rej == [(2, "text field 'text' is null")]
    assert fail_message(src) == "mem: row 2: text field 'text' is null"
    assert table_source(t.to_batches()[0]).table.num_rows == 4
    import pandas as pd
    df = pd.DataFrame({"text": ["a", "b"], "score": [1, 2]})
    assert read_all(table_source(df), score_column="score")[3] == [1.0, 2.0]
    with pytest.raises(TypeError):
        table_source([{"text": "a"}])


def test_datasets_table_source():
    import datasets
    ds = datasets.Dataset.from_dict({"text": ["a", "b", "c"]}).select([2, 0])
    assert read_all(table_source(ds))[0] == ["c", "a"]


# --------------------------------------------------------------------------- text files


def test_text_folder(cwd):
    put("proj/pkg/__init__.py", b"")
    put("proj/pkg/mod.py", "def f():\n    return 'é'\n")
    put("proj/notes.txt", "hello\r\nworld")
    srcs = discover(["proj"])
    assert [s.name for s in srcs] == ["proj/notes.txt", "proj/pkg/__init__.py", "proj/pkg/mod.py"]
    got = [read_all(s, id_column="id") for s in srcs]
    assert [g[0] for g in got] == [["hello\r\nworld"], [""], ["def f():\n    return 'é'\n"]]
    assert [g[1] for g in got] == [[0], [0], [0]]
    assert got[1][2] == ["pkg/__init__.py"]  # the id of a text file: its path below the common folder, as by position


def test_text_bad_utf8(cwd):
    src = one(put("notes/a.txt", b"abc\xff rest"))
    assert fail_message(src) == "notes/a.txt: invalid UTF-8 at byte 3"
    assert read_all(src, on_error="skip")[4] == [(None, "invalid UTF-8 at byte 3")]
    src = one(put("notes/b.txt.gz", gzip.compress(b"abc\xff rest")))  # decompressed, then checked
    assert fail_message(src) == "notes/b.txt.gz: invalid UTF-8 at byte 3 of its gzip data"


# --------------------------------------------------------------------------- write_kept


def _raw_lines():
    return [b'{"text": "a", "z": 1,   "y": [1, 2]}', b'{"text":"\xc3\xa9\xf0\x9f\x98\x80","id":2}\r',
            b"", b'{"text": "c"}', b"   ", b'{"text": "d", "keep": "spacing"  }', b'{"text": "e"}']


@pytest.mark.parametrize("comp,ext", [(None, ""), ("gzip", ".gz"), ("zstd", ".zst")])
def test_write_kept_jsonl_byte_identical(cwd, comp, ext):
    lines = _raw_lines()
    data = b"\n".join(lines)  # no final newline
    src = one(put(f"in/a.jsonl{ext}", compress(data, comp)))
    keep = np.array([1, 5, 6], dtype=np.int64)
    out = f"out/deep/a.jsonl{ext}"
    assert write_kept(src, keep, out) == 3
    raw = open(out, "rb").read()
    want = lines[1] + b"\n" + lines[5] + b"\n" + lines[6] + b"\n"
    if comp == "gzip":
        assert raw[:2] == b"\x1f\x8b" and raw[3] & 0x08 == 0 and raw[4:8] == b"\0\0\0\0"  # no name, mtime 0
        raw = gzip.decompress(raw)
    elif comp == "zstd":
        raw = zstandard.ZstdDecompressor().decompressobj().decompress(raw)
    assert raw == want
    assert not os.path.exists(out + ".tmp")
    first = open(out, "rb").read()
    assert write_kept(src, keep, out) == 3 and open(out, "rb").read() == first  # deterministic
    # the rows of the reader are the rows of the writer
    assert read_all(src)[1] == [0, 1, 3, 5, 6]
    # nothing kept: a valid empty file
    assert write_kept(src, np.array([], np.int64), f"out/empty.jsonl{ext}") == 0
    assert [b.skipped for b in read_source(one(f"out/empty.jsonl{ext}"))] == ["empty file (no records)"]


def test_write_kept_bad_keep_rows(cwd):
    src = one(put("a.jsonl", b"\n".join(_raw_lines())))
    with pytest.raises(ValueError, match="sorted"):
        write_kept(src, [3, 1], "o.jsonl")
    with pytest.raises(ValueError, match="has 7 lines"):
        write_kept(src, [1, 9], "o.jsonl")
    with pytest.raises(ValueError, match="blank line"):
        write_kept(src, [2], "o.jsonl")
    assert not os.path.exists("o.jsonl") and not os.path.exists("o.jsonl.tmp")
    with pytest.raises(ValueError):
        write_kept(table_source(pa.table({"text": ["a"]})), [0], "t.parquet")
    with pytest.raises(ConfigError):
        write_kept(src, [0], "o.jsonl", output_format="csv")


def test_write_kept_truncated_source(cwd):
    lines = _lines_for_truncation()
    full = gzip.compress(b"\n".join(lines) + b"\n", mtime=0)
    src = one(put("t.jsonl.gz", full[: len(full) // 2]))
    _, rows, _, _, _ = read_all(src, on_error="skip")
    assert write_kept(src, rows[::2], "o.jsonl.gz") == len(rows[::2])
    assert gzip.decompress(open("o.jsonl.gz", "rb").read()) == b"".join(lines[r] + b"\n" for r in rows[::2])
    with pytest.raises(InputError, match="truncated gzip stream"):
        write_kept(src, [rows[-1] + 5], "o2.jsonl.gz")


def test_write_kept_parquet_same(cwd):
    schema = pa.schema([("text", pa.string()), ("n", pa.int32()), ("tags", pa.list_(pa.string())),
                        ("cat", pa.dictionary(pa.int32(), pa.string()))], metadata={b"origin": b"test"})
    n = 300
    table = pa.table({"text": [f"t{i}" for i in range(n)], "n": pa.array(range(n), pa.int32()),
                      "tags": [[str(i)] * (i % 3) for i in range(n)],
                      "cat": pa.array([["a", "b"][i % 2] for i in range(n)]).dictionary_encode()},
                     schema=schema)
    pq.write_table(table, "in.parquet", row_group_size=64, compression="zstd")
    src = one("in.parquet")
    keep = np.arange(0, n, 7, dtype=np.int64)
    assert write_kept(src, keep, "out/k.parquet") == len(keep)
    got = pq.read_table("out/k.parquet")
    assert got.schema.equals(pq.read_schema("in.parquet"), check_metadata=True)
    assert got.to_pylist() == table.take(pa.array(keep)).to_pylist()
    assert pq.ParquetFile("out/k.parquet").metadata.row_group(0).column(0).compression == "ZSTD"
    first = open("out/k.parquet", "rb").read()
    write_kept(src, keep, "out/k.parquet")
    assert open("out/k.parquet", "rb").read() == first
    assert write_kept(src, [], "out/none.parquet") == 0
    assert pq.read_table("out/none.parquet").num_rows == 0


def test_write_kept_text(cwd):
    src = one(put("notes/a.txt", "héllo\r\n"))
    assert write_kept(src, [0], "out/notes/a.txt") == 1
    assert open("out/notes/a.txt", "rb").read() == "héllo\r\n".encode()
    assert write_kept(src, [], "out/b.txt") == 0 and not os.path.exists("out/b.txt")
    assert write_kept(src, [0], "out/a.jsonl", output_format="jsonl") == 1
    # the id as removed.parquet names the file (its path below the inputs' common folder), not as typed
    assert json.loads(open("out/a.jsonl", "rb").read()) == {"id": "a.txt", "text": "héllo\r\n"}
    assert write_kept(src, [0], "out/a.parquet", output_format="parquet") == 1
    assert pq.read_table("out/a.parquet").to_pylist() == [{"id": "a.txt", "text": "héllo\r\n"}]


def test_convert_jsonl_to_parquet(cwd, monkeypatch):
    monkeypatch.setattr(_streams, "BLOCK_BYTES", 64)  # several blocks: one schema over all of them
    recs = [{"text": "a", "n": 1, "when": "2020-01-01", "meta": {"u": "x"}},
            {"text": "b", "n": 2.5, "when": "2021-02-03T04:05:06"},
            {"text": "c", "extra": [1, 2], "n": None},
            {"text": "d", "n": 4, "late": True}]
    src = one(put("a.jsonl.gz", gzip.compress(jsonl(recs))))
    assert write_kept(src, [0, 1, 2, 3], "o/a.parquet", output_format="parquet") == 4
    got = pq.read_table("o/a.parquet").to_pylist()
    for g, r in zip(got, recs):
        assert {k: v for k, v in g.items() if v is not None} == {k: v for k, v in r.items() if v is not None}
    assert pq.read_schema("o/a.parquet").field("when").type == pa.string()  # dates stay strings
    first = open("o/a.parquet", "rb").read()
    write_kept(src, [0, 1, 2, 3], "o/a.parquet", output_format="parquet")
    assert open("o/a.parquet", "rb").read() == first
    # a field that is a number here and a string there cannot become one Parquet column
    mixed = one(put("m.jsonl", jsonl([{"text": "a", "v": 1}, {"text": "b", "v": "x"}])))
    with pytest.raises(InputError, match=r"^m.jsonl: cannot convert the kept records to Parquet"):
        write_kept(mixed, [0, 1], "o/m.parquet", output_format="parquet")
    assert write_kept(mixed, [1], "o/m1.parquet", output_format="parquet") == 1


def test_convert_parquet_to_jsonl_and_jsonl_gz_to_jsonl(cwd):
    pq.write_table(pa.table({"text": ["a", "ü", "c"], "n": [1, 2, 3], "b": [b"x", None, b"z"]}), "p.parquet")
    src = one("p.parquet")
    assert write_kept(src, [1, 2], "o/p.jsonl", output_format="jsonl") == 2
    assert open("o/p.jsonl", encoding="utf-8").read() == \
        '{"text": "ü", "n": 2, "b": null}\n{"text": "c", "n": 3, "b": "b\'z\'"}\n'
    lines = _raw_lines()
    src = one(put("g.jsonl.zst", compress(b"\n".join(lines), "zstd")))
    rel = output_relpath(src, "jsonl")
    assert rel == "g.jsonl"
    assert write_kept(src, [0, 6], "o/" + rel, output_format="jsonl") == 2
    assert open("o/g.jsonl", "rb").read() == lines[0] + b"\n" + lines[6] + b"\n"


@pytest.mark.parametrize("compression", [None, "gzip", "zstd"])
def test_blocks_are_whole_lines_that_add_up_to_the_file(tmp_path, compression):
    """iter_blocks: every block but the last ends with a newline, no block is empty, and the
    blocks put together are the file's bytes (without its BOM), for lines shorter and longer
    than a block and files with and without a final newline."""
    import gzip
    import random

    import zstandard

    from neardup.io._streams import iter_blocks

    rng = random.Random(5)
    for case in range(12):
        lines = [b"x" * rng.choice([0, 1, 7, 40, 300, 5000]) for _ in range(rng.randint(1, 60))]
        body = b"\n".join(lines) + (b"\n" if case % 2 else b"")
        raw = (b"\xef\xbb\xbf" if case % 3 == 0 else b"") + body
        name = tmp_path / f"f{case}.jsonl{'.gz' if compression == 'gzip' else '.zst' if compression else ''}"
        name.write_bytes(gzip.compress(raw) if compression == "gzip" else
                         zstandard.ZstdCompressor().compress(raw) if compression else raw)
        for block in (64, 1000, 1 << 20):
            blocks = list(iter_blocks(str(name), compression, block_bytes=block))
            assert b"".join(blocks) == body
            assert all(b for b in blocks)
            assert all(b.endswith(b"\n") for b in blocks[:-1])
            assert all(isinstance(b, bytes) for b in blocks)
