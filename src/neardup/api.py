"""``neardup.dedup``: the whole pipeline from a Python call."""

from __future__ import annotations

import contextlib
import functools
import os
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Union

import pyarrow as pa

from . import io as nio
from .kernels.arrays import empty_table
from .config import Config, Execution, Input, Output, Sketch, Similarity, Verification
from .errors import ConfigError, NeardupError
from .io.storage import fs
from .io.storage.tables import read_table
from .progress import plural
from .stages.write import INDEX_ID_COLUMN, publish_stats  # (the id of a DataFrame's row or of a text in a list)

__all__ = ["dedup", "DedupResult"]



@dataclass
class DedupResult:
    """What :func:`dedup` returns.

    kept      the kept documents, of the type given: a pyarrow Table, a pandas DataFrame, a
              datasets.Dataset; for paths, the list of files written under ``output/kept``
    removed   pyarrow Table: id, representative, cluster, similarity, source
    clusters  pyarrow Table: id, cluster, is_representative
    rejected  pyarrow Table: source, row, reason (empty unless on_error='skip')
    stats     the dict written to stats.json
    output    the output folder (None for an in-memory input without ``output=``: nothing kept on disk)
    """

    kept: Any
    removed: pa.Table
    clusters: pa.Table
    rejected: pa.Table
    stats: dict
    output: Optional[str]

    def summary(self) -> str:
        return format_summary(self.stats, self.output)

    def __repr__(self) -> str:
        """One line of sizes, never the tables (``print(result)``); ``summary()`` says more."""
        c = self.stats.get("counts", {})
        return (f"DedupResult(kept={_size_of(self.kept)}, removed={_rows(self.removed)}, "
                f"clusters={_rows(self.clusters)}, rejected={_rows(self.rejected)}, "
                f"input={c.get('input', 0):,}, output={self.output!r})")


def _rows(table) -> str:
    n = len(table)
    return f"<{n:,} {plural(n, 'row')}>"


def _size_of(kept) -> str:
    """``kept`` in a few words: its type and length."""
    if isinstance(kept, list):
        return f"<list of {len(kept):,}>"
    n = getattr(kept, "num_rows", None)
    if isinstance(n, dict):  # a datasets.DatasetDict: rows per split
        n = sum(n.values())
    if n is None:
        try:
            n = len(kept)
        except TypeError:
            return f"<{type(kept).__name__}>"
    return f"<{type(kept).__name__}: {n:,} {plural(n, 'row')}>"




def _looks_like_paths(items: Sequence) -> bool:
    """A list of strings is a list of paths when each one looks like a path: no white space, and
    an existing file or folder, a glob, a path separator or a file extension. Otherwise it is a
    list of texts."""
    for s in items:
        if isinstance(s, os.PathLike):
            continue
        if not isinstance(s, str) or not s or any(c.isspace() for c in s) or len(s) > 4096:
            return False
        if not (os.path.exists(s) or any(c in s for c in "*?[/" + os.sep) or os.path.splitext(s)[1]):
            return False
    return True


def _with_index_ids(table: pa.Table, ids) -> pa.Table:
    return table.append_column(INDEX_ID_COLUMN, pa.array([str(x) for x in ids], pa.string()))


def _in_memory(source) -> tuple:
    """(kind, {name: pyarrow Table}) for in-memory inputs, or (None, None) for paths."""
    if isinstance(source, pa.Table):
        return "arrow", {"<table>": source}
    if isinstance(source, pa.RecordBatch):
        return "arrow", {"<table>": pa.Table.from_batches([source])}
    mod = type(source).__module__ or ""
    # pandas (0.1-0.2 s to import) only when the object comes from it: a path never pays for it
    # (a subclass of DataFrame defined elsewhere has pandas in its MRO)
    if any((getattr(k, "__module__", "") or "").split(".")[0] == "pandas" for k in type(source).__mro__):
        import pandas as pd
        if isinstance(source, pd.DataFrame):
            table = pa.Table.from_pandas(source, preserve_index=False)
            return "pandas", {"<table>": _with_index_ids(table, source.index)}
    if mod.startswith("datasets") and type(source).__name__ == "DatasetDict":
        return "hf_dict", {name: _hf_table(split) for name, split in source.items()}
    if mod.startswith("datasets") and hasattr(source, "data") and hasattr(source, "select"):
        return "hf", {"<table>": _hf_table(source)}
    if isinstance(source, (list, tuple)) and source and not _looks_like_paths(source):
        if not all(isinstance(t, str) for t in source):
            bad = next(t for t in source if not isinstance(t, str))
            raise ConfigError(f"a list given to dedup must hold texts (str) or paths; found a {type(bad).__name__}")
        return "texts", {"<texts>": _with_index_ids(pa.table({"text": pa.array(source, pa.string())}),
                                                    range(len(source)))}
    return None, None


