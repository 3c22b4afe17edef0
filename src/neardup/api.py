"""``neardup.dedup``: the whole pipeline from a Python call."""

from __future__ import annotations

import os
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Union

import pyarrow as pa
import pyarrow.parquet as pq

from . import io as nio
from .config import Config
from .errors import ConfigError

__all__ = ["dedup", "DedupResult"]

RUN_OPTIONS = ("work_dir", "resume", "quiet", "keep_work")


@dataclass
class DedupResult:
    """What :func:`dedup` returns.

    kept      the kept documents, of the type given: a pyarrow Table, a pandas DataFrame, a
              datasets.Dataset; for paths, the list of files written under ``output/kept``
    removed   pyarrow Table: id, representative, cluster, similarity, source
    clusters  pyarrow Table: id, cluster, is_representative
    rejected  pyarrow Table: source, row, reason (empty unless on_error='skip')
    stats     the dict written to stats.json
    output    the output folder
    """

    kept: Any
    removed: pa.Table
    clusters: pa.Table
    rejected: pa.Table
    stats: dict
    output: str

    def summary(self) -> str:
        return format_summary(self.stats, self.output)


def _as_table(source) -> tuple:
    """(kind, pyarrow Table) for in-memory inputs, or (None, None) for paths."""
    if isinstance(source, pa.Table):
        return "arrow", source
    if isinstance(source, pa.RecordBatch):
        return "arrow", pa.Table.from_batches([source])
    try:
        import pandas as pd
        if isinstance(source, pd.DataFrame):
            return "pandas", pa.Table.from_pandas(source, preserve_index=False)
    except ImportError:  # pragma: no cover
        pass
    mod = type(source).__module__ or ""
    if mod.startswith("datasets") and hasattr(source, "data") and hasattr(source, "select"):
        table = source.data.table if hasattr(source.data, "table") else source.data
        if getattr(source, "_indices", None) is not None:  # a shuffled/selected view
            table = source.flatten_indices().data.table
        return "hf", pa.table(table)
    return None, None


def dedup(source: Union[str, os.PathLike, Sequence[str], pa.Table, Any], output: Optional[str] = None,
          **options) -> DedupResult:
    """Removes near-duplicates.

    ``source``: a path, folder or glob (or a list of them) of JSONL (.jsonl/.json, gzip or zstd),
    Parquet or text files; or a pyarrow Table, a pandas DataFrame or a Hugging Face Dataset.
    ``output``: the output folder (for paths, a temporary folder when None).
    ``options``: any field of :class:`neardup.Config` (threshold, num_perm, bands, rows, ngram,
    char_ngrams, verify, keep, text_column, id_column, on_error, output_format, seed, workers,
    engine, ray_address, ...) and ``work_dir``, ``resume``, ``quiet``, ``keep_work``.
    """
    run_opts = {k: options.pop(k) for k in list(options) if k in RUN_OPTIONS}
    config = Config.from_options(**options).resolved()
    kind, table = _as_table(source)
    if kind is not None:
        sources = [nio.table_source(table, name="<table>")]
    else:
        if isinstance(source, (str, os.PathLike)):
            inputs = [os.fspath(source)]
        elif isinstance(source, (list, tuple)) and all(isinstance(s, (str, os.PathLike)) for s in source):
            inputs = [os.fspath(s) for s in source]
        else:
            raise ConfigError(f"source must be a path, a list of paths, a pyarrow Table, a pandas DataFrame "
                              f"or a datasets.Dataset; got {type(source).__name__}")
        if not inputs:
            raise ConfigError("no input given")
        sources = nio.discover(inputs)
    if output is None:
        output = tempfile.mkdtemp(prefix="neardup-")
    ctx = run(config, sources, output, **run_opts)
    return _result(kind, table, source, ctx, output)


def check_output_folder(output: str) -> None:
    if os.path.exists(output) and not os.path.isdir(output):
        raise ConfigError(f"output {output!r} exists and is not a folder")
    if os.path.isdir(output):
        entries = [e for e in os.listdir(output) if not e.startswith(".")]
        from .stages.write import OUTPUT_FILES
        ours = set(OUTPUT_FILES)
        foreign = [e for e in entries if e not in ours]
        if foreign:
            raise ConfigError(f"output folder {output!r} holds other files ({', '.join(sorted(foreign)[:3])}); "
                              f"choose an empty or new folder")


