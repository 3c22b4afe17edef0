"""Stage ``write``: the output folder, the same bytes whichever engine ran the stages before.

    kept/                 one file per input file (:func:`write_kept_group`, a group of sources at a time)
    removed.parquet       REMOVED_SCHEMA, in document order        (:func:`removed_records`)
    clusters.parquet      CLUSTERS_SCHEMA, by cluster, then document (:func:`cluster_records`)
    rejected.parquet      REJECTED_SCHEMA (on_error='skip')        (:func:`rejected_table`)
    texts_sample.parquet  the largest clusters' texts, for the report
    stats.json            :func:`build_stats` + the seconds per stage (written by the run, last:
                          :mod:`neardup.run`)

Every Parquet file is written through :class:`ParquetRows`, whose fixed row groups make the same
rows give the same bytes however they were batched.
"""

from __future__ import annotations

import json
import math
from functools import partial
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa

from ..kernels.arrays import arrow, empty_table, to_numpy
from .. import io as nio
from .._version import __version__
from ..io.inputs import INDEX_ID_COLUMN
from ..io.reader import BINARY, EMPTY_FILE, NOT_RECORDS, NOT_UTF8, text_column_of, text_columns
from ..io.storage.folder import Folder
from ..progress import bar, check_interrupt, plural
from .workdir import MEMBERS_SCHEMA


REMOVED_SCHEMA = pa.schema([("id", pa.string()), ("representative", pa.string()), ("cluster", pa.string()),
                            ("similarity", pa.float64()), ("source", pa.string()), ("row", pa.int64()),
                            ("representative_source", pa.string())])
CLUSTERS_SCHEMA = pa.schema([("id", pa.string()), ("cluster", pa.string()), ("is_representative", pa.bool_())])
REJECTED_SCHEMA = pa.schema([("source", pa.string()), ("row", pa.int64()), ("reason", pa.string())])
SAMPLE_SCHEMA = pa.schema([("id", pa.string()), ("text", pa.string())])
# a run's result, the files it replaces in the output folder (nothing else there is touched)
OUTPUT_FILES = ("kept", "removed.parquet", "clusters.parquet", "rejected.parquet", "texts_sample.parquet",
                "report.html", "stats.json")


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


def prepare_output(output: Folder) -> Folder:
    """Makes the output folder and an empty kept/ in it; returns kept/."""
    output.remove("kept")
    kept = output.child("kept")
    kept.makedirs()
    return kept


def table_kept_name(si: int, n_sources: int) -> str:
    return "table.parquet" if n_sources == 1 else f"table-{si}.parquet"


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
                     dropped: Dict[int, np.ndarray], kept: Folder, config,
                     wanted: Optional[Dict[int, Dict[int, int]]] = None,
                     progress: Optional[Callable[[int], None]] = None) -> Tuple[Dict[int, str], Dict[int, str], int]:
    """Kept files of a group of sources, in the folder ``kept``: for source si, ``rows[si]`` (its
    documents' rows) less ``dropped[si]`` (removed or rejected), written with
    :func:`neardup.io.write_kept`; in-memory tables as Parquet. ``wanted[si]`` = {row: doc} of
    documents whose text the report shows: caught on the way where the file is copied line by
    line. Returns (written relpath per source, captured texts by doc, documents written)."""
    written: Dict[int, str] = {}
    n_written = 0
    captured: Dict[int, str] = {}
    copies: List[Tuple[nio.Source, str]] = []
    for si in group:
        check_interrupt()
        if progress is not None:
            progress(1)
        src = sources[si]
        all_rows = rows.get(si, np.zeros(0, np.int64))
        keep = kept_rows(all_rows, dropped.get(si, np.zeros(0, np.int64)))
        if src.format == "table":
            name = table_kept_name(si, len(sources))
            table = src.table.take(arrow(keep, pa.int64()))
            if INDEX_ID_COLUMN in table.column_names:
                table = table.drop_columns([INDEX_ID_COLUMN])
            kept.write_parquet(name, table)
            written[si] = name
            n_written += len(keep)
            continue
        if len(all_rows) == 0 or (src.format == "text" and len(keep) == 0):
            continue  # nothing could be read from it (all rejected), or a removed text file
        rel = nio.output_relpath(src, config.output_format)
        if src.format == "text" and config.output_format == "same":
            copies.append((src, kept.join(rel)))  # copied whole, many at a time (below)
            written[si] = rel
            n_written += 1
            continue
        want = (wanted or {}).get(si, {})
        capture = dict.fromkeys(want) if want and src.format == "jsonl" else None
        n_written += nio.write_kept(src, keep, kept.join(rel), output_format=config.output_format,
                                    text_column=config.text_column, id_column=config.id_column, capture=capture)
        if capture:
            column = text_column_of(src, text_columns(config.text_column))
        for row, line in (capture or {}).items():
            if line is not None:
                captured[want[row]] = json.loads(line)[column]
        written[si] = rel
    nio.copy_text_files(copies)
    return written, captured, n_written


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


