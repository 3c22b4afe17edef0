"""Marked records (``--mark``, ``dedup(..., mark=True)``): every record of a source written in its
own format with four columns appended, :data:`MARK_COLUMNS`, instead of only the kept ones.

    duplicate_of      the id of the document kept in its stead (text, as removed.parquet's
                      ``representative``); null for a kept document
    cluster           the id of its cluster (as clusters.parquet's ``cluster``); null for a
                      document that is in no cluster
    similarity        its similarity to ``duplicate_of`` (as removed.parquet's); null when kept
    duplicate_reason  ``near_duplicate`` (a document of this run kept in its stead),
                      ``against_index`` (an indexed document, ``--against``); null when kept

A JSONL line keeps its bytes: the columns go in before its closing brace (``{"a": 1}`` becomes
``{"a": 1, "duplicate_of": null, ...}``), the file compressed as the source was. Parquet rows
keep the source's schema and codec, the columns appended; CSV / TSV are written as the kept
records are (:func:`~neardup.io.formats.csv.write_kept_csv`), the columns appended; a text file
becomes one JSONL record ``{"id": ID, "text": content, ...}`` (its name gets ``.jsonl``). A
source that already has one of these fields is refused in one line (:func:`refuse_marked`).
"""

from __future__ import annotations

import json
from typing import BinaryIO, Iterator, Sequence

import numpy as np
import pyarrow as pa

from ...errors import InputError
from ..batch import one_line
from ..sinks import ByteSink
from ..sources import Source
from ..storage import fs as _fs
from ..storage.tables import parquet_file

MARK_COLUMNS = ("duplicate_of", "cluster", "similarity", "duplicate_reason")
MARKS_SCHEMA = pa.schema([("duplicate_of", pa.string()), ("cluster", pa.string()), ("similarity", pa.float64()),
                          ("duplicate_reason", pa.string())])
NEAR_DUPLICATE, AGAINST_INDEX = "near_duplicate", "against_index"
_KEYS = [b'"' + c.encode() + b'"' for c in MARK_COLUMNS]


def refuse_marked(name: str, fields: Sequence[str]) -> None:
    """An input that has a field of :data:`MARK_COLUMNS` cannot be marked (the columns would
    clash, or an earlier mark be taken for this run's): refused in one line."""
    clash = [c for c in MARK_COLUMNS if c in fields]
    if clash:
        raise InputError(f"{name} already has the field {clash[0]!r}, one of the columns --mark adds "
                         f"({', '.join(MARK_COLUMNS)}); rename or drop it, or run without --mark")


def write_marked(src: Source, keep: np.ndarray, marks: pa.Table, out_path: str) -> int:
    """The records of ``src`` at ``keep`` (sorted rows) with ``marks`` (MARKS_SCHEMA, a row
    each) appended, written to ``out_path`` in the source's format; returns the records written."""
    from .csv import write_kept_csv
    from .jsonl_kept import kept_line_blocks
    from .parquet import _parquet_rows, _source_parquet_codec, write_parquet_batches

    if len(keep) != marks.num_rows:
        raise RuntimeError(f"internal error: {len(keep)} rows and {marks.num_rows} marks; please report this bug")
    if src.format == "text":
        return _write_marked_text(src, keep, marks, out_path)
    with _fs.atomic_write(out_path) as out:
        if src.format == "jsonl":
            return _write_marked_lines(kept_line_blocks(src, keep), keep, marks, src, out)
        if src.format == "parquet":
            try:
                schema = parquet_file(src.path).schema_arrow
            except (pa.ArrowException, OSError, ValueError) as e:
                raise InputError(f"{src.name}: not a readable Parquet file ({one_line(e)})") from None
            refuse_marked(src.name, schema.names)
            full = pa.schema(list(schema) + list(MARKS_SCHEMA))
            batches = _with_marks(_parquet_rows(src, keep), marks, schema)
            return write_parquet_batches(out, full, batches, _source_parquet_codec(src))
        if src.format in ("csv", "tsv"):
            return write_kept_csv(src, keep, out, src.format, extra=marks, check=refuse_marked)
    raise ValueError(f"unknown source format {src.format!r}")


def _with_marks(batches: Iterator[pa.RecordBatch], marks: pa.Table, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Each batch (of ``schema``) with its slice of ``marks`` appended, in order."""
    at = 0
    for rb in batches:
        if rb.num_rows == 0:
            continue
        if not rb.schema.equals(schema, check_metadata=False):
            rb = pa.Table.from_batches([rb]).cast(schema).combine_chunks().to_batches()[0]
        part = marks.slice(at, rb.num_rows).combine_chunks()
        at += rb.num_rows
        yield pa.RecordBatch.from_arrays(list(rb.columns) + [part.column(c).combine_chunks() for c in MARK_COLUMNS],
                                         schema=pa.schema(list(schema) + list(MARKS_SCHEMA)))


def mark_suffixes(marks: pa.Table) -> list:
    """The bytes each marked JSON object ends with: ``"duplicate_of": ..., ...}`` (as
    ``json.dumps`` writes the values, ``ensure_ascii=False``; each encoded by its type, not by
    ``json.dumps`` a value: a tenth of the time)."""
    from json.encoder import encode_basestring

    def strings(name):
        return ["null" if v is None else encode_basestring(v) for v in marks.column(name).to_pylist()]

    sim = ["null" if v is None else float.__repr__(v) for v in marks.column("similarity").to_pylist()]
    form = ", ".join(f"{json.dumps(c)}: {{}}" for c in MARK_COLUMNS) + "}}"
    return [form.format(*row).encode("utf-8")
            for row in zip(strings("duplicate_of"), strings("cluster"), sim, strings("duplicate_reason"))]


def marked_line(line: bytes, suffix: bytes, name: str, row: int) -> bytes:
    """A JSON object's line with the marks in before its closing brace: every byte before that
    brace as it was (white space after the brace, a ``\\r``, is kept after the marks)."""
    body = line.rstrip()
    if not body.endswith(b"}"):
        raise InputError(f"{name}:{row + 1}: not a JSON object, cannot add the --mark columns")
    if any(k in body for k in _KEYS):
        try:
            refuse_marked(f"{name}:{row + 1}", list(json.loads(body)))
        except ValueError:
            pass
    inner = body[:-1]
    sep = b"" if inner.rstrip().endswith(b"{") else b", "
    return inner + sep + suffix + line[len(body):]


def _write_marked_lines(blocks, keep: np.ndarray, marks: pa.Table, src: Source, out: BinaryIO) -> int:
    suffixes = mark_suffixes(marks)
    sink = ByteSink(out, src.compression)
    n = 0
    try:
        for lines in blocks:
            marked = [marked_line(line, suffixes[n + i], src.name, int(keep[n + i]))
                      for i, line in enumerate(lines)]
            n += len(lines)
            marked.append(b"")
            sink.write(b"\n".join(marked))
    finally:
        sink.close()
    return n


def _write_marked_text(src: Source, keep: np.ndarray, marks: pa.Table, out_path: str) -> int:
    """A text file (``keep`` is ``[0]``) as one JSONL record ``{"id": ID, "text": content}`` and its
    marks (the file itself has no place for them)."""
    from .text import _read_text_file
    if len(keep) == 0:
        return 0
    record = {"id": src.relpath, "text": _read_text_file(src)}
    line = json.dumps(record, ensure_ascii=False).encode("utf-8")
    with _fs.atomic_write(out_path) as out:
        out.write(marked_line(line, mark_suffixes(marks)[0], src.name, 0) + b"\n")
    return 1
