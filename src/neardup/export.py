"""Signatures out and in: :func:`signatures` computes each document's MinHash signature and
writes it, with the parameters that made it, in the layout of :mod:`neardup.io.formats.signatures`;
:func:`signature_run` fits a run's config to inputs that are signatures (neardup's, or
RedPajama-V2's minhash.parquet): verification by the estimate, the parameters checked or taken.
"""

from __future__ import annotations

import os
from typing import Any, List, Optional, Tuple

import numpy as np
import pyarrow as pa

from . import io as nio
from .config import Config
from .errors import ConfigError, SkippedWarning
from .io.columns import positional_ids
from .io.formats import signatures as fmt
from .io.storage import fs as _fs
from .io.storage.paths import join, redact

PART = "part-{:05d}.parquet"     # the part files of a signature folder
PART_ROWS = 1 << 20              # documents a part file holds at most


def signatures(source, output: Optional[str] = None, *, overwrite: bool = False, **options: Any):
    """``neardup signatures``: the MinHash signature of every document of ``source`` (paths, as
    ``dedup`` reads them), with its id, shingle count and text length (the layout of
    :mod:`neardup.io.formats.signatures`), under the options of :class:`neardup.Config` that
    decide the values (num_perm, seed, hash_version, the shingling). Without ``output``: returns
    the pyarrow Table (the parameters in its schema metadata). With ``output``, a new or empty
    folder (or one written before, with ``overwrite``): writes ``part-00000.parquet``, ... (the
    parameters in each file's key-value metadata) and returns their paths. The same input and options give the same bytes.
    Records skipped with ``on_error="skip"`` have no signature: their number and the first of
    them (file, 0-based row, reason) are said in a :class:`SkippedWarning`."""
    id_column = options.pop("id_column", None)
    config = Config(**options)
    if isinstance(source, (str, os.PathLike)):
        source = [os.fspath(source)]
    if not isinstance(source, (list, tuple)) or not source:
        raise ConfigError("source must be a path or a list of paths")
    sources = nio.discover(list(source), input_format=config.input_format, follow_symlinks=config.follow_symlinks)
    if any(s.format in fmt.FORMATS for s in sources):
        raise ConfigError("signatures are made from text: give text inputs (--input-format auto or text)")
    chosen, _auto = nio.choose_id_column(sources, id_column)
    if output is not None:
        _check_output(output, overwrite)
    table = _compute(config, sources, chosen)
    if output is None:
        return table
    return _write(table, output, fmt.signature_params(config))


def _compute(config: Config, sources, id_column: Optional[str]) -> pa.Table:
    from .kernels.minhash import MinHasher
    hasher = MinHasher.from_config(config)
    params = fmt.signature_params(config)
    parts: List[pa.Table] = []
    skipped, first = 0, None
    for batch in nio.read_sources(sources, range(len(sources)), text_column=config.text_column,
                                  id_column=id_column, on_error=config.on_error, batch_size=config.batch_size):
        if batch.rejected:
            skipped += len(batch.rejected)
            if first is None:
                row, reason = batch.rejected[0]
                first = f"{sources[batch.source_index].name}{'' if row is None else f', row {row}'}: {reason}"
        if len(batch.text) == 0:
            continue
        sig, counts = hasher.signatures_and_counts(batch.text)
        ids = batch.ids if batch.ids is not None else positional_ids(sources[batch.source_index], batch.rows)
        import pyarrow.compute as pc
        lengths = pc.binary_length(batch.text).to_numpy(zero_copy_only=False)
        parts.append(fmt.signature_table(ids, sig, counts, lengths, params))
    if skipped:  # never silent: these documents have no signature
        import warnings
        warnings.warn(SkippedWarning(f"{skipped} record{'s' if skipped != 1 else ''} skipped (--on-error skip), "
                                     f"without a signature; the first: {first}"), stacklevel=3)
    if not parts:
        return fmt.signature_table(pa.nulls(0, pa.string()), np.zeros((0, config.num_perm), np.uint32),
                                   np.zeros(0), np.zeros(0), params)
    return pa.concat_tables(parts).combine_chunks()


def _check_output(output: str, overwrite: bool) -> None:
    """A new or empty folder, or one of signature files written before (replaced with overwrite)."""
    if not _fs.exists(output):
        return
    names = [name for name, _dir in _fs.listdir(output)] if _fs.isdir(output) else None
    if names is None:
        raise ConfigError(f"--output {redact(output)}: is a file; give a folder")
    ours = all(n.startswith("part-") and n.endswith(".parquet") and fmt.is_signature_file(join(output, n))
               for n in names)
    if names and not ours:
        raise ConfigError(f"--output {redact(output)}: not empty and not a signature folder; choose a new folder")
    if names and not overwrite:
        raise ConfigError(f"--output {redact(output)}: holds signatures already; pass --overwrite "
                          f"(overwrite=True) to replace them")


def _write(table: pa.Table, output: str, params: dict) -> List[str]:
    import pyarrow.parquet as pq
    _fs.makedirs(output)
    for name in [name for name, _dir in _fs.listdir(output)]:
        _fs.remove(join(output, name))  # an earlier export's files (checked: ours)
    written = []
    for i, start in enumerate(range(0, max(table.num_rows, 1), PART_ROWS)):
        path = join(output, PART.format(i))
        with _fs.atomic_write(path) as out:
            pq.write_table(table.slice(start, PART_ROWS), out, compression="zstd", row_group_size=65536)
        written.append(path)
    return written


# --------------------------------------------------------------------------- signatures in


def signature_run(config: Config, sources, verify: Optional[str], text_column_given: bool) -> Tuple[Config, str]:
    """The config of a run whose inputs are signatures (``--input-format signatures`` or
    ``rpv2-minhash``), and the note that says so: verification by the estimate (``verify`` None
    becomes "estimate"; "exact" is refused: there is no text); neardup signatures' parameters
    must be the run's (refused otherwise); RedPajama-V2's bands and rows are taken as shipped."""
    if verify == "exact":
        raise ConfigError(f"--verify exact needs the texts, and --input-format {config.input_format} reads "
                          f"signatures only; use --verify estimate (or none)")
    config = config.replace(verify=verify or "estimate")
    if config.against or config.update_index:
        if config.input_format == fmt.RPV2:
            raise ConfigError("RedPajama-V2 signatures (another hash and shingling than neardup's) cannot be "
                              "matched against an index; deduplicate them on their own")
    if config.input_format == fmt.SIGNATURES:
        fmt.check_params(sources, config)
        return config, fmt.signature_formats_note(fmt.SIGNATURES, None, None)
    column = fmt.rpv2_column(config, text_column_given)
    b, r = fmt.rpv2_shape(sources, column)
    config = config.replace(text_column=column, num_perm=b * r, bands=b, rows=r)
    return config, fmt.signature_formats_note(fmt.RPV2, (b, r), column)
