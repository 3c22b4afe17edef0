"""The public face of neardup: what a Python user and the command line call.

    dedup, DedupResult       the whole pipeline on what the user holds (:func:`dedup`)
    Index                    the persistent index (:class:`neardup.index.Index`)
    the rest                 what the commands of ``neardup`` need besides: messages, progress

The command line (:mod:`neardup.cli`) imports nothing of neardup but this module, the package,
:mod:`neardup.config` and :mod:`neardup.errors` (a test holds it to that).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import tempfile
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Union

import numpy as np
import pyarrow as pa

from . import io as nio
from .config import Config, Execution, Input, Output, Sketch, Similarity, Verification
from .engines.ray_data import dedup_dataset, is_ray_dataset
from .errors import ConfigError, NeardupError
from .io.inputs import INDEX_ID_COLUMN, in_memory, kept_of, typed_ids
from .io.storage.folder import Folder
from .io.storage.paths import join, redact
from ._lazy import lazy_names as _lazy_names
from .kernels.arrays import empty_table
from .progress import compile_notice, compiling, interrupt_handler, last_signal, plural
from .report.audit_files import MAX_BYTES as AUDIT_MAX_BYTES  # the audit's default bound
from .report.summary import format_summary
from .export import signatures
from .run import run
from .stages.write import CLUSTERS_SCHEMA, REJECTED_SCHEMA, REMOVED_SCHEMA, build_stats

__all__ = ["dedup", "DedupResult", "signatures", "Index", "QueryAnswers", "add_files", "query_files", "rate_warning",
           "remove_documents", "report", "audit", "params", "params_text", "AUDIT_MAX_BYTES",
           "compile_notice", "compiling", "interrupt_handler", "last_signal", "plural", "redact"]

# The index's names are imported on first use (module __getattr__): a dedup without --against
# opens no index, and the index's modules are 15-25 ms of the command line's start-up.
_INDEX_NAMES = {"Index": ".index", "QueryAnswers": ".index.commands", "add_files": ".index.commands",
                "query_files": ".index.commands", "rate_warning": ".index.commands",
                "remove_documents": ".index.commands"}

__getattr__ = _lazy_names(globals(), _INDEX_NAMES)


@dataclass
class DedupResult:
    """What :func:`dedup` returns.

    kept      the kept documents, of the type given: a pyarrow Table, a pandas DataFrame, a
              polars DataFrame, a datasets.Dataset, a ray.data.Dataset (see the README's "Ray
              Data"); for paths, the list of files written under ``output/kept``. With
              ``mark=True``: every document (but rejected ones), the columns duplicate_of,
              cluster, similarity, duplicate_reason added (a list of texts gives a pyarrow Table
              of ``text`` and them); for paths, the files of ``output/marked``
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
        """What the command line prints at the end of a run: counts, parameters, notes, seconds."""
        return format_summary(self.stats, self.output)

    def rejected_everything(self) -> str:
        """The one-line error of a run that read input but rejected every record (with
        ``on_error="skip"`` it would otherwise look like a success that kept nothing), or ''."""
        c = self.stats["counts"]
        if not c["input"] or c["kept"] + c["removed"] or c["rejected"] != c["input"]:
            return ""
        line = f"every record was rejected ({c['rejected']:,} of {c['input']:,}; see {self.output}/rejected.parquet)"
        if self.rejected is not None and self.rejected.num_rows:
            from .io.sources import detect_format
            first = self.rejected.slice(0, 1).to_pylist()[0]
            where, row = first.get("source") or "?", first.get("row")
            if row is not None:  # the numbering of the error messages: JSONL lines from 1, rows from 0
                fmt = detect_format(where)[0]
                where = f"{where}:{row + 1}" if fmt == "jsonl" else where if fmt == "text" else f"{where}: row {row}"
            line += f"; the first: {where}: {first.get('reason')}"
        return line

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
        except (TypeError, AttributeError):  # a ray.data.Dataset has no len (count() runs it)
            return f"<{type(kept).__name__}>"
    return f"<{type(kept).__name__}: {n:,} {plural(n, 'row')}>"




def run_dedup(source: Union[str, os.PathLike, Sequence[str], pa.Table, Any], output: Optional[str] = None, *,
          threshold: float = Similarity.threshold, num_perm: int = Sketch.num_perm, bands: Optional[int] = None,
          rows: Optional[int] = None, verify: Optional[str] = None, keep: str = Output.keep,
          text_column: str = Input.text_column, id_column: Optional[str] = None, on_error: str = Input.on_error,
          engine: str = Execution.engine, work_dir: Optional[str] = None, resume: bool = False,
          overwrite: bool = False, quiet: bool = True, keep_work: Optional[bool] = None, paths: bool = False,
          **options: Any) -> DedupResult:
    """Finds and removes near-duplicate documents; returns a :class:`DedupResult`. The defaults
    are those of :class:`neardup.Config` (the signature shows them).

    source
        What to deduplicate: a path, folder or glob, or a list of them (JSONL ``.jsonl``/``.json``,
        CSV ``.csv`` and TSV ``.tsv`` with a header line, each plain, gzip, zstd, bz2 or xz; Parquet; any
        other file is one text document); a pyarrow Table or
        RecordBatch; a pandas DataFrame (its index is the id of each row); a polars DataFrame (a
        LazyFrame is refused: collect it); a Hugging Face
        ``datasets.Dataset``, or a ``DatasetDict`` (its splits deduplicated together, a document of
        one split against those of every split); a ``ray.data.Dataset`` (run on Ray in its cluster, ``kept``
        a Dataset: :mod:`neardup.engines.ray_data`); or a list of texts (``["text one", ...]``: the
        result's ``kept`` is then the list of the indexes kept). A list of strings is read as paths
        when each one looks like a path (no white space, and an existing file or folder, a glob, a
        separator or an extension: ``["x.jsonl"]`` missing is an error, ``["Yes.", "No."]`` are
        texts); with ``paths=True``
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
        "exact" (Jaccard of the shingle sets), "estimate" (from the signatures) or "none"; None
        (the default): "exact", or "estimate" for inputs that are signatures
        (``input_format="signatures"`` or ``"rpv2-minhash"``: no text, "exact" refused).
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
        normalisation switches, punctuation, hash_version, max_anchor_rounds, input_format,
        follow_symlinks, output_format, batch_size, workers, ray_address, against, update_index;
        ``mark=True`` keeps every document and marks the duplicates instead (the
        README's "Marks instead of removals").

    >>> import neardup
    >>> result = neardup.dedup(["the cat sat on the mat today", "the cat sat on the mat today!",
    ...                         "a different text altogether here"], threshold=0.8)
    >>> result.kept
    [0, 2]
    """
    if is_ray_dataset(source):  # written to Parquet by Ray tasks, run on Ray: engines/ray_data.py
        named = {k: v for k, v in locals().items() if k not in ("source", "output", "options")}
        return dedup_dataset(run_dedup, source, output, {**named, **options})
    signature_input = options.get("input_format") in ("signatures", "rpv2-minhash")
    options.update(threshold=threshold, num_perm=num_perm, bands=bands, rows=rows, keep=keep,
                   verify=verify or ("estimate" if signature_input else Verification.verify),
                   text_column=text_column, id_column=id_column, on_error=on_error, engine=engine)
    kind, tables = (None, None) if paths else in_memory(source)
    for name, t in (tables or {}).items():  # neardup's own column (dropped from what it gives back) taken
        if t.column_names.count(INDEX_ID_COLUMN) > (kind in ("pandas", "texts")):
            error = ConfigError(f"{name}: a column named {INDEX_ID_COLUMN!r}, the name neardup reserves for the "
                                f"ids it adds (a DataFrame's index); rename that column")
            error.as_said = True  # in the user's terms already: the column is theirs (dedup leaves it as it is)
            raise error
    config = Config(**_id_options(options, id_column, kind, tables)).resolved()
    inputs: Sequence[str] = ()
    id_note = None
    if kind is not None:
        if config.mark:  # refused before any work (files: when their fields are first seen, in the write)
            from .io.formats.marked import refuse_marked
            for name, t in tables.items():
                refuse_marked("the input" if name in ("<table>", "<texts>") else name, t.column_names)
        if sum(t.num_rows for t in tables.values()) == 0:
            return _empty_result(kind, source, config)
        sources = [nio.table_source(t, name=name) for name, t in tables.items()]
    else:
        inputs = _paths_of(source)
        sources = nio.discover(inputs, input_format=config.input_format, follow_symlinks=config.follow_symlinks)
        if signature_input:  # signatures, not texts (neardup.export)
            from .export import signature_run
            config, id_note = signature_run(config, sources, verify, text_column != Input.text_column)
        chosen, auto = nio.choose_id_column(sources, id_column)
        id_note = "; ".join(filter(None, [id_note, nio.id_note(sources, id_column) if chosen is None else None]))
        if auto:
            config = config.replace(id_column=chosen, id_column_auto=True)
    temporary = output is None
    if temporary:
        output = tempfile.mkdtemp(prefix="neardup-")
    failed = True
    try:
        with collector_paused(kind is None):
            stats = run(config, sources, output, work_dir=work_dir, resume=resume, quiet=quiet, keep_work=keep_work,
                        overwrite=overwrite or temporary, report=not (temporary and kind is not None), inputs=inputs)
            if id_note:  # said in the summary and in result.stats, not silent
                stats.setdefault("notes", []).append(id_note)
            result = _result(kind, tables, source, stats, output)
        failed = False
    finally:
        # a temporary output goes after an in-memory input's run (its result holds the rows) and
        # after any failed run; a path input's result names its output, which stays
        if temporary and (failed or kind is not None):
            import shutil
            shutil.rmtree(output, ignore_errors=True)
    if temporary and kind is not None:
        result.output = None
    return result


RUN_GC_THRESHOLD = 200_000  # allocations between two young collections during a run over files


@contextlib.contextmanager
def collector_paused(paused: bool = True):
    """Python's garbage collector made rare while the run goes over the discovered files
    (``paused``: inputs given as paths) and the result reads their list (files.json): its young
    generation collected every :data:`RUN_GC_THRESHOLD` allocations instead of every 700 (or as
    the caller set it), so that cyclic garbage stays bounded in a long run, and set back exactly
    as the caller had it afterwards, an error or not. The run's per-file objects (sources, paths,
    relpaths: ~10 a file) make no cycles, and the collector walked them again and again: 1,008
    collections, 0.30 CPU-s in a 100,000-file run, against 8 and 0.07 CPU-s with it off
    (``bench/gc_collections.py``). A collector the caller turned off stays off."""
    before = gc.get_threshold()
    relax = paused and 0 < before[0] < RUN_GC_THRESHOLD
    if relax:
        gc.set_threshold(RUN_GC_THRESHOLD, *before[1:])
    try:
        yield
    finally:
        if relax:
            gc.set_threshold(*before)


def _id_options(options: dict, id_column: Optional[str], kind: Optional[str], tables) -> dict:
    """``options`` with the id column of an in-memory input by the rule of every input
    (:func:`neardup.io.choose_id_column`): an ``id`` column in every table, else a DataFrame's
    index (and a list's positions); ``id_column=""`` asks for positions whatever the input has.
    Paths choose theirs once discovered."""
    if id_column == "":
        return {**options, "id_column": None}
    if kind is not None and id_column is None:
        if all("id" in t.column_names for t in tables.values()):
            return {**options, "id_column": "id", "id_column_auto": True}
        if kind in ("pandas", "texts"):
            return {**options, "id_column": INDEX_ID_COLUMN}
    return options


def _paths_of(source) -> list:
    """The input paths of ``source``: a path, or a list of them; anything else is refused."""
    if isinstance(source, (str, os.PathLike)):
        inputs = [os.fspath(source)]
    elif isinstance(source, (list, tuple)) and all(isinstance(s, (str, os.PathLike)) for s in source):
        inputs = [os.fspath(s) for s in source]
    else:
        raise ConfigError(f"source must be a path, a list of paths or texts, a pyarrow Table, a pandas or polars "
                          f"DataFrame, a datasets.Dataset / DatasetDict or a ray.data.Dataset; got {type(source).__name__}")
    if not inputs:
        raise ConfigError("no input given")
    return inputs


@functools.wraps(run_dedup)
def dedup(*args, **kwargs) -> DedupResult:
    # The command line calls run_dedup, whose errors name its flags; a Python caller gets them
    # in the terms of this call (its keywords, and no column of neardup's own).
    try:
        return run_dedup(*args, **kwargs)
    except NeardupError as exc:
        message = str(exc) if getattr(exc, "as_said", False) else in_api_terms(str(exc))
        if message == str(exc):
            raise
        try:
            error = type(exc)(message)
        except TypeError:  # an error class with other arguments: left as it is
            raise exc from None
        raise error from None


dedup.__name__ = dedup.__qualname__ = "dedup"  # help() and repr() name it as the user calls it


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
    counts = dict.fromkeys(("input", "kept", "removed", "rejected", "clusters", "empty_documents",
                            "candidate_pairs", "verified_pairs", "buckets", "truncated_buckets"), 0)
    stats = build_stats(config, [], counts, [], [])
    kept = [] if kind == "texts" else source
    if config.mark:  # the columns, on no rows
        from .io.formats.marked import MARKS_SCHEMA
        from .io.frames import marked_of
        tables = in_memory(source)[1]
        kept = marked_of(kind, tables, source, {n: np.zeros(0, np.int64) for n in tables},
                         {n: empty_table(MARKS_SCHEMA) for n in tables})
    return DedupResult(kept=kept, removed=empty_table(REMOVED_SCHEMA), clusters=empty_table(CLUSTERS_SCHEMA),
                       rejected=empty_table(REJECTED_SCHEMA), stats=stats, output=None)


class _ReadOnUse(DedupResult):
    """The :class:`DedupResult` of a run on paths: ``removed``, ``clusters`` and ``kept`` are
    read from the output folder when first used, not when the run ends. The tables hold a row
    per cluster member, and a caller that wants only the counts (the command line) never reads
    them: the driver's memory stays flat however many documents the run removed (issue 28);
    the list of kept files, a path per file (100,000 files: files.json read back and a path
    joined a file, 0.15 CPU-s), is made for a caller that asks for it."""

    def _on_use(self, name: str):
        value = self.__dict__[name]
        if callable(value):
            value = self.__dict__[name] = value()
        return value

    removed = property(lambda self: self._on_use("_removed"),
                       lambda self, value: self.__dict__.__setitem__("_removed", value))
    clusters = property(lambda self: self._on_use("_clusters"),
                        lambda self, value: self.__dict__.__setitem__("_clusters", value))
    kept = property(lambda self: self._on_use("_kept"), lambda self, value: self.__dict__.__setitem__("_kept", value))


def _result(kind, tables, source, stats: dict, output: str) -> DedupResult:
    """The result of a run as the user gave its input: for paths, the kept files; for in-memory
    inputs, the kept rows (those removed.parquet and rejected.parquet do not list)."""
    out = Folder.of(output)
    if kind is None:  # read when used (:class:`_ReadOnUse`)
        removed = functools.partial(out.read_table, "removed.parquet")
        clusters = functools.partial(out.read_table, "clusters.parquet")
    else:
        removed, clusters = out.read_table("removed.parquet"), out.read_table("clusters.parquet")
    rejected = out.read_table("rejected.parquet") if out.exists("rejected.parquet") else empty_table(REJECTED_SCHEMA)
    if kind is None:
        kept = functools.partial(_kept_paths, out, stats, output)
    elif "marked_files" in stats:
        from .stages.mark import marked_result
        kept = marked_result(kind, tables, source, out, rejected)
        removed = typed_ids(kind, tables, source, removed, ("id", "representative", "cluster"))
        clusters = typed_ids(kind, tables, source, clusters, ("id", "cluster"))
    else:
        kept = kept_of(kind, tables, source, removed, rejected)
        removed = typed_ids(kind, tables, source, removed, ("id", "representative", "cluster"))
        clusters = typed_ids(kind, tables, source, clusters, ("id", "cluster"))
    made = _ReadOnUse if kind is None else DedupResult
    return made(kept=kept, removed=removed, clusters=clusters, rejected=rejected, stats=stats, output=output)


def _kept_paths(out: Folder, stats: dict, output: str) -> List[str]:
    """The kept (or marked) files of a run on paths, under ``output`` as it was named (their
    list from files.json when stats.json holds its first entries only)."""
    from .stages.write import full_list
    marked = "marked_files" in stats
    return [join(output, "marked" if marked else "kept", p)
            for p in full_list(out, stats, "marked_files" if marked else "kept_files") or []]


# --------------------------------------------------------------------------- reports (neardup report, audit, params)
# What `neardup report`, `neardup audit` and `neardup params` do, from Python and for the command
# line: each checks its options and the files it is to write before any work, does the work,
# writes its files whole and returns what it found; the command line parses, calls and prints.
# Their messages name the command line's flags (--output, --json, --plot ...), as the commands do.



def report(output_dir, output=None, *, plots: str = "auto", overwrite: bool = False):
    """``neardup report``: (re)writes ``report.html`` of the dedup output folder ``output_dir``
    (a path or a URL), or ``output``, and returns the path written (a Path, or a URL).

    ``plots``: "auto" (matplotlib PNGs when installed), "matplotlib" or "svg" (inline SVG drawn
    without matplotlib). The folder's own report.html is always replaced; ``output`` is refused
    when it is one of the folder's files or under its kept/, and when it exists unless
    ``overwrite``. See :func:`neardup.report.html.write_report`."""
    from .report.html import write_report
    return write_report(output_dir, output, plots=plots, overwrite=overwrite)


def audit(inputs, config: Optional[Config] = None, *, sample: int = 5000, bins: int = 10,
          max_docs: Optional[int] = 100_000, max_bytes: Optional[int] = AUDIT_MAX_BYTES, json_file=None,
          plot=None, overwrite: bool = False, notify=None, **options):
    """``neardup audit``: measures the LSH S-curve on the first documents of ``inputs`` (files,
    folders or globs, read as the dedup reads them) and returns an
    :class:`~neardup.report.audit.AuditResult` (``.summary()``: the table; ``.to_json()``: every
    number).

    ``config`` (a :class:`~neardup.config.Config`) and keyword ``options`` named like its fields
    give the similarity, sketch, shingling and input options. ``sample`` pairs are checked over
    ``bins`` similarity bins; at most ``max_docs`` documents and ``max_bytes`` bytes of text are
    read (None: no bound), and ``notify``, when given, is called with one line saying so before
    the reading and one more when a bound stops it. ``json_file`` and ``plot`` (.png or .svg, needs matplotlib) are written whole;
    checked before any work, they are refused when they are inputs or inside an input folder, the
    same file, or exist (unless ``overwrite``)."""
    from .report.audit_files import audit_files
    return audit_files(inputs, config, sample=sample, bins=bins, max_docs=max_docs, max_bytes=max_bytes,
                       json_file=json_file, plot=plot, overwrite=overwrite, notify=notify, **options)


def params(threshold: float = Similarity.threshold, num_perm: int = Sketch.num_perm, *,
           bands: Optional[int] = None, rows: Optional[int] = None, min_recall: float = Similarity.min_recall,
           method: str = "recall", plot=None, overwrite: bool = False) -> dict:
    """``neardup params``: the LSH bands and rows for a threshold and a signature length, why, and
    its S-curve, as a JSON-ready dict (:func:`neardup.report.params_text.params_summary`);
    :func:`params_text` is the text of it. ``bands`` and ``rows`` (both or neither) evaluate that
    choice instead; ``method``: "recall" (the default chooser) or "weighted". ``plot`` (.png or
    .svg, needs matplotlib) is written whole, with the FP/FN areas shaded; an existing file only
    with ``overwrite``."""
    from .report.params_text import params_summary
    if (bands is None) != (rows is None):
        raise ConfigError("--bands and --rows go together: give both or neither")
    if plot:
        from .io.storage.outfile import check_output_file
        from .report.plots import plot_format
        plot_format(plot)  # fail on a bad name, or a file not ours to replace, before any work
        check_output_file(plot, overwrite=overwrite, option="--plot")
    summary = params_summary(threshold, num_perm, bands=bands, rows=rows, min_recall=min_recall, method=method)
    if plot:
        from .report.plots import plot_s_curve
        plot_s_curve(plot, summary["bands"], summary["rows"], summary["threshold"], overwrite=overwrite)
    return summary


def params_text(summary: dict) -> str:
    """What ``neardup params`` prints of a :func:`params` summary: the numbers, the
    alternatives and the S-curve drawn in characters."""
    from .report.params_text import format_params
    return format_params(summary)
