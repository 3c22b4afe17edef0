"""Stage ``write``: the output folder, the same bytes whichever engine ran the stages before.

    kept/                 one file per input file (:func:`write_kept_group`, a group of sources at a time)
    removed.parquet       REMOVED_SCHEMA, in document order        (:func:`removed_records`)
    clusters.parquet      CLUSTERS_SCHEMA, by cluster, then document (:func:`cluster_records`)
    rejected.parquet      REJECTED_SCHEMA (on_error='skip')        (:func:`rejected_table`)
    texts_sample.parquet  the largest clusters' texts, for the report
    stats.json            :func:`build_stats` + the seconds per stage (:func:`publish`)

Every Parquet file is written through :class:`ParquetRows`, whose fixed row groups make the same
rows give the same bytes however they were batched.
"""

from __future__ import annotations

import json
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..arrays import arrow
from .. import io as nio
from .._version import __version__
from ..io import fs
from ..progress import check_interrupt

PARQUET_OPTS = dict(compression="zstd", use_dictionary=False, write_statistics=False)
ROW_GROUP = 65536

REMOVED_SCHEMA = pa.schema([("id", pa.string()), ("representative", pa.string()), ("cluster", pa.string()),
                            ("similarity", pa.float64()), ("source", pa.string()), ("row", pa.int64()),
                            ("representative_source", pa.string())])
CLUSTERS_SCHEMA = pa.schema([("id", pa.string()), ("cluster", pa.string()), ("is_representative", pa.bool_())])
REJECTED_SCHEMA = pa.schema([("source", pa.string()), ("row", pa.int64()), ("reason", pa.string())])
SAMPLE_SCHEMA = pa.schema([("id", pa.string()), ("text", pa.string())])
INDEX_ID_COLUMN = "__neardup_index__"  # ids the API adds to a table (a DataFrame's index); not written out
# a run's result, the files it replaces in the output folder (nothing else there is touched)
OUTPUT_FILES = ("kept", "removed.parquet", "clusters.parquet", "rejected.parquet", "texts_sample.parquet",
                "report.html", "stats.json")


