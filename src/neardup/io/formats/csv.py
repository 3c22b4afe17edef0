"""CSV / TSV tables with a header line (plain, gzip or zstd compressed): their reader, one
document a record, and the writer of their kept records.

CSV / TSV is read by pyarrow with a marker record appended (see :func:`read_csv`): so a quote
that is never closed, which pyarrow takes for a field running to the end of the file, is seen.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, BinaryIO, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np
import pyarrow as pa

from ...errors import InputError
from ..batch import EMPTY_FILE, MAX_REASON, Batch, ReadContext, one_line
from ..forward_file import ForwardFile
from ..kept_rows import kept_batches, unreadable
from ..opening import raise_if_environment
from ..sinks import ByteSink
from ..sources import Source
from ..storage import fs as _fs
from .columnar import arrow_batch, column_problem, refuse_columns, wanted_columns
from .parquet import write_parquet_batches

if TYPE_CHECKING:
    from ...kernels.lines import OpenQuote as _OpenQuote


_CSV_BLOCK = 32 << 20  # pyarrow needs a whole record inside one block: the longest record allowed
# What the reader appends to a CSV / TSV file for pyarrow: a line break, then a record of one field
# that ends in a quote. After a file that ends outside quotes it is one more record (the last one,
# never a document); after a file that ends inside a quoted field (which pyarrow would take as a
# good record) the line break and the text go into that field and the quote closes it: there is no
# such record, and the field's record ends in _CSV_TAIL.
_CSV_END_RECORD = '\x00neardup: the end of the file\x00"'
_CSV_TAIL = "\n" + _CSV_END_RECORD


def csv_options(src: Source, column_types: Dict[str, pa.DataType], include: Optional[List[str]] = None,
                invalid_row_handler=None, numbered: bool = False):
    """pyarrow's ``(read, parse, convert)`` options of a CSV / TSV source: a header line, quoted
    fields may hold newlines, the columns of ``column_types`` as typed and every string kept as
    read (an empty field is ``""``, never null); UTF-8 is checked per record afterwards.
    ``invalid_row_handler``: called with a record whose number of fields differs from the
    header's (None: such a record is an error). ``numbered``: a serial reader, the only one that
    tells the handler the record's number (about 10% slower)."""
    import pyarrow.csv as pcsv

    read = pcsv.ReadOptions(use_threads=not numbered, block_size=_CSV_BLOCK)
    parse = pcsv.ParseOptions(delimiter="\t" if src.format == "tsv" else ",", newlines_in_values=True,
                              invalid_row_handler=invalid_row_handler)
    convert = pcsv.ConvertOptions(column_types=column_types, include_columns=include or [],
                                  strings_can_be_null=False, quoted_strings_can_be_null=False,
                                  check_utf8=False)
    return read, parse, convert


def csv_stream(src: Source):
    """A pyarrow input stream of the (decompressed) bytes of a CSV / TSV source, local or remote."""
    if src.compression in ("bz2", "xz"):  # the standard library's decoders (pyarrow has no xz)
        from ..compressed import StdlibReader
        return pa.PythonFile(StdlibReader(_fs.open_input(src.path), src.compression), mode="r")
    raw = _fs.os_path(src.path) or _fs.open_input(src.path)
    return pa.input_stream(raw, compression=src.compression)


def csv_header(src: Source) -> List[str]:
    """The column names of a CSV / TSV source (its first record), read with Python's csv module."""
    import csv
    import io

    with csv_stream(src) as f:
        head = f.read(1 << 20)
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    for row in csv.reader(io.StringIO(text, newline=""), delimiter="\t" if src.format == "tsv" else ","):
        if row:  # a blank line before the header: pyarrow's reader skips it too
            return row
    return []


def _csv_problem(fmt: str, e: BaseException, row0: int) -> str:
    msg = one_line(e)
    if "straddling" in msg:
        msg = f"a record longer than {_CSV_BLOCK >> 20} MB"
    where = f"after row {row0}: " if row0 else ""
    return f"not a readable {fmt.upper()} file ({where}{msg})"