def _hf_table(ds) -> pa.Table:
    if getattr(ds, "_indices", None) is not None:  # a shuffled/selected view
        ds = ds.flatten_indices()
    return pa.table(ds.data.table if hasattr(ds.data, "table") else ds.data)


def run_dedup(source: Union[str, os.PathLike, Sequence[str], pa.Table, Any], output: Optional[str] = None, *,
          threshold: float = Similarity.threshold, num_perm: int = Sketch.num_perm, bands: Optional[int] = None,
          rows: Optional[int] = None, verify: str = Verification.verify, keep: str = Output.keep,
          text_column: str = Input.text_column, id_column: Optional[str] = None, on_error: str = Input.on_error,
          engine: str = Execution.engine, work_dir: Optional[str] = None, resume: bool = False,
          overwrite: bool = False, quiet: bool = True, keep_work: Optional[bool] = None, paths: bool = False,
          **options: Any) -> DedupResult:
    """Finds and removes near-duplicate documents; returns a :class:`DedupResult`. The defaults
    are those of :class:`neardup.Config` (the signature shows them).

    source
        What to deduplicate: a path, folder or glob, or a list of them (JSONL ``.jsonl``/``.json``,
        plain, gzip or zstd; Parquet; any other file is one text document); a pyarrow Table or
        RecordBatch; a pandas DataFrame (its index is the id of each row); a Hugging Face
        ``datasets.Dataset``, or a ``DatasetDict`` (its splits deduplicated together, a document of
        one split against those of every split); or a list of texts (``["text one", ...]``: the
        result's ``kept`` is then the list of the indexes kept). A list of strings is read as paths
        when each one names an existing file or folder or matches a glob; with ``paths=True``
        every string is a path (the command line passes that: a missing one is an error).
    output
        The output folder (kept/, removed.parquet, clusters.parquet, stats.json, report.html).
        For in-memory inputs, None (the default) keeps nothing on disk: the result is returned and
        the temporary folder removed. For paths, None writes into a new temporary folder whose
        path is ``result.output``.
    threshold
        Jaccard similarity of the shingle sets at or above which two documents are near-duplicates.
    num_perm, bands, rows
        MinHash signature length k and LSH banding; bands and rows are chosen from the threshold
        when not given (``neardup params`` shows the choice and its S-curve).
    verify
        "exact" (Jaccard of the shingle sets), "estimate" (from the signatures) or "none".
    keep
        Which document of a cluster is kept: "first" (input order), "longest", "score:COLUMN".
    text_column, id_column
        Fields of JSONL / Parquet / tables (``text_column`` may name several, comma-separated: the
        first each input has). Ids: ``id_column``; else an ``id`` field or column that every input
        has (a repeated one is an error); else a DataFrame's index or the index in a list of texts;
        else positions, ``FILE:LINE`` / ``FILE:ROW`` or the path of a text file (``id_column=""``
        asks for positions whatever the input has).
    on_error
        "fail": the first bad record stops the run with one clear line (InputError); "skip": bad
        records are left out and listed in ``result.rejected``.
    engine, work_dir, resume (False), overwrite (False), quiet (True), keep_work
        Run on this machine or on Ray ("ray"); where the stage files go (default
        ``output/.neardup-work``); continue an interrupted run (same inputs and options); replace
        the results of an earlier run in ``output`` and discard an earlier run's work in the work
        dir; show progress bars; keep the work directory after success. neardup writes only into
        a new or empty folder or one it made before (see the README's "What neardup will and will
        not touch").
    **options
        Every other field of :class:`neardup.Config`: ngram, char_ngrams, min_recall, seed,
        normalisation switches, max_anchor_rounds, output_format, batch_size, workers,
        ray_address.

    >>> import neardup
    >>> result = neardup.dedup(["the cat sat on the mat today", "the cat sat on the mat today!",
    ...                         "a different text altogether here"], threshold=0.8)
    >>> result.kept
    [0, 2]
    """
    options.update(threshold=threshold, num_perm=num_perm, bands=bands, rows=rows, verify=verify, keep=keep,
                   text_column=text_column, id_column=id_column, on_error=on_error, engine=engine)
    kind, tables = (None, None) if paths else _in_memory(source)
    if id_column == "":  # positions, even where the input has ids of its own
        options["id_column"] = None
    elif kind is not None and id_column is None:
        # the rule of every input (nio.choose_id_column): an `id` column in every table, else a
        # DataFrame's index (and a list's positions)
        if all("id" in t.column_names for t in tables.values()):
            options.update(id_column="id", id_column_auto=True)
        elif kind in ("pandas", "texts"):
            options["id_column"] = INDEX_ID_COLUMN
    config = Config(**options).resolved()
    if kind is not None:
        if sum(t.num_rows for t in tables.values()) == 0:
            return _empty_result(kind, source, config)
        sources = [nio.table_source(t, name=name) for name, t in tables.items()]
    else:
        if isinstance(source, (str, os.PathLike)):
            inputs = [os.fspath(source)]
        elif isinstance(source, (list, tuple)) and all(isinstance(s, (str, os.PathLike)) for s in source):
            inputs = [os.fspath(s) for s in source]
        else:
            raise ConfigError(f"source must be a path, a list of paths or texts, a pyarrow Table, a pandas "
                              f"DataFrame or a datasets.Dataset / DatasetDict; got {type(source).__name__}")
        if not inputs:
            raise ConfigError("no input given")
        sources = nio.discover(inputs, input_format=config.input_format, follow_symlinks=config.follow_symlinks)
        chosen, auto = nio.choose_id_column(sources, id_column)
        if auto:
            config = config.replace(id_column=chosen, id_column_auto=True)
    temporary = output is None
    if temporary:
        output = tempfile.mkdtemp(prefix="neardup-")
    try:
        ctx = run(config, sources, output, work_dir=work_dir, resume=resume, quiet=quiet, keep_work=keep_work,
                  overwrite=overwrite or temporary, report=not (temporary and kind is not None),
                  inputs=inputs if kind is None else ())
        result = _result(kind, tables, source, ctx, output)
    finally:
        if temporary and kind is not None:
            import shutil
            shutil.rmtree(output, ignore_errors=True)
    if temporary and kind is not None:
        result.output = None
    return result