def build_stats(cfg, sources: Sequence[nio.Source], counts: dict, per_source, kept_files: List[str],
                skipped: Sequence[Sequence] = ()) -> dict:
    """The content of stats.json (without "seconds"), the same for every engine. Checks first
    that every input document is accounted for: kept, removed or rejected. ``skipped``:
    [source, reason] of the files that hold no documents without an error (``Batch.skipped``);
    each says so in its ``inputs`` entry, and ``files`` counts them with what discovery did with
    symbolic links."""
    if counts["input"] != counts["kept"] + counts["removed"] + counts["rejected"]:
        raise RuntimeError(f"internal error: counts do not add up: {counts}; please report this bug")
    why = {int(si): reason for si, reason in skipped}
    inputs = [{"name": s.name, "format": s.format, "documents": int(per_source[i])} for i, s in enumerate(sources)]
    for si, reason in why.items():
        inputs[si]["skipped"] = reason
    return {
        "counts": counts,
        "files": file_counts(sources, why.values()),
        "params": cfg.recorded(),
        "inputs": inputs,
        "kept_files": kept_files,
        "neardup_version": __version__,
    }


def file_counts(sources: Sequence[nio.Source], skipped_reasons) -> dict:
    """stats.json's ``files``: input files (in-memory tables not counted), those skipped as empty
    or as binary / not UTF-8 or, walked ``.json`` files, as no JSON Lines records
    (:mod:`neardup.io.reader`), and the symbolic links discovery read
    once or did not follow, and the further paths of hard-linked files it left out (:class:`neardup.io.sources.Sources`)."""
    reasons = list(skipped_reasons)
    links = getattr(sources, "links", {})
    return {"inputs": sum(1 for s in sources if s.format != "table"),
            "skipped_empty": sum(1 for r in reasons if r.startswith(EMPTY_FILE)),
            "skipped_binary": sum(1 for r in reasons if r.startswith((BINARY, NOT_UTF8))),
            "skipped_not_records": sum(1 for r in reasons if r.startswith(NOT_RECORDS)),
            "links_read_once": int(links.get("read_once", 0)),
            "links_not_followed": int(links.get("not_followed", 0)),
            "hard_links_read_once": int(links.get("hard_links", 0))}


def run_counts(n_docs: int, read, pairs, clusters, kept: int) -> dict:
    """The counts of stats.json from the stages' records (:mod:`.records`) and the documents the
    kept files got."""
    return {
        "input": int(n_docs + read.rejected_records),
        "kept": int(kept),
        "removed": int(clusters.removed),
        "removed_against_index": int(clusters.removed_against_index),
        "rejected": int(read.rejected_records + len(read.rejected_documents)),
        "clusters": int(clusters.clusters),
        "empty_documents": int(read.empty_kept),
        "candidate_pairs": int(pairs.candidate_pairs),
        "verified_pairs": int(pairs.verified_pairs),
        "buckets": int(pairs.buckets),
        "truncated_buckets": int(pairs.truncated_buckets),
    }


# --------------------------------------------------------------------------- the stage


class WriteStage:
    """removed.parquet and clusters.parquet from the members (one document of a cluster a row:
    few next to the corpus, sorted here); kept/ a group of input files a call; in-memory tables
    here, where they are; then rejected.parquet, texts_sample.parquet and the stats (returned:
    stats.json is the run's to write, last)."""
    name = "write"

    def run(self, run, engine) -> dict:
        out = run.output
        out.makedirs()
        members = pa.concat_tables([run.work.folder.read_table(p) for p in run.work.parts("clusters")]
                                   or [empty_table(MEMBERS_SCHEMA)]).sort_by("doc")
        removed = members.filter(members.column("removed"))
        names = arrow([s.name for s in run.sources], pa.string())
        w = out.parquet_rows("removed.parquet", REMOVED_SCHEMA)
        w.write(removed_records(removed, names))
        w.close()
        w = out.parquet_rows("clusters.parquet", CLUSTERS_SCHEMA)
        w.write(cluster_records(members.sort_by([("cluster", "ascending"), ("doc", "ascending")])))
        w.close()
        check_interrupt()

        dropped = _dropped_rows(run, removed)
        kept_folder = prepare_output(out)
        wanted = wanted_texts(run.info("clusters").top)
        plan = run.work.plan(run.sources)
        block_of = {si: b for b, members in enumerate(plan) for si in members}
        files = [si for si, s in enumerate(run.sources) if s.format != "table"]
        size = max(1, math.ceil(len(files) / (4 * engine.cpus)))
        groups = [files[i:i + size] for i in range(0, len(files), size)]
        items = [(g, {si: block_of[si] for si in g}, {si: dropped[si] for si in g if si in dropped},
                  {si: wanted[si] for si in g if si in wanted}) for g in groups]
        written: Dict[int, str] = {}
        captured: Dict[int, str] = {}
        kept = 0
        with bar("write kept", total=len(files), unit="input file", quiet=run.quiet) as progress:
            task = run.task(engine)
            for r in engine.collect(engine.map(partial(write_kept_partition, task=task, kept=kept_folder),
                                               items, progress=progress, units=lambda r: r["files"])):
                written.update(r["written"])
                captured.update(r["captured"])
                kept += r["kept"]
            progress.set_postfix_str(f"{len(written):,} {plural(len(written), 'file')} written")
        tables = [si for si, s in enumerate(run.sources) if s.format == "table"]
        if tables:
            t_written, _, t_kept = write_kept_group(
                run.sources, tables, rows_of_sources(run.store, {si: block_of[si] for si in tables}), dropped,
                kept_folder, run.config)
            written.update(t_written)
            kept += t_kept
        return finish_write(run, [written[si] for si in sorted(written)], kept, captured)


