"""The Ray driver: the stages of :mod:`neardup.stages` mapped over a Ray cluster.

``neardup dedup ... --engine ray [--ray-address ADDRESS]``. Without an address a local Ray
instance is started (and stopped at the end); with one, the run joins that cluster. Ray is
imported only here. The outputs are byte for byte those of the local driver, and the work
directory is the same (a run interrupted under one engine is finished by the other). See
docs/scaling.md for the data flow and what crosses the network.

How the partitions are formed (the stage code itself is in :mod:`neardup.stages`):

read      one Ray task per block of the read plan (:func:`neardup.stages.read.read_block`);
          blocks already read are skipped.
pairs     (band, key, doc) rows -> keyed shuffle on the band key -> buckets -> shuffle on each
          bucket's smallest member -> :func:`neardup.stages.pairs.search_partition` -> shuffle
          on the pair -> :func:`neardup.stages.pairs.distinct_pairs`, one pairs file a partition.
clusters  connected components by alternating large-star / small-star steps (Kiveris et al.,
          "Connected Components in MapReduce and Beyond", SoCC 2014), then a shuffle on each
          component's label -> :func:`neardup.stages.clusters.select_partition`.
write     removed.parquet and clusters.parquet: a distributed sort streamed through the driver
          into one writer; kept/: one task per group of sources
          (:func:`neardup.stages.write.write_kept_group`).

A keyed shuffle is ``ds.sort("part", boundaries=[1, ..., P-1])`` on an int32 column ``part`` in
[0, P): the pull-based sort shuffle puts exactly the rows of one part value into one block, and
``map_batches(batch_size=None)`` hands that block to one call. Every task is a pure function of
its input and of the work directory (retried after a worker dies, it writes the same files);
the work directory must be visible to every node: a shared file system, or an object-store
prefix (``--work-dir s3://...``), which every task reads and writes through
:mod:`neardup.io.fs`, so that no node relies on another's disk. When neardup starts or joins a
cluster it hands the store's settings of its environment (``AWS_*``, ...) to the workers.
"""

from __future__ import annotations

import json
import logging
import math
import os
import warnings
from functools import partial
from typing import Dict, List

import numpy as np
import pyarrow as pa

from .._kernels import kernel
from ..arrays import arrow, empty_table, to_numpy, unique
from ..config import default_workers
from ..errors import ConfigError, InputError, NeardupError
from ..hashing import kernel_threads, mix64
from ..io import fs
from ..io.tables import read_table
from ..progress import bar, check_interrupt
from ..stages import (RunContext, block_finish, excluded_from_pairs, finish_clusters, finish_read, finish_write,
                      run_stages, user_ids_wanted)
from ..stages.clusters import merge_counts, select_partition
from ..stages.layout import PAIRS_SCHEMA, Corpus, fixed_binary_numpy
from ..stages.pairs import CHECKED_SCHEMA, distinct_pairs, keep_rank, make_verifier, search_partition
from ..stages.read import DUP_SCHEMA, DocStore, duplicate_ids, read_block
from ..stages.write import (CLUSTERS_SCHEMA, REMOVED_SCHEMA, ParquetRows, cluster_records, prepare_output,
                            removed_records, wanted_texts, write_kept_group, write_parquet)

MAX_RETRIES = 4                 # Ray retries of every task whose worker died
TARGET_PART_BYTES = 128 << 20   # bytes of shuffled rows per partition (one reduce task)
MAX_PARTS = 4096
MAX_CC_ROUNDS = 200
log = logging.getLogger("neardup.ray")


def _import_ray():
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"the Ray engine needs Ray: pip install 'neardup[ray]' ({exc})") from None
    return ray


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


# the settings of object stores that workers need as the driver has them (credentials, endpoints)
_STORE_ENV_PREFIXES = ("AWS_", "FSSPEC_", "GOOGLE_", "GCS_", "HF_", "AZURE_", "S3FS_")


def _store_environment(ctx: RunContext) -> Dict[str, str]:
    """The environment variables of object-store settings, when the run touches a URL (inputs,
    output or work dir): passed to every worker through ``runtime_env``, so that a worker on
    another node finds the same endpoint and credentials as the driver."""
    paths = [ctx.work.path, ctx.output] + [s.path for s in ctx.sources if s.format != "table"]
    if not fs.any_remote(paths):
        return {}
    return {k: v for k, v in os.environ.items() if k.startswith(_STORE_ENV_PREFIXES)}