def run(config: Config, sources: List[nio.Source], output: str, *, work_dir: Optional[str] = None,
        resume: bool = False, quiet: bool = True, keep_work: Optional[bool] = None):
    """Runs a resolved config over discovered sources with the configured engine, then writes
    report.html; returns the run's context (``.stats`` as written to stats.json)."""
    from .stages import RunContext
    from .stages.layout import WorkDir, fingerprint

    check_output_folder(output)
    explicit_work = work_dir is not None
    if work_dir is None:
        work_dir = os.path.join(output, ".neardup-work")
    if keep_work is None:
        keep_work = explicit_work
    work = WorkDir(work_dir, fingerprint(config, sources), resume=resume)
    ctx = RunContext(config=config, sources=sources, work=work, output=output, quiet=quiet)
    if config.engine == "ray":
        try:
            from .engines.ray import run_ray
        except ImportError as exc:
            raise ConfigError(f"the Ray engine needs Ray: pip install 'neardup[ray]' ({exc})") from None
        ctx.stats = run_ray(ctx)
    else:
        from .engines.local import run_local
        with _arrow_threads(config.workers):
            ctx.stats = run_local(ctx)
    from .report import write_report
    write_report(output)
    if not keep_work:
        work.remove()
    return ctx


_arrow_lock = threading.Lock()
_arrow_users = [0, None]  # runs inside _arrow_threads, Arrow's CPU count before the first


@contextmanager
def _arrow_threads(workers: Optional[int]):
    """--workers bounds Arrow's thread pool (JSON parsing, compute) as well as the kernels'.
    The pool is global to the process: the count found before the first of several concurrent
    runs is the one restored after the last."""
    if not workers:
        yield
        return
    with _arrow_lock:
        if _arrow_users[0] == 0:
            _arrow_users[1] = pa.cpu_count()
        _arrow_users[0] += 1
        pa.set_cpu_count(workers)
    try:
        yield
    finally:
        with _arrow_lock:
            _arrow_users[0] -= 1
            if _arrow_users[0] == 0:
                pa.set_cpu_count(_arrow_users[1])


def _result(kind, table, source, ctx, output) -> DedupResult:
    stats = ctx.stats
    removed = pq.read_table(os.path.join(output, "removed.parquet"))
    clusters = pq.read_table(os.path.join(output, "clusters.parquet"))
    rej_path = os.path.join(output, "rejected.parquet")
    rejected = pq.read_table(rej_path) if os.path.exists(rej_path) else pa.table(
        {"source": pa.array([], pa.string()), "row": pa.array([], pa.int64()), "reason": pa.array([], pa.string())})
    if kind is None:
        kept = [os.path.join(output, "kept", p) for p in stats["kept_files"]]
    else:
        rows = ctx.table_kept_rows[0]
        if kind == "hf":
            kept = source.select(rows.tolist())
        else:
            kept_table = table.take(pa.array(rows))
            kept = kept_table.to_pandas() if kind == "pandas" else kept_table
            if kind == "pandas":
                kept.index = source.index[rows]
    return DedupResult(kept=kept, removed=removed, clusters=clusters, rejected=rejected, stats=stats, output=output)


def format_summary(stats: dict, output: str) -> str:
    c = stats["counts"]
    p = stats["params"]
    secs = stats.get("seconds", {})
    total = sum(secs.values()) if secs else 0.0
    pct = (100.0 * c["removed"] / c["input"]) if c["input"] else 0.0
    lines = [
        "",
        f"neardup: {c['input']:,} documents in, {c['kept']:,} kept, {c['removed']:,} removed ({pct:.1f}%), "
        f"{c['rejected']:,} rejected",
        f"  clusters {c['clusters']:,}   candidate pairs {c['candidate_pairs']:,}   verified pairs {c['verified_pairs']:,}",
        f"  threshold {p['threshold']:g}  k={p['num_perm']}  {p['bands']} bands x {p['rows']} rows  "
        f"{'char' if p.get('char_ngrams') else 'word'} {p['ngram']}-grams  verify={p['verify']}  keep={p['keep']}",
    ]
    if c.get("truncated_buckets"):
        lines.append(f"  note: {c['truncated_buckets']:,} buckets still had unverified members after "
                     f"{p['max_anchor_rounds']} anchor rounds (raise --max-anchor-rounds)")
    if secs:
        lines.append("  seconds: " + "  ".join(f"{k} {v:.1f}" for k, v in secs.items()) + f"  (total {total:.1f})")
    lines.append(f"  output: {output}/ (kept/, removed.parquet, clusters.parquet, stats.json, report.html)")
    return "\n".join(lines)
