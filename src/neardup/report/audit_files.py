"""``neardup audit`` on files: the texts of the first documents of the inputs (:func:`read_texts`),
and the whole command (:func:`audit_files`): its options and output files checked before any
work, the texts read within their bounds, the audit measured (:func:`.audit.audit_texts`), the
``--json`` and ``--plot`` files written whole."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Callable, List, Optional, Sequence

import numpy as np

from ..errors import ConfigError, InputError
from ..io.storage.paths import redact

if TYPE_CHECKING:  # (imported when used: neardup.api imports this module for MAX_BYTES)
    from .audit import AuditResult

__all__ = ["audit_files", "read_texts", "MAX_BYTES"]

# The audit holds about 12 bytes per byte of text at its peak (the texts, their shingle hashes,
# signatures, the pool of pairs; measured: bench/results/audit_memory.json), so the default
# bound on the text it reads keeps it under 2 GB.
MAX_BYTES = 96 << 20


def audit_files(inputs, config=None, *, sample: int = 5000, bins: int = 10, max_docs: Optional[int] = 100_000,
                max_bytes: Optional[int] = MAX_BYTES, json_file=None, plot=None, overwrite: bool = False,
                notify: Optional[Callable[[str], None]] = None, **options) -> "AuditResult":
    """The audit of the first documents of ``inputs`` (files, folders, globs; see
    :func:`neardup.api.audit`), with --json and --plot written.

    In this order: ``plot`` names a .png or .svg and matplotlib is there; ``sample``, ``bins``,
    ``max_docs`` and ``max_bytes`` are at least 1; ``json_file`` and ``plot`` may be written
    (:func:`_check_targets`); then the texts are read (``notify`` is told first, in one line, which
    documents are read and the options that change it, and again when a bound stopped the reading), audited, and the files written whole. ConfigError or InputError,
    in one line, on the first thing wrong. Under the command line's signal handler a signal stops
    the reading and the measuring at their safe points (KeyboardInterrupt), before any file is
    written."""
    from ..config import Config
    from .audit import audit_texts, plot_audit
    from .plots import plot_format, require_matplotlib
    config = Config(**options) if config is None else config.replace(**options)
    inputs = [os.fspath(inputs)] if isinstance(inputs, (str, os.PathLike)) else [os.fspath(i) for i in inputs]
    if plot:
        plot_format(plot)
        require_matplotlib()  # fail before the work, not after it
    for name, value in (("sample", sample), ("bins", bins), ("max_docs", max_docs), ("max_bytes", max_bytes)):
        if value is not None and value < 1:
            raise ConfigError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    _check_targets(inputs, json_file, plot, overwrite)
    id_column = config.id_column
    if id_column is None or id_column == "":  # as the dedup does (neardup.io.choose_id_column)
        from ..io import choose_id_column, discover
        id_column = choose_id_column(discover(inputs), id_column)[0]
    if notify is not None:  # said before the reading: which documents the audit measures
        notify(sample_line(max_docs, max_bytes))
    limits: dict = {}
    texts, ids = read_texts(inputs, text_column=config.text_column, max_docs=max_docs, on_error=config.on_error,
                            id_column=id_column, with_ids=True, max_bytes=max_bytes, limits=limits)
    cut = limits.get("cut")
    if len(texts) < 2:
        why = f" (--max-bytes {max_bytes:,} stopped the reading)" if cut == "max_bytes" else ""
        raise InputError(f"the audit needs at least 2 documents; read {len(texts)} from "
                         f"{redact(', '.join(inputs))}{why}")
    if cut and notify is not None:
        bound = f"--max-docs {max_docs:,}" if cut == "max_docs" else f"--max-bytes {max_bytes:,}"
        notify(f"audit of the first {len(texts):,} documents ({bound}; the rest is not read)")
    result = audit_texts(texts, config, sample=sample, bins=bins, ids=ids)
    from ..progress import commit_point
    commit_point()  # measured: the files are written (and the table printed) whatever signal comes now
    if json_file:
        from ..io.storage.outfile import publish_file
        publish_file(json_file, result.to_json().encode("utf-8"), overwrite=overwrite, option="--json")
    if plot:
        plot_audit(result, plot, overwrite=overwrite)
    return result


def sample_line(max_docs: Optional[int], max_bytes: Optional[int]) -> str:
    """The first line of an audit: the documents it reads (the first ones, in the inputs' sorted
    path order) and the options that change how many."""
    bounds = [f"{max_docs:,} documents" if max_docs else "",
              (f"{max_bytes >> 20:,}M" if max_bytes % (1 << 20) == 0 else f"{max_bytes:,} bytes") + " of text"
              if max_bytes else ""]
    if not any(bounds):
        return "audit of every document of the inputs"
    return (f"audit: reads the first documents in path order, at most {' and '.join(b for b in bounds if b)} "
            f"(--max-docs, --max-bytes change it)")


def _check_targets(inputs: List[str], json_file, plot, overwrite: bool) -> None:
    """Before any work: the files of --json and --plot are new files (or, with ``overwrite``,
    files that are not the command's inputs), outside the input folders, in folders that exist,
    and not the same file twice. One-line ConfigError otherwise."""
    from ..io import discover
    from ..io.storage.outfile import check_output_file, same_file
    targets = [(opt, path) for opt, path in (("--json", json_file), ("--plot", plot)) if path]
    if not targets:
        return
    files = [s.path for s in discover(inputs) if s.format != "table"]
    for opt, path in targets:  # (URLs: never a local input; as a target, refused)
        check_output_file(path, inputs=list(inputs) + files, inside=inputs, overwrite=overwrite, option=opt)
    if len(targets) == 2 and same_file(targets[0][1], targets[1][1]):
        raise ConfigError(f"--json and --plot name the same file {redact(json_file)}; name two files")


def read_texts(inputs: Sequence[str], *, text_column: str = "text", max_docs: Optional[int] = None,
               on_error: str = "fail", batch_size: int = 8192, id_column: Optional[str] = None,
               with_ids: bool = False, max_bytes: Optional[int] = None, limits: Optional[dict] = None):
    """The texts of the first ``max_docs`` documents of ``inputs`` (files, folders, globs), and
    of no more than ``max_bytes`` bytes of UTF-8 text together, as one pyarrow large_string
    array, read through :mod:`neardup.io`. ``limits``, a dict, gets ``"cut"``: the name of the
    bound that stopped the reading (``max_docs`` or ``max_bytes``), or None.

    ``with_ids``: return ``(texts, ids)``, the ids as ``neardup dedup`` names the documents: the
    ``id_column`` value, else ``FILE:LINE`` (JSONL, from 1) or ``FILE:ROW`` (from 0), or the name
    of a text file."""
    import pyarrow as pa
    try:
        from ..io import discover, read_source
    except ImportError:
        raise ConfigError("reading files needs neardup.io, which this installation lacks") from None
    from ..progress import check_interrupt
    sources = discover(list(inputs))
    import pyarrow.compute as pc
    chunks = []
    ids: List[str] = []
    count = 0
    size = 0
    cut = None
    for i, src in enumerate(sources):
        if cut:
            break
        for batch in read_source(src, i, text_column=text_column, on_error=on_error,
                                 batch_size=batch_size, id_column=id_column):
            check_interrupt()
            text = batch.text
            if isinstance(text, pa.ChunkedArray):
                text = text.combine_chunks()
            if max_docs is not None and count + len(text) > max_docs:
                text, cut = text.slice(0, max_docs - count), "max_docs"
            if max_bytes is not None and len(text):
                ends = size + np.cumsum(pc.binary_length(text).fill_null(0).to_numpy(zero_copy_only=False))
                within = int(np.searchsorted(ends, max_bytes, side="right"))
                if within < len(text):
                    text, cut = text.slice(0, within), "max_bytes"
                size = int(ends[within - 1]) if within else size
            if len(text):
                chunks.append(text.cast(pa.large_string()))
                if with_ids:
                    rows = batch.rows[:len(text)].tolist()
                    if batch.ids is not None:
                        ids.extend(batch.ids.slice(0, len(text)).to_pylist())
                    elif src.format == "text":
                        ids.extend([src.name] * len(rows))
                    else:  # as the dedup names them: JSONL lines from 1, rows from 0
                        first = 1 if src.format == "jsonl" else 0
                        ids.extend(f"{src.name}:{r + first}" for r in rows)
                count += len(text)
            if cut:
                break
    if limits is not None:
        limits["cut"] = cut
    texts = pa.concat_arrays(chunks) if chunks else pa.nulls(0, pa.large_string())
    return (texts, ids) if with_ids else texts
