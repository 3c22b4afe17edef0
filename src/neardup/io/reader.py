"""Reading sources as a stream of :class:`Batch` es, with bounded memory.

JSONL is read in blocks of ~16 MB of whole lines. A block of plain records (the usual case)
is read by a compiled scanner (:mod:`neardup.kernels.jsonl`: text and id spans straight into Arrow
buffers; see :func:`neardup.kernels.jsonl.worth_it` for when); any other block is parsed by
``pyarrow.json`` with an explicit schema of only the needed fields, and a block pyarrow cannot
parse (or whose rows do not line up with its lines) is parsed again line by line with
``json.loads``, which names the bad lines. Every non-blank line ends up either as a document or
as a rejected entry; a line nested more than MAX_NESTING (512) deep is rejected whichever parser
reads its block (pyarrow's takes any depth, json.loads fails near 1,000, the scanner takes 64).

CSV / TSV is read by pyarrow with a marker record appended (see :func:`_read_csv`): so a quote
that is never closed, which pyarrow takes for a field running to the end of the file, is seen.
A local file is checked before it is opened for reading (a named pipe or a device would block or
never end), and a file that cannot be read stops the run whatever ``on_error`` says.
"""

from __future__ import annotations

import json
import math
import os
import stat
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from ..kernels.arrays import arrow, to_numpy
from ..errors import ConfigError, InputError
from ..kernels import jsonl
from .storage import fs as _fs
from ..kernels.lines import MAX_NESTING, blank_lines, csv_open_quote, deep_lines, line_bounds
from ..kernels.lines import OpenQuote as _OpenQuote
from ._streams import StreamError, iter_blocks
from .storage.tables import parquet_file
from .sources import Source

ON_ERROR_MODES = ("fail", "skip")
EMPTY_FILE = "empty file (no records)"
BINARY = "binary file"
NOT_UTF8 = "not UTF-8 text"
NOT_RECORDS = "not JSON Lines records"
_MAX_REASON = 400
_TOO_DEEP = f"JSON nested too deeply (more than {MAX_NESTING} levels of arrays and objects)"


@dataclass
class Batch:
    """Up to ``batch_size`` documents of one source.

    source_index: the index of the source (passed through from :func:`read_source`).
    rows: int64, each document's row in its source: the 0-based line index in the (decompressed)
        file for JSONL (blank lines count as lines but are never documents), the 0-based row for
        Parquet and tables, 0 for a text file.
    text: ``pa.large_string()`` without nulls, one per row.
    ids: ``pa.string()`` values of the id column (integers as decimal strings), or None.
    scores: float64 values of the score column (NaN where null), or None.
    rejected: ``(row, reason)`` of the records skipped in this batch (``on_error="skip"``);
        row is None for a problem with the whole file.
    skipped: why the whole file holds no documents, when that is no error (a batch of none):
        ``empty file (no records)``, or, for a file found by a walk (``Source.walked``) read as
        text, ``binary file (...)`` / ``not UTF-8 text (...)``, or for a ``.json`` file found by a
        walk whose first line is not a record with the text field, ``not JSON Lines records (...)``.
    """

    source_index: int
    rows: np.ndarray
    text: pa.Array
    ids: Optional[pa.Array]
    scores: Optional[np.ndarray]
    rejected: List[Tuple[Optional[int], str]] = field(default_factory=list)
    skipped: Optional[str] = None

    def __len__(self) -> int:
        return len(self.rows)


def one_line(s: Any) -> str:
    """``s`` as one line of at most 400 characters, any credentials in a URL hidden."""
    s = str(s)
    if len(s) > 4 * _MAX_REASON:
        s = s[: 4 * _MAX_REASON]
    s = _fs.redact(" ".join(s.split()))
    return s if len(s) <= _MAX_REASON else s[: _MAX_REASON - 3] + "..."


def _type_name(v: Any) -> str:
    return type(v).__name__


def _cannot_read(src: Source, e: BaseException) -> InputError:
    """The file cannot be read (no permission, an I/O error, the store): an error whatever
    ``on_error`` says, since skipping it would give a result without the whole input."""
    reason = e.strerror if isinstance(e, OSError) and e.strerror else one_line(e)
    return InputError(_fs.redact(f"{src.name}: cannot read file ({reason})"))


