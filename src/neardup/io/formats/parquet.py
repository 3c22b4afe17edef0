"""Parquet files: their reader (the text, id and score columns only, batch by batch) and the
writer of their kept rows (the source's schema and codec kept; or as JSONL), with
:func:`write_parquet_batches`, which the other formats' writers use to write Parquet."""

from __future__ import annotations

import json
from typing import BinaryIO, Callable, Iterator, List, Optional

import numpy as np
import pyarrow as pa

from ...errors import InputError
from ..batch import EMPTY_FILE, Batch, ReadContext, one_line
from ..kept_rows import kept_batches
from ..sources import Source
from ..storage.tables import parquet_file
from .columnar import arrow_batch, column_problem, refuse_columns, wanted_columns


def read_parquet(ctx: ReadContext) -> Iterator[Batch]:
    """A Parquet file: one document a row, only the columns asked for read."""
    src = ctx.src
    try:
        pf = parquet_file(src.path)
        schema = pf.schema_arrow
    except (pa.ArrowException, OSError, ValueError) as e:
        yield from ctx.problem(f"not a readable Parquet file ({one_line(e)})")
        return
    if pf.metadata.num_rows == 0:  # (Spark writes such files, with or without the columns)
        yield from ctx.skipped(EMPTY_FILE)
        return
    reason = column_problem(ctx, schema)
    if reason:
        yield from refuse_columns(ctx, schema, reason)
        return
    cols = wanted_columns(ctx)
    row0 = 0
    it = pf.iter_batches(batch_size=ctx.batch_size, columns=cols, use_threads=True)
    while True:
        try:
            rb = next(it)
        except StopIteration:
            break
        except (pa.ArrowException, OSError, ValueError) as e:
            yield from ctx.problem(
                f"not a readable Parquet file (after row {row0}: {one_line(e)})")
            return
        if rb.num_rows == 0:
            continue
        parts = arrow_batch(ctx, {c: rb.column(c) for c in cols}, row0)
        row0 += rb.num_rows
        yield from ctx.emit(*parts)


def field_names(src: Source) -> List[str]:
    """The columns of a Parquet file (from its footer); an error reading it is raised."""
    return parquet_file(src.path).schema_arrow.names


_PARQUET_READ_ROWS = 65536
_PARQUET_GROUP_ROWS = 131072
_PARQUET_GROUP_BYTES = 64 << 20
_PARQUET_CODECS = {"SNAPPY": "snappy", "GZIP": "gzip", "BROTLI": "brotli", "ZSTD": "zstd",
                   "LZ4": "lz4", "LZ4_RAW": "lz4", "UNCOMPRESSED": "none"}


def write_kept_parquet(src: Source, keep: np.ndarray, out: BinaryIO, target: str) -> int:
    """Kept Parquet rows as ``target``: Parquet with the source's schema and codec, or JSONL
    (one ``json.dumps`` line a row)."""
    if target != "parquet":
        return _parquet_to_jsonl(src, keep, out)
    try:
        schema = parquet_file(src.path).schema_arrow
    except (pa.ArrowException, OSError, ValueError) as e:
        raise InputError(f"{src.name}: not a readable Parquet file ({one_line(e)})") from None
    return write_parquet_batches(
        out, schema, _parquet_rows(src, keep), _source_parquet_codec(src),
        conform=lambda t: t if t.schema.equals(schema, check_metadata=False) else t.cast(schema))


def _parquet_rows(src: Source, keep: np.ndarray) -> Iterator[pa.RecordBatch]:
    """The kept rows of a Parquet source, all columns, in order."""
    try:
        pf = parquet_file(src.path)
    except (pa.ArrowException, OSError, ValueError) as e:
        raise InputError(f"{src.name}: not a readable Parquet file ({one_line(e)})") from None
    yield from kept_batches(pf.iter_batches(batch_size=_PARQUET_READ_ROWS, use_threads=True), keep, src.name,
                            "Parquet")


def _source_parquet_codec(src: Source) -> str:
    try:
        md = parquet_file(src.path).metadata
        if md.num_row_groups and md.num_columns:
            return _PARQUET_CODECS.get(md.row_group(0).column(0).compression, "snappy")
    except (pa.ArrowException, OSError, ValueError):
        pass
    return "snappy"


def write_parquet_batches(out: BinaryIO, schema: pa.Schema, batches: Iterator[pa.RecordBatch],
                          compression: str, conform: Optional[Callable] = None) -> int:
    """Write batches, grouped into row groups of up to ~128k rows / 64 MB."""
    import pyarrow.parquet as pq

    n = 0
    writer = pq.ParquetWriter(out, schema, compression=compression)
    try:
        buf: List[pa.RecordBatch] = []
        rows = nbytes = 0

        def flush() -> None:
            if buf:
                table = pa.Table.from_batches(buf)
                if conform is not None:
                    table = conform(table)
                writer.write_table(table, row_group_size=max(table.num_rows, 1))
                buf.clear()

        for rb in batches:
            if rb.num_rows == 0:
                continue
            buf.append(rb)
            rows += rb.num_rows
            nbytes += rb.nbytes
            n += rb.num_rows
            if rows >= _PARQUET_GROUP_ROWS or nbytes >= _PARQUET_GROUP_BYTES:
                flush()
                rows = nbytes = 0
        flush()
    finally:
        writer.close()
    return n


def _parquet_to_jsonl(src: Source, keep: np.ndarray, out: BinaryIO) -> int:
    n = 0
    for rb in _parquet_rows(src, keep):
        lines = [json.dumps(row, ensure_ascii=False, sort_keys=False, default=str)
                 for row in rb.to_pylist()]
        lines.append("")
        out.write("\n".join(lines).encode("utf-8"))
        n += rb.num_rows
    return n