def skip_invalid_csv_row(row) -> str:
    """pyarrow's ``invalid_row_handler`` that skips a record with the wrong number of fields."""
    return "skip"


class _EndRecord:
    """The transform of pyarrow's ``TransformInputStream`` that appends _CSV_TAIL to a stream
    (called with each chunk read, then once with an empty one at the end; none after)."""

    def __init__(self):
        self.tail = _CSV_TAIL.encode()

    def __call__(self, buf):
        if len(buf):
            return buf
        tail, self.tail = self.tail, b""
        return tail


def _end_marked(stream, limit: Optional[int] = None):
    """What pyarrow reads of a CSV / TSV file: the bytes of ``stream`` (only the first ``limit``
    ones if given), then _CSV_TAIL. Natively (no copy, no cost measured) for the whole stream;
    a Python file (about half as fast) for the rare reading up to a record."""
    if limit is None:
        return pa.TransformInputStream(stream, _EndRecord())
    return _EndMarked(stream, limit)


class _EndMarked(ForwardFile):
    """The first ``limit`` bytes of ``stream``, then _CSV_TAIL, as a Python file."""

    def __init__(self, stream, limit: int):
        self.stream = stream
        self.left = limit
        self.tail = _CSV_TAIL.encode()

    def read(self, n: Optional[int] = -1) -> bytes:
        """Up to ``n`` bytes (all when negative), fewer only at the end: pyarrow takes a short
        read for the end of the stream."""
        whole = n is None or n < 0
        parts: List[bytes] = []
        got = 0
        while (whole or got < n) and self.stream is not None:
            want = self.left if whole else min(n - got, self.left)
            data = self.stream.read(want) if want > 0 else b""
            if not data:
                self.stream = None
                break
            self.left -= len(data)
            parts.append(data)
            got += len(data)
        if self.stream is None and (whole or got < n):
            k = len(self.tail) if whole else n - got
            parts.append(self.tail[:k])
            self.tail = self.tail[k:]
        return parts[0] if len(parts) == 1 else b"".join(parts)


def _csv_open_quote(src: Source) -> Optional[_OpenQuote]:
    """Where the file ends inside a quoted field (a pass over the file, for a message only);
    None when it does not, or cannot be read again."""
    from ...kernels.lines import csv_open_quote
    try:
        with csv_stream(src) as f:
            def chunks() -> Iterator[bytes]:
                while True:
                    chunk = f.read(16 << 20)
                    if not chunk:
                        return
                    yield chunk

            return csv_open_quote(chunks(), b"\t" if src.format == "tsv" else b",")
    except (pa.ArrowException, OSError, ValueError):
        return None


def _unterminated(row: Optional[int], where: Optional[_OpenQuote]) -> str:
    """The reason for the record at ``row`` that holds a quote never closed."""
    if where is None or row is None or where.record - 1 != row:
        return ("unterminated quoted field: a quote of this record is never closed, the file ends "
                "inside it (the rest of the file is read as this one record)")
    lines = (f"line {where.line} is" if where.last_line <= where.line
             else f"lines {where.line}-{where.last_line} are")
    return (f"unterminated quoted field: the quote opened on line {where.line} is never closed, "
            f"the file ends inside it ({lines} read as this one record)")


