"""The blocks of a plain local file read into buffers used again (``iter_blocks(recycle=)``):
the same blocks, cut at the same places, as read without, whatever the block and read sizes,
byte order mark and range; a buffer still seen through a view is never written again; the
buffers shared by every file and range a process reads (``_streams.block_buffers``, a
:class:`~neardup.io._streams.BufferPool` the read stage clears at its end)."""

import random

import numpy as np

from neardup.io import _streams
from neardup.io import discover, read_source
from neardup.io._streams import BufferPool, iter_blocks
from neardup.io.splits import line_span
from neardup.stages.read import release_scratches


def _recycled(path, **kw):
    rec, out = BufferPool(), []
    for b in iter_blocks(path, None, recycle=rec, **kw):
        assert isinstance(b, bytearray)
        out.append(bytes(b))
        rec.put(b)
    return out


def test_recycled_blocks_are_the_blocks(tmp_path, monkeypatch):
    rng = random.Random(0)
    path = str(tmp_path / "a.jsonl")
    for _ in range(60):
        lines = [b"x" * rng.choice([0, 1, 5, 30, 100]) for _ in range(rng.randint(0, 30))]
        data = (b"\xef\xbb\xbf" if rng.random() < 0.3 else b"") + b"\n".join(lines) + b"\n" * rng.randint(0, 1)
        with open(path, "wb") as f:
            f.write(data)
        cut = rng.randint(0, len(data))
        for read in (3, 13, 64):
            monkeypatch.setattr(_streams, "BLOCK_BYTES", read)
            for block in (None, 5, 50):
                for span in (None, (0, cut), (cut, len(data))):
                    want = list(iter_blocks(path, None, block_bytes=block, span=span))
                    assert _recycled(path, block_bytes=block, span=span) == want


def test_a_buffer_still_seen_is_not_reused(tmp_path, monkeypatch):
    monkeypatch.setattr(_streams, "BLOCK_BYTES", 16)
    path = str(tmp_path / "b.jsonl")
    with open(path, "wb") as f:
        f.write(b"".join(b"line %02d\n" % i for i in range(20)))
    rec, views = BufferPool(), []
    blocks = iter_blocks(path, None, recycle=rec)
    first = next(blocks)
    seen = np.frombuffer(first, dtype=np.uint8)  # a view: the buffer must keep its bytes
    before = seen.tobytes()
    rec.put(first)
    for b in blocks:
        views.append(bytes(b))
        rec.put(b)
    assert seen.tobytes() == before
    assert b"".join([before] + views) == b"".join(b"line %02d\n" % i for i in range(20))


def _buffers_made(monkeypatch) -> list:
    """Blocks of 64 bytes; the list of the buffers they are read into, one a block (kept alive)."""
    monkeypatch.setattr(_streams, "BLOCK_BYTES", 64)
    made = []
    take = BufferPool.take
    monkeypatch.setattr(BufferPool, "take", lambda *a: made.append(take(*a)) or made[-1])
    return made


def _texts(batch) -> list:
    text = batch.text
    return (text.to_arrow() if hasattr(text, "to_arrow") else text).to_pylist()


def test_files_read_one_after_another_share_the_buffers(tmp_path, monkeypatch):
    """Every file and range the read stage reads (texts left in their blocks: ``text_spans``) in
    a process puts its blocks' buffers in one pool (``_streams.block_buffers``): a range of a
    split file is ~4 blocks, all still seen while it reads, so a pool of its own never gave one
    back; the next file's blocks are read into them. Other reads keep a pool of their own."""
    made = _buffers_made(monkeypatch)
    paths, want = [], []
    for name in ("a", "b"):
        (tmp_path / f"{name}.jsonl").write_text("".join(f'{{"text": "{name} {i:03d} {"w" * (i % 7)}"}}\n'
                                                        for i in range(40)))
        paths.append(str(tmp_path / f"{name}.jsonl"))
        want.append([f"{name} {i:03d} {'w' * (i % 7)}" for i in range(40)])
    _streams.block_buffers.clear()
    try:
        used = []  # the buffers each file was read into (all kept alive: no id given twice)
        for src, texts in zip(discover(paths), want):
            assert [t for batch in read_source(src, text_spans=True, batch_size=5) for t in _texts(batch)] == texts
            used.append(made[:])
            made.clear()
        assert {id(b) for b in used[0]} & {id(b) for b in used[1]}  # the second file read into the first's
        kept = list(_streams.block_buffers._kept)
        assert [t for batch in read_source(discover(paths[:1])[0], batch_size=5) for t in _texts(batch)] == want[0]
        assert made and not {id(b) for b in made} & {id(b) for b in kept}  # no text_spans: a pool of its own
        release_scratches()  # the read stage's end: the kept buffers let go with the kernels'
        assert _streams.block_buffers._kept == []
    finally:
        _streams.block_buffers.clear()


