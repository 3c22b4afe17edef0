"""The pipeline's stages, written once for every engine.

    read      one block of input files -> its document shard         :mod:`.read`
    pairs     one partition of buckets -> checked pairs -> verified   :mod:`.pairs`
    clusters  one partition of whole clusters -> members              :mod:`.clusters`
    write     groups of sources -> kept files; records, stats         :mod:`.write`

The stages know nothing of engines, of the command line or of where the output goes next; an
engine (:mod:`neardup.engines`) only decides how partitions are formed and where each call runs.
:mod:`.layout` is the work directory both engines share (files, schemas, resume). This module
holds what every driver does around the stages: the run's context, the loop that skips the stages
a resumed run has done, and the end of the read and write stages.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
import pyarrow as pa

from ..arrays import unique
from .. import io as nio
from ..config import Config
from ..errors import InputError
from ..io import fs
from ..progress import check_interrupt
from .layout import MAX_DOCUMENTS, STAGES, Corpus, WorkDir
from .read import DocStore, duplicate_id_rejections
from .write import (ParquetRows, REJECTED_SCHEMA, SAMPLE_SCHEMA, build_stats, fetch_texts, publish,
                    rejected_table, run_counts, sample_table, wanted_texts, write_parquet)


@dataclass
class RunContext:
    config: Config            # resolved: bands and rows set
    sources: List[nio.Source]
    work: WorkDir
    output: str
    quiet: bool = False
    seconds: Dict[str, float] = field(default_factory=dict)
    table_kept_rows: Dict[int, np.ndarray] = field(default_factory=dict)  # in-memory sources
    stats: Optional[dict] = None


def run_stages(ctx: RunContext, stage_funcs: Dict[str, Callable[[], dict]]) -> dict:
    """Runs the stages not yet done (every stage after the first one run is run again) and
    publishes stats.json; returns the stats."""
    redo = False
    for name in STAGES:
        check_interrupt()
        if not redo and name != "write" and ctx.work.is_done(name):
            ctx.seconds[name] = 0.0
            continue
        redo = True
        t0 = time.perf_counter()
        info = stage_funcs[name]()
        ctx.seconds[name] = round(time.perf_counter() - t0, 3)
        if name != "write":
            ctx.work.mark_done(name, info)
    stats = publish(ctx.output, ctx.stats, ctx.seconds)
    ctx.work.mark_done("write", {})
    return stats


def block_finish(work_path: str, config, block: int):
    """What a read block does once its files are complete, before its summary marks it done:
    the --against matches (None without indexes). Both drivers pass it to ``read_block``."""
    if not config.against:
        return None
    from .against import match_block
    return lambda documents: {"against_matched": match_block(work_path, block, documents, config)}


def finish_read(ctx: RunContext, blocks: Sequence[Sequence[int]], blocks_read: int,
                find_duplicates: Callable[[Corpus, DocStore], pa.Table]) -> dict:
    """The end of the read stage, once every block is read: the run's size checks and the
    duplicate-id check (``find_duplicates`` is the engine's way to look at every id)."""
    corpus = Corpus(ctx.work, ctx.config, blocks)
    records = corpus.rejected_records()
    if corpus.n == 0 and not records:
        raise InputError("no documents in the input")
    if corpus.n >= MAX_DOCUMENTS:
        raise InputError(f"{corpus.n:,} documents in one run; neardup handles fewer than 2^32 "
                         f"({MAX_DOCUMENTS:,}) per run: split the input and deduplicate against an index")
    store = DocStore(ctx.work.path, corpus.block_start, ctx.config.num_perm)
    rejected_docs: List[list] = []
    positional = False
    if ctx.config.id_column is not None and corpus.n >= 2:
        def where(docs):
            docs = np.asarray(docs, np.int64)
            order = np.argsort(docs, kind="stable")
            cols = store.columns(docs[order], ["source", "row"])
            out = np.empty((len(docs), 2), np.int64)
            out[order, 0], out[order, 1] = cols["source"], cols["row"]
            return [tuple(x) for x in out.tolist()]
        dups = find_duplicates(corpus, store)
        if ctx.config.id_column_auto and dups.num_rows:
            positional = True  # the input's own id field is not unique: FILE:LINE ids instead
        else:
            rejected_docs = duplicate_id_rejections(dups, where, ctx.sources, ctx.config.on_error)
    empty_rejected = 0
    if rejected_docs:
        counts = store.columns(np.array([d[0] for d in rejected_docs], np.int64), ["count"])["count"]
        empty_rejected = int((counts == 0).sum())
    return {"documents": corpus.n, "blocks": len(blocks), "blocks_read": blocks_read,
            "per_source": corpus.per_source(len(ctx.sources)), "rejected_records": len(records),
            "rejected_documents": rejected_docs, "positional_ids": positional,
            "empty_kept": int(sum(s["empty"] for s in corpus.summaries)) - empty_rejected}


def excluded_from_pairs(ctx: RunContext, corpus: Corpus) -> np.ndarray:
    """Documents that take no part in the run's own pairs: those rejected after reading
    (duplicate ids) and those an index already holds (``--against``), ascending."""
    out = [np.array([d[0] for d in ctx.work.info("read")["rejected_documents"]], np.int64)]
    if ctx.config.against:
        from .against import matched_docs
        out.append(matched_docs(ctx.work.path, corpus.block_start))
    return unique(np.concatenate(out))


def finish_clusters(ctx: RunContext, corpus: Corpus, counts: dict) -> dict:
    """The end of the clusters stage: the documents an index holds join the members, removed
    (``clusters/part-against.parquet``); returns the stage's counts with them."""
    if not ctx.config.against:
        return counts
    from .against import matched_members
    from .write import write_parquet
    store = DocStore(ctx.work.path, corpus.block_start, ctx.config.num_perm)
    members = matched_members(ctx.work.path, store, user_ids_wanted(ctx), ctx.sources)
    write_parquet(members, fs.join(ctx.work.path, "clusters", "part-against.parquet"))
    return {**counts, "removed": counts["removed"] + members.num_rows, "removed_against_index": members.num_rows}


def user_ids_wanted(ctx: RunContext) -> bool:
    """Whether documents are known by the user's ids (else by position: FILE:LINE, FILE:ROW)."""
    return ctx.config.id_column is not None and not ctx.work.info("read").get("positional_ids")


def rejected_rows(ctx: RunContext, corpus: Corpus) -> List[list]:
    """[source, row, reason] of every rejection: records that could not be read, and documents
    rejected after reading (duplicate ids)."""
    info = ctx.work.info("read")
    rows = list(corpus.rejected_records())
    docs = info["rejected_documents"]
    if docs:
        store = DocStore(ctx.work.path, corpus.block_start, ctx.config.num_perm)
        cols = store.columns(np.array([d[0] for d in docs], np.int64), ["source", "row"])
        for (doc, reason), s, r in zip(docs, cols["source"].tolist(), cols["row"].tolist()):
            rows.append([int(s), int(r), reason])
    return rows


def finish_write(ctx: RunContext, corpus: Corpus, kept_files: List[str], kept: int, texts: Dict[int, str]) -> dict:
    """The end of the write stage, once kept/ (``kept`` documents written), removed.parquet and
    clusters.parquet are written: rejected.parquet, texts_sample.parquet, and the stats, which
    must add up (kept + removed + rejected = input) before stats.json is published."""
    cfg = ctx.config
    read = ctx.work.info("read")
    clusters = ctx.work.info("clusters")
    rejections = rejected_rows(ctx, corpus)
    rejected_path = fs.join(ctx.output, "rejected.parquet")
    if cfg.on_error == "skip":
        write_parquet(rejected_table(rejections, [s.name for s in ctx.sources]), rejected_path)
    else:
        fs.remove(rejected_path)
    top = clusters["top"]
    missing = {si: {r: d for r, d in rows.items() if d not in texts} for si, rows in wanted_texts(top).items()}
    texts = dict(texts)
    texts.update(fetch_texts(ctx.sources, cfg, {si: w for si, w in missing.items() if w}))
    sample_path = fs.join(ctx.output, "texts_sample.parquet")
    if top:
        write_parquet(sample_table(top, texts), sample_path)
    else:
        ParquetRows(sample_path, SAMPLE_SCHEMA).close()
    counts = run_counts(corpus.n, read["rejected_records"], len(read["rejected_documents"]), read["empty_kept"], kept,
                        clusters, ctx.work.info("pairs"))
    if read.get("positional_ids"):
        cfg = dataclasses.replace(cfg, id_column=None, id_column_auto=False)
    ctx.stats = build_stats(cfg, ctx.sources, counts, read["per_source"], kept_files)
    return ctx.stats


__all__ = ["RunContext", "run_stages", "finish_read", "finish_write", "rejected_rows", "REJECTED_SCHEMA"]