def read_csv(ctx: ReadContext) -> Iterator[Batch]:
    """A CSV / TSV table: one document per record after the header, rows numbered from 0.

    A record whose number of fields differs from the header's is an error, or with
    ``on_error="skip"`` a rejected entry at its row: its place among the file's records (the
    header not counted); the rows of the other records are counted as if it were not there, by
    the reader and by the writer of the kept records alike. A quote never closed makes the rest of
    the file one record (as CSV reads it): that record is an error (or a rejected entry) naming
    its row and the line of the quote. When the rest of the file is too long for one record
    (pyarrow gives up on it), the file is read again up to that record.
    """
    src = ctx.src
    try:
        names = csv_header(src)
    except (pa.ArrowException, OSError, ValueError) as e:
        raise_if_environment(ctx, e)
        yield from ctx.problem(f"cannot read file ({one_line(e)})")
        return
    if not names:  # not even a header line: an empty file, as one of JSONL or Parquet
        yield from ctx.skipped(EMPTY_FILE)
        return
    types = {c: (pa.float64() if c == ctx.score_column else pa.string()) for c in wanted_columns(ctx)}
    schema = pa.schema([(n, types.get(n, pa.string())) for n in names])
    reason = column_problem(ctx, schema)
    if reason:
        yield from refuse_columns(ctx, schema, reason)
        return
    reading = _CsvReading(ctx, types)
    while True:
        outcome = yield from reading.read_once()
        if outcome == "stop":
            return
        if outcome != "again":
            break
    yield from reading.finish()


