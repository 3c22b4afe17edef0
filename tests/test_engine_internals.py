"""Pieces of the local engine that the end-to-end tests only see from afar."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from neardup.engines.local import ROW_GROUP, ParquetRows, ShingleStore
from neardup.engines.workdir import AppendFile, open_column


def test_char_class_table_cache_matches_a_fresh_build(tmp_path, monkeypatch):
    from neardup import shingles
    monkeypatch.setenv("NEARDUP_CACHE", str(tmp_path))
    shingles.char_classes.cache_clear()
    try:
        built = shingles.char_classes()          # builds and writes the cache file
        assert len(list(tmp_path.glob("char_classes-*.npy"))) == 1
        shingles.char_classes.cache_clear()
        loaded = shingles.char_classes()         # loads it
        assert np.array_equal(built, loaded)
        assert np.array_equal(loaded, shingles._build_char_classes())
        # a corrupt cache file is rebuilt, not trusted
        next(tmp_path.glob("char_classes-*.npy")).write_bytes(b"garbage")
        shingles.char_classes.cache_clear()
        assert np.array_equal(shingles.char_classes(), built)
    finally:
        shingles.char_classes.cache_clear()


def test_parquet_rows_same_bytes_whatever_the_batching(tmp_path):
    n = ROW_GROUP * 2 + 123
    table = pa.table({"id": pa.array([f"d{i}" for i in range(n)]), "x": pa.array(np.arange(n, dtype=np.float64))})
    paths = []
    for sizes in ([n], [1, 5000, ROW_GROUP, n - 1 - 5000 - ROW_GROUP], [ROW_GROUP - 1, 2, n - ROW_GROUP - 1]):
        path = tmp_path / f"t{len(paths)}.parquet"
        w = ParquetRows(str(path), table.schema)
        start = 0
        for size in sizes:
            w.write(table.slice(start, size))
            start += size
        w.close()
        paths.append(path)
    data = [p.read_bytes() for p in paths]
    assert data[0] == data[1] == data[2]
    meta = pq.ParquetFile(paths[0]).metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [ROW_GROUP, ROW_GROUP, 123]
    assert pq.read_table(paths[1]).equals(table)


def test_append_file_and_shingle_store(tmp_path):
    f = AppendFile(str(tmp_path / "x.u64"), np.uint64)
    f.append(np.arange(10, dtype=np.uint64))
    f.append(np.arange(10, 25, dtype=np.uint64))
    f.close()
    col = open_column(str(tmp_path / "x.u64"), np.uint64)
    assert col.tolist() == list(range(25))
    g = AppendFile(str(tmp_path / "y.u32"), np.uint32, 4)
    g.append(np.arange(8, dtype=np.uint32).reshape(2, 4))
    g.close()
    assert open_column(str(tmp_path / "y.u32"), np.uint32, 4).shape == (2, 4)
    # raw shingles of 6 documents (one empty, with repeats, out of order) read back as sorted sets
    docs = [[5, 3, 5], [], [9], [2, 2, 2, 1], [7, 8], [4, 0]]
    h = AppendFile(str(tmp_path / "sh.u64"), np.uint64)
    for d in docs:
        h.append(np.array(d, dtype=np.uint64))
    h.close()
    store = ShingleStore(str(tmp_path / "sh.u64"), np.array([len(d) for d in docs]))
    for pick in ([0, 1, 2, 3, 4, 5], [1, 3, 4], [0, 5], [2]):
        off, vals = store.raw(np.array(pick))
        got = [vals[off[i]:off[i + 1]].tolist() for i in range(len(pick))]
        assert got == [docs[p] for p in pick]


def test_estimate_documents_for_the_progress_bar(tmp_path):
    import json
    import gzip
    from neardup import io as nio
    from neardup.engines.local import estimate_documents
    lines = [json.dumps({"text": "word " * (i % 50 + 1)}) for i in range(3000)]
    (tmp_path / "a.jsonl").write_text("\n".join(lines) + "\n")
    pq.write_table(pa.table({"text": ["x"] * 77}), tmp_path / "b.parquet")
    (tmp_path / "c.txt").write_text("one document")
    est = estimate_documents(nio.discover([str(tmp_path / "a.jsonl"), str(tmp_path / "b.parquet"),
                                           str(tmp_path / "c.txt")]))
    assert abs(est - (3000 + 77 + 1)) <= 0.05 * 3000
    (tmp_path / "d.jsonl.gz").write_bytes(gzip.compress(b'{"text": "x"}\n'))
    assert estimate_documents(nio.discover([str(tmp_path / "d.jsonl.gz")])) is None
