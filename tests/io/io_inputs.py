"""Input files for the io tests: written (:func:`put`), compressed, discovered one at a time
(:func:`one`), read whole (:func:`read_all`)."""

from __future__ import annotations

import gzip
import os

import numpy as np
import pyarrow as pa
import zstandard

from neardup.io import Batch, Source, discover, read_source


def put(path, data) -> str:
    path = str(path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    with open(path, "wb") as f:
        f.write(data)
    return path


def compress(data: bytes, compression):
    if compression == "gzip":
        return gzip.compress(data, mtime=0)
    if compression == "zstd":
        return zstandard.ZstdCompressor(level=3).compress(data)
    return data


def one(inp) -> Source:
    srcs = discover([inp])
    assert len(srcs) == 1
    return srcs[0]


def read_all(src, **kw):
    """(texts, rows, ids, scores, rejected) of a whole source."""
    texts, rows, ids, scores, rejected = [], [], [], [], []
    for b in read_source(src, **kw):
        assert isinstance(b, Batch)
        assert b.text.type == pa.large_string()
        assert b.text.null_count == 0
        assert b.rows.dtype == np.int64 and len(b.rows) == len(b.text)
        texts += b.text.to_pylist()
        rows += b.rows.tolist()
        if b.ids is not None:
            assert b.ids.type == pa.string() and len(b.ids) == len(b.rows)
            ids += b.ids.to_pylist()
        if b.scores is not None:
            assert b.scores.dtype == np.float64 and len(b.scores) == len(b.rows)
            scores += b.scores.tolist()
        rejected += b.rejected
    return texts, rows, ids, scores, rejected