class _CsvReading:
    """The reading of one CSV / TSV file (:func:`read_csv`) in steps, and what they share: the
    bad records found by pyarrow's handler and not yet reported, what the end of the file
    showed, the rows handed out, and the limit of a second reading."""

    def __init__(self, ctx: ReadContext, types: Dict[str, pa.DataType]):
        self.ctx = ctx
        self.types = types
        self.cols = wanted_columns(ctx)
        self.found: List[Tuple[Optional[int], Optional[str]]] = []  # (row, reason) of bad records not yet reported
        self.seen = {"end": False, "swallowed": None, "invalid": 0, "done": 0}
        self.open_quote: List[Optional[_OpenQuote]] = []  # computed once, when needed
        self.emitted = 0  # valid rows handed out
        self.reported = 0  # bad records handed out
        self.limit: Optional[int] = None  # read only this many bytes (the second reading)
        self.last_record: Optional[int] = None  # the row of the record cut off by the second reading
        self.row0 = 0  # the row of the next record read
        self.pending: Optional[pa.RecordBatch] = None  # the last batch, held back: the end may change its last row
        self.pending_row0 = 0

    def on_invalid(self, row) -> str:
        """pyarrow's ``invalid_row_handler``: a record with the wrong number of fields, or the
        marker record appended at the end (:data:`_CSV_END_RECORD`)."""
        seen = self.seen
        text = row.text
        if text == _CSV_END_RECORD:
            seen["end"] = True
            return "skip"
        number = row.number  # the record's number, the header's being 1 (a serial reader knows it)
        if number is not None and number <= seen["done"]:  # reported before a second reading
            return "skip"
        r = number - 2 if number is not None else None
        seen["invalid"] += 1
        if text.endswith(_CSV_TAIL):
            seen["swallowed"] = r
            self.found.append((r, None))  # the reason needs a pass over the file: made when reported
        else:
            self.found.append((r, f"a record of {row.actual_columns} fields, the header has "
                                  f"{row.expected_columns}: {text[:2 * MAX_REASON]!r}"))
        return "skip" if self.ctx.skip else "error"

    def where_quote(self) -> Optional[_OpenQuote]:
        if not self.open_quote:
            self.open_quote.append(_csv_open_quote(self.ctx.src))
        return self.open_quote[0]

    def reasons(self, entries) -> List[Tuple[Optional[int], str]]:
        return [(r, reason if reason is not None else _unterminated(r, self.where_quote())) for r, reason in entries]

    def emit_pending(self) -> Iterator[Batch]:
        pending = self.pending
        yield from self.ctx.emit(*arrow_batch(self.ctx, {c: pending.column(c) for c in self.cols}, self.pending_row0))
        self.emitted += pending.num_rows

    def read_once(self):
        """One reading of the file (of its first ``limit`` bytes on a second reading): yields the
        batches, returns ``"again"`` when the file is to be read again up to a record, ``"stop"``
        when the reading ends here (a problem with the file reported), else None."""
        ctx = self.ctx
        src = ctx.src
        try:
            stream = csv_stream(src)
        except (pa.ArrowException, OSError, ValueError) as e:
            raise_if_environment(ctx, e)
            yield from ctx.problem(_csv_problem(src.format, e, 0))
            return "stop"
        self.row0 = self.emitted
        self.pending, self.pending_row0 = None, 0
        try:
            yield from self._batches(stream)
        except (pa.ArrowException, OSError, ValueError) as e:
            if self._read_again(e):
                return "again"
            if self.pending is not None:
                yield from self.emit_pending()
            yield from ctx.problem(_csv_problem(src.format, e, self.row0))
            return "stop"
        finally:
            stream.close()
        return None

    def _batches(self, stream) -> Iterator[Batch]:
        """The batches of one reading: the bad records as the handler finds them, the documents
        one batch behind (the last one is :meth:`finish`'s)."""
        import pyarrow.csv as pcsv

        ctx = self.ctx
        skip_rows = self.emitted  # a second reading passes over the rows already handed out
        reader = pcsv.open_csv(_end_marked(stream, self.limit),
                               *csv_options(ctx.src, self.types, self.cols, self.on_invalid, numbered=True))
        while True:
            try:
                rb = reader.read_next_batch()
            except StopIteration:
                break
            if skip_rows:
                cut = min(skip_rows, rb.num_rows)
                skip_rows -= cut
                rb = rb.slice(cut)
            if self.found:
                yield from self._report_found()
            if rb.num_rows == 0:
                continue
            if self.pending is not None:
                yield from self.emit_pending()
            self.pending, self.pending_row0 = rb, self.row0
            self.row0 += rb.num_rows

    def _report_found(self) -> Iterator[Batch]:
        """The bad records found so far, as rejected entries (``on_error="skip"``)."""
        ctx, found, seen = self.ctx, self.found, self.seen
        if not ctx.skip:  # pragma: no cover - the handler's "error" raised already
            row, reason = self.reasons(found[:1])[0]
            raise ctx.error(row, reason)
        yield ctx.empty([(r, one_line(x)) for r, x in self.reasons(found)])
        seen["done"] = max([seen["done"]] + [r + 2 for r, _ in found if r is not None])
        self.reported += len(found)
        found.clear()

    def _read_again(self, e: BaseException) -> bool:
        """After pyarrow's error ``e``: raise the error of the first bad record (``on_error="fail"``)
        or of the environment; True when the file is to be read again, up to the record whose
        quote is never closed (pyarrow gives up on a record longer than a block)."""
        ctx = self.ctx
        if self.found and not ctx.skip:  # the handler's "error": the first bad record
            row, reason = self.reasons(self.found[:1])[0]
            raise ctx.error(row, reason) from None
        raise_if_environment(ctx, e)
        if "straddling" in str(e) and self.limit is None:
            # pyarrow gives up on a record longer than a block: one whose quote is never closed?
            quote = self.where_quote()
            if quote is not None and quote.record >= 1:
                self.last_record = quote.record - 1
                if not ctx.skip:
                    raise ctx.error(self.last_record, _unterminated(self.last_record, quote)) from None
                self.limit = quote.offset
                self.found.clear()
                self.seen["invalid"] = self.reported
                return True
        return False

    def finish(self) -> Iterator[Batch]:
        """After the last reading: the record that the end of the file cut off (a quote never
        closed), the bad records left, the last batch held back; an empty file is skipped."""
        ctx, seen = self.ctx, self.seen
        pending = self.pending
        bad: List[Tuple[Optional[int], Optional[str]]] = list(self.found)
        if not seen["end"] and seen["swallowed"] is None:
            # no end record: the file ended inside quotes, or the end record was a valid one (a file
            # of one column), the last row read
            last = pending.num_rows - 1 if pending is not None else -1
            if last >= 0 and pending.column(ctx.text_column)[last].as_py() == _CSV_END_RECORD:
                pending = pending.slice(0, last)
            elif self.last_record is None and last >= 0:  # the last record of the file
                pending = pending.slice(0, last)
                bad.append((self.row0 - 1 + seen["invalid"], None))
            elif self.last_record is None:  # the header's quote is never closed
                yield from ctx.problem("unterminated quoted field in the header line (the file ends inside it)")
                return
        if self.last_record is not None:
            bad.append((self.last_record, None))
        if bad:
            if not ctx.skip:
                row, reason = self.reasons(bad[:1])[0]
                raise ctx.error(row, reason)
            yield ctx.empty([(r, one_line(x)) for r, x in self.reasons(bad)])
        self.pending = pending
        if pending is not None and pending.num_rows:
            yield from self.emit_pending()
        if self.emitted == 0 and not bad and seen["invalid"] == 0:
            yield from ctx.skipped(EMPTY_FILE)


