"""What every reader of a format hands out, and how: the :class:`Batch` of documents, the
:class:`ReadContext` of one source (the columns asked for, the error policy) that makes the
batches and the messages of bad input (``FILE:LINE: reason``, ``FILE: row N: reason``), and the
reasons of a file that holds no documents without being an error (``Batch.skipped``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np
import pyarrow as pa

from ..errors import InputError
from ..errors import one_line as _one_line
from ..kernels.arrays import arrow, cast_strings
from .sources import Source
from .storage.paths import redact

ON_ERROR_MODES = ("fail", "skip")
EMPTY_FILE = "empty file (no records)"
BINARY = "binary file"
NOT_UTF8 = "not UTF-8 text"
NOT_RECORDS = "not JSON Lines records"
COMPRESSED_UNREADABLE = "compressed and unreadable"
NO_TEXT_FIELD = "data file without the text field"
# Why a file was skipped, by the start of its reason: (reason, the count's name in stats.json's
# ``files``, the words of a message). Binary and not-UTF-8 files share one count.
SKIP_KINDS = ((EMPTY_FILE, "skipped_empty", "empty"), (BINARY, "skipped_binary", "binary"),
              (NOT_UTF8, "skipped_binary", "not UTF-8"),
              (COMPRESSED_UNREADABLE, "skipped_compressed", "compressed and unreadable"),
              (NOT_RECORDS, "skipped_not_records", "not JSON Lines (.json)"),
              (NO_TEXT_FIELD, "skipped_no_text_field", "without the text field"))


def skip_counts(reasons) -> Dict[str, int]:
    """How many of the skip ``reasons`` (``Batch.skipped``) are of each kind, by the words of
    :data:`SKIP_KINDS` (``{"binary": 3, "empty": 1}``), in that order, kinds of none left out."""
    out: Dict[str, int] = {}
    reasons = list(reasons)
    for start, _, words in SKIP_KINDS:
        n = sum(1 for r in reasons if r.startswith(start))
        if n:
            out[words] = n
    return out


MAX_REASON = 400  # characters of a reason, in a message or a rejected entry


def cannot_read(src: Source, e: BaseException) -> InputError:
    """The file cannot be read (no permission, an I/O error, the store): an error whatever
    ``on_error`` says, since skipping it would give a result without the whole input."""
    reason = e.strerror if isinstance(e, OSError) and e.strerror else one_line(e)
    return InputError(redact(f"{src.name}: cannot read file ({reason})"))


@dataclass
class Batch:
    """Up to ``batch_size`` documents of one source.

    source_index: the index of the source (passed through from :func:`neardup.io.read_source`).
    rows: int64, each document's row in its source: the 0-based line index in the (decompressed)
        file for JSONL (blank lines count as lines but are never documents), the 0-based row for
        Parquet and tables, 0 for a text file.
    text: ``pa.large_string()`` without nulls, one per row; for a reader asked for them
        (``read_source(text_spans=True)``), possibly a :class:`neardup.kernels.shingles.TextSpans`
        (the same strings, where they lie in the block read: ``to_arrow()`` makes the array).
    ids: ``pa.string()`` values of the id column (integers as decimal strings), or None.
    scores: float64 values of the score column (NaN where null), or None.
    rejected: ``(row, reason)`` of the records skipped in this batch (``on_error="skip"``);
        row is None for a problem with the whole file.
    skipped: why the whole file holds no documents, when that is no error (a batch of none):
        ``empty file (no records)``, or, for a file found by a walk (``Source.walked``) read as
        text, ``binary file (...)`` / ``not UTF-8 text (...)``, or for a ``.json`` file found by a
        walk whose first line is not a record with the text field, ``not JSON Lines records (...)``;
        a walked file whose compressed data cannot be decompressed, ``compressed and unreadable
        (...)``; a walked CSV / TSV / Parquet / JSONL file without the text field (a data file of a
        code tree: a test fixture), ``data file without the text field (...)``.
    signatures, counts, lengths: set by the signature readers only (``text`` is then empty).
    sources: int32, each row's source index, for a batch of many one-document text files
        (``read_sources(group_files=True)``; ``source_index`` is then the first row's); None
        when every row is of ``source_index``.
    lines: set on the last batch (of none) of a range of a split JSONL file read with its rows
        numbered from 0 (a span whose first line is None): the lines of the range, blank ones
        included (the next range's rows start that many lines later).
    line_bounds: int64 (n, 2), each row's line as byte offsets of the file (less a UTF-8 byte
        order mark at its start): its start and its newline's (or the file's end), for an
        uncompressed local JSONL file read for the read
        stage (``text_spans``): the write stage copies kept lines from them without finding
        them again; None otherwise.
    """

    source_index: int
    rows: np.ndarray
    text: pa.Array
    ids: Optional[pa.Array]
    scores: Optional[np.ndarray]
    rejected: List[Tuple[Optional[int], str]] = field(default_factory=list)
    skipped: Optional[str] = None
    # a document given as its MinHash signature (:mod:`.formats.signatures`, no text): the (n, k)
    # uint32 signatures, their shingle counts (0: empty) and text lengths, taken as they are
    signatures: Optional[np.ndarray] = None
    counts: Optional[np.ndarray] = None
    lengths: Optional[np.ndarray] = None
    sources: Optional[np.ndarray] = None
    lines: Optional[int] = None
    line_bounds: Optional[np.ndarray] = None

    def __len__(self) -> int:
        return len(self.rows)


def one_line(s: Any) -> str:
    """``s`` as one line of at most MAX_REASON characters, any credentials in a URL hidden (before
    the cut: a cut never leaves part of a credential)."""
    return _one_line(redact(_one_line(str(s)[:4 * MAX_REASON])), MAX_REASON)


class ReadContext:
    """What every reader needs: the source, the columns asked for, and the error policy."""

    def __init__(self, src: Source, source_index: int, text_column: str,
                 id_column: Optional[str], score_column: Optional[str], on_error: str,
                 batch_size: int):
        self.src = src
        self.source_index = source_index
        self.text_column = text_column
        self.id_column = id_column
        self.score_column = score_column
        self.skip = on_error == "skip"
        self.batch_size = batch_size
        self.by_line = src.format == "jsonl"
        self.span = None  # (first byte, stop byte, first line): one range of a split file (io.splits)
        self._line_base: Optional[int] = None
        # the texts of a JSONL block may come as spans of the block (neardup.kernels.shingles.TextSpans,
        # for the kernels: no copy) instead of an Arrow array: the read stage's choice, no other reader's
        self.text_spans = False

    def where(self, row: Optional[int]) -> str:
        if row is None:
            return f"{self.src.name}: "
        if self.by_line:
            return f"{self.src.name}:{row + self.line_base() + 1}: "
        return f"{self.src.name}: row {row}: "

    def line_base(self) -> int:
        """What to add to a row for the file's line: the newlines before the range of a span
        read with its rows numbered from 0 (first line None; counted here, once: messages
        only), else 0."""
        if self.span is None or self.span[2] is not None:
            return 0
        if self._line_base is None:
            from .splits import lines_before
            try:
                self._line_base = lines_before(self.src.path, self.span[0])
            except OSError as e:
                raise cannot_read(self.src, e) from None
        return self._line_base

    def error(self, row: Optional[int], reason: str) -> InputError:
        return InputError(redact(self.where(row)) + one_line(reason))

    def empty(self, rejected: List[Tuple[Optional[int], str]]) -> Batch:
        return Batch(
            source_index=self.source_index,
            rows=np.empty(0, dtype=np.int64),
            text=arrow([], type=pa.large_string()),
            ids=arrow([], type=pa.string()) if self.id_column is not None else None,
            scores=np.empty(0, dtype=np.float64) if self.score_column is not None else None,
            rejected=rejected,
        )

    def problem(self, reason: str) -> Iterator[Batch]:
        """A problem with the whole file: raise, or one rejected entry with row None."""
        if not self.skip:
            raise self.error(None, reason)
        yield self.empty([(None, one_line(reason))])

    def skipped(self, reason: str) -> Iterator[Batch]:
        """The whole file holds no documents, and that is no error (see ``Batch.skipped``)."""
        batch = self.empty([])
        batch.skipped = reason
        yield batch

    def column_missing(self, reason: str, column: Optional[str]) -> Iterator[Batch]:
        """A file without a column asked for (``reason``, from the column checks): a walked file
        without the text column is skipped (``NO_TEXT_FIELD``, counted: a folder of code holds
        data files of its own, test fixtures), any other case a problem of the file."""
        if self.src.walked and column == self.text_column:
            yield from self.skipped(f"{NO_TEXT_FIELD} ({reason})")
        else:
            yield from self.problem(reason)

    def emit(self, text: pa.Array, rows: np.ndarray, ids: Optional[pa.Array],
             scores: Optional[np.ndarray], bad: Dict[int, str],
             line_bounds: Optional[np.ndarray] = None) -> Iterator[Batch]:
        """Batches of at most batch_size documents; the rejected entries ride on the first."""
        rejected = [(r, one_line(bad[r])) for r in sorted(bad)]
        if rejected and not self.skip:
            row, reason = rejected[0]
            raise self.error(row, reason)
        n = len(rows)
        if n == 0:
            if rejected:
                yield self.empty(rejected)
            return
        if text.type != pa.large_string():  # (TextSpans are large strings)
            text = cast_strings(text, pa.large_string())
        if ids is not None:
            ids = cast_strings(ids, pa.string())
        for off in range(0, n, self.batch_size):
            end = min(off + self.batch_size, n)
            yield Batch(
                source_index=self.source_index,
                rows=rows[off:end],
                text=text.slice(off, end - off),
                ids=ids.slice(off, end - off) if ids is not None else None,
                scores=scores[off:end] if scores is not None else None,
                rejected=rejected if off == 0 else [],
                line_bounds=line_bounds[off:end] if line_bounds is not None else None,
            )