@functools.wraps(run_dedup)
def dedup(*args, **kwargs) -> DedupResult:
    # The command line calls run_dedup, whose errors name its flags; a Python caller gets them
    # in the terms of this call (its keywords, and no column of neardup's own).
    try:
        return run_dedup(*args, **kwargs)
    except NeardupError as exc:
        message = in_api_terms(str(exc))
        if message == str(exc):
            raise
        try:
            error = type(exc)(message)
        except TypeError:  # an error class with other arguments: left as it is
            raise exc from None
        raise error from None


def in_api_terms(message: str) -> str:
    """A message naming command-line flags, in the keywords of :func:`dedup`: ``--text-column``
    -> ``text_column``, a switch like ``--no-nfkc`` -> ``normalize_unicode=False``, ``--overwrite
    (overwrite=True)`` -> ``overwrite=True``, ``--id-column NAME (id_column='NAME')`` ->
    ``id_column='NAME'``; the column neardup adds to hold a DataFrame's index
    (or a list's positions) is "the index"."""
    import re
    from dataclasses import fields
    from .config import GROUPS, Switch, declaration

    names = {"--output": "output", "--work-dir": "work_dir", "--overwrite": "overwrite=True",
             "--resume": "resume=True", "--quiet": "quiet=True"}
    for group in GROUPS.values():
        for f in fields(group):
            d = declaration(f)
            if not d.cli:
                continue
            flag = d.flag or "--" + f.name.replace("_", "-")
            names[flag] = f"{f.name}={not f.default}" if isinstance(d.check, Switch) else f.name
    message = re.sub(r"--[a-z][a-z0-9-]*(?: [A-Z]+| '')? \((\w+=[^)]*)\)", r"\1", message)
    message = re.sub(r"--[a-z][a-z0-9-]*", lambda m: names.get(m.group(0), m.group(0)), message)
    message = message.replace(f", {INDEX_ID_COLUMN}", "").replace(f"{INDEX_ID_COLUMN}, ", "")
    return message.replace(f"'{INDEX_ID_COLUMN}'", "the index").replace(INDEX_ID_COLUMN, "the index")


