"""The texts of plain JSONL blocks hashed where they lie in the block (kernels.shingles.TextSpans,
``read_source(text_spans=True)``: no copy gathers them, escapes decoded over their own bytes)
give what the texts gathered into an Arrow array gave: the same strings, signatures, codes, and
the same output bytes of a run (kept/, removed.parquet, clusters.parquet, stats.json without its
seconds) on escapes, Unicode, CRLF, empty texts, a huge line, gzip / zstd, split files, ids."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import neardup
from neardup.io import Source, read_source
from neardup.kernels.jsonl import extract
from neardup.kernels.lines import line_bounds
from neardup.kernels.minhash import MinHasher
from neardup.kernels.shingles import TextSpans
from neardup.stages import read as read_stage
from helpers import outputs

TEXTS = [
    "plain words of a plain line",
    'a "quoted" word, a back\\slash, a tab\there and a\nnew line',
    "caf\u00e9 na\u00efve \u00c9COLE \u4e2d\u6587\u5b57 emoji \U0001F600 and more words",
    "",
    "   ",
    "\u0130stanbul \u212b \ufb01 ligature K\u0301 marks",
    "slash / and \\/ and \b\f\r controls",
]


def _lines(texts, ensure_ascii, ids=True):
    return [json.dumps({"id": f"d{i}", "text": t} if ids else {"text": t}, ensure_ascii=ensure_ascii)
            for i, t in enumerate(texts)]


@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_spans_are_the_texts_and_hash_as_them(ensure_ascii):
    block = ("\n".join(_lines(TEXTS * 3, ensure_ascii)) + "\n").encode()
    starts, ends = line_bounds(block)
    lines = np.arange(len(starts))
    text, ids = extract(block, starts, ends, lines, "text", "id")
    buf = bytearray(block)
    spans, span_ids = extract(buf, starts, ends, lines, "text", "id", in_place=True)
    assert isinstance(spans, TextSpans) and len(spans) == len(text)
    assert spans.to_arrow().to_pylist() == text.to_pylist() == TEXTS * 3
    assert span_ids.to_pylist() == ids.to_pylist()
    assert spans.nbytes == text.nbytes
    assert spans.slice(2, 5).to_arrow().to_pylist() == text.slice(2, 5).to_pylist()
    assert spans.slice(2, 5).nbytes == text.slice(2, 5).nbytes
    assert spans.to_arrow(np.array([4, 1])).to_pylist() == [TEXTS[4], TEXTS[1]]
    for options in ({}, {"char_ngrams": True}, {"lowercase": False, "normalize_unicode": False}):
        hasher = MinHasher(num_perm=64, ngram=3, seed=7, **options)
        sig, counts, codes = hasher.signatures_and_codes(text)
        sig2, counts2, codes2 = hasher.signatures_and_codes(spans)
        assert np.array_equal(sig, sig2) and np.array_equal(counts, counts2) and np.array_equal(codes, codes2)
        assert np.array_equal(hasher.signatures(text), hasher.signatures(spans.slice(0, len(spans))))


def test_escapes_in_a_buffer_that_cannot_be_written_are_copied_out():
    block = ("\n".join(_lines(TEXTS, True)) + "\n").encode()  # bytes: read-only
    starts, ends = line_bounds(block)
    text, _ = extract(block, starts, ends, np.arange(len(starts)), "text", None, in_place=True)
    assert isinstance(text, pa.Array) and text.to_pylist() == TEXTS
    plain = ("\n".join(_lines(TEXTS[:1] * 4, True)) + "\n").encode()
    starts, ends = line_bounds(plain)
    text, _ = extract(plain, starts, ends, np.arange(len(starts)), "text", None, in_place=True)
    assert isinstance(text, TextSpans) and text.to_arrow().to_pylist() == TEXTS[:1] * 4


def test_read_source_hands_spans_only_when_asked(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text("\n".join(_lines(TEXTS, True)) + "\n")
    src = Source(path=str(path), name="a.jsonl", relpath="a.jsonl", format="jsonl")
    asked = [b.text for b in read_source(src, text_spans=True)]
    plain = [b.text for b in read_source(src)]
    assert all(isinstance(t, pa.Array) for t in plain)
    assert [t.to_arrow().to_pylist() if isinstance(t, TextSpans) else t.to_pylist() for t in asked] == \
        [t.to_pylist() for t in plain]


def _corpus(path: Path, *, crlf=False, ensure_ascii=True, huge=False, compress=None, ids=True) -> Path:
    from neardup.testing.synth import generate_corpus
    texts = generate_corpus(300, seed=3, doc_words=40).texts
    texts = [t if i % 5 else t.replace(" ", "\n", 3).replace("e", "\u00e9", 2).replace("a", '"', 1)
             for i, t in enumerate(texts)] + TEXTS
    if huge:
        texts.insert(100, " ".join(texts[:200]))
    lines = _lines(texts, ensure_ascii, ids)
    lines[50:50] = ["", '{"id": "bad", "text": 7}']
    data = ((("\r\n" if crlf else "\n").join(lines)) + "\n").encode()
    if compress == "gzip":
        data, path = gzip.compress(data), path.with_suffix(".jsonl.gz")
    elif compress == "zstd":
        import pyarrow as _pa
        data, path = _pa.compress(data, codec="zstd", asbytes=True), path.with_suffix(".jsonl.zst")
    path.write_bytes(data)
    return path


CASES = {
    "escapes": {}, "utf8": {"ensure_ascii": False}, "crlf": {"crlf": True}, "huge": {"huge": True},
    "gzip": {"compress": "gzip"}, "zstd": {"compress": "zstd"}, "positions": {"ids": False},
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("split", [None, 20000])
def test_a_run_gives_the_same_bytes_as_with_the_texts_gathered(tmp_path, monkeypatch, case, split):
    monkeypatch.setenv("NEARDUP_JSONL_SCANNER", "1")
    if split:
        monkeypatch.setenv("NEARDUP_SPLIT_BYTES", str(split))
    path = _corpus(tmp_path / "c.jsonl", **CASES[case])
    options = dict(threshold=0.6, on_error="skip", id_column=None if case == "positions" else "id")
    got = {}
    for spans in (False, True):
        monkeypatch.setattr(read_stage, "TEXT_SPANS", spans)
        out = tmp_path / f"out{int(spans)}"
        neardup.dedup([str(path)], output=str(out), **options)
        got[spans] = outputs(out)
    assert got[True] == got[False]
    assert json.loads(json.dumps(got[True]["stats.json"]))["counts"]["removed"] > 0


@pytest.mark.slow  # a run that compiles the JSONL scanner in a fresh cache: 10-14 s
def test_a_run_that_read_spans_leaves_the_scanner_worth_it(tmp_path):
    """The scanner counts as compiled (numba's cache) after a run that read spans of texts
    without escapes (which never compiles the kernels of escapes or of gathered texts): the next
    run on a small input reads with it, not with pyarrow."""
    import os
    import subprocess
    import sys

    from helpers import SRC

    p = tmp_path / "c.jsonl"
    p.write_text("".join(json.dumps({"id": i, "text": f"words {i}"}) + "\n" for i in range(30)))
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), PYTHONPATH=SRC)
    read = f"""
from neardup.io import Source, read_source
src = Source(path={str(p)!r}, name="c.jsonl", relpath="c.jsonl", format="jsonl")
print(sum(len(b) for b in read_source(src, id_column="id", text_spans=True)))
"""
    r = subprocess.run([sys.executable, "-c", read], env=dict(env, NEARDUP_JSONL_SCANNER="1"),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.split() == ["30"], r.stderr
    check = "from neardup.kernels import jsonl as J; print(J.worth_it(10))"
    r = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "True", r.stdout + r.stderr


def test_the_kernel_is_given_one_type_of_part_whatever_the_texts_came_as():
    # guards: arrow_buffers' read-only views. Arrow's own buffers can be written, those over bytes
    # cannot, the spans' are made read-only: _process_kernel compiled a version for each (a JSONL
    # run, a folder of text files: ~10 CPU-s more on a machine's first runs)
    from numba import typeof

    from neardup.config import Shingling
    from neardup.kernels.shingles import prepare

    texts = TEXTS * 3
    own = pa.array(texts, pa.large_string())
    assert own.buffers()[2].is_mutable
    offsets = np.cumsum([0] + [len(t.encode()) for t in texts], dtype=np.int64)
    over_bytes = pa.Array.from_buffers(pa.large_string(), len(texts), [
        None, pa.py_buffer(offsets.tobytes()), pa.py_buffer("".join(texts).encode())])
    assert not over_bytes.buffers()[2].is_mutable
    block = ("\n".join(_lines(texts, False)) + "\n").encode()
    starts, ends = line_bounds(block)
    spans, _ = extract(bytearray(block), starts, ends, np.arange(len(starts)), "text", "id", in_place=True)
    assert isinstance(spans, TextSpans)
    kinds = set()
    for source in (own, over_bytes, spans):
        part = prepare(source, Shingling())[1]
        kinds.add(tuple(typeof(a) for a in (part.starts, part.ends, part.data)))
    assert len(kinds) == 1, kinds
