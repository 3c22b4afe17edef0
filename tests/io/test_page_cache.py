"""Inputs read from storage leave the page cache as they found it (neardup.io.page_cache): the
pages a run brought in are given back behind the reader; those that were cached stay cached.

Asked of the kernel itself (``mincore``), on files of this test's own folder; skipped where the
folder's file system keeps no page cache that can be emptied (tmpfs)."""

from __future__ import annotations

import functools
import gzip
import json
import os
import random

import pytest

from neardup.cli import main
from neardup.io import page_cache
from neardup.io._streams import block_buffers, iter_blocks
from neardup.io.page_cache import REGION, DropBehind, cached_regions, resident_pages

pytestmark = pytest.mark.skipif(not page_cache._available(), reason="no mincore / posix_fadvise here")


@functools.lru_cache(maxsize=None)
def _text(n_bytes: int, seed: int = 0) -> bytes:
    rng = random.Random(seed)
    words = ["w%d" % rng.randrange(50_000) for _ in range(4096)]
    lines, size, i = [], 0, 0
    while size < n_bytes:
        text = " ".join(rng.choice(words) for _ in range(60))
        line = json.dumps({"id": f"d{i}", "text": text}) + "\n"
        lines.append(line)
        size += len(line)
        i += 1
    return "".join(lines).encode()


def _cached(path) -> bytearray:
    fd = os.open(path, os.O_RDONLY)
    try:
        return cached_regions(fd, os.fstat(fd).st_size)
    finally:
        os.close(fd)