def _empty_result(kind: str, source, config: Config) -> "DedupResult":
    from .stages.write import CLUSTERS_SCHEMA, REJECTED_SCHEMA, REMOVED_SCHEMA, build_stats
    counts = dict.fromkeys(("input", "kept", "removed", "rejected", "clusters", "empty_documents",
                            "candidate_pairs", "verified_pairs", "buckets", "truncated_buckets"), 0)
    stats = build_stats(config, [], counts, [], [])
    kept = [] if kind == "texts" else source
    return DedupResult(kept=kept, removed=empty_table(REMOVED_SCHEMA), clusters=empty_table(CLUSTERS_SCHEMA),
                       rejected=empty_table(REJECTED_SCHEMA), stats=stats, output=None)


STAGING = ".neardup-staging"  # where a run writes its result before it is moved into the output
WORK = ".neardup-work"        # the default work dir, inside the output
OUTPUT_FORMAT = 1             # the output folder's marker format


def claim_output(out, run: str, overwrite: bool, resume: bool) -> None:
    """Makes ``out`` a neardup output folder, or checks that it is one, for the run ``run`` (its
    fingerprint). Results of an earlier run are replaced only with ``overwrite``, or with
    ``resume`` when they are this very run's (a resumed run that had published them already)."""
    from .stages.write import OUTPUT_FILES
    marker = out.claim("output", "output folder", OUTPUT_FORMAT)
    results = [n for n in out.names() if n in OUTPUT_FILES]
    if results and not overwrite and not (resume and marker.get("run") == run):
        other = " of other inputs or options" if resume else ""
        raise ConfigError(f"output folder {out} holds the results of an earlier run{other}; pass --overwrite "
                          f"(overwrite=True) to replace them, or choose another folder")
    if marker.get("run") != run:
        out.set_marker({**marker, "run": run})


def run(config: Config, sources: List[nio.Source], output: str, *, work_dir: Optional[str] = None,
        resume: bool = False, quiet: bool = True, keep_work: Optional[bool] = None, overwrite: bool = False,
        report: bool = True, inputs: Sequence[str] = ()):
    """Runs a resolved config over discovered sources with the configured engine, then writes
    report.html; returns the run's context (``.stats`` as written to stats.json).

    Everything is written into folders neardup owns (:mod:`neardup.io.storage.folder`): the output and
    the work dir are claimed (a foreign folder, or one that is or holds or lies inside an input,
    is refused untouched) and locked for the run; the result is written into a staging folder
    and published whole, stats.json last."""
    from .io.storage.folder import Folder, refuse_overlap
    from .stages import Run, run_stages
    from .stages.layout import WorkDir, fingerprint, run_identity
    from .stages.write import OUTPUT_FILES

    out = Folder.of(output)
    explicit_work = work_dir is not None
    work_folder = Folder.of(work_dir if explicit_work else _default_work_dir(out, config.engine))
    if work_folder.os_path is None and config.engine != "ray":
        raise ConfigError(f"--work-dir {work_folder}: the local engine keeps its work dir on local disk; "
                          f"give a local folder (or run with --engine ray, which accepts a URL)")
    files = [s.path for s in sources if s.format != "table"]
    refuse_overlap("output folder", out, inputs, files)
    refuse_overlap("--work-dir", work_folder, inputs, files)
    inside = out.contains(work_folder)  # the default: covered by the output's lock, removed whole
    if work_folder.path == out.path or work_folder.contains(out):
        raise ConfigError(f"--work-dir {work_folder}: is or holds the output folder {out}; choose another")
    for folder, kind, role in ((out, "output", "output folder"), (work_folder, "work-dir", "--work-dir")):
        folder.check_reachable()
        folder.check_claim(kind, role)  # before the lock file is made in it: nothing is written into a foreign folder
    if keep_work is None:
        keep_work = explicit_work
    identity = run_identity(config, sources)
    with out.lock(), (contextlib.nullcontext() if inside else work_folder.lock()):
        claim_output(out, fingerprint(identity), overwrite, resume)
        work = WorkDir(work_folder.path, identity, resume=resume, overwrite=overwrite)
        staging = out.child(STAGING)
        staging.remove_all()
        staging.makedirs()
        ctx = Run(config=config, sources=sources, work=work, output=staging.path, quiet=quiet)
        try:
            with _engine(config, [work.path, out.path] + files, quiet) as engine:
                ctx.stats = run_stages(ctx, engine)
            if report:
                from .report.html import write_report
                write_report(staging.path, plots="svg")  # inline SVG: no matplotlib start-up in a run
            out.publish(staging, OUTPUT_FILES, "stats.json", staging.read_bytes("stats.json"))
        except BaseException:
            with contextlib.suppress(Exception):
                staging.remove_all()  # the old result (if any) stays whole; nothing half-written is left
            raise
        ctx.output = out.path
        if config.update_index:
            # after the result is published: a failure here leaves a complete output and an index
            # without this run's documents (never an index holding documents of a run that failed)
            ctx.stats["index_update"] = _update_index(ctx)
            publish_stats(out.path, ctx.stats)
        if not keep_work:
            work.remove(whole=inside or not explicit_work)
    return ctx


