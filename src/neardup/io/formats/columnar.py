"""What the readers of the formats with columns share (Parquet, CSV / TSV, in-memory tables):
the check of the columns asked for against the columns there are (:func:`column_problem`, with a
hint at the likely text column), and the documents of a batch of Arrow columns
(:func:`arrow_batch`)."""

from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np
import pyarrow as pa

from ...kernels.arrays import arrow, to_numpy
from ..batch import ReadContext


def _is_stringlike(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        return _is_stringlike(t.value_type)
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t) \
        or pa.types.is_null(t)  # a column of nulls only: each row rejected as null, not the whole table


def _is_integer(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        return _is_integer(t.value_type)
    return pa.types.is_integer(t)


def _is_numeric(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        return _is_numeric(t.value_type)
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


def column_problem(ctx: ReadContext, schema: pa.Schema) -> Optional[str]:
    """Why the columns of ``schema`` cannot give the text, id and score columns asked for (one
    missing, repeated, or of the wrong type), or None."""
    names = schema.names
    listing = ", ".join(names) if len(names) <= 20 else ", ".join(names[:20]) + f", ... ({len(names)} in all)"
    wanted = [("text", ctx.text_column), ("id", ctx.id_column), ("score", ctx.score_column)]
    for role, col in wanted:
        if col is None:
            continue
        if col not in names:
            hint = ""
            if role in ("text", "id"):
                guess = _likely_text_column(schema) if role == "text" else "NAME"
                hint = f"; name the {role} column with --{role}-column {guess}"
            return f"no column {col!r} (columns: {listing}{hint})"
        if names.count(col) > 1:
            return f"column {col!r} appears {names.count(col)} times"
        t = schema.field(col).type
        if role == "text" and not _is_stringlike(t):
            return f"text column {col!r} is not a string column (type {t})"
        if role == "id" and not (_is_stringlike(t) or _is_integer(t)):
            return (f"id column {col!r} is not a string or integer column (type {t}): an id is a string or an "
                    f"integer (1.0 and 1 would be two ids, or one)")
        if role == "score" and not _is_numeric(t):
            return f"score column {col!r} is not numeric (type {t})"
    return None


def refuse_columns(ctx: ReadContext, schema: pa.Schema, reason: str):
    """The batches of a file whose columns cannot serve (``reason`` from :func:`column_problem`):
    a walked file without the text column is skipped and counted, else a problem of the file
    (:meth:`~neardup.io.batch.ReadContext.column_missing`)."""
    missing = ctx.text_column if ctx.text_column not in schema.names else None
    return ctx.column_missing(reason, missing)


_TEXT_NAMES = ("content", "contents", "raw_content", "body", "document", "doc", "article", "passage",
               "code", "sentence", "review", "comment", "message", "description", "abstract")


def _likely_text_column(schema: pa.Schema) -> str:
    """The string column most likely to hold the text (a usual name, or the only string
    column), else ``NAME``: what a "no column 'text'" message suggests for --text-column."""
    strings = [f.name for f in schema if _is_stringlike(f.type)]
    for name in _TEXT_NAMES:
        for s in strings:
            if s.lower() == name:
                return s
    return strings[0] if len(strings) == 1 else "NAME"


def _plain(arr: pa.Array) -> pa.Array:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    return arr


def _bad_strings(arr: pa.Array, field: str, bad: Dict[int, str]) -> None:
    """The rows of the string array ``arr`` that are not UTF-8 or null, each said of ``field``
    (``text field 'text'``) in ``bad`` unless a reason is there already."""
    try:
        arr.validate(full=True)
    except pa.ArrowInvalid:
        raw = arr.view(pa.large_binary() if pa.types.is_large_string(arr.type) else pa.binary())
        for i, v in enumerate(raw.to_pylist()):
            try:
                (v or b"").decode("utf-8")
            except UnicodeDecodeError as e:
                bad.setdefault(i, f"{field} has invalid UTF-8 at byte {e.start}")
    if arr.null_count:
        for i in np.flatnonzero(to_numpy(arr.is_null())).tolist():
            bad.setdefault(i, f"{field} is null")


def arrow_batch(ctx: ReadContext, cols: Dict[str, pa.Array], row0: int):
    """``(text, rows, ids, scores, bad)`` of one Arrow batch."""
    text = _plain(cols[ctx.text_column]).cast(pa.large_string())
    n = len(text)
    bad: Dict[int, str] = {}
    _bad_strings(text, f"text field {ctx.text_column!r}", bad)
    ids = None
    if ctx.id_column is not None:  # a CSV id of bytes that are not UTF-8: rejected as a text would be
        ids = _plain(cols[ctx.id_column]).cast(pa.string())
        _bad_strings(ids, f"id field {ctx.id_column!r}", bad)
    scores = None
    if ctx.score_column is not None:
        sc = _plain(cols[ctx.score_column]).cast(pa.float64())
        scores = to_numpy(sc).astype(np.float64, copy=False)
    rows = np.arange(row0, row0 + n, dtype=np.int64)
    if bad:
        mask = np.ones(n, dtype=bool)
        mask[list(bad)] = False
        amask = arrow(mask)
        text = text.filter(amask)
        ids = ids.filter(amask) if ids is not None else None
        scores = scores[mask] if scores is not None else None
        rows = rows[mask]
    return text, rows, ids, scores, {row0 + i: r for i, r in bad.items()}


def wanted_columns(ctx: ReadContext) -> List[str]:
    """The columns to read: the text column, then the id and score columns asked for."""
    cols = [ctx.text_column]
    for c in (ctx.id_column, ctx.score_column):
        if c is not None and c not in cols:
            cols.append(c)
    return cols