def _pages(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        return resident_pages(fd, os.fstat(fd).st_size)
    finally:
        os.close(fd)


def _evict(path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    if any(_cached(path)):
        pytest.skip("this file system keeps the file in memory (tmpfs?)")


def _consume(path, compression, recycle=None) -> int:
    n = 0
    for block in iter_blocks(str(path), compression, recycle=recycle):
        n += len(block)
        if recycle is not None:
            recycle.put(block)
    return n


@pytest.fixture
def plain(tmp_path):
    p = tmp_path / "corpus.jsonl"
    p.write_bytes(_text(10 * REGION))
    return p


@pytest.fixture(params=["cachestat", "mincore"])
def asked(request, monkeypatch):
    """Each test with the kernel asked by cachestat first (where it has it) and by mincore alone."""
    if request.param == "mincore":
        monkeypatch.setattr(page_cache, "_cachestat_works", False)
    return request.param


@pytest.mark.parametrize("recycle", [None, block_buffers], ids=["chunks", "recycled"])
def test_plain_file_read_from_storage_is_given_back(plain, recycle, asked):
    _evict(plain)
    assert _consume(plain, None, recycle) == plain.stat().st_size
    assert not any(_cached(plain))


@pytest.mark.parametrize("kind", ["gzip", "zstd"])
def test_compressed_file_read_from_storage_is_given_back(tmp_path, kind, asked):
    data = _text(10 * REGION)
    p = tmp_path / ("c.jsonl.gz" if kind == "gzip" else "c.jsonl.zst")
    if kind == "gzip":
        p.write_bytes(gzip.compress(data, 1))
    else:
        import zstandard
        p.write_bytes(zstandard.ZstdCompressor(level=-5).compress(data))
    assert p.stat().st_size >= 2 * REGION  # (a smaller file is not watched: nothing proved)
    _evict(p)
    assert _consume(p, kind) == len(data)
    assert not any(_cached(p))


def test_what_was_cached_stays_cached(plain, asked):
    _evict(plain)
    size = plain.stat().st_size
    plain.read_bytes()  # the first half in the page cache before the run (exactly: no read-ahead in flight)
    fd = os.open(plain, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 5 * REGION, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    before = _cached(plain)
    assert any(before) and not all(before)
    assert _consume(plain, None, block_buffers) == size
    after = _cached(plain)
    for k, was in enumerate(before):
        if was:
            assert after[k], f"region {k} was cached and was given back"
    assert not any(after[k] for k, was in enumerate(before) if not was and k < len(before) - 1)


def test_a_cached_file_is_left_alone(plain, asked):
    plain.read_bytes()
    assert all(_cached(plain))
    assert DropBehind.of(str(plain)) is None  # nothing to give back: nothing is watched
    _consume(plain, None, block_buffers)
    assert all(_cached(plain))


def test_a_range_gives_back_only_its_own_regions(plain, monkeypatch, asked):
    monkeypatch.setattr(page_cache, "READ_AHEAD", REGION)  # (what it gives back past its end)
    _evict(plain)
    size = plain.stat().st_size
    start, end = 4 * REGION + 10, 8 * REGION + 10
    drop = DropBehind.of(str(plain), start)
    assert drop is not None
    with open(plain, "rb") as f:  # the whole file brought in, as another range's reader would
        f.read()
    drop.close(end)
    after = _cached(plain)
    # the regions from its start's region to READ_AHEAD past its end: given back; the others kept
    assert not any(after[4:9])
    assert all(after[:4]) and all(after[9:])
    assert size > end


def test_turned_off_by_the_environment(plain, monkeypatch):
    monkeypatch.setenv("NEARDUP_DROP_BEHIND", "0")
    _evict(plain)
    _consume(plain, None, block_buffers)
    assert all(_cached(plain)[:-1])


def _on_and_off(corpus, read) -> list:
    """``read(mode)``'s result with NEARDUP_DROP_BEHIND 1, then 0, the corpus evicted before
    each: with it on, nothing of the corpus is left cached past its first region (what discovery
    read to tell the format and ids, with the read-ahead); with it off, most of it is."""
    outs = []
    for mode in ("1", "0"):
        os.environ["NEARDUP_DROP_BEHIND"] = mode
        try:
            _evict(corpus)
            outs.append(read(mode))
            cached = _pages(corpus)
            if mode == "1":
                assert not cached[REGION // 4096:].any()
                assert cached.sum() <= REGION // 4096
            else:
                assert cached.mean() > 0.5
        finally:
            os.environ.pop("NEARDUP_DROP_BEHIND", None)
    return outs


@pytest.mark.slow
def test_a_run_leaves_an_uncached_corpus_uncached(tmp_path):
    """The read stage and the write stage (its kept lines copied by the kernel) both read the
    input; neither leaves it in the page cache; the output is the same as with it off."""
    corpus = tmp_path / "in.jsonl"
    data = _text(10 * REGION)
    lines = data.splitlines(keepends=True)
    copies = [json.dumps({"id": f"copy{i}", "text": json.loads(x)["text"]}).encode() + b"\n"
              for i, x in enumerate(lines[:200])]
    corpus.write_bytes(b"".join(lines + copies))  # exact duplicates of the first 200, later
    def run(mode: str) -> bytes:
        out = tmp_path / f"out{mode}"
        assert main(["dedup", str(corpus), "--output", str(out), "--quiet"]) == 0
        return (out / "kept" / "in.jsonl").read_bytes()

    outs = _on_and_off(corpus, run)
    assert outs[0] == outs[1]
    assert len(outs[0]) == len(data)


def test_the_kept_ranges_copy_gives_back_what_it_read(tmp_path, asked):
    """The write stage's other copy of kept JSONL lines (byte ranges found block by block,
    neardup.io.formats.jsonl_ranges): the same bytes, and the source not left cached."""
    from neardup.io import discover
    from neardup.io.formats import jsonl_ranges
    from neardup.io.kept_rows import keep_array

    corpus = tmp_path / "in.jsonl"
    corpus.write_bytes(_text(10 * REGION))
    src = discover([str(corpus)])[0]
    n = corpus.read_bytes().count(b"\n")
    keep = list(range(0, n, 3))
    def copy(mode: str) -> bytes:
        out = tmp_path / f"out{mode}.jsonl"
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            assert jsonl_ranges.copy_jsonl_ranges(src, keep_array(keep), fd, block_bytes=REGION) == len(keep)
        finally:
            os.close(fd)
        return out.read_bytes()

    outs = _on_and_off(corpus, copy)
    lines = corpus.read_bytes().splitlines(keepends=True)
    assert outs[0] == outs[1] == b"".join(lines[i] for i in keep)
