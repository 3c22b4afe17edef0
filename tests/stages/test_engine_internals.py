"""Pieces of the stages that the end-to-end tests only see from afar."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup.io.storage.tables import ROW_GROUP, ParquetRows


@pytest.mark.slow
def test_char_class_table_cache_matches_a_fresh_build(tmp_path, monkeypatch):
    from neardup.kernels import charclasses
    monkeypatch.setenv("NEARDUP_CACHE", str(tmp_path))
    charclasses.char_classes.cache_clear()
    try:
        built = charclasses.char_classes()          # builds and writes the cache file
        assert len(list(tmp_path.glob("char_classes-*.npy"))) == 1
        charclasses.char_classes.cache_clear()
        loaded = charclasses.char_classes()         # loads it
        assert np.array_equal(built, loaded)
        assert np.array_equal(loaded, charclasses._build_char_classes())
        # a corrupt cache file is rebuilt, not trusted
        next(tmp_path.glob("char_classes-*.npy")).write_bytes(b"garbage")
        charclasses.char_classes.cache_clear()
        assert np.array_equal(charclasses.char_classes(), built)
    finally:
        charclasses.char_classes.cache_clear()


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


def test_doc_store_reads_back_each_documents_data(tmp_path):
    """Signatures and raw shingles of any documents, across blocks, in the order asked."""
    from neardup import Config
    from neardup import io as nio
    from neardup.kernels.minhash import MinHasher
    from neardup.stages.corpus import Corpus, DocStore
    from neardup.stages.workdir import WorkDir, plan_blocks
    from neardup.stages.read import read_block
    texts = [f"document {i} " + "word " * (i % 7) + ("tail" if i % 3 else "") for i in range(40)] + ["", "a"]
    for i in range(3):
        (tmp_path / f"f{i}.txt").write_text("\n".join(texts[i::3]))
    for verify in ("exact", "estimate"):
        cfg = Config(verify=verify).resolved()
        sources = nio.discover([str(tmp_path / "*.txt")])
        work = WorkDir(str(tmp_path / f"work-{verify}"), "fp", resume=False)
        blocks = plan_blocks(sources, block_bytes=1)  # one file per block
        assert blocks == [[0], [1], [2]]
        for b, members in enumerate(blocks):
            read_block(work.folder, cfg, sources, b, members)
        corpus = Corpus(work, cfg, blocks)
        store = DocStore(work.folder, corpus.block_start, cfg.num_perm)
        file_texts = [(tmp_path / f"f{i}.txt").read_text() for i in range(3)]
        hasher = MinHasher.from_config(cfg)
        for pick in ([0, 1, 2], [2], [0, 2], [1]):
            docs = np.array(pick, np.int64)
            if verify == "exact":
                off, vals = store.fingerprints(docs)
                assert vals.dtype == np.uint32
                for i, d in enumerate(pick):
                    _, o2, sh = hasher.signatures_and_shingles(pa.array([file_texts[d]], pa.large_string()))
                    # the fingerprints are the high halves of the 64-bit shingle hashes, repeats
                    # kept (their order is the code's: bucket order)
                    assert sorted(vals[off[i]:off[i + 1]].tolist()) == sorted((sh >> np.uint64(32)).tolist())
            else:
                sigs = store.signatures(docs)
                want, _ = hasher.signatures_and_counts(pa.array([file_texts[d] for d in pick], pa.large_string()))
                assert np.array_equal(sigs, want)


def test_pread_rows_reads_scattered_ranges_in_groups(tmp_path, monkeypatch):
    """read_rows gives every range's items whatever the grouping: adjacent, near (one read
    with the gap dropped), far apart, empty ranges, a group cut by the span limit; uint32 and
    uint64 files."""
    from neardup.io.storage import ranges
    for dtype in (np.uint32, np.uint64):
        data = np.arange(200_000, dtype=dtype) * 7 + 3
        path = tmp_path / f"f{np.dtype(dtype).itemsize}.bin"
        path.write_bytes(data.tobytes())
        rng = np.random.default_rng(1)
        cuts = np.sort(rng.choice(200_000, size=4000, replace=False))
        starts, ends = cuts[0::2].astype(np.int64), cuts[1::2].astype(np.int64)
        pick = rng.random(len(starts)) < 0.3
        starts, ends = starts[pick], ends[pick]
        ends[::7] = starts[::7]  # some empty ranges
        for gap, span in ((32 << 10, 8 << 20), (0, 8 << 20), (1 << 20, 4096), (1 << 30, 1 << 40)):
            monkeypatch.setattr(ranges, "LOCAL_GAP", gap)
            monkeypatch.setattr(ranges, "LOCAL_SPAN", span)
            off, vals = ranges.read_rows(str(path), starts, ends, dtype)
            assert vals.dtype == dtype
            want = np.concatenate([data[a:b] for a, b in zip(starts, ends)])
            assert np.array_equal(vals, want)
            assert np.array_equal(np.diff(off), ends - starts)


def test_a_large_batch_goes_through_the_kernels_alone(tmp_path, monkeypatch):
    """Small batches (a file of one short document each) are gathered into one call of the
    kernels; a batch of ALONE_BYTES of texts or more is not gathered: the small ones before it
    go on their own, it goes alone (joining it to others would copy its texts), the next ones
    are gathered again; every document once, in order. Guards: dropping the flush before a
    large batch joins it to the small ones before it; dropping ``alone or`` from the flush
    after it joins the next ones to it."""
    from neardup import io as nio
    from neardup.config import Config
    from neardup.stages import read
    from neardup.stages.workdir import WorkDir, plan_blocks
    monkeypatch.setattr(read, "ALONE_BYTES", 1000)
    calls = []
    process = read._process

    def spy(config, hasher, scratch, schema, batches, *rest, **kw):
        calls.append([b.text.to_pylist()[0][:2] for b in batches])
        return process(config, hasher, scratch, schema, batches, *rest, **kw)

    monkeypatch.setattr(read, "_process", spy)
    kinds = ["s", "s", "B", "s", "B", "B", "s", "s"]
    for i, k in enumerate(kinds):
        text = f"{k}{i} " + ("word " * 400 if k == "B" else "short text")
        (tmp_path / f"f{i}.jsonl").write_text(json.dumps({"text": text}) + "\n")
    cfg = Config().resolved()
    sources = nio.discover([str(tmp_path / "*.jsonl")])
    work = WorkDir(str(tmp_path / "work"), "fp", resume=False)
    summary = read.read_block(work.folder, cfg, sources, 0, list(range(len(sources))))
    assert summary["documents"] == len(kinds)
    assert calls == [["s0", "s1"], ["B2"], ["s3"], ["B4"], ["B5"], ["s6", "s7"]]
