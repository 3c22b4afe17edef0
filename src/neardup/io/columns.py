"""Which columns to read: the text column (of several names, the first that a source has:
:func:`text_column_of`), and the id column by the one rule of every command and of the API
(:func:`choose_id_column`); a document's id by position when the input has none
(:func:`positional_ids`)."""

from __future__ import annotations

import re
from typing import List, Optional, Tuple

import numpy as np
import pyarrow as pa

from ..errors import ConfigError, InputError
from .formats import field_names
from ..kernels.arrays import arrow, decimal_strings
from .sources import Source

INDEX_ID_COLUMN = "__neardup_index__"  # ids added to a table (a DataFrame's index, a list's positions); not written out


def text_columns(text_column: str) -> List[str]:
    """The text fields to look for, in order: ``text_column`` split at commas (``"body,text"``);
    a ConfigError for an empty or repeated name."""
    if not isinstance(text_column, str) or not text_column:
        raise ConfigError("text_column must be a non-empty field name")
    names = [n.strip() for n in text_column.split(",")]
    if not all(names):
        raise ConfigError(f"text_column {text_column!r} has an empty field name (names are separated by commas)")
    if len(set(names)) < len(names):
        raise ConfigError(f"text_column {text_column!r} names a field twice")
    return names


def text_column_of(src: Source, candidates: List[str]) -> str:
    """Of several text fields, the first that ``src`` has: a column of a Parquet or CSV / TSV
    file or of a table, a field of a JSONL file's first record (the first one otherwise, which
    its reader then reports missing). A text file has no fields: the first."""
    names = field_names(src)
    return next((c for c in candidates if c in names), candidates[0])


def every_record_has_an_id(sources) -> bool:
    """Whether the inputs carry their own ids: every JSONL, Parquet or CSV / TSV file (or table)
    has an ``id`` field in its first record, its schema or its header (text files have none)."""
    if not sources:
        return False
    return all("id" in field_names(s) for s in sources)


def choose_id_column(sources, id_column: Optional[str]) -> Tuple[Optional[str], bool]:
    """``(id column or None, whether it was found rather than given)``, by the one rule of every
    command and of the API: ``id_column`` when given; ``""`` for positions (``FILE:LINE``,
    ``FILE:ROW``, a text file's path) whatever the input has; else ``id`` when every input has
    such a field (:func:`every_record_has_an_id`); else positions (None)."""
    if id_column is not None and id_column != "":
        return id_column, False
    if id_column is None and every_record_has_an_id(sources):
        return "id", True
    check_positional_ids(sources)
    return None, False


_POSITION = re.compile(r"(.*):([0-9]+)")


def check_positional_ids(sources) -> None:
    """Positional ids that two documents would share are refused before any work: a text file
    whose path (its id) is ``OTHER:N`` while ``OTHER`` is a JSONL, Parquet or CSV file of the
    same inputs, whose record N has that id too (``x.jsonl`` and a text file ``x.jsonl:3``)."""
    records = {s.relpath for s in sources if s.format not in ("text", "table")}
    if not records:  # no id of a record to share (a folder of text files: 100,000 paths not matched)
        return
    for s in sources:
        m = _POSITION.fullmatch(s.relpath) if s.format == "text" else None
        if m and m.group(1) in records:
            raise InputError(f"{s.name}: the id of this text file, {s.relpath!r}, is also the positional id of "
                             f"record {m.group(2)} of {m.group(1)!r} (FILE:LINE, FILE:ROW); rename the file, or "
                             f"choose an id column (--id-column NAME)")


NOTE_PROBES = 64  # files with fields whose first record id_note reads (a probe is a read, a GET remotely)


def id_note(sources, id_column: Optional[str]) -> Optional[str]:
    """A line when ids were not named, the inputs take positions (call it then only) and some of
    them, not all, have an ``id`` field (a folder of text files beside a JSONL with ids): those
    fields are not the ids, said, never silent. Reads the first record of up to
    :data:`NOTE_PROBES` files with fields (text files have none: no read)."""
    if id_column is not None:
        return None
    has = lacks = None
    probed = 0
    for s in sources:
        if s.format == "text":
            lacks = lacks or s
        elif probed < NOTE_PROBES:
            probed += 1
            if "id" in field_names(s):
                has = has or s
            else:
                lacks = lacks or s
        if has is not None and lacks is not None:
            return (f"ids are positions (FILE:LINE, FILE:ROW, a text file's path) for every input: {has.name} "
                    f"has an 'id' field but {lacks.name} has none; --id-column id (id_column='id') takes the "
                    f"field where there is one (a text file's id stays its path)")
    return None


def id_values(values, what: str = "id") -> pa.Array:
    """Ids given as Python values (:meth:`neardup.Index.add`'s ``ids=``, :meth:`Index.remove`'s)
    as a string array, by the rule of the ids read from files: a string, or an integer written in
    decimal digits (``1`` and ``"1"`` are then one id, as in an ``id`` field); ``None``, a bool, a
    float or any other type is refused in one line (never stored as ``"None"`` or ``"True"``)."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        if pa.types.is_string(values.type) or pa.types.is_large_string(values.type) \
                or pa.types.is_integer(values.type):
            if values.null_count:
                raise ConfigError(f"an {what} is None: an id is a string or an integer")
            return values.cast(pa.string())
        raise ConfigError(f"{what}s of type {values.type} given: an id is a string or an integer")
    out = []
    for v in values:
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
            out.append(str(int(v)))
        else:
            shown = "None" if v is None else f"{v!r} (a {type(v).__name__})"
            raise ConfigError(f"an {what} is {shown}: an id is a string or an integer")
    return pa.array(out, pa.string())


def positional_ids(src: Source, rows: np.ndarray, path: Optional[str] = None) -> pa.Array:
    """The ids of documents of ``src`` at ``rows`` when ids come from positions (the one rule of
    ``neardup dedup`` and of the index): the path of a text file, ``PATH:LINE`` for JSONL (lines
    counted from 1, as in an editor and in neardup's messages) or ``PATH:ROW`` for Parquet, CSV
    and tables (rows counted from 0, as in pyarrow and pandas). PATH is the file's path below the
    root of kept/ (``Source.relpath``: relative to the inputs' longest common folder), so an id
    does not depend on how the path was typed and names the same file as kept/ does; a table's
    is its name. ``path`` replaces PATH (an index's rule: :func:`neardup.index.inputs.index_path`)."""
    rows = np.asarray(rows, dtype=np.int64)
    path = id_path(src, path)
    if src.format == "text":
        return arrow([path] * len(rows), pa.string())  # (arrow: pa.array imports pandas)
    # numbers as decimal strings in numpy (Arrow's cast and join: pyarrow.compute and its casts'
    # set-up, kernels.arrays.decimal_strings)
    return decimal_strings(rows + 1 if src.format == "jsonl" else rows, prefix=path + ":")



def id_path(src: Source, path: Optional[str] = None) -> str:
    """PATH of the ids of ``src`` (:func:`positional_ids`), a text file's whole id: ``path``
    where given, else a table's name or the file's path below the inputs' common folder."""
    if path is not None:
        return path
    return src.name if src.format == "table" else src.relpath