def _raise_if_environment(ctx: "_Ctx", e: BaseException) -> None:
    """Raise :func:`_cannot_read` for an error of the operating system (it has an errno); other
    errors of a reader are the file's content, reported as such."""
    if isinstance(e, OSError) and e.errno is not None:
        raise _cannot_read(ctx.src, e) from None


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a device"),
          (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"))


def check_local_file(src: Source) -> None:
    """An InputError naming ``src`` when it is a local path that cannot be opened for reading or
    is not a regular file (a folder, a named pipe or a device, which would block or never end).
    The check opens without blocking (a named pipe with no writer does not wait). Nothing is
    checked for a URL or an in-memory table."""
    if src.format == "table" or _fs.os_path(src.path) is None:
        return
    fd, _ = _open_regular(src)
    os.close(fd)


def _open_regular(src: Source):
    """``(fd, size)`` of the local file ``src``, opened without blocking and checked to be a
    regular file; an InputError naming it otherwise (the descriptor then closed)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(_fs.local_path(src.path), flags)
    except OSError as e:
        raise _cannot_read(src, e) from None
    try:
        st = os.fstat(fd)
    except OSError as e:
        os.close(fd)
        raise _cannot_read(src, e) from None
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a file")
        raise InputError(_fs.redact(f"{src.name}: not a regular file ({kind})"))
    return fd, st.st_size


class _Ctx:
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

    def where(self, row: Optional[int]) -> str:
        if row is None:
            return f"{self.src.name}: "
        if self.by_line:
            return f"{self.src.name}:{row + 1}: "
        return f"{self.src.name}: row {row}: "

    def error(self, row: Optional[int], reason: str) -> InputError:
        return InputError(_fs.redact(self.where(row)) + one_line(reason))

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

    def emit(self, text: pa.Array, rows: np.ndarray, ids: Optional[pa.Array],
             scores: Optional[np.ndarray], bad: Dict[int, str]) -> Iterator[Batch]:
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
        if text.type != pa.large_string():
            text = text.cast(pa.large_string())
        if ids is not None and ids.type != pa.string():
            ids = ids.cast(pa.string())
        for off in range(0, n, self.batch_size):
            end = min(off + self.batch_size, n)
            yield Batch(
                source_index=self.source_index,
                rows=rows[off:end],
                text=text.slice(off, end - off),
                ids=ids.slice(off, end - off) if ids is not None else None,
                scores=scores[off:end] if scores is not None else None,
                rejected=rejected if off == 0 else [],
            )


# --------------------------------------------------------------------------- records


def _check_record(obj: Any, ctx: _Ctx) -> Tuple[Optional[str], Any, Any, float]:
    """``(reason, text, id, score)`` of a parsed JSON value; reason is None for a good record."""
    if not isinstance(obj, dict):
        return f"not a JSON object (got {_type_name(obj)})", None, None, math.nan
    tc = ctx.text_column
    if tc not in obj:
        return f"text field {tc!r} is missing" + _missing_text_hint(obj), None, None, math.nan
    text = obj[tc]
    if text is None:
        return f"text field {tc!r} is null", None, None, math.nan
    if not isinstance(text, str):
        return f"text field {tc!r} is not a string (got {_type_name(text)})", None, None, math.nan
    if not _encodable(text):
        return (f"text field {tc!r} is not valid Unicode (an unpaired surrogate \\u escape)",
                None, None, math.nan)
    idv = None
    if ctx.id_column is not None:
        ic = ctx.id_column
        if ic not in obj:
            return f"id field {ic!r} is missing", None, None, math.nan
        v = obj[ic]
        if v is None:
            return f"id field {ic!r} is null", None, None, math.nan
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            return f"id field {ic!r} is not a string or number (got {_type_name(v)})", None, None, math.nan
        if isinstance(v, str):
            if not _encodable(v):
                return (f"id field {ic!r} is not valid Unicode (an unpaired surrogate \\u escape)",
                        None, None, math.nan)
            idv = v
        else:
            idv = str(v) if isinstance(v, int) else repr(v)
    score = math.nan
    if ctx.score_column is not None:
        sc = ctx.score_column
        if sc not in obj:
            return f"score column {sc!r} is missing", None, None, math.nan
        v = obj[sc]
        if v is not None:
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                return f"score column {sc!r} is not a number (got {_type_name(v)})", None, None, math.nan
            try:
                score = float(v)
            except OverflowError:
                return f"score column {sc!r} is out of range for a float", None, None, math.nan
    return None, text, idv, score


def _missing_text_hint(obj: dict) -> str:
    """What to do about a record without the text field: the fields it has, and the option to
    name the right one (the longest string field is the likeliest)."""
    names = list(obj)
    if not names:
        return " (the record has no fields)"
    listing = ", ".join(map(str, names[:20])) + (f", ... ({len(names)} in all)" if len(names) > 20 else "")
    strings = [k for k, v in obj.items() if isinstance(v, str)]
    guess = max(strings, key=lambda k: len(obj[k])) if strings else "NAME"
    return f" (fields: {listing}; name the text field with --text-column {guess})"


def _encodable(s: str) -> bool:
    if s.isascii():
        return True
    try:
        s.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _json_reason(line: bytes) -> Tuple[Optional[str], Any]:
    """Parse one line; ``(reason, value)`` with reason None when it is valid JSON."""
    try:
        return None, json.loads(line.decode("utf-8"))
    except UnicodeDecodeError as e:  # pragma: no cover - lines are validated before
        return f"invalid UTF-8 at byte {e.start}", None
    except json.JSONDecodeError as e:
        # some of json's messages end in "at" ("Invalid control character at"): say it once
        msg = e.msg.removesuffix(" at")
        return f"broken JSON ({msg} at column {e.colno})", None
    except RecursionError:  # pragma: no cover - lines nested over MAX_NESTING deep are out before
        return _TOO_DEEP, None


# --------------------------------------------------------------------------- JSONL


def _whole_json_hint(first_line: bytes) -> str:
    """A hint when the first record line suggests a JSON document rather than JSON Lines."""
    head = first_line.strip()
    if head.startswith(b"["):
        return "; the file looks like one JSON array, but JSON Lines (one object per line) is expected"
    if head == b"{":
        return ("; the file looks like one JSON document spread over several lines, but JSON Lines "
                "(one object per line) is expected")
    return ""


def _utf8_ok(data: bytes) -> bool:
    if data.isascii():
        return True
    buf = pa.py_buffer(data)
    offsets = pa.py_buffer(np.array([0, len(data)], dtype=np.int64))
    arr = pa.Array.from_buffers(pa.large_string(), 1, [None, offsets, buf])
    try:
        arr.validate(full=True)
        return True
    except pa.ArrowInvalid:
        return False


class _JsonlParser:
    """Parses the blocks of one JSONL file."""

    def __init__(self, ctx: _Ctx):
        self.ctx = ctx
        self.id_types = [pa.string(), pa.int64()]  # the last one that worked goes first
        self.seen_record = False
        size = 0  # a remote file counts as small here: no extra request for its size
        local = _fs.os_path(ctx.src.path)
        if local is not None:
            try:
                size = os.path.getsize(local)
            except OSError:  # its size only decides whether to compile the scanner now
                pass
        self.fast = jsonl.worth_it(size)

    def _schema(self, id_type: pa.DataType) -> pa.Schema:
        ctx = self.ctx
        fields = [pa.field(ctx.text_column, pa.string())]
        if ctx.id_column is not None:
            fields.append(pa.field(ctx.id_column, id_type))
        if ctx.score_column is not None:
            fields.append(pa.field(ctx.score_column, pa.float64()))
        return pa.schema(fields)

    def _arrow(self, feed: bytes, expected: int, longest: int) -> Optional[pa.Table]:
        """pyarrow's parse of ``feed`` (one object per non-blank line), or None when it fails
        or its rows do not match the lines."""
        block_size = max(1 << 20, 2 * longest + 16)
        ropts = pj.ReadOptions(use_threads=True, block_size=block_size)
        attempts = self.id_types if self.ctx.id_column is not None else self.id_types[:1]
        for k, id_type in enumerate(attempts):
            popts = pj.ParseOptions(explicit_schema=self._schema(id_type),
                                    unexpected_field_behavior="ignore", newlines_in_values=False)
            try:
                table = pj.read_json(pa.BufferReader(feed), read_options=ropts, parse_options=popts)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                msg = str(e)
                ic = self.ctx.id_column
                if ic is not None and (f"/{ic})" in msg or "to int64" in msg) and k == 0:
                    continue  # the id field has the other type: try it
                return None
            if table.num_rows != expected:
                return None
            if k:
                self.id_types = [attempts[k]] + [t for t in self.id_types if t != attempts[k]]
            return table
        return None

    def parse(self, data: bytes, line0: int):
        """``(n_lines, n_records, text, rows, ids, scores, bad)`` of one block."""
        ctx = self.ctx
        starts, ends = line_bounds(data)
        n_lines = len(starts)
        blank = blank_lines(data, starts, ends)
        good_mask = np.ones(n_lines, dtype=bool)
        good_mask[blank] = False
        bad: Dict[int, str] = {}  # line index in the block -> reason
        if not _utf8_ok(data):
            for i in np.flatnonzero(good_mask).tolist():
                try:
                    data[starts[i]:ends[i]].decode("utf-8")
                except UnicodeDecodeError as e:
                    bad[i] = f"invalid UTF-8 at byte {e.start}"
                    good_mask[i] = False
        good = np.flatnonzero(good_mask)
        n_records = n_lines - len(blank)

        text = ids = scores = None
        keep = good
        fast = None
        if self.fast and len(good) and not bad and ctx.score_column is None:
            # the plain case, every line a simple record: compiled, no Python objects
            fast = jsonl.extract(data, starts, ends, good, ctx.text_column, ctx.id_column)
        if fast is not None:
            text, ids = fast
        elif len(good):
            # the scanner takes no line nested over 64 deep; here none over MAX_NESTING, whichever
            # parser would read it (pyarrow's takes any depth, json.loads fails near 1,000)
            deep = deep_lines(data, starts, ends, good)
            if len(deep):
                for i in deep.tolist():
                    bad[i] = _TOO_DEEP
                good_mask[deep] = False
                good = np.flatnonzero(good_mask)
        if fast is None and len(good):
            feed = data if not bad else b"\n".join(data[starts[i]:ends[i]] for i in good.tolist())
            longest = int((ends - starts).max())
            # pyarrow skips a byte order mark at the start of its input (json.loads does not:
            # the file's own BOM is already gone, so one here starts a line of a later block)
            table = None if feed.startswith(b"\xef\xbb\xbf") else self._arrow(feed, len(good), longest)
            if table is not None:
                text, ids, scores, keep = self._from_arrow(table, data, starts, ends, good, bad)
            else:
                text, ids, scores, keep = self._line_by_line(data, starts, ends, good, bad)
        if n_records:
            self.seen_record = True
        if text is None:
            text = arrow([], type=pa.large_string())
            ids = arrow([], type=pa.string()) if ctx.id_column is not None else None
            scores = np.empty(0, dtype=np.float64) if ctx.score_column is not None else None
            keep = np.empty(0, dtype=np.int64)
        rows = keep.astype(np.int64) + line0
        bad_rows = {line0 + i: r for i, r in bad.items()}
        return n_lines, n_records, text, rows, ids, scores, bad_rows

    def _from_arrow(self, table: pa.Table, data, starts, ends, good, bad):
        ctx = self.ctx
        text = table.column(ctx.text_column).combine_chunks()
        ids = table.column(ctx.id_column).combine_chunks() if ctx.id_column is not None else None
        scores = (table.column(ctx.score_column).combine_chunks()
                  if ctx.score_column is not None else None)
        need = None
        for arr in (text, ids, scores):
            if arr is not None and arr.null_count:
                m = arr.is_null()
                need = m if need is None else pc.or_(need, m)
        positions = [] if need is None else np.flatnonzero(to_numpy(need)).tolist()
        drop = []
        for p in positions:
            i = int(good[p])
            reason, obj = _json_reason(data[starts[i]:ends[i]])
            if reason is None:
                reason = _check_record(obj, ctx)[0]
            if reason is None and not (text[p].is_valid and (ids is None or ids[p].is_valid)):
                # cannot happen (pyarrow's null is a missing or null field), but never let a
                # null text through
                reason = f"text field {ctx.text_column!r} is null"  # pragma: no cover
            if reason is not None:
                bad[i] = reason
                drop.append(p)
        keep = good
        if drop:
            mask = np.ones(len(good), dtype=bool)
            mask[drop] = False
            amask = arrow(mask)
            text = text.filter(amask)
            ids = ids.filter(amask) if ids is not None else None
            scores = scores.filter(amask) if scores is not None else None
            keep = good[mask]
        if ids is not None and ids.type != pa.string():
            ids = ids.cast(pa.string())
        np_scores = None
        if scores is not None:
            np_scores = to_numpy(scores).astype(np.float64, copy=False)
        return text.cast(pa.large_string()), ids, np_scores, keep

    def _line_by_line(self, data, starts, ends, good, bad):
        ctx = self.ctx
        texts: List[str] = []
        ids: List[str] = []
        scores: List[float] = []
        keep: List[int] = []
        first = not self.seen_record
        for i in good.tolist():
            line = data[starts[i]:ends[i]]
            reason, obj = _json_reason(line)
            if reason is None:
                reason, text, idv, score = _check_record(obj, ctx)
            if reason is not None:
                if first:
                    reason += _whole_json_hint(line)
                bad[i] = reason
                first = False
                continue
            first = False
            texts.append(text)
            ids.append(idv)
            scores.append(score)
            keep.append(i)
        text_arr = arrow(texts, type=pa.large_string())
        id_arr = arrow(ids, type=pa.string()) if ctx.id_column is not None else None
        sc = np.asarray(scores, dtype=np.float64) if ctx.score_column is not None else None
        return text_arr, id_arr, sc, np.asarray(keep, dtype=np.int64)


def _json_document(src: Source) -> bool:
    """A ``.json`` file (not ``.jsonl``) that a folder walk found: in a folder of code or data it
    is as often one JSON document (package.json, a pretty-printed test fixture) as JSON Lines."""
    name = src.path.rsplit("/", 1)[-1].lower()
    for ext in (".gz", ".zst", ".zstd"):
        if name.endswith(ext):
            name = name[: -len(ext)]
    return src.walked and name.endswith(".json")


def _not_records(ctx: _Ctx, data: bytes) -> Optional[str]:
    """Why a walked ``.json`` file whose first block is ``data`` holds no records of the corpus
    (its first non-blank line is not a JSON object with the text field), or None. Such a file is
    skipped and counted, as a binary file is; a later bad line is a bad record as in any file."""
    first = next((ln for ln in data.split(b"\n") if ln.strip()), None)
    if first is None:
        return None
    try:
        record = json.loads(first)
    except (ValueError, RecursionError):
        return f"{NOT_RECORDS} (line 1 is not a JSON object: one JSON document?)"
    if not isinstance(record, dict):
        return f"{NOT_RECORDS} (line 1 is a JSON {type(record).__name__}, not an object)"
    if ctx.text_column not in record:
        return f"{NOT_RECORDS} (line 1 has no field {ctx.text_column!r})"
    return None


def _read_jsonl(ctx: _Ctx) -> Iterator[Batch]:
    src = ctx.src
    parser = _JsonlParser(ctx)
    line0 = 0
    records = 0
    blocks = iter_blocks(src.path, src.compression)
    check = _json_document(src)
    try:
        while True:
            try:
                data = next(blocks)
                if check:
                    check = False
                    why = _not_records(ctx, data)
                    if why is not None:
                        yield from ctx.skipped(why)
                        return
            except StopIteration:
                break
            except StreamError as e:
                yield from ctx.problem(e.describe(src.compression or "", line0))
                return
            except OSError as e:
                raise _cannot_read(src, e) from None
            n_lines, n_records, text, rows, ids, scores, bad = parser.parse(data, line0)
            line0 += n_lines
            records += n_records
            yield from ctx.emit(text, rows, ids, scores, bad)
    finally:
        blocks.close()
    if records == 0:
        yield from ctx.skipped(EMPTY_FILE)


# --------------------------------------------------------------------------- Arrow (Parquet, tables)


def _is_stringlike(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        return _is_stringlike(t.value_type)
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _is_numeric(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        return _is_numeric(t.value_type)
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


def _column_problem(ctx: _Ctx, schema: pa.Schema) -> Optional[str]:
    names = schema.names
    listing = ", ".join(names) if len(names) <= 20 else ", ".join(names[:20]) + f", ... ({len(names)} in all)"
    wanted = [("text", ctx.text_column), ("id", ctx.id_column), ("score", ctx.score_column)]
    for role, col in wanted:
        if col is None:
            continue
        if col not in names:
            hint = ""
            if role in ("text", "id"):
                guess = _likely_text_column(schema) if role == "text" else "NAME"
                hint = f"; name the {role} column with --{role}-column {guess}"
            return f"no column {col!r} (columns: {listing}{hint})"
        if names.count(col) > 1:
            return f"column {col!r} appears {names.count(col)} times"
        t = schema.field(col).type
        if role == "text" and not _is_stringlike(t):
            return f"text column {col!r} is not a string column (type {t})"
        if role == "id" and not (_is_stringlike(t) or _is_numeric(t)):
            return f"id column {col!r} is not a string or number column (type {t})"
        if role == "score" and not _is_numeric(t):
            return f"score column {col!r} is not numeric (type {t})"
    return None


_TEXT_NAMES = ("content", "contents", "raw_content", "body", "document", "doc", "article", "passage",
               "code", "sentence", "review", "comment", "message", "description", "abstract")


def _likely_text_column(schema: pa.Schema) -> str:
    """The string column most likely to hold the text (a usual name, or the only string
    column), else ``NAME``: what a "no column 'text'" message suggests for --text-column."""
    strings = [f.name for f in schema if _is_stringlike(f.type)]
    for name in _TEXT_NAMES:
        for s in strings:
            if s.lower() == name:
                return s
    return strings[0] if len(strings) == 1 else "NAME"


def _plain(arr: pa.Array) -> pa.Array:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    return arr


def _arrow_batch(ctx: _Ctx, cols: Dict[str, pa.Array], row0: int):
    """``(text, rows, ids, scores, bad)`` of one Arrow batch."""
    text = _plain(cols[ctx.text_column]).cast(pa.large_string())
    n = len(text)
    bad: Dict[int, str] = {}
    try:
        text.validate(full=True)
    except pa.ArrowInvalid:
        raw = text.view(pa.large_binary())
        for i in range(n):
            v = raw[i].as_py()
            if v is None:
                continue
            try:
                v.decode("utf-8")
            except UnicodeDecodeError as e:
                bad[i] = f"text field {ctx.text_column!r} has invalid UTF-8 at byte {e.start}"
    if text.null_count:
        for i in np.flatnonzero(to_numpy(text.is_null())).tolist():
            bad.setdefault(i, f"text field {ctx.text_column!r} is null")
    ids = None
    if ctx.id_column is not None:
        ids = _plain(cols[ctx.id_column]).cast(pa.string())
        if ids.null_count:
            for i in np.flatnonzero(to_numpy(ids.is_null())).tolist():
                bad.setdefault(i, f"id field {ctx.id_column!r} is null")
    scores = None
    if ctx.score_column is not None:
        sc = _plain(cols[ctx.score_column]).cast(pa.float64())
        scores = to_numpy(sc).astype(np.float64, copy=False)
    rows = np.arange(row0, row0 + n, dtype=np.int64)
    if bad:
        mask = np.ones(n, dtype=bool)
        mask[list(bad)] = False
        amask = arrow(mask)
        text = text.filter(amask)
        ids = ids.filter(amask) if ids is not None else None
        scores = scores[mask] if scores is not None else None
        rows = rows[mask]
    return text, rows, ids, scores, {row0 + i: r for i, r in bad.items()}


def _wanted_columns(ctx: _Ctx) -> List[str]:
    cols = [ctx.text_column]
    for c in (ctx.id_column, ctx.score_column):
        if c is not None and c not in cols:
            cols.append(c)
    return cols


def _read_parquet(ctx: _Ctx) -> Iterator[Batch]:
    src = ctx.src
    try:
        pf = parquet_file(src.path)
        schema = pf.schema_arrow
    except (pa.ArrowException, OSError, ValueError) as e:
        yield from ctx.problem(f"not a readable Parquet file ({one_line(e)})")
        return
    if pf.metadata.num_rows == 0:  # (Spark writes such files, with or without the columns)
        yield from ctx.skipped(EMPTY_FILE)
        return
    reason = _column_problem(ctx, schema)
    if reason:
        yield from ctx.problem(reason)
        return
    cols = _wanted_columns(ctx)
    row0 = 0
    it = pf.iter_batches(batch_size=ctx.batch_size, columns=cols, use_threads=True)
    while True:
        try:
            rb = next(it)
        except StopIteration:
            break
        except (pa.ArrowException, OSError, ValueError) as e:
            yield from ctx.problem(
                f"not a readable Parquet file (after row {row0}: {one_line(e)})")
            return
        if rb.num_rows == 0:
            continue
        parts = _arrow_batch(ctx, {c: rb.column(c) for c in cols}, row0)
        row0 += rb.num_rows
        yield from ctx.emit(*parts)


def _read_table(ctx: _Ctx) -> Iterator[Batch]:
    table = ctx.src.table
    if not isinstance(table, pa.Table):
        raise TypeError(f"source {ctx.src.name} of format 'table' has no pyarrow.Table")
    reason = _column_problem(ctx, table.schema)
    if reason:
        yield from ctx.problem(reason)
        return
    if table.num_rows == 0:
        yield from ctx.problem("empty table (no records)")
        return
    cols = _wanted_columns(ctx)
    sel = table.select(cols)
    for row0 in range(0, sel.num_rows, ctx.batch_size):
        part = sel.slice(row0, ctx.batch_size)
        parts = _arrow_batch(ctx, {c: part.column(c) for c in cols}, row0)
        yield from ctx.emit(*parts)


# --------------------------------------------------------------------------- CSV / TSV

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


class _EndMarked:
    """The first ``limit`` bytes of ``stream``, then _CSV_TAIL, as a Python file."""

    def __init__(self, stream, limit: int):
        self.stream = stream
        self.left = limit
        self.tail = _CSV_TAIL.encode()
        self.closed = False

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

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def close(self) -> None:
        self.closed = True


def _csv_open_quote(src: Source) -> Optional[_OpenQuote]:
    """Where the file ends inside a quoted field (a pass over the file, for a message only);
    None when it does not, or cannot be read again."""
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


def _read_csv(ctx: _Ctx) -> Iterator[Batch]:
    """A CSV / TSV table: one document per record after the header, rows numbered from 0.

    A record whose number of fields differs from the header's is an error, or with
    ``on_error="skip"`` a rejected entry at its row: its place among the file's records (the
    header not counted); the rows of the other records are counted as if it were not there, by
    the reader and by the writer of the kept records alike. A quote never closed makes the rest of
    the file one record (as CSV reads it): that record is an error (or a rejected entry) naming
    its row and the line of the quote. When the rest of the file is too long for one record
    (pyarrow gives up on it), the file is read again up to that record.
    """
    import pyarrow.csv as pcsv

    src = ctx.src
    try:
        names = csv_header(src)
    except (pa.ArrowException, OSError, ValueError) as e:
        _raise_if_environment(ctx, e)
        yield from ctx.problem(f"cannot read file ({one_line(e)})")
        return
    types = {c: (pa.float64() if c == ctx.score_column else pa.string()) for c in _wanted_columns(ctx)}
    schema = pa.schema([(n, types.get(n, pa.string())) for n in names])
    reason = _column_problem(ctx, schema)
    if reason:
        yield from ctx.problem(reason)
        return
    cols = _wanted_columns(ctx)
    text_col = ctx.text_column
    found: List[Tuple[Optional[int], Optional[str]]] = []  # (row, reason) of bad records not yet reported
    seen = {"end": False, "swallowed": None, "invalid": 0, "done": 0}

    def on_invalid(row) -> str:
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
            found.append((r, None))  # the reason needs a pass over the file: made when reported
        else:
            found.append((r, f"a record of {row.actual_columns} fields, the header has "
                             f"{row.expected_columns}: {text[:2 * _MAX_REASON]!r}"))
        return "skip" if ctx.skip else "error"

    open_quote: List[Optional[_OpenQuote]] = []  # computed once, when needed

    def where_quote() -> Optional[_OpenQuote]:
        if not open_quote:
            open_quote.append(_csv_open_quote(src))
        return open_quote[0]

    def reasons(entries) -> List[Tuple[Optional[int], str]]:
        return [(r, reason if reason is not None else _unterminated(r, where_quote())) for r, reason in entries]

    emitted = 0  # valid rows handed out
    reported = 0  # bad records handed out
    limit: Optional[int] = None  # read only this many bytes (the second reading)
    last_record: Optional[int] = None  # the row of the record cut off by the second reading
    while True:
        try:
            stream = csv_stream(src)
        except (pa.ArrowException, OSError, ValueError) as e:
            _raise_if_environment(ctx, e)
            yield from ctx.problem(_csv_problem(src.format, e, 0))
            return
        skip_rows = emitted  # a second reading passes over the rows already handed out
        row0 = emitted
        pending: Optional[pa.RecordBatch] = None  # the last batch, held back: the end may change its last row
        pending_row0 = 0
        again = False
        try:
            reader = pcsv.open_csv(_end_marked(stream, limit),
                                   *csv_options(src, types, cols, on_invalid, numbered=True))
            while True:
                try:
                    rb = reader.read_next_batch()
                except StopIteration:
                    break
                if skip_rows:
                    cut = min(skip_rows, rb.num_rows)
                    skip_rows -= cut
                    rb = rb.slice(cut)
                if found:
                    if not ctx.skip:  # pragma: no cover - the handler's "error" raised already
                        row, reason = reasons(found[:1])[0]
                        raise ctx.error(row, reason)
                    yield ctx.empty([(r, one_line(x)) for r, x in reasons(found)])
                    seen["done"] = max([seen["done"]] + [r + 2 for r, _ in found if r is not None])
                    reported += len(found)
                    found.clear()
                if rb.num_rows == 0:
                    continue
                if pending is not None:
                    yield from ctx.emit(*_arrow_batch(ctx, {c: pending.column(c) for c in cols}, pending_row0))
                    emitted += pending.num_rows
                pending, pending_row0 = rb, row0
                row0 += rb.num_rows
        except (pa.ArrowException, OSError, ValueError) as e:
            if found and not ctx.skip:  # the handler's "error": the first bad record
                row, reason = reasons(found[:1])[0]
                raise ctx.error(row, reason) from None
            _raise_if_environment(ctx, e)
            if "straddling" in str(e) and limit is None:
                # pyarrow gives up on a record longer than a block: one whose quote is never closed?
                quote = where_quote()
                if quote is not None and quote.record >= 1:
                    last_record = quote.record - 1
                    if not ctx.skip:
                        raise ctx.error(last_record, _unterminated(last_record, quote)) from None
                    limit, again = quote.offset, True
                    found.clear()
                    seen["invalid"] = reported
            if not again:
                if pending is not None:
                    yield from ctx.emit(*_arrow_batch(ctx, {c: pending.column(c) for c in cols}, pending_row0))
                yield from ctx.problem(_csv_problem(src.format, e, row0))
                return
        finally:
            stream.close()
        if again:
            continue
        break

    bad: List[Tuple[Optional[int], Optional[str]]] = list(found)
    if not seen["end"] and seen["swallowed"] is None:
        # no end record: the file ended inside quotes, or the end record was a valid one (a file
        # of one column), the last row read
        last = pending.num_rows - 1 if pending is not None else -1
        if last >= 0 and pending.column(text_col)[last].as_py() == _CSV_END_RECORD:
            pending = pending.slice(0, last)
        elif last_record is None and last >= 0:  # the last record of the file
            pending = pending.slice(0, last)
            bad.append((row0 - 1 + seen["invalid"], None))
        elif last_record is None:  # the header's quote is never closed
            yield from ctx.problem("unterminated quoted field in the header line (the file ends inside it)")
            return
    if last_record is not None:
        bad.append((last_record, None))
    if bad:
        if not ctx.skip:
            row, reason = reasons(bad[:1])[0]
            raise ctx.error(row, reason)
        yield ctx.empty([(r, one_line(x)) for r, x in reasons(bad)])
    if pending is not None and pending.num_rows:
        yield from ctx.emit(*_arrow_batch(ctx, {c: pending.column(c) for c in cols}, pending_row0))
        emitted += pending.num_rows
    if emitted == 0 and not bad and seen["invalid"] == 0:
        yield from ctx.skipped(EMPTY_FILE)


# --------------------------------------------------------------------------- text files


def _compressed_hint(data: bytes) -> str:
    if data[:2] == b"\x1f\x8b":
        return " (it looks gzip-compressed; only .jsonl.gz / .json.gz files are decompressed)"
    if data[:4] == b"\x28\xb5\x2f\xfd":
        return " (it looks zstd-compressed; only .jsonl.zst / .json.zst files are decompressed)"
    return ""


def _read_text(ctx: _Ctx) -> Iterator[Batch]:
    """One document, the whole file (see :func:`_text_document`)."""
    src = ctx.src
    try:
        with _fs.open_input(src.path) as f:
            data = f.read()
    except OSError as e:
        raise _cannot_read(src, e) from None
    yield from _text_document(ctx, data)


def _text_document(ctx: _Ctx, data: bytes) -> Iterator[Batch]:
    """The document of a text file whose bytes are ``data``. A file found by a walk that is
    binary (a NUL byte) or not UTF-8 is skipped (``Batch.skipped``): a folder of code holds
    images and compiled files; a file named on its own is an error (or a rejected entry)."""
    src = ctx.src
    if src.walked:
        nul = data.find(b"\0")
        if nul >= 0:
            yield from ctx.skipped(f"{BINARY} (a NUL byte at byte {nul})")
            return
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        if src.walked:
            yield from ctx.skipped(f"{NOT_UTF8} (invalid UTF-8 at byte {e.start})")
            return
        yield from ctx.problem(f"invalid UTF-8 at byte {e.start}" + _compressed_hint(data))
        return
    yield Batch(
        source_index=ctx.source_index,
        rows=np.zeros(1, dtype=np.int64),
        text=arrow([text], type=pa.large_string()),
        ids=arrow([src.name], type=pa.string()) if ctx.id_column is not None else None,
        scores=np.full(1, np.nan) if ctx.score_column is not None else None,
        rejected=[],
    )


def _slurp(src: Source) -> bytes:
    """The bytes of a local file, read with one open: checked to be a regular file first, as
    :func:`check_local_file` does (opened without blocking)."""
    fd, size = _open_regular(src)
    try:
        parts = []
        size = max(size, 0) + 1  # one more: the end is seen at once
        while True:
            chunk = os.read(fd, max(size, 1 << 16))
            if not chunk:
                break
            parts.append(chunk)
        return parts[0] if len(parts) == 1 else b"".join(parts)
    except OSError as e:
        raise _cannot_read(src, e) from None
    finally:
        os.close(fd)


_FILES_AHEAD = 512  # small files read ahead by the pool of read_sources


def read_sources(sources, members, **options) -> Iterator[Batch]:
    """:func:`read_source` over ``sources[i]`` for each ``i`` of ``members``, in order (the
    batches' ``source_index`` is ``i``). Runs of local text files (a folder of code, of scraped
    pages: many small files) are opened and read by a pool of threads, up to _FILES_AHEAD files
    ahead, instead of one at a time; the batches, errors and their order are those of
    :func:`read_source`."""
    members = list(members)
    pool = None
    k = 0
    try:
        while k < len(members):
            if not _pooled(sources[members[k]]):
                yield from read_source(sources[members[k]], members[k], **options)
                k += 1
                continue
            end = k
            while end < len(members) and _pooled(sources[members[end]]):
                end += 1
            if pool is None:
                from concurrent.futures import ThreadPoolExecutor
                pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="neardup-read")
            yield from _pooled_texts(pool, sources, members[k:end], options)
            k = end
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def _pooled(src: Source) -> bool:
    return src.format == "text" and _fs.os_path(src.path) is not None


def _pooled_texts(pool, sources, run: List[int], options: dict) -> Iterator[Batch]:
    from collections import deque

    ahead: "deque" = deque()
    nxt = 0
    while nxt < len(run) or ahead:
        while nxt < len(run) and len(ahead) < _FILES_AHEAD:
            ahead.append((run[nxt], pool.submit(_slurp, sources[run[nxt]])))
            nxt += 1
        si, future = ahead.popleft()
        ctx = _context(sources[si], si, **options)
        yield from _text_document(ctx, future.result())


# --------------------------------------------------------------------------- entry point


def read_source(src: Source, source_index: int = 0, *, text_column: str = "text",
                id_column: Optional[str] = None, score_column: Optional[str] = None,
                on_error: str = "fail", batch_size: int = 8192) -> Iterator[Batch]:
    """Stream the documents of one source as batches of at most ``batch_size``.

    Bad input raises :class:`InputError` (one line naming the file and the line or row) with
    ``on_error="fail"``; with ``on_error="skip"`` it is reported in ``Batch.rejected`` and
    reading goes on. JSONL line numbers in messages are 1-based (like an editor's), rows in
    ``Batch.rows`` / ``rejected`` are 0-based; Parquet and table messages say ``row N``
    (0-based). A text file (one document) read with ``id_column`` gets its name as id, and
    with ``score_column`` a NaN score.
    """
    ctx = _context(src, source_index, text_column=text_column, id_column=id_column, score_column=score_column,
                   on_error=on_error, batch_size=batch_size)
    readers = {"jsonl": _read_jsonl, "parquet": _read_parquet, "text": _read_text, "table": _read_table,
               "csv": _read_csv, "tsv": _read_csv}
    if src.format not in readers:
        raise ValueError(f"unknown source format {src.format!r}")
    return _checked(ctx, readers[src.format])


def _context(src: Source, source_index: int, *, text_column: str = "text", id_column: Optional[str] = None,
             score_column: Optional[str] = None, on_error: str = "fail", batch_size: int = 8192) -> _Ctx:
    """The checked arguments of :func:`read_source` for ``src`` (its text column chosen)."""
    if on_error not in ON_ERROR_MODES:
        raise ConfigError(f"on_error must be 'fail' or 'skip', got {on_error!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")
    candidates = text_columns(text_column)
    if score_column is not None and (score_column in candidates or score_column == id_column):
        raise ConfigError(f"score_column {score_column!r} must differ from the text and id columns")
    if id_column is not None and id_column in candidates:
        raise ConfigError(f"id_column {id_column!r} must differ from text_column")
    if len(candidates) > 1:
        text_column = text_column_of(src, candidates)
    ctx = _Ctx(src, source_index, text_column, id_column, score_column, on_error, int(batch_size))
    return ctx


def text_columns(text_column: str) -> List[str]:
    """The text fields to look for, in order: ``text_column`` split at commas (``"body,text"``);
    a ConfigError for an empty or repeated name."""
    if not isinstance(text_column, str) or not text_column:
        raise ConfigError("text_column must be a non-empty field name")
    names = [n.strip() for n in text_column.split(",")]
    if not all(names):
        raise ConfigError(f"text_column {text_column!r} has an empty field name (names are separated by commas)")
    if len(set(names)) < len(names):
        raise ConfigError(f"text_column {text_column!r} names a field twice")
    return names


def text_column_of(src: Source, candidates: List[str]) -> str:
    """Of several text fields, the first that ``src`` has: a column of a Parquet or CSV / TSV
    file or of a table, a field of a JSONL file's first record (the first one otherwise, which
    its reader then reports missing). A text file has no fields: the first."""
    try:
        if src.format == "table":
            names = src.table.column_names
        elif src.format == "parquet":
            names = parquet_file(src.path).schema_arrow.names
        elif src.format in ("csv", "tsv"):
            names = csv_header(src)
        elif src.format == "jsonl":
            head = _fs.head(src.path, src.compression)
            first = next((ln for ln in head.split(b"\n") if ln.strip()), b"")
            record = json.loads(first) if first else {}
            names = list(record) if isinstance(record, dict) else []
        else:
            names = []
    except (OSError, ValueError, RecursionError, pa.ArrowException):  # unreadable: the reader will say so
        names = []
    return next((c for c in candidates if c in names), candidates[0])


def every_record_has_an_id(sources) -> bool:
    """Whether the inputs carry their own ids: every JSONL, Parquet or CSV / TSV file (or table)
    has an ``id`` field in its first record, its schema or its header (text files have none)."""
    if not sources:
        return False
    for s in sources:
        try:
            if s.format == "parquet":
                names = parquet_file(s.path).schema_arrow.names
            elif s.format == "table":
                names = s.table.column_names
            elif s.format == "jsonl":
                head = _fs.head(s.path, s.compression)
                first = next((line for line in head.split(b"\n") if line.strip()), b"")
                record = json.loads(first)
                names = list(record) if isinstance(record, dict) else []
            elif s.format in ("csv", "tsv"):
                names = csv_header(s)
            else:
                return False
        except (OSError, ValueError, RecursionError, pa.ArrowException):  # unreadable: the reader will say so
            return False
        if "id" not in names:
            return False
    return True


def choose_id_column(sources, id_column: Optional[str]) -> Tuple[Optional[str], bool]:
    """``(id column or None, whether it was found rather than given)``, by the one rule of every
    command and of the API: ``id_column`` when given; ``""`` for positions (``FILE:LINE``,
    ``FILE:ROW``, a text file's path) whatever the input has; else ``id`` when every input has
    such a field (:func:`every_record_has_an_id`); else positions (None)."""
    if id_column == "":
        return None, False
    if id_column is not None:
        return id_column, False
    if every_record_has_an_id(sources):
        return "id", True
    return None, False


def _checked(ctx: _Ctx, reader) -> Iterator[Batch]:
    check_local_file(ctx.src)  # when reading starts, as every other error
    yield from reader(ctx)
