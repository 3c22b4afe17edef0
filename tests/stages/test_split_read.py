"""A large plain JSONL file read by several tasks, one byte range each (neardup.io.splits), gives
the run of the file read whole: the same output bytes (kept/, removed.parquet, clusters.parquet,
rejected.parquet, stats.json without its seconds), ids, errors. $NEARDUP_SPLIT_BYTES makes a
small file split here. (The Ray engine's: tests/engines/test_ray_engine.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import neardup
from neardup.errors import InputError
from neardup.io import discover
from neardup.io.splits import count_span, nominal_ranges
from neardup.stages.workdir import plan_reads
from helpers import outputs

SPLIT = "NEARDUP_SPLIT_BYTES"


def corpus_file(path: Path, crlf=False, last_newline=True, long_line=False) -> Path:
    """Near-duplicates in one JSONL file, with blank lines, a bad line and (``long_line``) one
    line longer than several ranges."""
    from neardup.testing.synth import generate_corpus
    texts = generate_corpus(400, seed=5, doc_words=50).texts
    lines = [json.dumps({"id": f"d{i}", "text": t}) for i, t in enumerate(texts)]
    lines[120:120] = ["", "   ", '{"id": "bad", "text": 7}']
    if long_line:
        lines[200:200] = [json.dumps({"id": "long", "text": " ".join(texts[:150])})]
    end = "\r\n" if crlf else "\n"
    path.write_bytes((end.join(lines) + (end if last_newline else "")).encode())
    return path


def whole_and_split(tmp_path, monkeypatch, inputs, every: int, **options):
    """Output folders of the run with the file read whole and cut every ``every`` bytes."""
    monkeypatch.delenv(SPLIT, raising=False)
    neardup.dedup(inputs, output=str(tmp_path / "whole"), **options)
    monkeypatch.setenv(SPLIT, str(every))
    neardup.dedup(inputs, output=str(tmp_path / "split"), **options)
    return tmp_path / "whole", tmp_path / "split"


def ranges_of(inputs, every: int, monkeypatch) -> int:
    monkeypatch.setenv(SPLIT, str(every))
    return len(plan_reads(discover(inputs))[1])


@pytest.mark.parametrize("id_column", ["", "id"])  # positions (FILE:LINE), the records' field
@pytest.mark.parametrize("crlf,last_newline", [(False, True), (True, False)])
def test_split_file_same_bytes(tmp_path, monkeypatch, id_column, crlf, last_newline):
    """Guards: rows of later ranges not offset by their first line (``with_row_base`` in
    stages.corpus returning its table as it is): ids FILE:LINE, kept/ and removed.parquet differ; a split file's rows from
    one block only in the write stage (``pieces[-1:]`` in rows_of_sources): kept/ differs."""
    f = corpus_file(tmp_path / "big.jsonl", crlf=crlf, last_newline=last_newline)
    every = f.stat().st_size // 6
    assert ranges_of([str(f)], every, monkeypatch) >= 6
    whole, split = whole_and_split(tmp_path, monkeypatch, [str(f)], every, id_column=id_column,
                                   on_error="skip", keep="longest")
    a, b = outputs(whole), outputs(split)
    assert a["stats.json"]["counts"]["removed"] > 0 and a["stats.json"]["counts"]["rejected"] == 1
    assert sorted(a) == sorted(b)
    assert [k for k in a if a[k] != b[k]] == []


def test_a_line_spanning_ranges_and_files_around_it(tmp_path, monkeypatch):
    """One line longer than several ranges (empty ranges), the split file between two small
    files (compressed: read whole) and lines exactly at range boundaries: the same bytes."""
    import gzip
    (tmp_path / "in").mkdir()
    f = corpus_file(tmp_path / "in" / "b.jsonl", long_line=True)
    (tmp_path / "in" / "a.jsonl").write_text('{"id": "a0", "text": "first file"}\n')
    with gzip.open(tmp_path / "in" / "c.jsonl.gz", "wb") as g:
        g.write(f.read_bytes()[:20000])
    every = f.stat().st_size // 9
    assert ranges_of([str(tmp_path / "in")], every, monkeypatch) >= 9
    spans = [count_span(str(f), s, e) for s, e in nominal_ranges(f.stat().st_size, every)]
    assert any(a == b for a, b, _ in spans)  # a range inside the long line: empty
    whole, split = whole_and_split(tmp_path, monkeypatch, [str(tmp_path / "in")], every,
                                   on_error="skip", id_column="")
    a, b = outputs(whole), outputs(split)
    assert sorted(a) == sorted(b)
    assert [k for k in a if a[k] != b[k]] == []


def test_boundaries_on_line_starts(tmp_path, monkeypatch):
    """Every line the same length and the ranges a multiple of it: every nominal start is the
    first byte of a line (that line stays in the range before). The same bytes."""
    lines = [json.dumps({"text": f"document number {i:05d} " + "word " * 8}) for i in range(300)]
    lines += lines[:40]  # exact duplicates
    f = tmp_path / "even.jsonl"
    f.write_text("\n".join(lines) + "\n")
    width = len(lines[0]) + 1
    assert all(len(x) + 1 == width for x in lines)
    assert ranges_of([str(f)], width * 25, monkeypatch) > 10
    whole, split = whole_and_split(tmp_path, monkeypatch, [str(f)], width * 25, id_column="")
    a, b = outputs(whole), outputs(split)
    assert a["stats.json"]["counts"]["removed"] == 40
    assert [k for k in a if a[k] != b[k]] == []


def test_bad_line_in_a_later_range_names_its_line(tmp_path, monkeypatch):
    """on_error='fail': the error names the file's line number, not the range's (a range's rows
    are numbered from 0; guard: ``return 0`` for ``self._line_base`` in ReadContext.line_base);
    the work dir shows the ranges."""
    f = corpus_file(tmp_path / "big.jsonl")
    lines = f.read_bytes().split(b"\n")
    assert lines[122] == b'{"id": "bad", "text": 7}'
    every = len(b"\n".join(lines[:60]))  # the bad line is in the third range
    monkeypatch.setenv(SPLIT, str(every))
    work = tmp_path / "work"
    with pytest.raises(InputError) as ei:
        neardup.dedup([str(f)], output=str(tmp_path / "out"), work_dir=str(work))
    assert "big.jsonl:123: text field 'text' is not a string" in str(ei.value)
    assert len(json.loads((work / "read" / "ranges.json").read_text())) >= 3


def test_local_engine_map_concurrent_keeps_order_and_first_error():
    """LocalEngine.map(concurrent=N): results in item order, the first error in item order."""
    import time
    from neardup.engines.local import LocalEngine

    def slow(i):
        time.sleep(0.02 * (5 - i))
        if i in (2, 4):
            raise ValueError(f"item {i}")
        return i * 10

    with LocalEngine(workers=2) as eng:
        assert eng.collect(eng.map(lambda i: i, range(6), concurrent=3)) == list(range(6))
        with pytest.raises(ValueError, match="item 2"):
            eng.map(slow, range(5), concurrent=4)


def test_file_in_object_storage_split_same_bytes(tmp_path, monkeypatch, s3):
    """A JSONL file on an S3 server (moto, on loopback) is cut like a local one, each range read
    by seeking in it (ranged GETs): the bytes of the file read whole."""
    f = corpus_file(tmp_path / "big.jsonl", crlf=True)
    url = s3.put("in/big.jsonl", f.read_bytes())
    every = f.stat().st_size // 4
    assert ranges_of([url], every, monkeypatch) >= 4
    whole, split = whole_and_split(tmp_path, monkeypatch, [url], every, on_error="skip", id_column="")
    a, b = outputs(whole), outputs(split)
    assert a["stats.json"]["counts"]["removed"] > 0
    assert [k for k in a if a[k] != b[k]] == []


@pytest.mark.slow
def test_split_file_of_blank_lines_is_an_empty_file(tmp_path, monkeypatch):
    """A split file without a record is skipped as empty, as when read whole, though none of its
    ranges sees the whole file (guard: ``out += ...`` left out of stages.read.skipped_of:
    stats.json's skipped_empty differs)."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "blank.jsonl").write_bytes(b"\n  \n" * 3000)
    corpus_file(tmp_path / "in" / "docs.jsonl")
    assert ranges_of([str(tmp_path / "in" / "blank.jsonl")], 1000, monkeypatch) >= 10
    whole, split = whole_and_split(tmp_path, monkeypatch, [str(tmp_path / "in")], 1000, on_error="skip")
    a, b = outputs(whole), outputs(split)
    assert a["stats.json"]["files"]["skipped_empty"] == 1
    assert [k for k in a if a[k] != b[k]] == []


def test_a_read_stopped_between_ranges_resumes_to_the_same_bytes(tmp_path, monkeypatch):
    """A run whose read stage stops after some ranges of a split file are read (their rows
    numbered from 0, their lines in their summaries) resumes with the others: the first lines
    summed over the ranges of both runs, the same bytes as the file read whole. Guard: a
    summary's ``lines`` left out (``if batch.lines is not None`` never true in _read_into)."""
    import neardup.stages.read as rd
    f = corpus_file(tmp_path / "big.jsonl")
    every = f.stat().st_size // 7
    monkeypatch.delenv(SPLIT, raising=False)
    neardup.dedup([str(f)], output=str(tmp_path / "whole"), on_error="skip", id_column="")
    monkeypatch.setenv(SPLIT, str(every))
    real = rd.read_block

    def stop_at_block_4(work, config, sources, block, *a, **k):
        if block == 4:
            raise RuntimeError("stopped here")
        return real(work, config, sources, block, *a, **k)

    monkeypatch.setattr(rd, "read_block", stop_at_block_4)
    work = tmp_path / "work"
    with pytest.raises(RuntimeError, match="stopped here"):
        neardup.dedup([str(f)], output=str(tmp_path / "split"), on_error="skip", id_column="", work_dir=str(work))
    assert (work / "read" / "block-000002.json").exists() and not (work / "read" / "block-000004.json").exists()
    monkeypatch.setattr(rd, "read_block", real)
    neardup.dedup([str(f)], output=str(tmp_path / "split"), on_error="skip", id_column="", work_dir=str(work),
                  resume=True)
    a, b = outputs(tmp_path / "whole"), outputs(tmp_path / "split")
    assert a["stats.json"]["counts"]["rejected"] == 1
    assert [k for k in a if a[k] != b[k]] == []
