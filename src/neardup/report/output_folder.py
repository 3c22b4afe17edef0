"""What the report reads of a dedup output folder (a local directory: a remote folder is read
from its local view): stats.json, the sizes of the run's clusters, what happened to the members
of the largest ones (removed.parquet, clusters.parquet) and their texts (texts_sample.parquet).

Every file is read in Arrow and filtered there, so that a removed.parquet of millions of rows
never becomes Python objects; only the rows of the clusters shown do. A file that cannot be read
is a one-line InputError naming it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from ..errors import ConfigError, InputError, one_line
from ..io.storage.paths import redact
from ..kernels.arrays import adjacent_differ, arrow, cast_strings, empty_table, take_array, take_rows, to_numpy

# What happened to a member of a cluster (the ``role`` of :func:`cluster_members`).
HEAD, KEPT, REMOVED, MEMBER = "head", "kept", "removed", "member"


# ---- stats.json -----------------------------------------------------------------------------

def load_stats(out: Path) -> dict:
    """The content of ``out/stats.json``, a dict (InputError when it is missing or not one)."""
    path = out / "stats.json"
    if not path.is_file():
        raise InputError(f"{redact(out)}: no stats.json here; is it a neardup output folder?")
    try:
        with open(path, "r", encoding="utf-8") as fh:
            stats = json.load(fh)
    except (OSError, ValueError) as exc:
        raise InputError(f"{redact(path)}: cannot read it as JSON: {redact(one_line(exc))}") from None
    if not isinstance(stats, dict):
        raise InputError(f"{redact(path)}: expected a JSON object, got {type(stats).__name__}")
    return stats


def as_recorded(stats: Any) -> dict:
    """A run's stats given in memory as :func:`load_stats` would read them back from the
    stats.json written of them (which is written with sorted keys): the same keys in the same
    order, lists for tuples, so that the page is the same bytes either way."""
    if not isinstance(stats, dict):
        raise ConfigError(f"stats must be a dict (the content of stats.json), got {type(stats).__name__}")
    return json.loads(json.dumps(stats, sort_keys=True))


class KeptTally(NamedTuple):
    """kept/'s files and their bytes as the run that wrote them counted them, which the report
    shows instead of listing kept/ (a stat a file)."""
    files: int
    bytes: int


# ---- Parquet --------------------------------------------------------------------------------

def read_parquet(path: Path, columns: Optional[Sequence[str]] = None, keep: Optional[Callable] = None):
    """The columns ``columns`` (all when None) of a Parquet file, as a pyarrow Table; with
    ``keep`` (table -> the rows of it wanted), read a batch at a time and only the kept rows
    held (the few rows of the report's largest clusters out of a file of every member)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    try:
        schema = pq.read_schema(path)
        if columns is not None:
            missing = [c for c in columns if c not in schema.names]
            if missing:
                raise InputError(f"{redact(path)}: missing column(s) {', '.join(missing)}; "
                                 f"it has {', '.join(schema.names)}")
        # ParquetFile: the dataset reader behind pq.read_table imports pandas
        f = pq.ParquetFile(path)
        cols = list(columns) if columns else None
        if keep is None:
            return f.read(columns=cols)
        parts = [keep(pa.Table.from_batches([b])) for b in f.iter_batches(columns=cols, batch_size=STREAM_BATCH)]
        return pa.concat_tables(parts) if parts else empty_table(f.schema_arrow).select(cols or f.schema_arrow.names)
    except InputError:
        raise
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise InputError(f"{redact(path)}: cannot read it as Parquet: {redact(one_line(exc))}") from None


def schema_names(path: Path) -> List[str]:
    """The column names of a Parquet file."""
    import pyarrow.parquet as pq
    try:
        return list(pq.read_schema(path).names)
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise InputError(f"{redact(path)}: cannot read it as Parquet: {redact(one_line(exc))}") from None


def as_strings(col):
    """A (chunked) Arrow column as one string array (cluster ids may be stored as numbers)."""
    import pyarrow as pa
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks else pa.nulls(0, col.type)
    return cast_strings(col, pa.string())


def _filter(arr, mask):
    import pyarrow as pa
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks else pa.nulls(0, arr.type)
    return arr.filter(mask)


def _only(table, column: str, values: List[str]):
    """The rows of ``table`` whose ``column`` (as a string) is one of ``values``: those whose
    hash (:func:`_run_hash`) is one of theirs, compared (``pc.is_in`` imports pyarrow.compute,
    issue 32)."""
    import pyarrow as pa
    col = as_strings(table[column])
    maybe = np.flatnonzero(_among(_run_hash(col), _run_hash(arrow(list(values), pa.string()))))
    wanted = set(values)
    return take_rows(table, maybe[np.array([v in wanted for v in take_array(col, maybe).to_pylist()], bool)])


def _among(a: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``np.isin(a, values)`` of integer arrays, by a binary search in the sorted ``values``:
    ``np.isin`` sorts through ``np.unique``, which imports numpy.ma (numpy 2.4: 8-10 CPU-ms of
    the report's tail, the only use of it in a run)."""
    if len(values) == 0 or len(a) == 0:
        return np.zeros(len(a), dtype=bool)
    s = np.sort(values)
    at = np.searchsorted(s, a)
    np.minimum(at, len(s) - 1, out=at)
    return s[at] == a


# ---- the clusters ---------------------------------------------------------------------------

def _cluster_column(out: Path):
    """(the cluster of each row, the is_representative flags or None, the documents a cluster
    has beyond its rows) from clusters.parquet, or without it from removed.parquet (its removed
    documents, plus the representative); None when neither file exists."""
    import pyarrow.compute as pc
    clusters_path = out / "clusters.parquet"
    removed_path = out / "removed.parquet"
    if clusters_path.is_file():
        flagged = "is_representative" in schema_names(clusters_path)
        t = read_parquet(clusters_path, ["cluster"] + (["is_representative"] if flagged else []))
        return t["cluster"], (t["is_representative"] if flagged else None), 0
    if removed_path.is_file():
        against = "representative_source" in schema_names(removed_path)
        t = read_parquet(removed_path, ["cluster"] + (["representative_source"] if against else []))
        if against:
            t = t.filter(pc.is_null(t["representative_source"]))
        return t["cluster"], None, 1
    return None


STREAM_BATCH = 1 << 16  # rows of clusters.parquet read at a time for the cluster sizes


def _at(col, i: int):
    """The i-th value of an Arrow array as Python (through a list: a pyarrow scalar imports pandas)."""
    return col.slice(i, 1).to_pylist()[0]


def _true(flags) -> np.ndarray:
    """A boolean Arrow array as numpy, null as false: ``pc.and_kleene(flags, pc.is_valid(flags))``
    from its bits (pyarrow.compute is not imported on a run's path: issue 32)."""
    n, at = len(flags), flags.offset
    if n == 0:
        return np.zeros(0, bool)

    def bits(buf):
        return np.unpackbits(np.frombuffer(buf, np.uint8), bitorder="little", count=at + n)[at:].astype(bool)

    values = bits(flags.buffers()[1])
    return values & bits(flags.buffers()[0]) if flags.null_count else values


def _run_hash(strings) -> np.ndarray:
    """A 64-bit hash of each string of an Arrow string array (a null as the empty string), in
    numpy over its buffers: a polynomial in the UTF-8 bytes, mixed with the length. Only says
    whether two strings may be equal (two runs of clusters.parquet one cluster: a collision sends
    the caller to the whole column; a row one of the wanted ids: :func:`_only` compares them), so
    the driver, which draws the report, loads no compiled kernel for it."""
    import pyarrow as pa
    arr = cast_strings(strings, pa.large_string())
    n = len(arr)
    if n == 0:
        return np.zeros(0, np.uint64)
    offsets = np.frombuffer(arr.buffers()[1], np.int64, count=n + 1, offset=8 * arr.offset)
    start, end = int(offsets[0]), int(offsets[-1])
    data = arr.buffers()[2]
    raw = (np.frombuffer(data, np.uint8)[start:end] if data is not None else np.zeros(0, np.uint8)).astype(np.uint64)
    lengths = np.diff(offsets)
    with np.errstate(over="ignore"):
        position = np.arange(end - start, dtype=np.int64) - np.repeat(offsets[:-1] - start, lengths)
        power = np.full(max(int(lengths.max()), 1), np.uint64(0x100000001B3))
        power[0] = 1
        power = np.cumprod(power, dtype=np.uint64)  # wraps: arithmetic modulo 2**64
        terms = (raw + np.uint64(1)) * power[position]
        h = np.zeros(n, np.uint64)
        filled = lengths > 0
        if raw.size:
            h[filled] = np.add.reduceat(terms, (offsets[:-1] - start)[filled])
        h ^= lengths.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        h ^= h >> np.uint64(33)
        h *= np.uint64(0xFF51AFD7ED558CCD)
        h ^= h >> np.uint64(33)
    return h


def _streamed_cluster_sizes(path: Path, flagged: bool, top: Optional[int]):
    """(ids of the ``top`` largest clusters, sizes largest first) from a clusters.parquet whose
    rows of one cluster lie together (as neardup writes it: sorted by cluster), read once, a
    batch at a time: memory for a batch and a few numbers a cluster, never a string a member
    (the report of a run is drawn by the driver: issue 28); the ids of the ``top`` largest so
    far (and of the batch's last cluster, which the next batch may go on) are carried from batch
    to batch. None when a cluster's rows are not together (two runs of one value; a hash
    collision says so too): the caller then reads the column whole."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    cols = ["cluster"] + (["is_representative"] if flagged else [])
    sizes, owns, hashes = [], [], []
    # the candidates: their run numbers (ascending), sizes and kept flags so far, ids
    cand = np.zeros(0, np.int64)
    cand_size, cand_own = np.zeros(0, np.int64), np.zeros(0, bool)
    cand_ids = pa.nulls(0, pa.string())  # pa.array([]) would import pandas
    first, last = 0, None  # the run number of the batch's first new run; the last value seen
    for batch in pq.ParquetFile(path).iter_batches(columns=cols, batch_size=STREAM_BATCH):
        col = as_strings(batch.column(0))
        kept = batch.column(1) if flagged else None
        if col.null_count:
            import pyarrow.compute as pc  # (neardup writes no null cluster)
            valid = pc.is_valid(col)
            col = col.filter(valid)
            kept = None if kept is None else kept.filter(valid)
        if len(col) == 0:
            continue
        neq = adjacent_differ(col)
        starts = np.concatenate(([0], np.flatnonzero(neq) + 1)).astype(np.int64)
        size = np.diff(np.append(starts, len(col))).astype(np.int64)
        if kept is not None:
            own = np.add.reduceat(_true(kept).astype(np.int64), starts) > 0
        else:
            own = np.ones(len(starts), bool)
        if last is not None and _at(col, 0) == last:  # the run goes on from the batch before
            sizes[-1][-1] += size[0]
            owns[-1][-1] |= own[0]
            cand_size[-1] += size[0]  # the batch before's last run: always a candidate, the last
            cand_own[-1] |= own[0]
            size, own, starts = size[1:], own[1:], starts[1:]
        last = _at(col, len(col) - 1)
        if not len(starts):
            continue
        ids = take_array(col, starts)
        sizes.append(size)
        owns.append(own)
        hashes.append(_run_hash(ids))
        runs = first + np.arange(len(starts), dtype=np.int64)
        first += len(starts)
        cand, cand_size, cand_own = (np.concatenate((cand, runs)), np.concatenate((cand_size, size)),
                                     np.concatenate((cand_own, own)))
        cand_ids = pa.concat_arrays([cand_ids, cast_strings(ids, pa.string())])
        if top is not None:  # sizes only grow, and only the last run's: the rest cannot overtake
            order = np.lexsort((cand, -cand_size))
            if flagged:
                order = order[cand_own[order]]
            keep = np.zeros(len(cand), bool)
            keep[order[:top]] = True
            keep[-1] = True
            at = np.flatnonzero(keep)
            cand, cand_size, cand_own = cand[at], cand_size[at], cand_own[at]
            cand_ids = take_array(cand_ids, at)
    if not sizes:
        return arrow([], pa.string()), np.zeros(0, dtype=np.int64)
    # a few numbers a cluster, one array at a time (the driver's peak at 3M documents: issue 28)
    hashes = np.concatenate(hashes)
    hashes.sort()
    if np.any(hashes[1:] == hashes[:-1]):
        return None
    del hashes
    sizes, owns = np.concatenate(sizes), np.concatenate(owns)
    order = np.argsort(-sizes, kind="stable")  # largest first, ties first seen first
    if flagged:  # only the clusters with a kept member: the run's own
        order = order[owns[order]]
    wanted = order if top is None else order[:top]
    found = take_array(cand_ids, np.searchsorted(cand, wanted))
    return found, sizes[order]


def cluster_sizes(out: Path, top: Optional[int] = None):
    """(cluster ids as an Arrow string array, sizes) of the clusters of this run, largest first
    (ties: first seen first), or None when no cluster file exists; ``top``: the ids of the first
    ``top`` clusters only (the sizes of all).

    A cluster of documents removed against an index (``--against``) is not one of them: its
    representative is an indexed document, not a document of this run. In clusters.parquet such
    a cluster has no kept member; in removed.parquet its rows have a ``representative_source``.
    Those documents are shown apart (the report's index section).
    """
    import pyarrow as pa
    clusters_path = out / "clusters.parquet"
    if clusters_path.is_file():
        streamed = _streamed_cluster_sizes(clusters_path, "is_representative" in schema_names(clusters_path), top)
        if streamed is not None:
            return streamed
    import pyarrow.compute as pc  # (an output without clusters.parquet's streamed sizes)
    found = _cluster_column(out)
    if found is None:
        return None
    cluster, kept, extra = found
    col = as_strings(cluster)
    valid = pc.is_valid(col)
    if col.null_count:
        col = col.filter(valid)
        kept = None if kept is None else _filter(kept, valid)
    if len(col) == 0:
        return arrow([], pa.string()), np.zeros(0, dtype=np.int64)
    enc = pc.dictionary_encode(col)
    codes = np.asarray(to_numpy(enc.indices), dtype=np.int64)
    heads = enc.dictionary
    sizes = np.bincount(codes, minlength=len(heads)).astype(np.int64) + extra
    order = np.lexsort((np.arange(len(sizes)), -sizes))
    if kept is not None:  # only the clusters with a kept member: the run's own
        kept = kept.combine_chunks() if isinstance(kept, pa.ChunkedArray) else kept
        # null counts as not kept; a Python fill value would make a pyarrow scalar, which imports pandas
        flags = _true(kept)
        own = np.bincount(codes, weights=flags.astype(np.float64), minlength=len(heads)) > 0
        order = order[own[order]]
    return heads.take(arrow(order.astype(np.int64))), sizes[order]


# ---- the members of the largest clusters -----------------------------------------------------

def cluster_members(out: Path, cluster_ids: List[str], limit: int) -> Dict[str, dict]:
    """What the report can say of the members of each cluster.

    For each cluster id: ``representative`` (the kept document that heads it: the first in keep
    order, whose id names the cluster in a real output), ``members`` (up to ``limit`` ids, the
    representative first, then in file order) and ``info`` {id: (role, representative,
    similarity)} for each listed member, role one of:

    * ``head``: kept, the representative;
    * ``kept``: kept too, by the chain guard (no verified pair at or above the threshold with a
      document of the cluster kept before it); ``is_representative`` true in clusters.parquet,
      or the representative of a removed document;
    * ``removed``: removed, with its own representative (the most similar kept document of the
      cluster: not always the head) and the similarity to it (None when not recorded);
    * ``member``: in clusters.parquet, which says no more, and no removed.parquet to ask.
    """
    result: Dict[str, dict] = {c: {"representative": None, "members": [], "info": {}} for c in cluster_ids}
    if not cluster_ids:
        return result
    removed, clusters = _member_tables(out, cluster_ids)
    listed_of, kept_of = _listed_members(clusters, limit)
    removals = _removal_rows(removed, clusters, listed_of, cluster_ids, limit)
    flagged = clusters is not None and "is_representative" in clusters.column_names
    for c in cluster_ids:
        kept, rows = kept_of.get(c, []), removals.get(c, [])
        head = _head(c, kept, rows, listed=clusters is not None)
        if clusters is not None:
            order, info = _roles_of_listed(head, listed_of.get(c, []), rows, set(kept), flagged,
                                           have_removed=removed is not None)
        else:
            order, info = _roles_of_removals(head, rows)
        entry = result[c]
        entry["representative"] = head
        entry["members"] = order[:limit]
        entry["info"] = {m: info[m] for m in entry["members"]}
    return result


def _member_tables(out: Path, cluster_ids: List[str]):
    """(removed.parquet, clusters.parquet) rows of the clusters ``cluster_ids``, each None when
    the file is not there."""
    clusters_path = out / "clusters.parquet"
    removed_path = out / "removed.parquet"
    removed = clusters = None
    if removed_path.is_file():
        removed = read_parquet(removed_path, ["id", "representative", "cluster", "similarity"],
                               keep=lambda t: _only(t, "cluster", cluster_ids))
    if clusters_path.is_file():
        names = schema_names(clusters_path)
        cols = ["id", "cluster"] + (["is_representative"] if "is_representative" in names else [])
        clusters = read_parquet(clusters_path, cols, keep=lambda t: _only(t, "cluster", cluster_ids))
    return removed, clusters


def _listed_members(clusters, limit: int) -> Tuple[Dict[str, List[str]], Dict[str, List[str]]]:
    """({cluster: the first limit + 1 member ids}, {cluster: its kept members}) from the rows of
    clusters.parquet (empty without it). Grouped in Python (these are the top clusters' rows
    only): Arrow's comparisons with a Python scalar import pandas."""
    listed_of: Dict[str, List[str]] = {}
    kept_of: Dict[str, List[str]] = {}
    if clusters is None:
        return listed_of, kept_of
    flags_col = clusters["is_representative"].to_pylist() if "is_representative" in clusters.column_names else None
    ids_col = clusters["id"].to_pylist()
    for i, c in enumerate(clusters["cluster"].to_pylist()):
        c = str(c)
        if flags_col is not None and flags_col[i]:
            kept_of.setdefault(c, []).append(str(ids_col[i]))
        lst = listed_of.setdefault(c, [])
        if len(lst) <= limit:
            lst.append(str(ids_col[i]))
    return listed_of, kept_of


def _removal_rows(removed, clusters, listed_of: Dict[str, List[str]], cluster_ids: List[str],
                  limit: int) -> Dict[str, List[Tuple[str, Optional[str], Any]]]:
    """{cluster: [(id, representative, similarity)]} from removed.parquet: the removals of the
    listed members when clusters.parquet lists them, else the first limit + 1 of each cluster."""
    rows_of: Dict[str, List[Tuple[str, Optional[str], Any]]] = {}
    if removed is None:
        return rows_of
    if clusters is not None:  # the removal records of the listed members only
        wanted = set()
        for c in cluster_ids:
            wanted.update(listed_of.get(c, []))
        removed = _only(removed, "id", sorted(wanted))
    for i, r, c, s in zip(removed["id"].to_pylist(), removed["representative"].to_pylist(),
                          removed["cluster"].to_pylist(), removed["similarity"].to_pylist()):
        rows = rows_of.setdefault(str(c), [])
        if clusters is not None or len(rows) <= limit:
            rows.append((str(i), None if r is None else str(r), s))
    return rows_of


def _head(cluster: str, kept: List[str], rows: list, *, listed: bool) -> Optional[str]:
    """The representative of a cluster: in a real output the cluster is named by its first kept
    document; else its first kept member, else the first representative of a removal."""
    reps = [r for _, r, _ in rows if r is not None]
    if cluster in kept or (not listed and cluster in reps):
        return cluster
    if kept:
        return kept[0]
    return reps[0] if reps else None


def _headed(head: Optional[str]) -> Tuple[List[str], Dict[str, tuple]]:
    """(member order, roles) of a cluster before its members: its head, if any."""
    if head is None:
        return [], {}
    return [head], {head: (HEAD, None, None)}


def _roles_of_listed(head, listed: List[str], rows: list, kept: set, flagged: bool, *,
                     have_removed: bool) -> Tuple[List[str], Dict[str, tuple]]:
    """The roles of the members clusters.parquet lists, in its order."""
    order, info = _headed(head)
    removal = {i: (r, s) for i, r, s in rows}
    for m in listed:
        if m in info:
            continue
        if m in removal:
            info[m] = (REMOVED,) + removal[m]
        elif flagged:
            info[m] = (KEPT, None, None) if m in kept else (REMOVED, None, None)
        elif have_removed:  # not in removed.parquet, which lists every removal
            info[m] = (KEPT, None, None)
        else:
            info[m] = (MEMBER, None, None)
        order.append(m)
    return order, info


def _roles_of_removals(head, rows: list) -> Tuple[List[str], Dict[str, tuple]]:
    """Without clusters.parquet: the members are the removed documents and their
    representatives (kept), in the order of removed.parquet."""
    order, info = _headed(head)
    for m, r, s in rows:
        if r is not None and r not in info:  # a representative: kept
            info[r] = (KEPT, None, None)
            order.append(r)
        if m not in info:
            info[m] = (REMOVED, r, s)
            order.append(m)
    return order, info


def sample_texts(out: Path, ids: set) -> Dict[str, str]:
    """{id: text} of the documents ``ids`` that texts_sample.parquet holds."""
    path = out / "texts_sample.parquet"
    if not path.is_file() or not ids:
        return {}
    t = read_parquet(path, ["id", "text"])
    return {str(i): ("" if x is None else str(x)) for i, x in zip(t["id"].to_pylist(), t["text"].to_pylist())
            if str(i) in ids}
