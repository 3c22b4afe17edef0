"""The Ray engine: the stages of the local engine as Ray Data pipelines over a cluster.

``neardup dedup ... --engine ray [--ray-address ADDRESS]``. Without an address a local Ray
instance is started (and stopped at the end); with one, the run joins that cluster. Ray is
imported only here, when the engine is asked for. The outputs are byte for byte those of the
local engine (only stats.json's ``seconds`` differ). See docs/scaling.md for the data flow, what
crosses the network, and how to run it on a cluster.

Stages (the work directory holds each stage's files, so that ``--resume`` skips finished ones):

read      a custom Ray Data datasource: read tasks over groups of consecutive input files (a
          file is never split; ``neardup.io.read_source``: the same rows, ids, rejections and
          messages as the local engine), fused with ``map_batches`` running the compiled
          kernels; each block of documents is written as one shard (Arrow IPC) in the work
          directory, and one summary row per shard comes back. The driver keeps one count per
          file and makes the dense document index (file order, then row order) from them.
pairs     (band, key, doc) rows -> keyed shuffle on (band, key) -> buckets -> shuffle by
          document range, where each document's data (signature or shingle set) is read from
          its shard -> shuffle by the bucket's anchor -> :func:`neardup.bands.find_pairs` on
          each partition's buckets (star pairs, verification, re-anchoring) -> shuffle by pair
          -> distinct pairs; the verified ones are written to the work directory.
clusters  connected components by alternating large-star / small-star steps, then a shuffle by
          document range (labels meet the documents' attributes from the shards) and one by
          component: the chain guard of :func:`neardup.clusters.select_representatives` on
          each partition's whole clusters; members are written to the work directory.
write     kept/ (one task per group of input files, ``neardup.io.write_kept``), removed.parquet
          and clusters.parquet (a distributed sort, streamed through the driver into the
          local engine's ParquetRows writer), rejected.parquet, stats.json, report.html.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import shutil
import time
import warnings
from functools import partial
from typing import Dict, List, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..config import default_workers
from ..errors import ConfigError, InputError, NeardupError
from ..progress import bar
from . import ray_tasks as rt
from .local import (CLUSTERS_SCHEMA, REJECTED_SCHEMA, REMOVED_SCHEMA, SAMPLE_SCHEMA, ParquetRows, RunContext,
                    build_stats, place, publish)

MAX_RETRIES = 4                 # Ray retries of every task whose worker died
TARGET_PART_BYTES = 128 << 20   # bytes of shuffled rows per partition (one reduce task)
MAX_PARTS = 4096
MAX_CC_ROUNDS = 200
ENGINE = "ray"


def _import_ray():
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"the Ray engine needs Ray: pip install 'neardup[ray]' ({exc})") from None
    return ray


# --------------------------------------------------------------------------- session


def _check_reachable(address: str, timeout: float = 10.0) -> None:
    """A HOST:PORT address that nothing answers on is an error now (Ray would keep retrying)."""
    import socket

    if "://" in address or address in ("auto", "local") or ":" not in address:
        return
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot reach the Ray cluster at {address} ({exc}); start one with "
                          f"'ray start --head' or check --ray-address") from None


class _Session:
    """The Ray connection and the Ray Data settings of one run."""

    def __init__(self, ctx: RunContext):
        t0 = time.perf_counter()
        ray = _import_ray()
        from ray.data.context import DataContext, ShuffleStrategy

        self.ray = ray
        self.started = False
        cfg = ctx.config
        if not ray.is_initialized():
            kwargs = dict(include_dashboard=False, logging_level=logging.WARNING, log_to_driver=not ctx.quiet)
            if cfg.ray_address:
                _check_reachable(cfg.ray_address)
            try:
                if cfg.ray_address:
                    ray.init(address=cfg.ray_address, **kwargs)
                else:
                    ray.init(address="local", num_cpus=default_workers(cfg.workers), **kwargs)
            except (ConnectionError, ValueError, RuntimeError) as exc:
                where = f"the Ray cluster at {cfg.ray_address}" if cfg.ray_address else "a local Ray instance"
                msg = " ".join(str(exc).split())
                raise ConfigError(f"cannot start or join {where}: {msg[:300]}") from None
            self.started = True
        _debug("import ray and connect", t0)
        res = ray.cluster_resources()
        self.cpus = max(1, int(res.get("CPU", 1)))
        per_node = [int(n.get("Resources", {}).get("CPU", 0)) for n in ray.nodes() if n.get("Alive")]
        self.cpus_per_node = max([c for c in per_node if c > 0] or [1])
        self.nodes = max(1, sum(1 for c in per_node if c > 0))
        dc = DataContext.get_current()
        self._dc = dc
        self._saved = (dc.enable_progress_bars, dc.execution_options.preserve_order, dc.shuffle_strategy)
        dc.enable_progress_bars = False
        dc.execution_options.preserve_order = True
        # The pull-based sort shuffle puts each partition into exactly one block and needs no
        # actors; NEARDUP_RAY_SHUFFLE=push selects the push-based variant for large clusters.
        dc.shuffle_strategy = (ShuffleStrategy.SORT_SHUFFLE_PUSH_BASED
                               if os.environ.get("NEARDUP_RAY_SHUFFLE") == "push"
                               else ShuffleStrategy.SORT_SHUFFLE_PULL_BASED)
        self._loggers = {}
        for name in ("ray.data", "ray.data._internal.execution.streaming_executor"):
            lg = logging.getLogger(name)
            self._loggers[name] = lg.level
            lg.setLevel(logging.ERROR if ctx.quiet else logging.WARNING)
        self.warming = []
        if not os.environ.get("NEARDUP_RAY_NO_WARMUP"):
            # every worker loads the compiled kernels now, in parallel, instead of each stage's
            # first task waiting for it
            warm = ray.remote(num_cpus=1, max_retries=MAX_RETRIES)(rt.warm_up)
            self.warming = [warm.remote(cfg) for _ in range(min(self.cpus, 256))]
            # meanwhile Ray Data's first execution creates its helper actors (about a second)
            import threading
            self._first = threading.Thread(target=lambda: ray.data.range(1).materialize(), daemon=True)
            self._first.start()

    def wait_warm(self) -> None:
        if self.warming:
            self.ray.get(self.warming)
            self.warming = []
            self._first.join()

    def parts(self, nbytes: float) -> int:
        """Partitions for a shuffle of nbytes: at least one per CPU (and 2), at most MAX_PARTS."""
        return int(max(2, self.cpus, min(MAX_PARTS, math.ceil(nbytes / TARGET_PART_BYTES))))

    def close(self) -> None:
        dc = self._dc
        dc.enable_progress_bars, dc.execution_options.preserve_order, dc.shuffle_strategy = self._saved
        for name, level in self._loggers.items():
            logging.getLogger(name).setLevel(level)
        if self.started:
            t0 = time.perf_counter()
            self.ray.shutdown()
            _debug("shutdown", t0)


# --------------------------------------------------------------------------- Ray Data plumbing


def _datasource_classes():
    from ray.data.block import BlockMetadata
    from ray.data.datasource import Datasource, ReadTask

    class SourcesDatasource(Datasource):
        """Read tasks over groups of consecutive input files, wrapping :func:`neardup.io.read_source`."""

        def __init__(self, groups, config):
            super().__init__()
            self.groups = groups      # [[(source index, Source, table ref or None), ...], ...]
            self.config = config

        def get_name(self) -> str:
            return "Sources"

        def estimate_inmemory_data_size(self):
            return None

        def get_read_tasks(self, parallelism, per_task_row_limit=None, data_context=None):
            return [ReadTask(partial(rt.read_sources_blocks, items, self.config),
                             BlockMetadata(num_rows=None, size_bytes=None, input_files=None, exec_stats=None))
                    for items in self.groups]

    class FilesDatasource(Datasource):
        """Parquet files of the work directory, in order, a few per read task."""

        def __init__(self, items, columns, tasks):
            super().__init__()
            self.items = items
            self.columns = columns
            self.tasks = tasks

        def get_name(self) -> str:
            return "WorkFiles"

        def estimate_inmemory_data_size(self):
            return None

        def get_read_tasks(self, parallelism, per_task_row_limit=None, data_context=None):
            k = max(1, min(len(self.items), self.tasks))
            bounds = np.linspace(0, len(self.items), k + 1).astype(int)
            return [ReadTask(partial(rt.read_files, self.items[a:b], self.columns),
                             BlockMetadata(num_rows=None, size_bytes=None, input_files=None, exec_stats=None))
                    for a, b in zip(bounds[:-1], bounds[1:]) if b > a]

    return SourcesDatasource, FilesDatasource


def _read_files(env: _Session, items, columns):
    import ray.data
    _, files_ds = _datasource_classes()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tasks = max(1, min(len(items), 2 * env.cpus))
        # override_num_blocks = the number of read tasks: Ray Data would split their blocks
        # to reach its default parallelism otherwise
        return ray.data.read_datasource(files_ds(list(items), columns, tasks=tasks), override_num_blocks=tasks,
                                        ray_remote_args={"max_retries": MAX_RETRIES})


def _map(ds, fn, num_cpus: float = 1, **kwargs):
    """map_batches over whole blocks as Arrow tables, with task retries."""
    with warnings.catch_warnings():  # max_retries has no named parameter on map_batches
        warnings.simplefilter("ignore")
        return ds.map_batches(partial(fn, **kwargs), batch_size=None, batch_format="pyarrow",
                              zero_copy_batch=True, num_cpus=num_cpus, max_retries=MAX_RETRIES)


def _shuffle(ds, key: str, parts: int):
    """Keyed shuffle: every row with ``key`` == p (p in [0, parts)) lands in the p-th block."""
    return ds.sort(key, boundaries=list(range(1, parts)))


def _collect(ds, what: str = "") -> Optional[pa.Table]:
    """Runs a pipeline whose output is small (summary rows) and returns it as one table."""
    import ray
    t0 = time.perf_counter()
    tables = [t for t in ray.get(ds.to_arrow_refs()) if t is not None and t.num_rows]
    _debug(what, t0)
    if os.environ.get("NEARDUP_RAY_DEBUG") == "stats":
        import sys
        print(ds.stats(), file=sys.stderr)
    return pa.concat_tables(tables) if tables else None


def _debug(what: str, t0: float) -> None:
    if os.environ.get("NEARDUP_RAY_DEBUG"):
        import sys
        print(f"[neardup ray] {what}: {time.perf_counter() - t0:.2f}s", file=sys.stderr)


def _one_call_per_partition(summary: pa.Table, what: str) -> None:
    """Every partition must reach its function in one piece (the keyed shuffle's contract)."""
    parts = rt.col(summary, "part", np.int64)
    if len(np.unique(parts)) != len(parts):
        raise NeardupError(f"internal error: a {what} partition was split over several calls")


def _data_path(env: "_Session") -> str:
    """How bucket members meet their data: 'shuffle' (by document range, then to the pair
    partitions: the cluster path) or 'lookup' (pair partitions read the shards directly: one
    node). NEARDUP_RAY_DATA=shuffle|lookup chooses."""
    choice = os.environ.get("NEARDUP_RAY_DATA", "")
    if choice in ("shuffle", "lookup"):
        return choice
    return "lookup" if env.nodes == 1 else "shuffle"


def _chunk_starts(n_docs: int, chunks: int) -> np.ndarray:
    """First document of each of ``chunks`` equal document ranges."""
    return np.unique(np.linspace(0, max(n_docs, 1), chunks + 1).astype(np.int64)[:-1])


def _raise_as(kind: Optional[str], message: str):
    cls = {"InputError": InputError, "ConfigError": ConfigError}.get(kind or "", NeardupError)
    raise cls(message)


# --------------------------------------------------------------------------- stage: read


def _meta_path(ctx: RunContext, stage: str) -> str:
    return ctx.work.file(stage, "meta.json")


def _save_meta(ctx: RunContext, stage: str, meta: dict) -> None:
    path = _meta_path(ctx, stage)
    with open(path + ".tmp", "w") as f:
        json.dump(meta, f)
    os.replace(path + ".tmp", path)


def _load_meta(ctx: RunContext, stage: str) -> dict:
    with open(_meta_path(ctx, stage)) as f:
        return json.load(f)


def _source_groups(ctx: RunContext, env: _Session) -> List[List[int]]:
    """Consecutive input files grouped into read tasks: about 4 per CPU, 1 MiB to 256 MiB each;
    a file is never split."""
    sizes = []
    for s in ctx.sources:
        sizes.append(s.table.nbytes if s.format == "table" else os.path.getsize(s.path))
    target = min(256 << 20, max(1 << 20, sum(sizes) / (4 * env.cpus)))
    groups: List[List[int]] = [[]]
    acc = 0
    for si, size in enumerate(sizes):
        if groups[-1] and acc + size > target:
            groups.append([])
            acc = 0
        groups[-1].append(si)
        acc += size
    return [g for g in groups if g]


def stage_read(ctx: RunContext, env: _Session) -> dict:
    import ray
    import ray.data

    cfg = ctx.config
    work = ctx.work.path
    ctx.work.stage_dir("read", fresh=True)
    n_src = len(ctx.sources)
    groups = _source_groups(ctx, env)
    # with fewer read tasks than CPUs each task gets several kernel threads
    threads = max(1, min(env.cpus_per_node, env.cpus // len(groups)))
    task_cfg = dataclasses.replace(cfg, workers=threads)
    items = [[(si, dataclasses.replace(ctx.sources[si], table=None) if ctx.sources[si].format == "table"
               else ctx.sources[si], ray.put(ctx.sources[si].table) if ctx.sources[si].format == "table" else None)
              for si in g] for g in groups]
    sources_ds, _ = _datasource_classes()
    progress = bar("read + signatures (ray)", total=n_src, unit="file", quiet=ctx.quiet)
    dc = ray.data.DataContext.get_current()
    saved_block_size = dc.target_max_block_size
    # Ray Data would merge the read blocks up to 128 MiB of text before the kernels (the shingle
    # hashes of a block are about as large again): keep them at the read task's size
    dc.target_max_block_size = rt.BLOCK_TEXT_BYTES
    try:
        with warnings.catch_warnings():  # max_retries has no named parameter on read_datasource
            warnings.simplefilter("ignore")
            ds = ray.data.read_datasource(sources_ds(items, task_cfg), override_num_blocks=len(items),
                                          ray_remote_args={"num_cpus": threads, "max_retries": MAX_RETRIES})
        ds = _map(ds, rt.signature_block, num_cpus=threads, config=task_cfg, workdir=work, threads=threads)
        summary = _collect(ds, "read")
    finally:
        dc.target_max_block_size = saved_block_size
    progress.update(n_src)
    progress.close()
    summary = summary if summary is not None else rt.SUMMARY_SCHEMA.empty_table()
    kind = rt.col(summary, "kind", np.int8)
    source = rt.col(summary, "source", np.int64)
    pos0 = rt.col(summary, "pos0", np.int64)
    # errors that stop the run: the first in file order, as the local engine raises it
    fatal = np.flatnonzero(kind == 2)
    if len(fatal):
        first = fatal[np.argmin(source[fatal])]
        _raise_as(summary.column("fatal")[first].as_py(), summary.column("reason")[first].as_py())
    seg = np.flatnonzero(kind == 0)
    n = rt.col(summary, "n", np.int64)
    per_source = np.zeros(n_src, np.int64)
    np.add.at(per_source, source[seg], n[seg])
    offsets = np.concatenate([[0], np.cumsum(per_source)]).astype(np.int64)
    n_docs = int(offsets[-1])
    # shards: each a run of consecutive documents; together they must tile 0 .. n_docs - 1
    paths = summary.column("path").to_pylist()
    by_path: Dict[str, list] = {}
    for i in seg.tolist():
        d0 = int(offsets[source[i]] + pos0[i])
        e = by_path.setdefault(paths[i], [d0, 0, paths[i]])
        e[0] = min(e[0], d0)
        e[1] += int(n[i])
    shards = sorted(by_path.values())
    expect = 0
    for d0, m, _ in shards:
        if d0 != expect:
            raise NeardupError("internal error: the read stage's shards do not tile the documents")
        expect += m
    if expect != n_docs:
        raise NeardupError("internal error: the read stage's shards do not hold every document")
    rec = np.flatnonzero(kind == 1)
    rec = rec[np.lexsort((pos0[rec], source[rec]))]  # file order, then order of emission
    rows = rt.col(summary, "row", np.int64)
    reasons = summary.column("reason").to_pylist()
    records = [[int(source[i]), None if rows[i] < 0 else int(rows[i]), reasons[i]] for i in rec.tolist()]
    if n_docs == 0 and not records:
        raise InputError("no documents in the input")
    zero = int(rt.col(summary, "zero", np.int64)[seg].sum())
    documents = _duplicate_ids(ctx, env, shards, offsets, n_docs) if cfg.id_column else []
    _save_meta(ctx, "read", {"shards": shards, "per_source": per_source.tolist(), "offsets": offsets.tolist(),
                             "records": records, "documents": documents, "zero": zero, "threads": threads,
                             "read_tasks": len(items)})
    return {"engine": ENGINE, "documents": n_docs, "per_source": per_source.tolist(),
            "rejected_records": len(records), "rejected_documents": len(documents)}


def _duplicate_ids(ctx: RunContext, env: _Session, shards: list, offsets, n_docs: int) -> List[list]:
    """Duplicate user ids (a shuffle on the id's hash): an error naming both places (fail), or
    the later documents rejected (skip); returns [doc, reason, source, row, empty]."""
    if n_docs < 2:
        return []
    index = rt.ShardIndex(ctx.work.path, shards, offsets)
    parts = env.parts(n_docs * 48)
    ds = _read_files(env, index.files(), ["row", "id", "count"])
    ds = _map(ds, rt.id_parts, parts=parts, shards=index)
    ds = _map(_shuffle(ds, "part", parts), rt.find_dup_ids)
    dups = _collect(ds)
    if dups is None:
        return []
    later = rt.col(dups, "later", np.int64)
    ids = dups.column("id").to_pylist()
    ls, lr = rt.col(dups, "later_source", np.int64), rt.col(dups, "later_row", np.int64)
    fs, fr = rt.col(dups, "first_source", np.int64), rt.col(dups, "first_row", np.int64)
    empty = rt.col(dups, "later_empty", bool)
    out = []
    for i in sorted(range(len(later)), key=lambda i: (ids[i].encode("utf-8"), int(later[i]))):
        where_first = place(ctx.sources[int(fs[i])], int(fr[i]))
        where_later = place(ctx.sources[int(ls[i])], int(lr[i]))
        if ctx.config.on_error == "fail":
            raise InputError(f"{where_later}: duplicate id {ids[i]!r} (first at {where_first}); "
                             f"ids in --id-column must be unique")
        out.append([int(later[i]), f"duplicate id {ids[i]!r} (first at {where_first})", int(ls[i]), int(lr[i]),
                    bool(empty[i])])
    out.sort(key=lambda r: r[0])
    return out


# --------------------------------------------------------------------------- stage: pairs


def stage_pairs(ctx: RunContext, env: _Session) -> dict:
    cfg = ctx.config
    work = ctx.work.path
    ctx.work.stage_dir("pairs", fresh=True)
    meta = _load_meta(ctx, "read")
    index = rt.ShardIndex(work, meta["shards"], meta["offsets"])
    n_docs = int(meta["offsets"][-1])
    rejected = np.array(sorted(d[0] for d in meta["documents"]), dtype=np.int64)
    eligible = n_docs - meta["zero"] - len(rejected)
    info = {"engine": ENGINE, "candidate_pairs": 0, "verified_pairs": 0, "buckets": 0, "anchor_rounds": 0,
            "truncated_buckets": 0, "verifications": 0}
    files: List[str] = []
    if eligible >= 2:
        progress = bar("candidates + verify (ray)", total=1, unit="step", quiet=ctx.quiet)
        exact = cfg.verify == "exact"
        key_parts = env.parts(eligible * cfg.bands * 24)
        data_bytes = 8 * 300 if exact else 4 * cfg.num_perm
        pair_parts = env.parts(eligible * data_bytes)
        chunks = _chunk_starts(n_docs, env.parts(eligible * data_bytes))
        data_type = pa.large_list(pa.uint64()) if exact else pa.binary(4 * cfg.num_perm)
        ds = _read_files(env, index.files(), ["count", "keys"])
        ds = _map(ds, rt.explode_keys, bands=cfg.bands, parts=key_parts, rejected=rejected)
        ds = _map(_shuffle(ds, "part", key_parts), rt.form_buckets, tp_parts=pair_parts, chunk_starts=chunks)
        if _data_path(env) == "shuffle":
            # the join of bucket members with their data: by document range, where each task reads
            # its documents' rows from their shards, then on to the pair partitions
            ds = _map(_shuffle(ds, "chunk", len(chunks)), rt.attach_data, shards=index, exact=exact,
                      data_type=data_type, score=cfg.score_column is not None)
            ds = _map(_shuffle(ds, "tp", pair_parts), rt.search_pairs, config=cfg, pair_parts=pair_parts)
        else:  # one node: each pair partition reads its members' rows from the (local) shards
            ds = _map(_shuffle(ds, "tp", pair_parts), rt.search_pairs_from_shards, shards=index, config=cfg,
                      pair_parts=pair_parts, data_type=data_type)
        ds = _map(_shuffle(ds, "pair_part", pair_parts), rt.dedup_pairs, workdir=work)
        summary = _collect(ds, "pairs")
        progress.update(1)
        progress.close()
        if summary is not None:
            _one_call_per_partition(summary, "pair")
            files = sorted(p for p in summary.column("path").to_pylist() if p)
            info.update(candidate_pairs=int(rt.col(summary, "candidates", np.int64).sum()),
                        verified_pairs=int(rt.col(summary, "verified", np.int64).sum()),
                        buckets=int(rt.col(summary, "buckets", np.int64).sum()),
                        anchor_rounds=int(rt.col(summary, "rounds", np.int64).max()),
                        truncated_buckets=int(rt.col(summary, "truncated", np.int64).sum()),
                        # pairs verified in more than one pair partition count once in candidate_pairs
                        verifications=int(rt.col(summary, "checks", np.int64).sum()))
    _save_meta(ctx, "pairs", {"files": files})
    return info


# --------------------------------------------------------------------------- stage: clusters


def stage_clusters(ctx: RunContext, env: _Session) -> dict:
    cfg = ctx.config
    work = ctx.work.path
    ctx.work.stage_dir("clusters", fresh=True)
    read_meta = _load_meta(ctx, "read")
    index = rt.ShardIndex(work, read_meta["shards"], read_meta["offsets"])
    n_docs = int(read_meta["offsets"][-1])
    files = [(os.path.join(work, p), -1) for p in _load_meta(ctx, "pairs")["files"]]
    verified = int(ctx.work.info("pairs")["verified_pairs"])
    meta = {"files": [], "top": [], "members": 0, "removed": 0, "clusters": 0, "cc_rounds": 0}
    if verified:
        progress = bar("clusters (ray)", total=None, unit="round", quiet=ctx.quiet)
        parts = env.parts(verified * 48)
        edges = _map(_read_files(env, files, ["left", "right"]), rt.pairs_to_edges)
        rounds = 0
        while True:
            rounds += 1
            if rounds > MAX_CC_ROUNDS:
                raise NeardupError("internal error: connected components did not converge")
            stars = _map(_shuffle(_map(edges, rt.large_star_map, parts=parts), "part", parts), rt.large_star)
            t0 = time.perf_counter()
            stars = stars.materialize()
            _debug(f"large-star round {rounds}", t0)
            progress.update(1)
            if not int(stars.sum("ns") or 0):
                break
            edges = _map(_shuffle(_map(stars, rt.small_star_map, parts=parts), "part", parts), rt.small_star)
        chunks = _chunk_starts(n_docs, env.parts(verified * 64))
        labels = _map(stars, rt.star_labels, chunk_starts=chunks)
        links = _map(_read_files(env, files, ["left", "right", "sim"]), rt.pair_links, chunk_starts=chunks)
        ds = _map(_shuffle(labels.union(links), "chunk", len(chunks)), rt.attach_attributes, shards=index,
                  parts=parts, config=cfg)
        ds = _map(_shuffle(ds, "part", parts), rt.select_clusters, config=cfg, workdir=work,
                  names=[s.name for s in ctx.sources], formats=[s.format for s in ctx.sources])
        summary = _collect(ds, "select")
        progress.close()
        _one_call_per_partition(summary, "cluster")
        tops = []
        for t in summary.column("top").to_pylist():
            tops.extend(json.loads(t))
        tops.sort(key=lambda c: (-c["size"], c["head"]))
        meta = {"files": sorted(summary.column("path").to_pylist()), "top": tops[:20],
                "members": int(rt.col(summary, "members", np.int64).sum()),
                "removed": int(rt.col(summary, "removed", np.int64).sum()),
                "clusters": int(rt.col(summary, "clusters", np.int64).sum()), "cc_rounds": rounds}
    _save_meta(ctx, "clusters", meta)
    return {"engine": ENGINE, "clusters": meta["clusters"], "removed": meta["removed"]}


# --------------------------------------------------------------------------- stage: write


def _sorted_members(env: _Session, ctx: RunContext, columns: List[str], keys: List[str], n_docs: int,
                    rows: int, removed_only: bool):
    """Member rows sorted by ``keys`` (a range shuffle on the first key, with boundaries at even
    document indices: no sampling pass), in blocks of about TARGET_PART_BYTES."""
    files = [(os.path.join(ctx.work.path, p), -1) for p in _load_meta(ctx, "clusters")["files"]]
    ds = _read_files(env, files, columns)
    if removed_only:
        ds = _map(ds, rt.only_removed)
    parts = env.parts(rows * 200)
    bounds = sorted(set(int(b) for b in np.linspace(0, n_docs, parts + 1)[1:-1].astype(np.int64)))
    return ds.sort(keys, boundaries=bounds) if bounds else ds.sort(keys)


def _stream_parquet(ds, path: str, schema: pa.Schema, make, order_key: List[str]) -> None:
    """Writes the rows of a sorted dataset, streamed block by block through ParquetRows."""
    t0 = time.perf_counter()
    writer = ParquetRows(path, schema)
    last = None
    for block in ds.iter_batches(batch_size=None, batch_format="pyarrow", prefetch_batches=2):
        if block.num_rows == 0:
            continue
        keys = [rt.col(block, k, np.int64) for k in order_key]
        first_key = tuple(int(k[0]) for k in keys)
        if last is not None and first_key < last:
            raise NeardupError(f"internal error: rows of {os.path.basename(path)} arrived out of order")
        last = tuple(int(k[-1]) for k in keys)
        writer.write(make(block))
    writer.close()
    _debug(os.path.basename(path), t0)


def stage_write(ctx: RunContext, env: _Session) -> dict:
    cfg = ctx.config
    out = ctx.output
    work = ctx.work.path
    read_info = ctx.work.info("read")
    pairs_info = ctx.work.info("pairs")
    read_meta = _load_meta(ctx, "read")
    cl_meta = _load_meta(ctx, "clusters")
    index = rt.ShardIndex(work, read_meta["shards"], read_meta["offsets"])
    n_docs = int(read_meta["offsets"][-1])
    names = [s.name for s in ctx.sources]
    name_arr = pa.array(names, pa.string())
    os.makedirs(out, exist_ok=True)
    progress = bar("write (ray)", total=4, unit="step", quiet=ctx.quiet)

    # removed.parquet: removed documents in document order
    removed_path = os.path.join(out, "removed.parquet")
    if cl_meta["removed"]:
        ds = _sorted_members(env, ctx, ["doc", "source", "removed", "sim", "id", "head_id", "rep_id"], ["doc"],
                             n_docs, cl_meta["removed"], removed_only=True)
        _stream_parquet(ds, removed_path, REMOVED_SCHEMA, lambda b: pa.table({
            "id": b.column("id"), "representative": b.column("rep_id"), "cluster": b.column("head_id"),
            "similarity": b.column("sim"), "source": name_arr.take(b.column("source"))}), ["doc"])
    else:
        ParquetRows(removed_path, REMOVED_SCHEMA).close()
    progress.update(1)

    # clusters.parquet: every member of a cluster, grouped by cluster, in document order
    clusters_path = os.path.join(out, "clusters.parquet")
    if cl_meta["members"]:
        ds = _sorted_members(env, ctx, ["doc", "head", "removed", "id", "head_id"], ["head", "doc"], n_docs,
                             cl_meta["members"], removed_only=False)
        _stream_parquet(ds, clusters_path, CLUSTERS_SCHEMA, lambda b: pa.table({
            "id": b.column("id"), "cluster": b.column("head_id"),
            "is_representative": pa.array(~rt.col(b, "removed", bool))}), ["head", "doc"])
    else:
        ParquetRows(clusters_path, CLUSTERS_SCHEMA).close()
    progress.update(1)

    # rejected.parquet: records that could not be read, and documents rejected after reading
    rej_rows = [(s, r, reason) for s, r, reason in read_meta["records"]]
    for doc, reason, s, r, _ in read_meta["documents"]:
        rej_rows.append((s, r, reason))
    rej_rows.sort(key=lambda t: (t[0], -1 if t[1] is None else t[1]))
    rejected_path = os.path.join(out, "rejected.parquet")
    if cfg.on_error == "skip":
        w = ParquetRows(rejected_path, REJECTED_SCHEMA)
        w.write(pa.table({
            "source": pa.array([names[s] for s, _, _ in rej_rows], pa.string()),
            "row": pa.array([r for _, r, _ in rej_rows], pa.int64()),
            "reason": pa.array([x for _, _, x in rej_rows], pa.string())}, schema=REJECTED_SCHEMA))
        w.close()
    elif os.path.exists(rejected_path):
        os.remove(rejected_path)

    # kept/: one file per input file, written by tasks next to the data
    kept_files = _write_kept(ctx, env, index, read_meta, cl_meta)
    progress.update(1)

    n_input = n_docs + len(read_meta["records"])
    n_removed = int(cl_meta["removed"])
    n_rejected = len(rej_rows)
    n_kept = n_docs - n_removed - len(read_meta["documents"])
    empty_rejected = sum(1 for d in read_meta["documents"] if d[4])
    counts = {
        "input": int(n_input),
        "kept": int(n_kept),
        "removed": n_removed,
        "rejected": int(n_rejected),
        "clusters": int(cl_meta["clusters"]),
        "empty_documents": int(read_meta["zero"] - empty_rejected),
        "candidate_pairs": int(pairs_info["candidate_pairs"]),
        "verified_pairs": int(pairs_info["verified_pairs"]),
        "buckets": int(pairs_info["buckets"]),
        "truncated_buckets": int(pairs_info["truncated_buckets"]),
    }
    stats = build_stats(cfg, ctx.sources, counts, read_info["per_source"], kept_files)
    _write_sample_texts(ctx, cl_meta["top"])
    progress.update(1)
    progress.close()
    return stats


def _write_kept(ctx: RunContext, env: _Session, index: rt.ShardIndex, read_meta: dict, cl_meta: dict) -> List[str]:
    import ray.data

    cfg = ctx.config
    kept_dir = os.path.join(ctx.output, "kept")
    if os.path.isdir(kept_dir):
        shutil.rmtree(kept_dir)
    os.makedirs(kept_dir, exist_ok=True)
    n_src = len(ctx.sources)
    rejected_rows: Dict[int, List[int]] = {}
    for _, _, s, r, _ in read_meta["documents"]:
        rejected_rows.setdefault(int(s), []).append(int(r))
    groups = max(1, min(n_src, 4 * env.cpus))
    group_size = math.ceil(n_src / groups)
    groups = math.ceil(n_src / group_size)
    member_files = [(os.path.join(ctx.work.path, p), -1) for p in cl_meta["files"]]
    sentinel = ray.data.from_arrow(pa.table({"group": pa.array(np.arange(groups, dtype=np.int32)),
                                             "source": pa.array(np.full(groups, -1, np.int32)),
                                             "row": pa.array(np.full(groups, -1, np.int64))},
                                            schema=rt.KEPT_IN_SCHEMA))
    ds = sentinel
    if member_files:
        ds = sentinel.union(_map(_read_files(env, member_files, ["source", "row", "removed"]), rt.removed_rows,
                                 group_size=group_size))
    lite = [dataclasses.replace(s, table=None) if s.format == "table" else s for s in ctx.sources]
    ds = _map(_shuffle(ds, "group", max(2, groups)), rt.write_kept_group, group_size=group_size, sources=lite,
              shards=index, rejected_rows=rejected_rows, kept_dir=kept_dir, output_format=cfg.output_format,
              text_column=cfg.text_column, id_column=cfg.id_column)
    summary = _collect(ds, "kept")
    written: Dict[int, str] = {}
    if summary is not None:
        errors = summary.filter(pc.is_valid(summary.column("error")))
        if errors.num_rows:
            first = errors.sort_by("source")
            _raise_as(first.column("error_kind")[0].as_py(), first.column("error")[0].as_py())
        for si, path in zip(summary.column("source").to_pylist(), summary.column("path").to_pylist()):
            if path:
                written[si] = path
    # in-memory tables (the Python API): the kept rows are taken here, where the table is
    for si, src in enumerate(ctx.sources):
        if src.format != "table":
            continue
        rows = index.source_column(si, "row")
        drop = [np.asarray(rejected_rows.get(si, []), np.int64)]
        for path, _ in member_files:
            t = pq.read_table(path, columns=["source", "row", "removed"])
            sel = rt.col(t, "removed", bool) & (rt.col(t, "source", np.int64) == si)
            drop.append(rt.col(t, "row", np.int64)[sel])
        kept = np.setdiff1d(rows, np.concatenate(drop))
        ctx.table_kept_rows[si] = kept
        path = os.path.join(kept_dir, "table.parquet" if n_src == 1 else f"table-{si}.parquet")
        w = ParquetRows(path, src.table.schema)
        w.write(src.table.take(pa.array(kept, pa.int64())))
        w.close()
        written[si] = os.path.relpath(path, kept_dir)
    return [written[si] for si in sorted(written)]


def _write_sample_texts(ctx: RunContext, tops: list) -> None:
    """texts_sample.parquet: the members of the largest clusters (as the local engine picks them)."""
    import ray

    path = os.path.join(ctx.output, "texts_sample.parquet")
    if not tops:
        w = ParquetRows(path, SAMPLE_SCHEMA)
        w.close()
        return
    wanted = [m for c in tops for m in c["members"]]  # [doc, id, source, row]
    by_source: Dict[int, list] = {}
    for doc, _, s, r in wanted:
        by_source.setdefault(int(s), []).append((int(doc), int(r)))
    fetch = ray.remote(max_retries=MAX_RETRIES)(rt.fetch_texts_task)
    refs = []
    for si, items in sorted(by_source.items()):
        src = ctx.sources[si]
        refs.append(fetch.remote(ctx.config, src, si, items))
    texts: Dict[int, str] = {}
    for part in ray.get(refs):
        texts.update(part)
    w = ParquetRows(path, SAMPLE_SCHEMA)
    w.write(pa.table({"id": pa.array([m[1] for m in wanted], pa.string()),
                      "text": pa.array([texts[m[0]] for m in wanted], pa.string())}, schema=SAMPLE_SCHEMA))
    w.close()


# --------------------------------------------------------------------------- the run


def run_ray(ctx: RunContext) -> dict:
    """Runs the stages not yet done on Ray; returns stats (with seconds per stage)."""
    env = _Session(ctx)
    try:
        work = ctx.work
        stages = [("read", stage_read), ("pairs", stage_pairs), ("clusters", stage_clusters)]
        redo = False
        for name, func in stages:
            # a stage done by another engine (its files differ) is done again, with all after it
            if not redo and work.is_done(name) and work.info(name).get("engine") == ENGINE:
                ctx.seconds[name] = 0.0
                continue
            redo = True
            t0 = time.perf_counter()
            env.wait_warm()
            info = func(ctx, env)
            ctx.seconds[name] = round(time.perf_counter() - t0, 3)
            work.mark_done(name, info)
        return _finish(ctx, env)
    finally:
        env.close()


def _finish(ctx: RunContext, env: _Session) -> dict:
    t0 = time.perf_counter()
    stats = stage_write(ctx, env)
    ctx.seconds["write"] = round(time.perf_counter() - t0, 3)
    return publish(ctx, stats)