class ParquetRows:
    """Writes rows streamed in any batch sizes as row groups of exactly ROW_GROUP rows, so that
    the same rows give the same bytes whichever engine produced them and however they were
    batched. Appears whole on close (:func:`neardup.io.fs.atomic_write`: a local file under a
    temporary name renamed, an upload completed); a writer dropped unclosed, after an error,
    leaves nothing."""

    def __init__(self, path: str, schema: pa.Schema):
        self.path = path
        self.schema = schema
        self._upload = fs.atomic_write(path)
        sink = self._upload.__enter__()
        try:
            self._writer = pq.ParquetWriter(sink, schema, **PARQUET_OPTS)
        except BaseException as exc:
            self._abort(exc)
            raise
        self._pending: List[pa.Table] = []
        self._pending_rows = 0

    def write(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        self._pending.append(table.select(self.schema.names).cast(self.schema))
        self._pending_rows += table.num_rows
        if self._pending_rows >= ROW_GROUP:
            self._flush(final=False)

    def _flush(self, final: bool) -> None:
        if not self._pending:
            return
        table = pa.concat_tables(self._pending)
        full = (table.num_rows // ROW_GROUP) * ROW_GROUP if not final else table.num_rows
        if full:
            self._writer.write_table(table.slice(0, full).combine_chunks(), row_group_size=ROW_GROUP)
        rest = table.slice(full)
        self._pending = [rest] if rest.num_rows else []
        self._pending_rows = rest.num_rows

    def close(self) -> None:
        try:
            self._flush(final=True)
            self._writer.close()
        except BaseException as exc:
            self._abort(exc)
            raise
        upload, self._upload = self._upload, None
        upload.__exit__(None, None, None)  # the file appears now (renamed; an upload completed)

    def _abort(self, exc: BaseException) -> None:
        upload, self._upload = self._upload, None
        if upload is not None:
            upload.__exit__(type(exc), exc, None)

    def __del__(self):
        if getattr(self, "_upload", None) is not None:  # never closed: no half-written object
            self._abort(RuntimeError("abandoned"))


def write_parquet(table: pa.Table, path: str) -> None:
    w = ParquetRows(path, table.schema)
    w.write(table)
    w.close()


def removed_records(members: pa.Table, names: pa.Array) -> pa.Table:
    """Rows of removed.parquet from member rows (MEMBERS_SCHEMA) of removed documents."""
    return pa.table({"id": members.column("id"), "representative": members.column("representative_id"),
                     "cluster": members.column("cluster_id"), "similarity": members.column("similarity"),
                     "source": names.take(members.column("source")), "row": members.column("row"),
                     "representative_source": members.column("representative_source")},
                    schema=REMOVED_SCHEMA)


def cluster_records(members: pa.Table) -> pa.Table:
    """Rows of clusters.parquet from member rows."""
    return pa.table({"id": members.column("id"), "cluster": members.column("cluster_id"),
                     "is_representative": pa.compute.invert(members.column("removed"))}, schema=CLUSTERS_SCHEMA)


def rejected_table(records: Sequence[Sequence], names: Sequence[str]) -> pa.Table:
    """rejected.parquet from [source, row or None, reason] rows (sorted here: file, then row)."""
    rows = sorted(records, key=lambda t: (t[0], -1 if t[1] is None else t[1]))
    return pa.table({"source": arrow([names[s] for s, _, _ in rows], pa.string()),
                     "row": arrow([r for _, r, _ in rows], pa.int64()),
                     "reason": arrow([x for _, _, x in rows], pa.string())}, schema=REJECTED_SCHEMA)


def prepare_output(output: str) -> str:
    """Makes the output folder and an empty kept/ in it; returns kept/."""
    kept_dir = fs.join(output, "kept")
    fs.remove_tree(kept_dir)
    fs.makedirs(kept_dir)
    return kept_dir


def table_kept_path(kept_dir: str, si: int, n_sources: int) -> str:
    return fs.join(kept_dir, "table.parquet" if n_sources == 1 else f"table-{si}.parquet")


def kept_rows(rows: np.ndarray, dropped: np.ndarray) -> np.ndarray:
    """``np.setdiff1d(rows, dropped)`` (sorted, without repeats), without its two sorts when
    ``rows`` is already sorted without repeats (as a source's rows are)."""
    rows = np.asarray(rows)
    if len(rows) > 1 and not np.all(rows[1:] > rows[:-1]):
        return np.setdiff1d(rows, dropped)
    if len(dropped) == 0:
        return rows.copy()
    return rows[~np.isin(rows, dropped)]


def write_kept_group(sources: Sequence[nio.Source], group: Sequence[int], rows: Dict[int, np.ndarray],
                     dropped: Dict[int, np.ndarray], kept_dir: str, config,
                     wanted: Optional[Dict[int, Dict[int, int]]] = None,
                     progress: Optional[Callable[[int], None]] = None) -> Tuple[Dict[int, str], Dict[int, np.ndarray], Dict[int, str], int]:
    """Kept files of a group of sources: for source si, ``rows[si]`` (its documents' rows) less
    ``dropped[si]`` (removed or rejected), written with :func:`neardup.io.write_kept`; in-memory
    tables as Parquet. ``wanted[si]`` = {row: doc} of documents whose text the report shows:
    caught on the way where the file is copied line by line.
    Returns (written relpath per source, kept rows of in-memory tables, captured texts by doc,
    documents written)."""
    written: Dict[int, str] = {}
    n_written = 0
    table_rows: Dict[int, np.ndarray] = {}
    captured: Dict[int, str] = {}
    for si in group:
        check_interrupt()
        if progress is not None:
            progress(1)
        src = sources[si]
        all_rows = rows.get(si, np.zeros(0, np.int64))
        kept = kept_rows(all_rows, dropped.get(si, np.zeros(0, np.int64)))
        if src.format == "table":
            path = table_kept_path(kept_dir, si, len(sources))
            table = src.table.take(arrow(kept, pa.int64()))
            if INDEX_ID_COLUMN in table.column_names:
                table = table.drop_columns([INDEX_ID_COLUMN])
            write_parquet(table, path)
            table_rows[si] = kept
            written[si] = fs.basename(path)
            n_written += len(kept)
            continue
        if len(all_rows) == 0 or (src.format == "text" and len(kept) == 0):
            continue  # nothing could be read from it (all rejected), or a removed text file
        rel = nio.output_relpath(src, config.output_format)
        want = (wanted or {}).get(si, {})
        capture = dict.fromkeys(want) if want and src.format == "jsonl" else None
        n_written += nio.write_kept(src, kept, fs.join(kept_dir, rel), output_format=config.output_format,
                                    text_column=config.text_column, id_column=config.id_column, capture=capture)
        for row, line in (capture or {}).items():
            if line is not None:
                captured[want[row]] = json.loads(line)[config.text_column]
        written[si] = rel
    return written, table_rows, captured, n_written


def fetch_texts(sources: Sequence[nio.Source], config, wanted: Dict[int, Dict[int, int]]) -> Dict[int, str]:
    """The texts of a few documents, {source: {row: doc}}, by reading again only their sources."""
    out: Dict[int, str] = {}
    for si in sorted(wanted):
        want = wanted[si]
        last = max(want)
        for batch in nio.read_source(sources[si], si, text_column=config.text_column, on_error="skip",
                                     batch_size=config.batch_size):
            rows = batch.rows
            for i in np.flatnonzero(np.isin(rows, np.fromiter(want.keys(), np.int64))).tolist():
                out[want[int(rows[i])]] = batch.text[i].as_py()
            if len(rows) and rows[-1] >= last:
                break
    return out


def sample_table(top: List[dict], texts: Dict[int, str]) -> pa.Table:
    """texts_sample.parquet: the members of the largest clusters, as ``top`` lists them."""
    wanted = [m for c in top for m in c["members"]]  # [doc, id, source, row]
    return pa.table({"id": arrow([m[1] for m in wanted], pa.string()),
                     "text": arrow([texts[m[0]] for m in wanted], pa.string())}, schema=SAMPLE_SCHEMA)


def wanted_texts(top: List[dict]) -> Dict[int, Dict[int, int]]:
    out: Dict[int, Dict[int, int]] = {}
    for c in top:
        for doc, _id, si, row in c["members"]:
            out.setdefault(int(si), {})[int(row)] = int(doc)
    return out


def build_stats(cfg, sources: Sequence[nio.Source], counts: dict, per_source, kept_files: List[str]) -> dict:
    """The content of stats.json (without "seconds"), the same for every engine. Checks first
    that every input document is accounted for: kept, removed or rejected."""
    if counts["input"] != counts["kept"] + counts["removed"] + counts["rejected"]:
        raise RuntimeError(f"internal error: counts do not add up: {counts}; please report this bug")
    return {
        "counts": counts,
        "params": cfg.recorded(),
        "inputs": [{"name": s.name, "format": s.format, "documents": int(per_source[i])}
                   for i, s in enumerate(sources)],
        "kept_files": kept_files,
        "neardup_version": __version__,
    }


def run_counts(n_docs: int, records: int, rejected_docs: int, empty_kept: int, kept: int, clusters: dict,
               pairs: dict) -> dict:
    """The counts of stats.json from the stages' counts and the documents the kept files got."""
    return {
        "input": int(n_docs + records),
        "kept": int(kept),
        "removed": int(clusters["removed"]),
        "removed_against_index": int(clusters.get("removed_against_index", 0)),
        "rejected": int(records + rejected_docs),
        "clusters": int(clusters["clusters"]),
        "empty_documents": int(empty_kept),
        "candidate_pairs": int(pairs["candidate_pairs"]),
        "verified_pairs": int(pairs["verified_pairs"]),
        "buckets": int(pairs["buckets"]),
        "truncated_buckets": int(pairs["truncated_buckets"]),
    }


def publish(output: str, stats: dict, seconds: dict) -> dict:
    """stats.json, the last file of a run (with the seconds per stage)."""
    stats["seconds"] = dict(seconds)
    publish_stats(output, stats)
    return stats


def publish_stats(output: str, stats: dict) -> None:
    """Writes stats.json whole (a temporary name and a rename; one object put)."""
    fs.write_bytes(fs.join(output, "stats.json"), (json.dumps(stats, indent=2, sort_keys=True) + "\n").encode())

