"""Writing the kept records of a source: a second, streaming pass over the input, by the writer
of the source's format (:mod:`neardup.io.formats`).

Same-format output keeps every record exactly as it was (JSONL lines byte for byte, Parquet rows
with the source schema; the kept lines of an uncompressed local JSONL file written to a local
file are byte ranges of it that the kernel copies, see :mod:`neardup.io.formats.jsonl_ranges`);
the bytes written depend only on the input and ``keep_rows``, so two runs give identical files.
Files are written atomically through :func:`neardup.io.storage.fs.atomic_write` (local:
``PATH.tmp`` renamed into place; object stores: the object appears when its upload completes),
to a local path or a URL alike.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ..errors import ConfigError
from .formats.csv import write_kept_csv
from .formats.jsonl_kept import jsonl_to_parquet, write_kept_lines
from .formats.parquet import write_kept_parquet
from .formats.text import copy_local_text_files, write_kept_text
from .kept_rows import keep_array
from .sources import OUTPUT_FORMATS, Source
from .storage import fs as _fs
from .storage.paths import no_url_among


def write_kept(src: Source, keep_rows, out_path: str, *, output_format: str = "same",
               text_column: str = "text", id_column: Optional[str] = None,
               capture: Optional[Dict[int, Optional[bytes]]] = None) -> int:
    """Write the records of ``src`` at ``keep_rows`` (sorted rows, as in ``Batch.rows``) to
    ``out_path``; returns how many were written.

    ``same`` format: JSONL lines are copied byte for byte (recompressed: gzip level 6 with
    mtime 0 and no file name, as members of GZIP_MEMBER bytes made in parallel; zstd level 3),
    Parquet rows keep the source schema and codec, a text file is copied when row 0 is kept
    (nothing is written otherwise). ``jsonl`` / ``parquet`` convert: Parquet rows become
    ``json.dumps`` lines, JSONL records become a Parquet table (one schema inferred over all kept
    records), a text file becomes the record ``{"id": src.name, "text": content}``. CSV / TSV
    records are parsed and written again (a header, every field quoted, the values as they were;
    as ``jsonl``: objects of strings). ``text_column`` / ``id_column`` are accepted for symmetry
    with :func:`~neardup.io.reader.read_source`; every field is written as it was.

    ``capture`` (JSONL copied as is only): a dict whose keys are rows; the raw bytes of those
    lines that the pass reads (it stops after the last kept row) are stored as the values.
    """
    del text_column, id_column  # records are written whole
    if output_format not in OUTPUT_FORMATS:
        raise ConfigError(
            f"output_format must be one of {', '.join(OUTPUT_FORMATS)}, got {output_format!r}")
    if src.format == "table":
        raise ValueError("write_kept does not write in-memory tables; take the kept rows of the table instead")
    keep = keep_array(keep_rows)
    target = src.format if output_format == "same" else output_format

    if src.format == "text":
        return write_kept_text(src, keep, out_path, target)

    if src.format == "jsonl":
        with _fs.atomic_write(out_path) as out:
            if target == "jsonl":
                comp = src.compression if output_format == "same" else None
                return write_kept_lines(src, keep, out, comp, capture=capture)
            return jsonl_to_parquet(src, keep, out)

    if src.format in ("parquet", "signatures", "rpv2-minhash"):  # signature files: their rows, as Parquet
        target = "parquet" if target in ("signatures", "rpv2-minhash") else target
        with _fs.atomic_write(out_path) as out:
            return write_kept_parquet(src, keep, out, target)

    if src.format in ("csv", "tsv"):
        with _fs.atomic_write(out_path) as out:
            return write_kept_csv(src, keep, out, target)

    raise ValueError(f"unknown source format {src.format!r}")


def _local(path: str) -> bool:
    """Whether ``path`` is local (:func:`neardup.io.storage.fs.os_path`; no ``://``: at once)."""
    return "://" not in path or _fs.os_path(path) is not None


def copy_text_files(copies: List[Tuple[Source, str]], workers: int = 8,
                    sizes: Optional[List[int]] = None) -> Optional[int]:
    """Kept text files copied whole (``(source, destination)``): local ones to local paths by a
    pool of threads (the kernel copies each file: ``sendfile``), their folders made once each:
    what :func:`write_kept` does for one text file, without its per-file costs (a folder of
    100,000 small files). The destinations lie in a run's staging folder, published whole: no
    file is renamed into place one by one. A file or destination in a store: :func:`write_kept`.
    Returns the bytes copied; None when a file went to or came from a store (not counted: a
    request a file to learn it). ``sizes``: each file's size as the run found it, -1 where
    not known (see :func:`copy_local_text_files`)."""
    if no_url_among([src.path for src, _ in copies] + [dst for _, dst in copies]):
        return copy_local_text_files(copies, workers, sizes)  # no URL (most runs): no call a path (100,000: ~0.01 s)
    local = [_local(src.path) and _local(dst) for src, dst in copies]
    for (src, dst), here in zip(copies, local):
        if not here:
            write_kept(src, [0], dst)
    if sizes is not None and not all(local):
        sizes = [size for size, here in zip(sizes, local) if here]
    copied = copy_local_text_files([item for item, here in zip(copies, local) if here], workers, sizes)
    return copied if all(local) else None
