"""The kept records of a JSONL file written: the lines as they were, byte for byte (recompressed
as the source, or not), or as a Parquet table (one schema inferred over every kept record).

The kept lines of an uncompressed local file written to a local file are byte ranges of it that
the kernel copies (:mod:`.jsonl_ranges`); other lines are read block by block
(:func:`kept_line_blocks`) and written through a :class:`~neardup.io.sinks.ByteSink`."""

from __future__ import annotations

import json
from typing import BinaryIO, Dict, Iterator, List, Optional

import numpy as np
import pyarrow as pa

from ...errors import InputError
from .._streams import StreamError, iter_blocks
from ..batch import one_line
from ..kept_rows import block_rows, run_bounds
from ..sinks import ByteSink
from ..sources import Source
from .jsonl_ranges import copy_jsonl_ranges, local_fd, regular_local_file
from .parquet import write_parquet_batches


def kept_line_blocks(src: Source, keep: np.ndarray, runs: bool = False,
                     capture: Optional[Dict[int, Optional[bytes]]] = None) -> Iterator[List[bytes]]:
    """The kept lines of a JSONL source (without newlines), block by block.

    Reading stops once the last kept row is reached, so damage after it (a truncated stream
    whose records were rejected) does not matter; damage before it is an InputError.
    """
    from ...kernels.lines import line_bounds
    line0 = 0
    k = 0
    blocks = iter_blocks(src.path, src.compression)
    try:
        while k < len(keep):
            try:
                data = next(blocks)
            except StopIteration:
                break
            except StreamError as e:
                raise InputError(f"{src.name}: " + e.describe(src.compression or "", line0)) from None
            except OSError as e:
                raise InputError(f"{src.name}: cannot read file ({e.strerror or e})") from None
            starts, ends = line_bounds(data)
            n = len(starts)
            hi, idx = block_rows(data, starts, ends, keep, k, line0, capture, src.name)
            if len(idx):
                if runs:
                    # consecutive kept lines as one slice each (their inner newlines included):
                    # joined with newlines, the same bytes as the lines joined one by one
                    first, last = run_bounds(idx)
                    s, e = starts[idx[first]].tolist(), ends[idx[last]].tolist()
                else:
                    s, e = starts[idx].tolist(), ends[idx].tolist()
                yield [data[a:b] for a, b in zip(s, e)]
            k = hi
            line0 += n
    finally:
        blocks.close()
    if k < len(keep):
        raise ValueError(f"keep_rows has row {int(keep[k])} but {src.name} has {line0} lines")


def write_kept_lines(src: Source, keep: np.ndarray, out: BinaryIO, compression: Optional[str],
                     capture: Optional[Dict[int, Optional[bytes]]] = None) -> int:
    """The kept lines of ``src`` written to ``out`` as they were, ``compression`` (None, gzip,
    zstd) applied; ``capture`` as for :func:`neardup.io.writer.write_kept`."""
    if compression is None and src.compression is None and regular_local_file(src.path):
        fd = local_fd(out)
        if fd is not None:
            out.flush()
            return copy_jsonl_ranges(src, keep, fd, capture)
    sink = ByteSink(out, compression)
    try:
        for chunks in kept_line_blocks(src, keep, runs=True, capture=capture):
            chunks.append(b"")  # for the final newline
            sink.write(b"\n".join(chunks))
    finally:
        sink.close()
    return len(keep)


def _strings_for_timestamps(t: pa.DataType) -> pa.DataType:
    """pyarrow's JSON inference turns date-like strings into timestamps; keep them strings."""
    if pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_time(t):
        return pa.string()
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_strings_for_timestamps(f.type)) for f in t])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        inner = t.value_field.with_type(_strings_for_timestamps(t.value_type))
        return pa.large_list(inner) if pa.types.is_large_list(t) else pa.list_(inner)
    return t


def _parse_kept_lines(lines: List[bytes], schema: Optional[pa.Schema], name: str) -> pa.Table:
    import pyarrow.json as pj

    feed = b"\n".join(lines)
    longest = max(len(x) for x in lines)
    ropts = pj.ReadOptions(use_threads=True, block_size=max(1 << 20, 2 * longest + 16))
    popts = pj.ParseOptions(explicit_schema=schema, newlines_in_values=False,
                            unexpected_field_behavior="infer" if schema is None else "error")
    try:
        table = pj.read_json(pa.BufferReader(feed), read_options=ropts, parse_options=popts)
        if table.num_rows == len(lines):
            if schema is None:
                table = table.cast(pa.schema([f.with_type(_strings_for_timestamps(f.type))
                                              for f in table.schema]))
            return table
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    # pyarrow could not infer one schema (say, a field that is sometimes a number and sometimes
    # a string): let Python parse and Arrow convert
    objs = [json.loads(x.decode("utf-8")) for x in lines]
    try:
        if schema is not None:
            return pa.Table.from_pylist(objs, schema=schema)
        return pa.Table.from_pylist(objs)
    except (pa.ArrowException, OverflowError, TypeError, ValueError) as e:
        raise InputError(f"{name}: cannot convert the kept records to Parquet ({one_line(e)})") from None


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    cols = []
    for f in schema:
        if f.name in table.column_names:
            col = table.column(f.name)
            cols.append(col if col.type == f.type else col.cast(f.type))
        else:
            cols.append(pa.nulls(table.num_rows, type=f.type))
    return pa.Table.from_arrays(cols, schema=schema)


def jsonl_to_parquet(src: Source, keep: np.ndarray, out: BinaryIO) -> int:
    """The kept records of ``src`` written to ``out`` as one Parquet table, in two passes over
    the file (bounded memory): the schema of every kept record, then the rows."""
    # pass 1: one schema for every kept record (bounded memory: one block at a time)
    schema: Optional[pa.Schema] = None
    for lines in kept_line_blocks(src, keep):
        s = _parse_kept_lines(lines, None, src.name).schema
        try:
            schema = s if schema is None else pa.unify_schemas([schema, s],
                                                               promote_options="permissive")
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise InputError(
                f"{src.name}: cannot convert the kept records to Parquet ({one_line(e)})") from None
    if schema is None:
        schema = pa.schema([])

    # pass 2: parse again with that schema and write
    def batches() -> Iterator[pa.RecordBatch]:
        for lines in kept_line_blocks(src, keep):
            table = _conform(_parse_kept_lines(lines, schema, src.name), schema)
            yield from table.to_batches()

    try:
        return write_parquet_batches(out, schema, batches(), "snappy")
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise InputError(f"{src.name}: cannot convert the kept records to Parquet ({one_line(e)})") from None