def _csv_rows(src: Source, keep: np.ndarray) -> Iterator[pa.RecordBatch]:
    """The kept records of a CSV / TSV source, every column as the string it was, in order;
    the first batch is empty (it carries the schema, for the header of an empty output)."""
    import pyarrow.csv as pcsv

    try:
        names = csv_header(src)
        stream = csv_stream(src)
    except (pa.ArrowException, OSError, ValueError) as e:
        raise InputError(f"{src.name}: cannot read file ({one_line(e)})") from None
    try:
        try:  # the records the reader rejected for their number of fields are skipped here too
            reader = pcsv.open_csv(stream, *csv_options(src, {n: pa.string() for n in names},
                                                         invalid_row_handler=skip_invalid_csv_row))
        except (pa.ArrowException, OSError) as e:
            raise unreadable(src.name, src.format.upper(), 0, e) from None
        yield pa.RecordBatch.from_pylist([], schema=reader.schema)
        yield from kept_batches(reader, keep, src.name, src.format.upper())
    finally:
        stream.close()


def _appended(batches: Iterator[pa.RecordBatch], extra: pa.Table, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Each batch with its slice of ``extra`` appended, in order."""
    at = 0
    for rb in batches:
        part = extra.slice(at, rb.num_rows).combine_chunks()
        at += rb.num_rows
        yield pa.RecordBatch.from_arrays(list(rb.columns) + [c.combine_chunks() for c in part.columns],
                                         schema=pa.schema(list(schema) + list(extra.schema)))


def write_kept_csv(src: Source, keep: np.ndarray, out: BinaryIO, target: str, extra: Optional[pa.Table] = None,
                   check: Optional[Callable] = None) -> int:
    """Kept CSV / TSV records as ``target``: the same format (a header, then the records with
    every field quoted; same compression), JSONL (one object of strings per record) or Parquet
    (string columns). ``extra`` (a row per kept record: ``--mark``'s columns) is appended to
    the records, once ``check(name, header)`` has passed."""
    import pyarrow.csv as pcsv

    batches = _csv_rows(src, keep)
    schema = next(batches).schema
    if extra is not None:
        check(src.name, schema.names)
        batches = _appended(batches, extra, schema)
        schema = pa.schema(list(schema) + list(extra.schema))
    if target == "parquet":
        return write_parquet_batches(out, schema, batches, "snappy")
    n = 0
    sink = ByteSink(out, src.compression if target in ("csv", "tsv") else None)
    try:
        if target in ("csv", "tsv"):
            opts = pcsv.WriteOptions(include_header=True, delimiter="\t" if target == "tsv" else ",")
            buf = pa.BufferOutputStream()
            pcsv.write_csv(pa.Table.from_batches([], schema=schema), buf, opts)
            sink.write(buf.getvalue().to_pybytes())
            opts = pcsv.WriteOptions(include_header=False, delimiter=opts.delimiter)
        for rb in batches:
            if rb.num_rows == 0:
                continue
            if target in ("csv", "tsv"):
                buf = pa.BufferOutputStream()
                pcsv.write_csv(rb, buf, opts)
                sink.write(buf.getvalue().to_pybytes())
            else:
                lines = [json.dumps(row, ensure_ascii=False) for row in rb.to_pylist()]
                lines.append("")
                sink.write("\n".join(lines).encode("utf-8"))
            n += rb.num_rows
    finally:
        sink.close()
    return n
