"""The formats of input, one module a format: its reader (``read_<format>(ctx)``, a generator of
:class:`~neardup.io.batch.Batch` es), the names of its fields (``field_names(src)``) where it
has fields, and, where it fits, the writer of its kept records.

- :mod:`.jsonl`: JSON Lines (plain, gzip, zstd); its kept lines: :mod:`.jsonl_kept` (as they
  were, or to Parquet) and :mod:`.jsonl_ranges` (byte ranges of a local file, copied by the kernel)
- :mod:`.csv`: CSV / TSV tables with a header line
- :mod:`.parquet`: Parquet files
- :mod:`.text`: text files, one document a file
- :mod:`.table`: in-memory tables
- :mod:`.signatures`: MinHash signatures instead of text (neardup's, RedPajama-V2's)
- :mod:`.columnar`: what the readers of Parquet, CSV / TSV and tables share

A new input format: a module here, its reader in :data:`READERS` and its field names in
:data:`FIELD_NAMES`; the names of its files in :func:`neardup.io.sources.detect_format`; its
kept records in :func:`neardup.io.writer.write_kept`.
"""

from __future__ import annotations

from typing import List

import pyarrow as pa

from ..sources import Source
from . import csv, jsonl, parquet, signatures, table, text

READERS = {"jsonl": jsonl.read_jsonl, "parquet": parquet.read_parquet, "text": text.read_text,
           "table": table.read_table, "csv": csv.read_csv, "tsv": csv.read_csv,
           **signatures.given_formats()}

FIELD_NAMES = {"jsonl": jsonl.field_names, "parquet": parquet.field_names, "table": table.field_names,
               "csv": csv.csv_header, "tsv": csv.csv_header,
               **dict.fromkeys(signatures.FORMATS, signatures.field_names)}


def field_names(src: Source) -> List[str]:
    """The names of the fields of ``src``: the columns of a table, of a Parquet file or of a
    CSV / TSV file's header, the fields of a JSONL file's first record. None for a text file,
    nor for a file that cannot be read or parsed (its reader will say why)."""
    names_of = FIELD_NAMES.get(src.format)
    if names_of is None:
        return []
    try:
        return names_of(src)
    except (OSError, ValueError, RecursionError, pa.ArrowException):  # unreadable: the reader will say so
        return []