def _read_parts(files: List[str]):
    """A dataset of the rows of Parquet files of the work dir: Ray Data's reader for local files;
    for a URL work dir one task per file reading through :mod:`neardup.io.fs` (the endpoint and
    credentials as the environment gives them)."""
    import ray.data

    if not fs.any_remote(files):
        return ray.data.read_parquet(files)
    return _over(files, read_table)


class _Session:
    """The Ray connection and the Ray Data settings of one run."""

    def __init__(self, ctx: RunContext):
        ray = _import_ray()
        from ray.data.context import DataContext, ShuffleStrategy

        self.ray = ray
        self.started = False
        cfg = ctx.config
        if not ray.is_initialized():
            kwargs = dict(include_dashboard=False, logging_level=logging.WARNING, log_to_driver=not ctx.quiet)
            env_vars = _store_environment(ctx)
            if env_vars:
                kwargs["runtime_env"] = {"env_vars": env_vars}
            if cfg.ray_address:
                _check_reachable(cfg.ray_address)
            try:
                if cfg.ray_address:
                    ray.init(address=cfg.ray_address, **kwargs)
                else:
                    ray.init(address="local", num_cpus=default_workers(cfg.workers), **kwargs)
            except (ConnectionError, ValueError, RuntimeError) as exc:
                where = f"the Ray cluster at {cfg.ray_address}" if cfg.ray_address else "a local Ray instance"
                raise ConfigError(f"cannot start or join {where}: {' '.join(str(exc).split())[:300]}") from None
            self.started = True
        self.cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        per_node = [int(n.get("Resources", {}).get("CPU", 0)) for n in ray.nodes() if n.get("Alive")]
        self.cpus_per_node = max([c for c in per_node if c > 0] or [1])
        dc = DataContext.get_current()
        self._dc = dc
        self._saved = (dc.enable_progress_bars, dc.execution_options.preserve_order, dc.shuffle_strategy)
        dc.enable_progress_bars = False
        dc.execution_options.preserve_order = True
        # the pull-based sort shuffle puts each partition into exactly one block and needs no actors
        dc.shuffle_strategy = ShuffleStrategy.SORT_SHUFFLE_PULL_BASED
        self._loggers = {}
        for name in ("ray.data", "ray.data._internal.execution.streaming_executor"):
            lg = logging.getLogger(name)
            self._loggers[name] = lg.level
            lg.setLevel(logging.ERROR if ctx.quiet else logging.WARNING)

    def parts(self, nbytes: float) -> int:
        """Partitions for a shuffle of nbytes: at least one per CPU (and 2), at most MAX_PARTS."""
        return int(max(2, self.cpus, min(MAX_PARTS, math.ceil(nbytes / TARGET_PART_BYTES))))

    def close(self) -> None:
        dc = self._dc
        dc.enable_progress_bars, dc.execution_options.preserve_order, dc.shuffle_strategy = self._saved
        for name, level in self._loggers.items():
            logging.getLogger(name).setLevel(level)
        if self.started:
            self.ray.shutdown()


# --------------------------------------------------------------------------- Ray Data plumbing


def _col(table: pa.Table, name: str, dtype=None) -> np.ndarray:
    c = table.column(name)
    arr = to_numpy(c) if c.num_chunks == 1 else to_numpy(c.combine_chunks())
    return arr.astype(dtype, copy=False) if dtype is not None else arr


def _part_of(x, parts: int) -> np.ndarray:
    """Hash partition in [0, parts) of integer keys (int32)."""
    return (mix64(x) % np.uint64(parts)).astype(np.int32)


def _runs(*keys: np.ndarray) -> np.ndarray:
    """Start of each run of equal consecutive values (over all keys together)."""
    n = len(keys[0])
    if n == 0:
        return np.zeros(0, np.int64)
    change = np.zeros(n, bool)
    change[0] = True
    for k in keys:
        change[1:] |= k[1:] != k[:-1]
    return np.flatnonzero(change)


def _over(items: List, fn, **kwargs):
    """A dataset of one call of ``fn(item, **kwargs) -> pa.Table`` per item, one task each."""
    import ray.data
    ds = ray.data.from_items([{"i": i} for i in range(len(items))], override_num_blocks=max(1, len(items)))
    return _map(ds, lambda t: fn(items[int(t.column("i")[0].as_py())], **kwargs) if t.num_rows else t)


def _map(ds, fn, **kwargs):
    """map_batches over whole blocks as Arrow tables, with task retries."""
    with warnings.catch_warnings():  # max_retries has no named parameter on map_batches
        warnings.simplefilter("ignore")
        return ds.map_batches(partial(fn, **kwargs), batch_size=None, batch_format="pyarrow",
                              zero_copy_batch=True, max_retries=MAX_RETRIES)


