"""A Ray Data ``Dataset`` deduplicated on the Ray engine, and its kept rows given back as one.

``neardup.dedup(ds)`` with a ``ray.data.Dataset``: Ray tasks write the Dataset's blocks as
Parquet files into a new folder (``ds.write_parquet``, in the Dataset's row order: its context's
``preserve_order`` is set for that write and put back after), the Ray engine runs over those
files in the cluster that Ray Data already uses (the one ``ray.init`` joined; none is started
when one is connected), and the kept rows come back as ``ray.data.read_parquet`` of the kept/
Parquet files of the output, in input order (the returned Dataset's own context preserves order),
every column and its type as it was. The driver holds the per-file row counts, never a row.

Ids follow the rule of an in-memory table: ``id_column``, else an ``id`` column, else positions,
which for a Dataset are its row numbers (0, 1, ... in its row order), given as integers in
``removed`` and ``clusters`` (the CLI's ``FILE:ROW`` of the files written, translated).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from typing import Any, Callable, Dict, List, Optional

import numpy as np
import pyarrow as pa

from ..errors import ConfigError, NeardupError

SOURCE = "<dataset>"  # the source of every row of a Dataset in removed and rejected
_TEMPORARY: List[str] = []  # output folders of calls with output=None, removed when the process exits


def is_ray_dataset(source: Any) -> bool:
    """Whether ``source`` is a ``ray.data.Dataset`` (or a subclass: a MaterializedDataset);
    Ray is not imported for anything else."""
    return any((getattr(k, "__module__", "") or "").startswith("ray.data") and k.__name__ == "Dataset"
               for k in type(source).__mro__)


def dedup_dataset(run_dedup: Callable, ds, output: Optional[str], options: Dict[str, Any]):
    """:func:`neardup.api.run_dedup` over the rows of the Dataset ``ds`` (``options``: its other
    keywords); returns its DedupResult with ``kept`` a Dataset of the kept rows. With ``output``
    None the output goes into a temporary folder that the returned Dataset reads: it is kept
    until this Python process exits (``result.output`` names it; remove it sooner if you like), and
    removed at once if the call fails."""
    if options.get("ray_address"):
        raise ConfigError("ray_address: a Ray Dataset is deduplicated in the Ray this process is connected to; "
                          "call ray.init(address=...) before making the Dataset, and leave ray_address out")
    if options.get("mark") and options.get("against"):
        raise ConfigError("mark with against is not supported for a Ray Dataset yet: an index's ids and the "
                          "Dataset's row numbers would share the duplicate_of column")
    if options.get("resume"):
        raise ConfigError("resume is not supported for a Ray Dataset: its rows are written anew by every call")
    if options.get("output_format", "same") not in ("same", "parquet"):
        raise ConfigError(f"output_format={options['output_format']!r}: a Ray Dataset's kept rows are read back "
                          f"from Parquet; leave output_format as it is (or 'parquet')")
    options.pop("paths", None)
    options["engine"] = "ray"  # the Dataset's own cluster: the engine joins the Ray that is connected
    rows_dir = tempfile.mkdtemp(prefix="neardup-rows-")
    temporary = None  # the output folder made here: kept until exit once the call returns, removed if it fails
    try:
        files = write_rows(ds, rows_dir)
        if not files:  # an empty Dataset: nothing to run, nothing removed
            result = run_dedup(pa.table({"text": pa.array([], pa.string())}), None, **options)
            result.kept = ds
            return result
        if output is None:
            output = temporary = tempfile.mkdtemp(prefix="neardup-")
        try:
            result = run_dedup([rows_dir], output, paths=True, **options)
        except NeardupError as exc:  # named by the Dataset's rows, not the files written (gone on return)
            raise _in_rows(exc, rows_dir, _offsets(files)) from None
        id_column, offsets = options.get("id_column"), _offsets(files)
        positional = id_column == "" or (id_column is None and "id" not in _schema(files[0]).names)
        result.removed = positions(result.removed, offsets, ("id", "representative", "cluster") if positional else ())
        result.clusters = positions(result.clusters, offsets, ("id", "cluster") if positional else ())
        result.rejected = positions(result.rejected, offsets, ())  # where: the Dataset's row, not a file removed
        result.kept = read_kept(result.kept, _schema(files[0]))
        if options.get("mark") and positional and result.stats["counts"]["input"]:
            # marked/'s ids are positions in the files written (gone once this returns): the
            # Dataset's row numbers instead, as removed's, by Ray tasks as the rows are read
            result.kept = result.kept.map_batches(_MarkedPositions(offsets), batch_format="pyarrow",
                                                  batch_size=None, zero_copy_batch=True)
        if temporary is not None:
            _keep_until_exit(temporary)
        return result
    except BaseException:
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(rows_dir, ignore_errors=True)


def _in_rows(exc, rows_dir: str, offsets: Dict[str, int]):
    """``exc`` with each ``FILE: row N`` of the files written into ``rows_dir`` as ``<dataset>: row
    M`` (M the Dataset's row number), any other mention of such a file as ``<dataset>``."""
    import re
    at = re.compile(re.escape(os.path.join(rows_dir, "")) + r"([^\s:]+)(?:: row ([0-9]+))?")
    message = at.sub(lambda m: SOURCE if m.group(2) is None or m.group(1) not in offsets
                     else f"{SOURCE}: row {offsets[m.group(1)] + int(m.group(2))}", str(exc))
    try:
        return type(exc)(message)
    except TypeError:  # an error class with other arguments: left as it is
        return exc


def write_rows(ds, folder: str) -> List[str]:
    """Writes the blocks of ``ds`` as Parquet files into ``folder`` by Ray tasks, in the
    Dataset's row order (files named by write task, in order: ``..._000000-0.parquet``, ...);
    returns their paths, sorted (the order discovery reads them in). The Dataset's
    ``preserve_order`` is set for the write and put back after."""
    options = ds.context.execution_options
    before = options.preserve_order
    options.preserve_order = True
    try:
        ds.write_parquet(folder)
    finally:
        options.preserve_order = before
    return [os.path.join(folder, n) for n in sorted(os.listdir(folder)) if n.endswith(".parquet")]


def _schema(path: str) -> pa.Schema:
    import pyarrow.parquet as pq
    return pq.read_schema(path)


def _offsets(files: List[str]) -> Dict[str, int]:
    """The Dataset row number of the first row of each file (by its name and by its path),
    from the files' footers: one number a file in the driver, never a row."""
    import pyarrow.parquet as pq
    offsets, at = {}, 0
    for path in files:
        offsets[os.path.basename(path)] = offsets[path] = at  # ids name the file, sources its path
        at += pq.read_metadata(path).num_rows
    return offsets


class _MarkedPositions:
    """A block of marked rows with ``duplicate_of`` and ``cluster`` as the Dataset's row numbers
    (:func:`positions`), its own columns untouched."""

    def __init__(self, offsets: Dict[str, int]):
        self.offsets = offsets

    def __call__(self, block: pa.Table) -> pa.Table:
        return positions(block, self.offsets, ("duplicate_of", "cluster"), where=False)


def positions(table: pa.Table, offsets: Dict[str, int], columns, where: bool = True) -> pa.Table:
    """``table`` (removed, clusters or rejected) with its ``columns`` of ids ``FILE:ROW``
    (positions in the files written, which are gone once the call returns) as the Dataset's row
    numbers (int64), and (``where``) its ``source`` ``<dataset>`` and ``row`` the row number; a
    column holding an id of elsewhere (an index's) stays as it is."""
    import pyarrow.compute as pc
    names = pa.array(list(offsets), pa.string())
    starts = pa.array(list(offsets.values()), pa.int64())
    for name in columns:
        col = table.column(name).combine_chunks()
        parts = pc.extract_regex(col, r"^(?P<file>.*):(?P<row>[0-9]+)$")
        at = pc.index_in(pc.struct_field(parts, "file"), value_set=names)
        if at.null_count != col.null_count:
            continue  # not all of them the Dataset's rows
        rows = pc.add(starts.take(at), pc.struct_field(parts, "row").cast(pa.int64()))
        table = table.set_column(table.column_names.index(name), name, rows)
    if where and "source" in table.column_names and "row" in table.column_names:
        src = table.column("source").combine_chunks()
        at = pc.index_in(src, value_set=names)
        if at.null_count == src.null_count:
            row = pc.add(starts.take(at), table.column("row").combine_chunks())
            table = table.set_column(table.column_names.index("row"), "row", row)
            table = table.set_column(table.column_names.index("source"), "source",
                                     pa.array(np.where(pc.is_null(src).to_numpy(zero_copy_only=False), None, SOURCE),
                                              pa.string()))
    return table


def read_kept(kept_files: List[str], schema: pa.Schema):
    """The kept rows as a lazy Dataset over the kept/ Parquet files, read in input order (its
    own context, a copy of the current one, preserves order; the caller's is untouched); none
    kept (every row rejected): an empty Dataset of the input's ``schema``."""
    import ray.data
    if not kept_files:
        return ray.data.from_arrow(schema.empty_table())
    kept = read_parquet_in_order(list(kept_files))
    kept.context.execution_options.preserve_order = True
    return kept


def read_parquet_in_order(paths):
    """``ray.data.read_parquet(paths)`` by Ray's V1 Parquet reader, whose rows come in the order
    of the files (a folder's sorted by name) and of their rows. Ray 2.60's default reader (V2)
    yields the files of one read task in a varying order, preserve_order set or not: the rows of
    three 100-row files came back as files 2, 1, 3 or 1, 3, 2 in 2-3 of 40 reads of the same
    Dataset, so a kept Dataset read by it would not be the same rows in the same order each time.
    The choice is the Dataset's own (its context, copied when it is made); the caller's current
    context is put back."""
    import ray.data
    from ray.data.context import DataContext
    ctx = DataContext.get_current()
    before = getattr(ctx, "use_datasource_v2", None)
    if before is None:
        return ray.data.read_parquet(paths)  # a Ray without the V2 reader
    ctx.use_datasource_v2 = False
    try:
        return ray.data.read_parquet(paths)
    finally:
        ctx.use_datasource_v2 = before


def _keep_until_exit(folder: str) -> None:
    """The temporary output of a call with output=None: the returned Dataset reads its kept/
    files lazily (and so may any Dataset made from it), so it stays until the process exits."""
    if not _TEMPORARY:
        atexit.register(lambda: [shutil.rmtree(f, ignore_errors=True) for f in _TEMPORARY])
    _TEMPORARY.append(folder)
