"""The embedded driver: every stage in this process, every core through the kernels' threads.

It forms the stages' partitions the simplest way one machine allows: the read stage's blocks one
after another, one partition of every bucket (a sort of all band keys), one partition of every
cluster. Memory: per document the band keys (8 bytes a band), source, row, length and count
(28 bytes); signatures and shingle hashes stay on disk and are read only for the documents of
candidate pairs; texts are held one batch at a time.
"""

from __future__ import annotations

import os
from typing import Dict, Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..arrays import arrow, empty_table, to_numpy, unique
from .. import io as nio
from ..io import fs
from ..bands import bucket_runs
from ..clusters import keep_order
from ..hashing import kernel_threads
from ..progress import bar, check_interrupt
from ..stages import (RunContext, block_finish, excluded_from_pairs, finish_clusters, finish_read, finish_write,
                      run_stages, user_ids_wanted)
from ..stages.clusters import select_partition
from ..stages.layout import MEMBERS_SCHEMA, PAIRS_SCHEMA, Corpus
from ..stages.pairs import distinct_pairs, make_verifier, search_partition
from ..stages.read import DocStore, duplicate_ids, read_block
from ..stages.write import (CLUSTERS_SCHEMA, REMOVED_SCHEMA, ParquetRows, cluster_records, prepare_output,
                            removed_records, wanted_texts, write_kept_group, write_parquet)


def estimate_documents(sources: Sequence[nio.Source]) -> Optional[int]:
    """About how many documents the sources hold, for the progress bar's ETA (cheap: Parquet row
    counts from the footer, one per text file, and for uncompressed JSONL the file size over the
    mean line length of its first MiB); None when a compressed file makes it a guess."""
    total = 0
    for src in sources:
        if src.format not in ("text", "table") and fs.is_url(src.path):
            return None  # a request per file only for a progress bar's ETA: not worth it
        try:
            if src.format == "text":
                total += 1
            elif src.format == "table":
                total += src.table.num_rows
            elif src.format == "parquet":
                total += pq.ParquetFile(src.path).metadata.num_rows
            elif src.compression is None:
                size = os.path.getsize(src.path)
                with open(src.path, "rb") as f:
                    head = f.read(1 << 20)
                lines = head.count(b"\n") or 1
                total += int(round(size / (len(head) / lines))) if head else 0
            else:
                return None
        except (OSError, ValueError, pa.ArrowException):
            return None
    return total


def run_local(ctx: RunContext) -> dict:
    """Runs the stages not yet done; returns the stats (with seconds per stage)."""
    with kernel_threads(ctx.config.workers):
        return run_stages(ctx, {"read": lambda: stage_read(ctx), "pairs": lambda: stage_pairs(ctx),
                                "clusters": lambda: stage_clusters(ctx), "write": lambda: stage_write(ctx)})


def _corpus(ctx: RunContext):
    corpus = Corpus(ctx.work, ctx.config, ctx.work.plan(ctx.sources))
    return corpus, DocStore(ctx.work.path, corpus.block_start, ctx.config.num_perm)


def _all_ids(corpus: Corpus, store: DocStore) -> pa.Table:
    return duplicate_ids(np.arange(corpus.n, dtype=np.int64), corpus.ids())


def stage_read(ctx: RunContext) -> dict:
    blocks = ctx.work.plan(ctx.sources)
    todo = [b for b in range(len(blocks)) if ctx.work.block_summary(b) is None]
    n = 0
    with bar("read + signatures", total=None if ctx.quiet else estimate_documents(ctx.sources),
             quiet=ctx.quiet) as progress:
        for b in todo:
            n += read_block(ctx.work.path, ctx.config, ctx.sources, b, blocks[b], progress=progress.update,
                            finish=block_finish(ctx.work.path, ctx.config, b))["documents"]
        progress.total = n  # the estimate is replaced by the true count
        progress.refresh()
    return finish_read(ctx, blocks, len(todo), _all_ids)