def _shuffle(ds, parts: int):
    """Keyed shuffle: every row with ``part`` == p (p in [0, parts)) lands in the p-th block."""
    return ds.sort("part", boundaries=list(range(1, parts)))


def _collect(ds, schema: pa.Schema) -> pa.Table:
    import ray
    tables = [t for t in ray.get(ds.to_arrow_refs()) if t is not None and t.num_rows]
    return pa.concat_tables(tables) if tables else empty_table(schema)


def _one_call_per_partition(summary: pa.Table, what: str) -> None:
    """Every partition must reach its function in one piece (the keyed shuffle's contract)."""
    parts = _col(summary, "part", np.int64)
    if len(np.unique(parts)) != len(parts):
        raise RuntimeError(f"internal error: a {what} partition was split over several calls; please report this bug")


def _store(ctx: RunContext):
    corpus = Corpus(ctx.work, ctx.config, ctx.work.plan(ctx.sources))
    return corpus, DocStore(ctx.work.path, corpus.block_start, ctx.config.num_perm)


# --------------------------------------------------------------------------- stage: read


def _read_task(work_path, config, sources, tables, block, members):
    """One block; a bad record's error comes back as a value, so that the driver raises the first
    one in file order, as the local driver does."""
    sources = [s if s.format != "table" else _with_table(s, tables[si]) for si, s in enumerate(sources)]
    try:
        with kernel_threads(config.workers):
            return read_block(work_path, config, sources, block, members,
                              finish=block_finish(work_path, config, block))
    except NeardupError as exc:
        return {"error": [type(exc).__name__, str(exc)]}


def _with_table(source, ref):
    import dataclasses

    import ray
    return dataclasses.replace(source, table=ray.get(ref)) if ref is not None else source


def _lite_sources(ctx: RunContext):
    import dataclasses
    return [dataclasses.replace(s, table=None) if s.format == "table" else s for s in ctx.sources]


