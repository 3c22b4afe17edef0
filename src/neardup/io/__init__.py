"""Reading and writing corpus files: JSONL (plain, gzip, zstd), CSV / TSV, Parquet, folders of
text files and in-memory tables.

:func:`discover` lists the input files (:mod:`.discovery`; :mod:`.sources` says what a source is), :func:`read_source` streams their
documents as :class:`Batch` es (:mod:`.reader`), :func:`write_kept` writes the kept records of a
source in a second pass (:mod:`.writer`); each format's reader and writer live in
:mod:`.formats`, one module a format. Files go through one filesystem layer,
:mod:`neardup.io.storage.fs`: a local path or a URL (``s3://``, ``gs://``, ``hf://``, any fsspec
protocol) alike; :mod:`neardup.io.storage.tables` reads and writes Arrow / Parquet tables over
it. Bad input is an :class:`~neardup.errors.InputError` whose one-line message names the file and
the line or row (``on_error="fail"``), or a rejected entry (``on_error="skip"``).
"""

from .batch import BINARY, COMPRESSED_UNREADABLE, EMPTY_FILE, NO_TEXT_FIELD, NOT_RECORDS, NOT_UTF8, Batch, skip_counts
from .columns import choose_id_column, every_record_has_an_id, id_note, text_column_of, text_columns
from .reader import read_source, read_sources
from .discovery import discover
from .sources import Source, estimate_documents, output_relpath, output_relpaths, table_source
from .writer import copy_text_files, write_kept

__all__ = [
    "BINARY",
    "Batch",
    "EMPTY_FILE",
    "NOT_RECORDS",
    "COMPRESSED_UNREADABLE",
    "NO_TEXT_FIELD",
    "skip_counts",
    "NOT_UTF8",
    "choose_id_column",
    "id_note",
    "copy_text_files",
    "every_record_has_an_id",
    "Source",
    "discover",
    "estimate_documents",
    "output_relpath",
    "output_relpaths",
    "read_source",
    "read_sources",
    "table_source",
    "text_column_of",
    "text_columns",
    "write_kept",
]