def stage_pairs(ctx: RunContext) -> dict:
    cfg = ctx.config
    ctx.work.stage_dir("pairs", fresh=True)
    corpus, store = _corpus(ctx)
    eligible = corpus.column("count") > 0
    eligible[excluded_from_pairs(ctx, corpus)] = False
    with bar("candidates + verify", total=2, unit="step", quiet=ctx.quiet) as progress:
        rank = keep_order(corpus.n, cfg.keep, lengths=corpus.column("length") if cfg.keep == "longest" else None,
                          scores=corpus.column("score") if cfg.score_column else None)
        offsets, members = bucket_runs(corpus.band_keys, eligible, rank=rank, bands=cfg.bands)
        progress.update(1)
        checked, counts = search_partition(offsets, members, make_verifier(store, cfg), cfg)
        pairs, candidates = distinct_pairs(checked)
        progress.update(1)
    write_parquet(pairs.cast(PAIRS_SCHEMA), ctx.work.part_path("pairs", 0))
    return {**counts, "candidate_pairs": candidates, "verified_pairs": pairs.num_rows}


def stage_clusters(ctx: RunContext) -> dict:
    cfg = ctx.config
    ctx.work.stage_dir("clusters", fresh=True)
    corpus, _ = _corpus(ctx)
    pairs = pa.concat_tables([pq.ParquetFile(p).read() for p in ctx.work.parts("pairs")]
                             or [empty_table(PAIRS_SCHEMA)])
    left = to_numpy(pairs.column("left"))
    right = to_numpy(pairs.column("right"))
    docs = unique(np.concatenate([left, right]))
    attrs = {"source": corpus.column("source")[docs], "row": corpus.column("row")[docs],
             "length": corpus.column("length")[docs]}
    if cfg.score_column:
        attrs["score"] = corpus.column("score")[docs]
    user_ids = corpus.ids().take(arrow(docs)) if user_ids_wanted(ctx) else None
    members, counts = select_partition(docs, attrs, user_ids, left, right, to_numpy(pairs.column("similarity")),
                                       cfg, ctx.sources)
    write_parquet(members, ctx.work.part_path("clusters", 0))
    return finish_clusters(ctx, corpus, counts)


def stage_write(ctx: RunContext) -> dict:
    cfg = ctx.config
    corpus, _ = _corpus(ctx)
    fs.makedirs(ctx.output)
    members = pa.concat_tables([pq.ParquetFile(p).read() for p in ctx.work.parts("clusters")]
                               or [empty_table(MEMBERS_SCHEMA)]).sort_by("doc")
    removed = members.filter(members.column("removed"))
    names = arrow([s.name for s in ctx.sources], pa.string())
    w = ParquetRows(fs.join(ctx.output, "removed.parquet"), REMOVED_SCHEMA)
    w.write(removed_records(removed, names))
    w.close()
    w = ParquetRows(fs.join(ctx.output, "clusters.parquet"), CLUSTERS_SCHEMA)
    w.write(cluster_records(members.sort_by([("cluster", "ascending"), ("doc", "ascending")])))
    w.close()
    check_interrupt()

    # kept/: every source's rows, less the removed and the rejected documents
    source, row = corpus.column("source"), corpus.column("row")
    order = np.argsort(source, kind="stable")
    bounds = np.searchsorted(source[order], np.arange(len(ctx.sources) + 1))
    rows = {si: row[order[bounds[si]:bounds[si + 1]]] for si in range(len(ctx.sources))}
    drop_docs = np.concatenate([to_numpy(removed.column("doc")),
                                np.array([d[0] for d in ctx.work.info("read")["rejected_documents"]], np.int64)])
    dropped: Dict[int, list] = {}
    for s, r in zip(source[drop_docs].tolist(), row[drop_docs].tolist()):
        dropped.setdefault(s, []).append(r)
    dropped_rows = {s: np.array(r, np.int64) for s, r in dropped.items()}
    with bar("write kept", total=len(ctx.sources), unit="file", quiet=ctx.quiet) as progress:
        written, table_rows, captured, kept = write_kept_group(
            ctx.sources, range(len(ctx.sources)), rows, dropped_rows, prepare_output(ctx.output), cfg,
            wanted_texts(ctx.work.info("clusters")["top"]), progress=progress.update)
    ctx.table_kept_rows.update(table_rows)
    finish_write(ctx, corpus, [written[si] for si in sorted(written)], kept, captured)
    return {}