def write_kept_partition(item, *, task, kept: Folder, report=None) -> dict:
    """One group of input files: (sources, the block of each, their dropped rows, the rows whose
    text the report shows) -> their kept files."""
    group, block_of, dropped, wanted = item
    written, captured, n = write_kept_group(task.sources, group, rows_of_sources(task.store, block_of), dropped,
                                            kept, task.config, wanted, progress=report)
    return {"written": written, "captured": captured, "kept": n, "files": len(group)}


def rows_of_sources(store, block_of: Dict[int, int]) -> Dict[int, np.ndarray]:
    """The rows of the documents of each source (it lies whole in block ``block_of[si]``), in
    file order."""
    out: Dict[int, np.ndarray] = {}
    by_block: Dict[int, List[int]] = {}
    for si, b in block_of.items():
        by_block.setdefault(b, []).append(si)
    for b, group in by_block.items():
        t = store.table(b, ["source", "row"])
        source = to_numpy(t.column("source").combine_chunks())
        row = to_numpy(t.column("row").combine_chunks())
        sel = np.isin(source, np.array(group, source.dtype))
        source, row = source[sel], row[sel]
        order = np.argsort(source, kind="stable")
        source, row = source[order], row[order]
        bounds = np.searchsorted(source, np.array(group, source.dtype), side="left")
        ends = np.searchsorted(source, np.array(group, source.dtype), side="right")
        for si, lo, hi in zip(group, bounds.tolist(), ends.tolist()):
            out[si] = row[lo:hi]
    return out


def _dropped_rows(run, removed: pa.Table) -> Dict[int, np.ndarray]:
    """What each source loses: its removed documents and its rejected ones (source -> rows)."""
    source = to_numpy(removed.column("source").combine_chunks()).astype(np.int64)
    row = to_numpy(removed.column("row").combine_chunks()).astype(np.int64)
    rejected = run.info("read").rejected_docs()
    if len(rejected):
        cols = run.store.columns(rejected, ["source", "row"])
        source = np.concatenate([source, cols["source"].astype(np.int64)])
        row = np.concatenate([row, cols["row"].astype(np.int64)])
    order = np.argsort(source, kind="stable")
    source, row = source[order], row[order]
    heads = np.flatnonzero(np.concatenate(([True], source[1:] != source[:-1]))) if len(source) else np.zeros(0, int)
    return {int(source[h]): row[h:e] for h, e in zip(heads.tolist(), np.append(heads[1:], len(source)).tolist())}


def rejected_rows(run) -> List[list]:
    """[source, row, reason] of every rejection: records that could not be read, and documents
    rejected after reading (duplicate ids)."""
    rows = list(run.corpus.rejected_records())
    read = run.info("read")
    if read.rejected_documents:
        cols = run.store.columns(read.rejected_docs(), ["source", "row"])
        for (_doc, reason), s, r in zip(read.rejected_documents, cols["source"].tolist(), cols["row"].tolist()):
            rows.append([int(s), int(r), reason])
    return rows


def finish_write(run, kept_files: List[str], kept: int, texts: Dict[int, str]) -> dict:
    """Once kept/ (``kept`` documents written), removed.parquet and clusters.parquet are written:
    rejected.parquet, texts_sample.parquet, and the stats, which must add up (kept + removed +
    rejected = input) before stats.json is written."""
    cfg = run.config
    read, pairs, clusters = run.info("read"), run.info("pairs"), run.info("clusters")
    out = run.output
    if cfg.on_error == "skip":
        out.write_parquet("rejected.parquet", rejected_table(rejected_rows(run), [s.name for s in run.sources]))
    else:
        out.remove("rejected.parquet")
    missing = {si: {r: d for r, d in rows.items() if d not in texts} for si, rows in wanted_texts(clusters.top).items()}
    texts = dict(texts)
    texts.update(fetch_texts(run.sources, cfg, {si: w for si, w in missing.items() if w}))
    if clusters.top:
        out.write_parquet("texts_sample.parquet", sample_table(clusters.top, texts))
    else:
        out.parquet_rows("texts_sample.parquet", SAMPLE_SCHEMA).close()
    counts = run_counts(run.corpus.n, read, pairs, clusters, kept)
    run.stats = build_stats(cfg, run.sources, counts, read.per_source, kept_files, read.skipped_files)
    if cfg.against:
        from .against import index_stats
        run.stats["indexes"] = index_stats(cfg, run.corpus.summaries)
    return run.stats
