"""The blocks of a plain local file read into buffers used again (``iter_blocks(recycle=)``):
the same blocks, cut at the same places, as read without, whatever the block and read sizes,
byte order mark and range; a buffer still seen through a view is never written again."""

import random

import numpy as np

from neardup.io import _streams
from neardup.io._streams import iter_blocks


def _recycled(path, **kw):
    rec, out = [], []
    for b in iter_blocks(path, None, recycle=rec, **kw):
        assert isinstance(b, bytearray)
        out.append(bytes(b))
        rec.append(b)
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
    rec, views = [], []
    blocks = iter_blocks(path, None, recycle=rec)
    first = next(blocks)
    seen = np.frombuffer(first, dtype=np.uint8)  # a view: the buffer must keep its bytes
    before = seen.tobytes()
    rec.append(first)
    for b in blocks:
        views.append(bytes(b))
        rec.append(b)
    assert seen.tobytes() == before
    assert b"".join([before] + views) == b"".join(b"line %02d\n" % i for i in range(20))