def _default_work_dir(out, engine: str) -> str:
    """OUTPUT/.neardup-work; for a URL output on the local engine a local folder in the temporary
    directory instead, named after the output, so that ``--resume`` finds it again (the local
    engine reads its stage files back with explicit reads and memory maps: local disk only). The
    Ray engine keeps it in the store, where every node sees it."""
    if out.os_path is not None or engine == "ray":
        return out.join(WORK)
    import hashlib

    name = hashlib.sha256(out.path.encode()).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), f"neardup-work-{name}")


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


@contextmanager
def _engine(config: Config, paths: List[str], quiet: bool):
    """The engine of a run, started for it and stopped after it."""
    if config.engine == "ray":
        try:
            from .engines.ray import RayEngine
        except ImportError as exc:
            raise ConfigError(f"the Ray engine needs Ray: pip install 'neardup[ray]' ({exc})") from None
        with RayEngine(config.workers, config.ray_address, quiet, paths) as engine:
            yield engine
    else:
        from .engines.local import LocalEngine
        with _arrow_threads(config.workers), LocalEngine(config.workers) as engine:
            yield engine


def _update_index(ctx) -> dict:
    """--update-index: the run succeeded; its kept documents go into the first --against index."""
    from .stages.against import update_index
    try:
        return update_index(ctx)
    except NeardupError as exc:
        raise type(exc)(f"the output {fs.redact(ctx.output)} is complete, but adding its kept documents to the "
                        f"index failed: {exc}") from None


def _result(kind, tables, source, ctx, output) -> DedupResult:
    stats = ctx.stats
    removed = read_table(fs.join(output, "removed.parquet"))
    clusters = read_table(fs.join(output, "clusters.parquet"))
    rej_path = fs.join(output, "rejected.parquet")
    from .stages.write import REJECTED_SCHEMA
    rejected = read_table(rej_path) if fs.exists(rej_path) else empty_table(REJECTED_SCHEMA)
    if kind is None:
        return DedupResult(kept=[fs.join(output, "kept", p) for p in stats["kept_files"]], removed=removed,
                           clusters=clusters, rejected=rejected, stats=stats, output=output)
    rows = [ctx.table_kept_rows[si] for si in range(len(tables))]
    if kind == "texts":
        kept = rows[0].tolist()
    elif kind == "hf":
        kept = source.select(rows[0].tolist())
    elif kind == "hf_dict":
        kept = type(source)({name: source[name].select(r.tolist()) for name, r in zip(tables, rows)})
    else:
        table = next(iter(tables.values()))
        if INDEX_ID_COLUMN in table.column_names:
            table = table.drop_columns([INDEX_ID_COLUMN])
        kept = table.take(pa.array(rows[0]))
        if kind == "pandas":
            kept = kept.to_pandas()
            kept.index = source.index[rows[0]]
    return DedupResult(kept=kept, removed=removed, clusters=clusters, rejected=rejected, stats=stats, output=output)