def test_two_readers_never_write_a_buffer_the_other_still_sees(tmp_path, monkeypatch):
    """Two ranges read at once (two threads of the read stage) share the pool: a block whose texts
    one reader's batch still holds (the scanner's texts: views of the buffer) is never read into
    by the other, while the blocks nothing sees are used again."""
    monkeypatch.setenv("NEARDUP_JSONL_SCANNER", "1")
    made = _buffers_made(monkeypatch)
    path = tmp_path / "c.jsonl"
    path.write_text("".join(f'{{"text": "doc {i:04d} {"z" * (i % 5)}"}}\n' for i in range(300)))
    src = discover([str(path)])[0]
    size = path.stat().st_size
    spans = [(*line_span(str(path), 0, size // 2), None), (*line_span(str(path), size // 2, size), None)]
    _streams.block_buffers.clear()
    try:
        readers = [read_source(src, text_spans=True, batch_size=3, span=s) for s in spans]
        held = []  # (batch, its texts when read): some batches kept to the end, their buffers seen
        k = 0
        while readers:
            r = readers[k % len(readers)]
            batch = next(r, None)
            if batch is None:
                readers.remove(r)
            elif len(batch) and k % 3 == 0:
                held.append((batch, _texts(batch)))
            k += 1
        assert len(held) > 10
        assert all(_texts(batch) == texts for batch, texts in held)
        assert len({id(b) for b in made}) < len(made)  # buffers were used again meanwhile
    finally:
        _streams.block_buffers.clear()


def test_pool_reads_again_only_a_buffer_nothing_sees():
    """A kept buffer seen through a view is never handed out; one nothing sees is, resized and
    starting with the bytes carried; at most KEEP - 1 still seen stay kept; ``clear`` lets all go."""
    pool = BufferPool()
    first = pool.take(10, b"ab")
    assert len(first) == 10 and first[:2] == b"ab"
    seen = np.frombuffer(first, dtype=np.uint8)
    pool.put(first)
    second = pool.take(10, b"")
    assert second is not first  # first still seen
    pool.put(second)
    again = pool.take(20, b"xyz")
    assert again is second and len(again) == 20 and again[:3] == b"xyz"
    views = [seen]
    for _ in range(BufferPool.KEEP + 3):
        buf = pool.take(4, b"")
        views.append(np.frombuffer(buf, dtype=np.uint8))
        pool.put(buf)
    kept = list(pool._kept)
    fresh = pool.take(4, b"")
    assert all(fresh is not b for b in kept)  # every kept one still seen: a new one
    assert len(pool._kept) == BufferPool.KEEP - 1  # the oldest still seen let go
    pool.clear()
    assert pool._kept == []


def test_buffers_keep_their_allocation_from_block_to_block(tmp_path, monkeypatch):
    """A new buffer is allocated HEADROOM longer than its first block, so the next blocks it
    holds (a few bytes longer or shorter) resize it in place: its allocation never changes. A
    short last block is copied out (cut in place by half or more, the bytearray would be
    reallocated, and moved again to grow for its next block); a kept buffer less than half a
    block long is let go, not grown."""
    monkeypatch.setattr(BufferPool, "HEADROOM", 256)
    pool = BufferPool()
    buf = pool.take(1000, b"ab")
    alloc = buf.__alloc__()
    assert len(buf) == 1000 and buf[:2] == b"ab" and alloc > 1000 + 200
    for size in (990, 1100, 1000, 1150):
        pool.put(buf)
        again = pool.take(size, b"")
        assert again is buf and len(again) == size and again.__alloc__() == alloc
    pool.put(bytearray(400))  # short: let go
    pool.put(buf)
    assert pool.take(1000, b"") is buf
    assert pool.take(1000, b"") is not buf and pool._kept == []

    monkeypatch.setattr(_streams, "BLOCK_BYTES", 64)
    path = str(tmp_path / "d.jsonl")
    data = b"".join(b"line %03d\n" % i for i in range(100)) + b"tail\n"  # the last block short
    with open(path, "wb") as f:
        f.write(data)
    pool, blocks = BufferPool(), []
    for b in iter_blocks(path, None, recycle=pool):
        blocks.append(bytes(b))
        pool.put(b)
    assert b"".join(blocks) == data and len(blocks[-1]) < 32
    assert max(len(b) for b in pool._kept) >= 64  # the last buffer kept whole (the short block a copy)


def test_a_file_shorter_than_a_read_is_read_once(tmp_path, monkeypatch):
    """A read short of what it asked is the file's end: no read after it, the buffer not grown
    by a read's length for one (a whole file of 8-16 MB read into a 24-32 MB buffer), and the
    buffer kept with its allocation."""
    monkeypatch.setattr(_streams, "BLOCK_BYTES", 64)
    monkeypatch.setattr(BufferPool, "HEADROOM", 32)  # (a bytearray cut to under half its allocation is reallocated)
    path = str(tmp_path / "e.jsonl")
    with open(path, "wb") as f:
        f.write(b"".join(b"row %02d\n" % i for i in range(6)))  # 42 bytes: one short read
    pool = BufferPool()
    blocks = []
    for b in iter_blocks(path, None, recycle=pool):
        blocks.append(bytes(b))
        pool.put(b)
    assert blocks == [b"".join(b"row %02d\n" % i for i in range(6))]
    assert max(len(b) for b in pool._kept) <= 64
    assert max(b.__alloc__() for b in pool._kept) > 64 + 16
