"""Reading and writing corpus files: JSONL (plain, gzip, zstd), Parquet, folders of text files
and in-memory tables.

:func:`discover` lists the input files, :func:`read_source` streams their documents as
:class:`Batch` es, :func:`write_kept` writes the kept records of a source in a second pass.
Files go through one filesystem layer, :mod:`neardup.io.storage.fs`: a local path or a URL (``s3://``,
``gs://``, ``hf://``, any fsspec protocol) alike; :mod:`neardup.io.storage.tables` reads and writes
Arrow / Parquet tables over it. Bad input is an :class:`~neardup.errors.InputError` whose one-line message names the file and
the line or row (``on_error="fail"``), or a rejected entry (``on_error="skip"``).
"""

from .reader import Batch, choose_id_column, every_record_has_an_id, read_source, read_sources
from .sources import Source, discover, estimate_documents, output_relpath, output_relpaths, table_source
from .writer import copy_text_files, write_kept

__all__ = [
    "Batch",
    "choose_id_column",
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
    "write_kept",
]