def file_notes(files: dict) -> str:
    """What was left out of the input files or read once (stats.json's ``files``), in words."""
    def n(k: int, one: str, many: str) -> str:
        return f"{k:,} {one if k == 1 else many}"

    parts = [n(files["inputs"], "input file", "input files")]
    if files.get("skipped_binary"):
        parts.append(n(files["skipped_binary"], "binary or non-UTF-8 file", "binary or non-UTF-8 files") + " skipped")
    if files.get("skipped_not_records"):
        parts.append(n(files["skipped_not_records"], ".json file", ".json files")
                     + " of no JSON Lines records skipped (--input-format text reads them as documents)")
    if files.get("skipped_empty"):
        parts.append(n(files["skipped_empty"], "empty data file", "empty data files") + " (no records)")
    if files.get("links_read_once"):
        parts.append(n(files["links_read_once"], "symbolic link", "symbolic links") + " to files of the input read once")
    if files.get("links_not_followed"):
        parts.append(n(files["links_not_followed"], "symbolic link", "symbolic links")
                     + " leading out of the input not followed (--follow-symlinks)")
    return ", ".join(parts)


def format_summary(stats: dict, output: str) -> str:
    c = stats["counts"]
    p = stats["params"]
    secs = stats.get("seconds", {})
    total = sum(secs.values()) if secs else 0.0
    pct = (100.0 * c["removed"] / c["input"]) if c["input"] else 0.0
    lines = [
        "",
        f"neardup: {c['input']:,} {plural(c['input'], 'document')} in, {c['kept']:,} kept, {c['removed']:,} removed ({pct:.1f}%), "
        f"{c['rejected']:,} rejected",
        f"  clusters {c['clusters']:,}   candidate pairs {c['candidate_pairs']:,}   " + (
            f"pairs taken unverified {c['verified_pairs']:,} (verify=none: every candidate pair counts)"
            if p["verify"] == "none" else f"verified pairs {c['verified_pairs']:,}"),
        f"  threshold {p['threshold']:g}  k={p['num_perm']}  {p['bands']} bands x {p['rows']} rows  "
        f"{'char' if p.get('char_ngrams') else 'word'} {p['ngram']}-grams  verify={p['verify']}  keep={p['keep']}",
    ]
    if c.get("removed_against_index"):
        n = c["removed_against_index"]
        lines.insert(2, f"  of the removed, {n:,} {plural(n, 'document')} matched a document of the index (--against)")
    for ix in stats.get("indexes", []):
        if ix["recall_note"]:
            lines.append(f"  note: {ix['recall_note']}")
        if ix["truncated_buckets"]:
            lines.append(f"  warning: index {ix['index']}: {ix['truncated_buckets']:,} band buckets held more than "
                         f"{ix['max_bucket']:,} documents a segment; {ix['truncated_candidates']:,} candidates in "
                         f"them were not verified (a match among them can be missed)")
    files = stats.get("files") or {}
    if files.get("skipped_binary") or files.get("skipped_empty") or files.get("skipped_not_records") \
            or files.get("links_not_followed") \
            or files.get("links_read_once"):
        lines.append("  files: " + file_notes(files))
    if c.get("truncated_buckets"):
        n = c["truncated_buckets"]
        bound = (f"after {p['max_anchor_rounds']} anchor {plural(p['max_anchor_rounds'], 'round')} (--max-anchor-rounds)"
                 if p.get("max_anchor_rounds") else "within the work bound of the bucket search")
        lines.append(f"  note: {n:,} {plural(n, 'bucket')} still had unverified members {bound}")
    if secs:
        lines.append("  seconds: " + "  ".join(f"{k} {v:.1f}" for k, v in secs.items()) + f"  (total {total:.1f})")
    lines.append(f"  output: {fs.redact(output)}/ (kept/, removed.parquet, clusters.parquet, stats.json, report.html)")
    return "\n".join(lines)


# --------------------------------------------------------------------------- the index (neardup index ...)
# Imported here, below the pipeline's API: a block of its own (the index needs nothing above).
from .index import Index  # noqa: E402
from .index.commands import (QueryAnswers, add_files, query_files, rate_warning,  # noqa: E402
                             remove_documents)
from .progress import plural  # noqa: E402,F811

__all__ += ["Index", "QueryAnswers", "add_files", "query_files", "rate_warning", "remove_documents"]