def stage_read(ctx: RunContext, env: _Session) -> dict:
    import dataclasses

    ray = env.ray
    cfg = ctx.config
    blocks = ctx.work.plan(ctx.sources)
    todo = [b for b in range(len(blocks)) if ctx.work.block_summary(b) is None]
    # with fewer blocks than CPUs each task gets several kernel threads
    threads = max(1, min(env.cpus_per_node, env.cpus // max(1, len(todo))))
    tables = {si: ray.put(s.table) for si, s in enumerate(ctx.sources) if s.format == "table"}
    task = ray.remote(num_cpus=threads, max_retries=MAX_RETRIES)(_read_task)
    task_cfg = dataclasses.replace(cfg, workers=threads)
    lite = _lite_sources(ctx)
    refs = {task.remote(ctx.work.path, task_cfg, lite, tables, b, blocks[b]): b for b in todo}
    results: Dict[int, dict] = {}
    with bar("read + signatures (ray)", total=len(todo), unit="block", quiet=ctx.quiet) as progress:
        pending = list(refs)
        while pending:
            check_interrupt()
            done, pending = ray.wait(pending, timeout=0.5)
            for ref in done:
                results[refs[ref]] = ray.get(ref)
                progress.update(1)
    errors = [results[b]["error"] for b in sorted(results) if "error" in results[b]]
    if errors:
        kind, message = errors[0]
        raise {"ConfigError": ConfigError}.get(kind, InputError)(message)
    return finish_read(ctx, blocks, len(todo), partial(_duplicate_ids, env))


def _id_rows(block: int, *, store: DocStore, parts: int) -> pa.Table:
    ids = store.table(block, ["id"]).column(0).combine_chunks()
    docs = np.arange(store.block_start[block], store.block_start[block + 1], dtype=np.int64)
    return pa.table({"part": arrow(_part_of(_string_hash(ids), parts)), "doc": arrow(docs), "id": ids})


@kernel()
def _fnv1a(offsets, data):
    n = offsets.shape[0] - 1
    out = np.empty(n, dtype=np.uint64)
    for i in range(n):
        h = np.uint64(0xCBF29CE484222325)
        for j in range(offsets[i], offsets[i + 1]):
            h = (h ^ np.uint64(data[j])) * np.uint64(0x100000001B3)
        out[i] = h
    return out


def _string_hash(ids: pa.Array) -> np.ndarray:
    """FNV-1a of each string's UTF-8 bytes (uint64)."""
    ids = ids.cast(pa.large_string())
    if len(ids) == 0:
        return np.zeros(0, np.uint64)
    offsets = np.frombuffer(ids.buffers()[1], np.int64, count=len(ids) + 1, offset=8 * ids.offset)
    data = np.frombuffer(ids.buffers()[2], np.uint8) if ids.buffers()[2] is not None else np.zeros(0, np.uint8)
    return _fnv1a(offsets, data)


def _dup_partition(table: pa.Table) -> pa.Table:
    if table.num_rows == 0:
        return empty_table(DUP_SCHEMA)
    return duplicate_ids(_col(table, "doc", np.int64), table.column("id").combine_chunks())


def _duplicate_ids(env: _Session, corpus: Corpus, store: DocStore) -> pa.Table:
    parts = env.parts(corpus.n * 48)
    ds = _over(list(range(len(corpus.blocks))), _id_rows, store=store, parts=parts)
    return _collect(_map(_shuffle(ds, parts), _dup_partition), DUP_SCHEMA)


# --------------------------------------------------------------------------- stage: pairs

BUCKET_BITS = 40                # bucket id = band partition << 40 | ordinal in the partition


def _band_rows(block: int, *, store: DocStore, bands: int, parts: int, rejected: np.ndarray) -> pa.Table:
    """One row (part, band, key, doc) per band of every eligible document of a block."""
    t = store.table(block, ["count", "keys"])
    doc = np.arange(store.block_start[block], store.block_start[block + 1], dtype=np.int64)
    ok = _col(t, "count", np.int64) > 0
    if len(rejected):
        ok &= ~np.isin(doc, rejected)
    keys = fixed_binary_numpy(t.column("keys"), np.uint64, bands)[ok]
    doc = doc[ok]
    key = keys.reshape(-1)
    return pa.table({"part": arrow((key % np.uint64(parts)).astype(np.int32)),
                     "band": arrow(np.tile(np.arange(bands, dtype=np.int32), len(doc))),
                     "key": arrow(key), "doc": arrow(np.repeat(doc, bands))})


def bucket_members(band: np.ndarray, key: np.ndarray, doc: np.ndarray):
    """Buckets of 2+ rows sharing (band, key): (members in ascending document order, sizes,
    smallest member of each). One sort on a 64-bit mix of (band, key); a mix shared by two
    different (band, key) (probability about rows^2 / 2^64) is caught and the exact three-key
    sort is used instead."""
    h = key ^ mix64(band.astype(np.int64) + 1)
    order = np.argsort(h)
    hs = h[order]
    sizes = np.diff(np.append(_runs(hs), len(hs)))
    big = sizes >= 2
    sel = order[np.repeat(big, sizes)]
    bsizes = sizes[big]
    if len(bsizes) == 0:
        return doc[:0], bsizes, doc[:0]
    heads = np.concatenate([[0], np.cumsum(bsizes)[:-1]]).astype(np.int64)
    rb, rk = band[sel], key[sel]
    if np.any(rb != np.repeat(rb[heads], bsizes)) or np.any(rk != np.repeat(rk[heads], bsizes)):
        order = np.lexsort((doc, key, band))
        sizes = np.diff(np.append(_runs(band[order], key[order]), len(order)))
        big = sizes >= 2
        members = doc[order][np.repeat(big, sizes)]
        bsizes = sizes[big]
        heads = np.concatenate([[0], np.cumsum(bsizes)[:-1]]).astype(np.int64)
        return members, bsizes, members[heads] if len(bsizes) else members[:0]
    run_id = np.repeat(np.arange(len(bsizes), dtype=np.int64), bsizes)
    members = doc[sel][np.lexsort((doc[sel], run_id))]
    return members, bsizes, members[heads]


def _form_buckets(table: pa.Table, *, parts: int) -> pa.Table:
    """One band partition -> (part, bucket, doc) of every bucket of 2+, keyed by the bucket's
    smallest member, so that the buckets of a group of near-duplicates sharing several bands are
    searched together (and their common pairs verified once)."""
    if table.num_rows == 0:
        return pa.table({"part": arrow([], pa.int32()), "bucket": arrow([], pa.int64()),
                         "doc": arrow([], pa.int64())})
    members, sizes, first = bucket_members(_col(table, "band", np.int32), _col(table, "key", np.uint64),
                                           _col(table, "doc", np.int64))
    ids = (np.int64(_col(table, "part")[0]) << np.int64(BUCKET_BITS)) + np.arange(len(sizes), dtype=np.int64)
    return pa.table({"part": arrow(np.repeat(_part_of(first, parts), sizes)),
                     "bucket": arrow(np.repeat(ids, sizes)), "doc": arrow(members)})


CHECKED_ROWS = pa.schema([("part", pa.int32()), ("code", pa.uint64()), ("passed", pa.bool_()),
                          ("similarity", pa.float64()), ("counts", pa.string())])
DISTINCT_SUMMARY = pa.schema([("part", pa.int32()), ("candidates", pa.int64()), ("verified", pa.int64()),
                              ("counts", pa.string())])


def _search(table: pa.Table, *, store: DocStore, config, parts: int) -> pa.Table:
    """One pair partition: its buckets, members in keep order, through the pair search; the
    checked pairs keyed by pair code, and one last row (part -1) with the partition's counts."""
    if table.num_rows == 0:
        return empty_table(CHECKED_ROWS)
    bucket = _col(table, "bucket", np.int64)
    doc = _col(table, "doc", np.int64)
    udocs, inverse = np.unique(doc, return_inverse=True)
    rank = keep_rank(udocs, store, config)[inverse]
    order = np.lexsort((rank, bucket))
    offsets = np.append(_runs(bucket[order]), len(order)).astype(np.int64)
    with kernel_threads(1):
        checked, counts = search_partition(offsets, doc[order], make_verifier(store, config), config)
    codes = to_numpy(checked.column("code"))
    return pa.table({"part": arrow(np.append(_part_of(codes, parts), -1).astype(np.int32)),
                     "code": arrow(np.append(codes, np.uint64(0))),
                     "passed": arrow(np.append(to_numpy(checked.column("passed")), False)),
                     "similarity": arrow(np.append(to_numpy(checked.column("similarity")), 0.0)),
                     "counts": arrow([None] * len(codes) + [json.dumps(counts)], pa.string())},
                    schema=CHECKED_ROWS)


def _distinct(table: pa.Table, *, work) -> pa.Table:
    """One pair-code partition: distinct pairs, the verified ones written as its pairs file."""
    if table.num_rows == 0:
        return empty_table(DISTINCT_SUMMARY)
    part = int(_col(table, "part")[0])
    if part < 0:  # the partitions' counts
        return pa.table({"part": arrow([-1], pa.int32()), "candidates": arrow([0], pa.int64()),
                         "verified": arrow([0], pa.int64()),
                         "counts": arrow([json.dumps([json.loads(c) for c in table.column("counts").to_pylist()
                                                         if c])])}, schema=DISTINCT_SUMMARY)
    pairs, candidates = distinct_pairs(table.select(CHECKED_SCHEMA.names).cast(CHECKED_SCHEMA))
    if pairs.num_rows:
        write_parquet(pairs.cast(PAIRS_SCHEMA), work.part_path("pairs", part))
    return pa.table({"part": arrow([part], pa.int32()), "candidates": arrow([candidates], pa.int64()),
                     "verified": arrow([pairs.num_rows], pa.int64()), "counts": arrow([None], pa.string())},
                    schema=DISTINCT_SUMMARY)


def stage_pairs(ctx: RunContext, env: _Session) -> dict:
    cfg = ctx.config
    ctx.work.stage_dir("pairs", fresh=True)
    corpus, store = _store(ctx)
    rejected = excluded_from_pairs(ctx, corpus)
    info = {"candidate_pairs": 0, "verified_pairs": 0, "buckets": 0, "anchor_rounds": 0, "truncated_buckets": 0,
            "verifications": 0}
    eligible = corpus.n - len(rejected)
    if eligible < 2:
        return info
    with bar("candidates + verify (ray)", total=1, unit="step", quiet=ctx.quiet) as progress:
        key_parts = env.parts(eligible * cfg.bands * 24)
        pair_parts = env.parts(eligible * (2400 if cfg.verify == "exact" else 4 * cfg.num_perm))
        ds = _over(list(range(len(corpus.blocks))), _band_rows, store=store, bands=cfg.bands, parts=key_parts,
                   rejected=rejected)
        ds = _map(_shuffle(ds, key_parts), _form_buckets, parts=pair_parts)
        ds = _map(_shuffle(ds, pair_parts), _search, store=store, config=cfg, parts=pair_parts)
        # the counts rows (part -1) sort first, into a block of their own
        summary = _collect(_map(ds.sort("part", boundaries=list(range(0, pair_parts))), _distinct, work=ctx.work), DISTINCT_SUMMARY)
        progress.update(1)
    real = summary.filter(pa.compute.greater_equal(summary.column("part"), 0))
    _one_call_per_partition(real, "pair")
    per_part = [c for cs in summary.column("counts").to_pylist() if cs for c in json.loads(cs)]
    info.update(candidate_pairs=int(_col(real, "candidates", np.int64).sum()),
                verified_pairs=int(_col(real, "verified", np.int64).sum()),
                buckets=sum(c["buckets"] for c in per_part),
                anchor_rounds=max([c["anchor_rounds"] for c in per_part] or [0]),
                truncated_buckets=sum(c["truncated_buckets"] for c in per_part),
                verifications=sum(c["verifications"] for c in per_part))
    return info


# --------------------------------------------------------------------------- stage: clusters
# Edges are (hi, lo), hi > lo. large-star(u): m = min(N(u) + u); (v, m) for every neighbour v > u.
# small-star(u): N = neighbours < u, m = min(N); (v, m) for every v in N + u but m. The input of
# a large-star step is a forest of stars centred on their minimum (so: done) iff no node has a
# smaller neighbour together with any other neighbour; the step counts such nodes ("ns").

EDGE_SCHEMA = pa.schema([("hi", pa.int64()), ("lo", pa.int64()), ("ns", pa.int64())])


def _node_rows(table: pa.Table, *, parts: int, both: bool) -> pa.Table:
    hi, lo = _col(table, "hi", np.int64), _col(table, "lo", np.int64)
    ok = hi >= 0
    hi, lo = hi[ok], lo[ok]
    node, nbr = (np.concatenate([hi, lo]), np.concatenate([lo, hi])) if both else (hi, lo)
    return pa.table({"part": arrow(_part_of(node, parts)), "node": arrow(node), "nbr": arrow(nbr)})


def _grouped(table: pa.Table):
    node, nbr = _col(table, "node", np.int64), _col(table, "nbr", np.int64)
    order = np.lexsort((nbr, node))
    node, nbr = node[order], nbr[order]
    keep = np.ones(len(node), bool)
    keep[1:] = (node[1:] != node[:-1]) | (nbr[1:] != nbr[:-1])
    node, nbr = node[keep], nbr[keep]
    starts = _runs(node)
    return node, nbr, starts, np.diff(np.append(starts, len(node)))


def _large_star(table: pa.Table) -> pa.Table:
    if table.num_rows == 0:
        return empty_table(EDGE_SCHEMA)
    node, nbr, starts, sizes = _grouped(table)
    m = np.minimum(np.minimum.reduceat(nbr, starts), node[starts])
    smaller = np.add.reduceat((nbr < node).astype(np.int64), starts)
    nonstar = int(((smaller >= 2) | ((smaller >= 1) & (sizes > smaller))).sum())
    mm = np.repeat(m, sizes)
    out = nbr > node
    ns = np.zeros(int(out.sum()) + 1, np.int64)
    ns[-1] = nonstar
    return pa.table({"hi": arrow(np.append(nbr[out], -1)), "lo": arrow(np.append(mm[out], -1)),
                     "ns": arrow(ns)}, schema=EDGE_SCHEMA)


def _small_star(table: pa.Table) -> pa.Table:
    if table.num_rows == 0:
        return empty_table(EDGE_SCHEMA)
    node, nbr, starts, sizes = _grouped(table)
    m = np.minimum.reduceat(nbr, starts)
    mm = np.repeat(m, sizes)
    keep = nbr != mm
    hi = np.concatenate([nbr[keep], node[starts]])
    return pa.table({"hi": arrow(hi), "lo": arrow(np.concatenate([mm[keep], m])),
                     "ns": arrow(np.zeros(len(hi), np.int64))}, schema=EDGE_SCHEMA)


def _label_rows(table: pa.Table, *, parts: int) -> pa.Table:
    """Converged stars (leaf, centre) -> (part, doc, label, kind 0) for leaves and centres."""
    hi, lo = _col(table, "hi", np.int64), _col(table, "lo", np.int64)
    ok = hi >= 0
    centres = unique(lo[ok])
    doc = np.concatenate([hi[ok], centres])
    label = np.concatenate([lo[ok], centres])
    n = len(doc)
    return pa.table({"part": arrow(_part_of(doc, parts)), "kind": arrow(np.zeros(n, np.int8)),
                     "doc": arrow(doc), "label": arrow(label), "right": arrow(np.full(n, -1, np.int64)),
                     "similarity": arrow(np.zeros(n))})


def _pair_rows(table: pa.Table, *, parts: int) -> pa.Table:
    left = _col(table, "left", np.int64)
    n = len(left)
    return pa.table({"part": arrow(_part_of(left, parts)), "kind": arrow(np.ones(n, np.int8)),
                     "doc": arrow(left), "label": arrow(np.full(n, -1, np.int64)),
                     "right": table.column("right"), "similarity": table.column("similarity")})


def _relabel(table: pa.Table, *, parts: int) -> pa.Table:
    """One document partition: each pair gets the label of its left document; every row is then
    keyed by its label's partition (whole components meet there)."""
    kind, doc, label = _col(table, "kind", np.int8), _col(table, "doc", np.int64), _col(table, "label", np.int64)
    lab = kind == 0
    ldoc, first = np.unique(doc[lab], return_index=True)
    labels = label.copy()
    labels[~lab] = label[lab][first][np.searchsorted(ldoc, doc[~lab])]
    return table.set_column(0, "part", arrow(_part_of(labels, parts)))


SELECT_SUMMARY = pa.schema([("part", pa.int32()), ("counts", pa.string())])


def _select(table: pa.Table, *, store: DocStore, config, sources, work, with_ids: bool) -> pa.Table:
    """One label partition (whole components): the selection of the stage, its members file."""
    part = int(_col(table, "part")[0])
    kind = _col(table, "kind", np.int8)
    docs = unique(_col(table, "doc", np.int64)[kind == 0])
    pairs = table.filter(arrow(kind == 1))
    columns = ["source", "row", "length"] + (["score"] if config.score_column else [])
    attrs = store.columns(docs, columns)
    user_ids = store.ids(docs) if with_ids else None
    with kernel_threads(1):
        members, counts = select_partition(docs, attrs, user_ids, _col(pairs, "doc", np.int64),
                                           _col(pairs, "right", np.int64), _col(pairs, "similarity", np.float64),
                                           config, sources)
    write_parquet(members, work.part_path("clusters", part))
    return pa.table({"part": arrow([part], pa.int32()), "counts": arrow([json.dumps(counts)])},
                    schema=SELECT_SUMMARY)


def stage_clusters(ctx: RunContext, env: _Session) -> dict:
    cfg = ctx.config
    ctx.work.stage_dir("clusters", fresh=True)
    corpus, store = _store(ctx)
    files = ctx.work.parts("pairs")
    verified = int(ctx.work.info("pairs")["verified_pairs"])
    if not verified:
        return finish_clusters(ctx, corpus, merge_counts([]))
    parts = env.parts(verified * 48)
    pairs = _read_parts(files)
    edges = pairs.map_batches(lambda t: pa.table({"hi": t.column("right"), "lo": t.column("left"),
                                                  "ns": arrow(np.zeros(t.num_rows, np.int64))}),
                              batch_format="pyarrow")
    with bar("clusters (ray)", total=None, unit="round", quiet=ctx.quiet) as progress:
        for rounds in range(1, MAX_CC_ROUNDS + 1):
            check_interrupt()
            stars = _map(_shuffle(_map(edges, _node_rows, parts=parts, both=True), parts), _large_star).materialize()
            progress.update(1)
            if not int(stars.sum("ns") or 0):
                break
            edges = _map(_shuffle(_map(stars, _node_rows, parts=parts, both=False), parts), _small_star)
        else:
            raise RuntimeError("internal error: connected components did not converge; please report this bug")
    rows = _map(stars, _label_rows, parts=parts).union(_map(pairs, _pair_rows, parts=parts))
    ds = _map(_shuffle(_map(_shuffle(rows, parts), _relabel, parts=parts), parts), _select, store=store,
              config=cfg, sources=_lite_sources(ctx), work=ctx.work, with_ids=user_ids_wanted(ctx))
    summary = _collect(ds, SELECT_SUMMARY)
    _one_call_per_partition(summary, "cluster")
    return finish_clusters(ctx, corpus, {**merge_counts([json.loads(c) for c in summary.column("counts").to_pylist()]),
                                         "cc_rounds": rounds})


# --------------------------------------------------------------------------- stage: write


def _stream_sorted(env: _Session, ctx: RunContext, path: str, schema: pa.Schema, keys: List[str], make,
                   removed_only: bool, rows: int, n_docs: int) -> None:
    """Member rows sorted by ``keys`` (a range shuffle with boundaries at even document indices:
    no sampling pass), streamed block by block through one ParquetRows writer."""
    writer = ParquetRows(path, schema)
    files = ctx.work.parts("clusters")
    if files and rows:
        ds = _read_parts(files)
        if removed_only:
            ds = _map(ds, lambda t: t.filter(t.column("removed")))
        bounds = sorted(set(np.linspace(0, n_docs, env.parts(rows * 200) + 1)[1:-1].astype(np.int64).tolist()))
        ds = ds.sort(keys, boundaries=bounds) if bounds else ds.sort(keys)
        for block in ds.iter_batches(batch_size=None, batch_format="pyarrow", prefetch_batches=2):
            writer.write(make(block))
    writer.close()


KEPT_SUMMARY = pa.schema([("result", pa.string())])


def _kept_task(group: List[int], *, sources, plan_of, store: DocStore, dropped, kept_dir: str, config, wanted):
    rows = {si: store.source_rows(plan_of[si], si) for si in group}
    try:
        written, _, captured, kept = write_kept_group(sources, group, rows, dropped, kept_dir, config, wanted)
    except NeardupError as exc:
        return pa.table({"result": [json.dumps({"error": [type(exc).__name__, str(exc)]})]}, schema=KEPT_SUMMARY)
    return pa.table({"result": [json.dumps({"written": written, "captured": captured, "kept": kept})]},
                    schema=KEPT_SUMMARY)


def stage_write(ctx: RunContext, env: _Session) -> dict:
    cfg = ctx.config
    corpus, store = _store(ctx)
    fs.makedirs(ctx.output)
    info = ctx.work.info("clusters")
    names = arrow([s.name for s in ctx.sources], pa.string())
    _stream_sorted(env, ctx, fs.join(ctx.output, "removed.parquet"), REMOVED_SCHEMA, ["doc"],
                   lambda b: removed_records(b, names), True, info["removed"], corpus.n)
    _stream_sorted(env, ctx, fs.join(ctx.output, "clusters.parquet"), CLUSTERS_SCHEMA, ["cluster", "doc"],
                   cluster_records, False, info["members"], corpus.n)
    # what each source loses: its removed documents and its rejected ones (few next to the corpus)
    dropped: Dict[int, list] = {}
    for path in ctx.work.parts("clusters"):
        t = read_table(path, columns=["source", "row", "removed"])
        t = t.filter(t.column("removed"))
        for s, r in zip(_col(t, "source").tolist(), _col(t, "row").tolist()):
            dropped.setdefault(s, []).append(r)
    rejected = [d[0] for d in ctx.work.info("read")["rejected_documents"]]
    if rejected:
        cols = store.columns(np.array(rejected, np.int64), ["source", "row"])
        for s, r in zip(cols["source"].tolist(), cols["row"].tolist()):
            dropped.setdefault(int(s), []).append(int(r))
    dropped_rows = {s: np.array(r, np.int64) for s, r in dropped.items()}
    plan_of = {si: b for b, members in enumerate(corpus.blocks) for si in members}
    wanted = wanted_texts(info["top"])
    kept_dir = prepare_output(ctx.output)
    files = [si for si, s in enumerate(ctx.sources) if s.format != "table"]
    size = max(1, math.ceil(len(files) / (4 * env.cpus)))
    groups = [files[i:i + size] for i in range(0, len(files), size)]
    written: Dict[int, str] = {}
    captured: Dict[int, str] = {}
    kept = 0
    with bar("write kept (ray)", total=len(groups), unit="group", quiet=ctx.quiet) as progress:
        if groups:
            ds = _over(groups, _kept_task, sources=_lite_sources(ctx), plan_of=plan_of, store=store,
                       dropped={s: dropped_rows[s] for s in files if s in dropped_rows}, kept_dir=kept_dir,
                       config=cfg, wanted={s: w for s, w in wanted.items() if s in set(files)})
            results = [json.loads(r) for r in _collect(ds, KEPT_SUMMARY).column("result").to_pylist()]
            errors = [r["error"] for r in results if "error" in r]
            if errors:
                raise {"ConfigError": ConfigError}.get(errors[0][0], InputError)(errors[0][1])
            for r in results:
                written.update({int(k): v for k, v in r["written"].items()})
                captured.update({int(k): v for k, v in r["captured"].items()})
                kept += r["kept"]
        progress.update(len(groups))
    # in-memory tables (the Python API): their kept rows are taken here, where the table is
    tables = [si for si, s in enumerate(ctx.sources) if s.format == "table"]
    if tables:
        t_written, table_rows, _, t_kept = write_kept_group(
            ctx.sources, tables, {si: store.source_rows(plan_of[si], si) for si in tables}, dropped_rows,
            kept_dir, cfg)
        written.update(t_written)
        ctx.table_kept_rows.update(table_rows)
        kept += t_kept
    finish_write(ctx, corpus, [written[si] for si in sorted(written)], kept, captured)
    return {}


# --------------------------------------------------------------------------- the run


def run_ray(ctx: RunContext) -> dict:
    """Runs the stages not yet done on Ray; returns the stats (with seconds per stage)."""
    env = _Session(ctx)
    try:
        return run_stages(ctx, {"read": lambda: stage_read(ctx, env), "pairs": lambda: stage_pairs(ctx, env),
                                "clusters": lambda: stage_clusters(ctx, env), "write": lambda: stage_write(ctx, env)})
    finally:
        env.close()
