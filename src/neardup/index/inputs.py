"""What :meth:`neardup.Index.add` and ``neardup index query`` read: paths (read like ``neardup
dedup`` reads its inputs), texts or tables, as batches of (texts, ids, source names).

The ids of an add, by one rule (the README's "Ids in an index"): an id column's values (read as
``neardup dedup`` reads them), the ``ids=`` of texts (strings or integers:
:func:`neardup.io.columns.id_values`), or positions. A positional id in an index names the file
as the add named it, so that two dumps of the same layout (``dump1/part-0001.jsonl``,
``dump2/part-0001.jsonl``) give distinct ids: ``SOURCE:LINE`` (``SOURCE:ROW``; a text file:
``SOURCE``) with SOURCE the document's source in the index (the path as given), or with ``name``
``NAME/FILE:LINE`` (FILE: the path below the inputs' common folder, as in ``neardup dedup``).
What still repeats (within the add, or an id a live document of the index has) is refused at
the commit (:class:`neardup.index.writer.IndexWriter`)."""

from __future__ import annotations

import os
from typing import Iterator

import pyarrow as pa

from ..errors import ConfigError
from ..io.columns import id_values, positional_ids


def documents(data, ids, name, text_column, id_column, on_error, batch_size, writer) -> Iterator[tuple]:
    """(texts, ids, source name(s)) batches from any of the inputs :meth:`Index.add` takes."""
    from .. import io as nio
    if isinstance(data, (str, os.PathLike)) or (isinstance(data, (list, tuple)) and data
                                                and all(isinstance(d, os.PathLike) for d in data)):
        if ids is not None:
            raise ConfigError("ids are given by id_column (or NAME:ROW) for files, not by ids=")
        sources = nio.discover(data if isinstance(data, (list, tuple)) else [data])
        yield from source_batches(sources, name, text_column, id_column, on_error, batch_size, writer, indexed=True)
        return
    if isinstance(data, (list, tuple, pa.Array, pa.ChunkedArray)) or type(data).__name__ == "Series":
        texts = data if isinstance(data, (pa.Array, pa.ChunkedArray)) else pa.array(list(data), pa.large_string())
        n = len(texts)
        if ids is None:
            id_arr = pa.array([str(i) for i in range(n)], pa.string())
        else:
            id_arr = id_values(ids)
            if len(id_arr) != n:
                raise ConfigError(f"{len(id_arr)} ids for {n} texts")
        for start in range(0, n, batch_size):
            yield texts[start:start + batch_size], id_arr[start:start + batch_size], name or "<texts>"
        return
    try:
        src = nio.table_source(data, name=name or "<table>")
    except TypeError:
        raise ConfigError(f"cannot add a {type(data).__name__}: give paths, texts or a table") from None
    if ids is not None:
        raise ConfigError("a table's ids come from id_column, not from ids=")
    yield from source_batches([src], name, text_column, id_column, on_error, batch_size, writer, indexed=True)


def index_path(src, name) -> object:
    """The PATH of a positional id of ``src`` added to an index (see the module's docstring):
    ``NAME/FILE`` with a name, else the file's path as given (its source in the index); a
    table's name stays (None: :func:`positional_ids`'s own). Redacted like the source it names
    (a name or path holding a URL's credentials is stored as ``user:***@``)."""
    from ..io.storage.paths import redact
    if src.format == "table":
        return None
    return redact(f"{name}/{src.relpath}" if name else src.name)


def source_batches(sources, name, text_column, id_column, on_error, batch_size, writer, indexed=False):
    """(texts, ids, source name) batches of files or a table; the ids by the rule of ``neardup
    dedup`` (:func:`neardup.io.choose_id_column`): ``id_column``, else an ``id`` field that every
    input has, else positions (``""`` asks for positions); ``indexed``: positions by the index's
    rule (:func:`index_path`), for an add (a query names its documents as dedup does)."""
    from .. import io as nio
    given = id_column
    id_column = nio.choose_id_column(sources, id_column)[0]
    note = nio.id_note(sources, given) if id_column is None else None
    if note and hasattr(writer, "notes"):
        writer.notes.append(note)
    for si, src in enumerate(sources):
        for batch in nio.read_source(src, si, text_column=text_column, id_column=id_column,
                                     on_error=on_error, batch_size=batch_size):
            writer.rejected += len(batch.rejected)
            if len(batch.rows) == 0:
                continue
            if batch.ids is not None:
                batch_ids = batch.ids.cast(pa.string())
            else:  # as neardup dedup names them
                batch_ids = positional_ids(src, batch.rows, index_path(src, name) if indexed else None)
            yield batch.text, batch_ids, name or src.name
