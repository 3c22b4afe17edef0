"""The compressed streams of kept files (neardup.io.sinks): gzip members made in parallel and
zstd's workers give the same bytes on any number of threads."""

from __future__ import annotations

import gzip

from neardup.io import sinks


def test_zstd_output_bytes_do_not_depend_on_the_number_of_compression_threads():
    """The kept .zst files are written by zstd's multi-threaded mode (threads=-1: one worker per
    core); the same input must give the same bytes on a machine with any number of cores."""
    import io as _io

    import zstandard

    data = b"".join(b'{"text": "line %d of some words that repeat, words words"}\n' % i for i in range(200_000))
    outs = []
    for threads in (1, 2, 4, -1):
        buf = _io.BytesIO()
        cctx = zstandard.ZstdCompressor(level=sinks._ZSTD_LEVEL, write_checksum=True, threads=threads)
        with cctx.stream_writer(buf, closefd=False) as s:
            for i in range(0, len(data), 1 << 16):
                s.write(data[i:i + (1 << 16)])
        outs.append(buf.getvalue())
    assert all(o == outs[0] for o in outs)
    sink_buf = _io.BytesIO()
    sink = sinks.ByteSink(sink_buf, "zstd")
    for i in range(0, len(data), 1 << 16):
        sink.write(data[i:i + (1 << 16)])
    sink.close()
    assert sink_buf.getvalue() == outs[0]
    assert zstandard.ZstdDecompressor().decompressobj().decompress(outs[0]) == data


def test_gzip_output_is_members_made_in_parallel_with_the_same_bytes_for_any_thread_count(monkeypatch):
    """Kept .gz files are consecutive gzip members of GZIP_MEMBER bytes (no name, mtime 0, OS
    255), compressed by a pool of threads: any number of threads gives the same bytes, every
    reader sees the data, and an empty stream is one valid empty member."""
    import io as _io

    import pyarrow as pa

    monkeypatch.setattr(sinks, "GZIP_MEMBER", 1 << 16)
    data = b"".join(b'{"text": "line %d of some words"}\n' % i for i in range(40_000))
    outs = []
    for workers in (1, 2, 5):
        buf = _io.BytesIO()
        g = sinks.ParallelGzip(buf, workers=workers)
        for i in range(0, len(data), 7777):
            g.write(data[i:i + 7777])
        g.close()
        outs.append(buf.getvalue())
    assert outs[0] == outs[1] == outs[2]
    raw = outs[0]
    assert raw[:2] == b"\x1f\x8b" and raw[3] & 0x08 == 0 and raw[4:8] == b"\0\0\0\0" and raw[9] == 255
    assert gzip.decompress(raw) == data
    assert pa.CompressedInputStream(pa.BufferReader(raw), "gzip").read() == data
    assert raw.count(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff") >= len(data) // (1 << 16)
    empty = _io.BytesIO()
    g = sinks.ParallelGzip(empty, workers=2)
    g.close()
    assert gzip.decompress(empty.getvalue()) == b""
    assert pa.CompressedInputStream(pa.BufferReader(empty.getvalue()), "gzip").read() == b""
