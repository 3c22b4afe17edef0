"""Reading JSON Lines (plain, gzip or zstd compressed), with bounded memory.

JSONL is read in blocks of ~16 MB of whole lines (:func:`neardup.io._streams.iter_blocks`). A
block of plain records (the usual case) is read by a compiled scanner (:mod:`neardup.kernels.jsonl`:
text and id spans straight into Arrow buffers; see :func:`neardup.kernels.jsonl.worth_it` for
when); any other block is parsed by ``pyarrow.json`` with an explicit schema of only the needed
fields, and a block pyarrow cannot parse (or whose rows do not line up with its lines) is parsed
again line by line with ``json.loads``, which names the bad lines. Every non-blank line ends up
either as a document or as a rejected entry; a line nested more than MAX_NESTING (512) deep is
rejected whichever parser reads its block (pyarrow's takes any depth, json.loads fails near
1,000, the scanner takes 64).

The kept records of a JSONL file are written by :mod:`.jsonl_kept`.
"""

from __future__ import annotations

import json
import math
import os
from codecs import BOM_UTF8
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.json as pj

from ...kernels.arrays import arrow, cast_strings, to_numpy
from .._streams import BufferPool, StreamError, block_buffers, iter_blocks
from ..batch import EMPTY_FILE, NO_TEXT_FIELD, NOT_RECORDS, Batch, ReadContext
from ..opening import cannot_read
from ..sources import COMPRESSED_SUFFIXES, Source
from ..storage import fs as _fs


def _too_deep() -> str:
    """The reason of a line nested over :data:`neardup.kernels.lines.MAX_NESTING` deep."""
    from ...kernels.lines import MAX_NESTING
    return f"JSON nested too deeply (more than {MAX_NESTING} levels of arrays and objects)"


def _type_name(v: Any) -> str:
    return type(v).__name__


def _check_record(obj: Any, ctx: ReadContext) -> Tuple[Optional[str], Any, Any, float]:
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
        if isinstance(v, bool) or not isinstance(v, (str, int)):  # 1.0 beside 1 would be two ids, or one
            shown = _type_name(v) + (f" {v!r}" if isinstance(v, (float, bool)) else "")
            return f"id field {ic!r} is not a string or an integer (got {shown})", None, None, math.nan
        if isinstance(v, str):
            if not _encodable(v):
                return (f"id field {ic!r} is not valid Unicode (an unpaired surrogate \\u escape)",
                        None, None, math.nan)
            idv = v
        else:
            idv = str(v)
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
        return _too_deep(), None


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

    def __init__(self, ctx: ReadContext):
        from ...kernels import jsonl as scanner
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
        self.fast = scanner.worth_it(size)

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
        if block_size > (1 << 31) - 1:  # pyarrow's block size is an int32: json.loads reads such a line
            return None
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
        """``(n_lines, n_records, text, rows, ids, scores, bad, bounds)`` of one block; ``bounds``:
        int64 (n, 2), each document's line in the block, its start and its end (the newline's
        position, or the block's end)."""
        from ...kernels import jsonl as scanner
        from ...kernels.lines import blank_lines, deep_lines, line_bounds_ascii
        ctx = self.ctx
        # the plain case, every line a simple record: its lines found and scanned in one pass
        scanned = (scanner.scan_block(data, ctx.text_column, ctx.id_column)
                   if self.fast and ctx.score_column is None else None)
        stop = None if scanned is None else scanned.stop  # its first line not a simple record
        if scanned is not None and stop is None and (scanned.ascii or _utf8_ok(data)):
            n = len(scanned)  # at least one: the block is not empty
            self.seen_record = True
            text, ids = scanned.extract(in_place=ctx.text_spans)
            ends = scanned.line_ends()
            bounds = np.empty((n, 2), np.int64)
            bounds[0, 0] = 0
            bounds[1:, 0] = ends[:-1] + 1
            bounds[:, 1] = ends
            return n, n, text, np.arange(line0, line0 + n, dtype=np.int64), ids, None, {}, bounds
        starts, ends, is_ascii = line_bounds_ascii(data)  # ASCII: valid UTF-8, no check needed
        n_lines = len(starts)
        blank = blank_lines(data, starts, ends)
        good_mask = np.ones(n_lines, dtype=bool)
        good_mask[blank] = False
        bad: Dict[int, str] = {}  # line index in the block -> reason
        if not is_ascii and not _utf8_ok(data):
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
        # the line scan_block stopped at, unless a blank one, would stop extract too
        stopped = stop is not None and good_mask[stop]
        if self.fast and len(good) and not bad and ctx.score_column is None and not stopped:
            # every line but the blank ones a simple record: compiled, no Python objects
            fast = scanner.extract(data, starts, ends, good, ctx.text_column, ctx.id_column,
                                   in_place=ctx.text_spans)
        if fast is not None:
            text, ids = fast
        elif len(good):
            # the scanner takes no line nested over 64 deep; here none over MAX_NESTING, whichever
            # parser would read it (pyarrow's takes any depth, json.loads fails near 1,000)
            deep = deep_lines(data, starts, ends, good)
            if len(deep):
                for i in deep.tolist():
                    bad[i] = _too_deep()
                good_mask[deep] = False
                good = np.flatnonzero(good_mask)
        if fast is None and len(good):
            feed = data if not bad else b"\n".join(data[starts[i]:ends[i]] for i in good.tolist())
            longest = int((ends - starts).max())
            # pyarrow skips a byte order mark at the start of its input (json.loads does not:
            # the file's own BOM is already gone, so one here starts a line of a later block)
            table = None if feed.startswith(BOM_UTF8) else self._arrow(feed, len(good), longest)
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
        return n_lines, n_records, text, rows, ids, scores, bad_rows, np.stack((starts[keep], ends[keep]), axis=1)

    def _from_arrow(self, table: pa.Table, data, starts, ends, good, bad):
        ctx = self.ctx
        text = table.column(ctx.text_column).combine_chunks()
        ids = table.column(ctx.id_column).combine_chunks() if ctx.id_column is not None else None
        scores = (table.column(ctx.score_column).combine_chunks()
                  if ctx.score_column is not None else None)
        need = None
        for arr in (text, ids, scores):
            if arr is not None and arr.null_count:  # (is_null imports pyarrow.compute: only here)
                m = to_numpy(arr.is_null())
                need = m if need is None else need | m
        positions = [] if need is None else np.flatnonzero(need).tolist()
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
        if ids is not None:
            ids = cast_strings(ids, pa.string())
        np_scores = None
        if scores is not None:
            np_scores = to_numpy(scores).astype(np.float64, copy=False)
        return cast_strings(text, pa.large_string()), ids, np_scores, keep

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
    for ext in COMPRESSED_SUFFIXES:
        if name.endswith(ext):
            name = name[: -len(ext)]
    return src.walked and name.endswith(".json")


def _not_records(ctx: ReadContext, data: bytes, document: bool) -> Optional[str]:
    """Why a walked file whose first block is ``data`` holds no records of the corpus, or None.
    A ``.json`` file (``document``): its first non-blank line is not a JSON object with the text
    field; a ``.jsonl`` one: its first record has no text field (a data file of a code tree, not
    of the corpus). Such a file is skipped and counted, as a binary file is; a later bad line is a
    bad record as in any file."""
    first = next((ln for ln in data.split(b"\n") if ln.strip()), None)
    if first is None:
        return None
    try:
        record = json.loads(first)
    except (ValueError, RecursionError):
        return f"{NOT_RECORDS} (line 1 is not a JSON object: one JSON document?)" if document else None
    if not isinstance(record, dict):
        return f"{NOT_RECORDS} (line 1 is a JSON {type(record).__name__}, not an object)" if document else None
    if ctx.text_column not in record:
        if document:
            return f"{NOT_RECORDS} (line 1 has no field {ctx.text_column!r})"
        return f"{NO_TEXT_FIELD} (line 1 has no field {ctx.text_column!r})"
    return None


def read_jsonl(ctx: ReadContext) -> Iterator[Batch]:
    """A JSONL file: one document a record line, rows numbered by line (blank lines counted);
    with ``ctx.span``, one range of it (lines numbered as in the whole file, or, with a first
    line None, from the range's first line, its last batch saying how many it holds: ``Batch.lines``;
    a range without records is no empty file)."""
    src = ctx.src
    parser = _JsonlParser(ctx)
    span = ctx.span
    line0 = 0 if span is None or span[2] is None else span[2]
    records = 0
    # the blocks of a plain local file are read into buffers used again: each is put back once
    # parsed (a buffer still seen is never reused). The read stage's texts left in their block
    # (``text_spans``) keep it seen until hashed, a few blocks later: a range of a split file
    # (~4 blocks) would get none back from a pool of its own, so they go in the pool every file
    # and range of the process shares, which the read stage empties at its end; elsewhere what
    # the parse makes is copied out of the block, which is free again at once: a pool of its own
    recycle = block_buffers if ctx.text_spans else BufferPool()
    blocks = iter_blocks(src.path, src.compression, span=None if span is None else span[:2], recycle=recycle)
    check = src.walked and span is None
    document = _json_document(src)
    at = _first_line_offset(src, span) if ctx.text_spans else None  # the file offset of the next block
    try:
        while True:
            try:
                data = next(blocks)
                if check:
                    check = False
                    why = _not_records(ctx, data, document)
                    if why is not None:
                        yield from ctx.skipped(why)
                        return
            except StopIteration:
                break
            except StreamError as e:
                yield from ctx.problem(e.describe(src.compression or "", line0 + ctx.line_base()))
                return
            except OSError as e:
                raise cannot_read(src, e) from None
            n_lines, n_records, text, rows, ids, scores, bad, bounds = parser.parse(data, line0)
            if at is not None:
                bounds += at
                at += len(data)
            if isinstance(data, bytearray):
                recycle.put(data)
            data = None
            line0 += n_lines
            records += n_records
            yield from ctx.emit(text, rows, ids, scores, bad, None if at is None else bounds)
    finally:
        blocks.close()
    if records == 0 and span is None:
        yield from ctx.skipped(EMPTY_FILE)
    if span is not None and span[2] is None:
        end = ctx.empty([])
        end.lines = line0
        yield end


def _first_line_offset(src: Source, span) -> Optional[int]:
    """Where the blocks of an uncompressed local file start in it, less a UTF-8 byte order mark
    at its start (:func:`iter_blocks` drops it; the lines' offsets are those of the file without
    it: ``Batch.line_bounds``): 0, or the first byte of a range after the first (the file
    looked at for a mark: a large file's range, not each of many small files); None for another
    file."""
    local = _fs.os_path(src.path)
    if src.compression is not None or local is None:
        return None
    if span is None or span[0] == 0:
        return 0
    try:
        with open(local, "rb") as f:
            return span[0] - (len(BOM_UTF8) if f.read(3) == BOM_UTF8 else 0)
    except OSError:
        return None  # the blocks' reading says why


def field_names(src: Source) -> List[str]:
    """The fields of the first record of a JSONL file (none when it has no records or its first
    line is not an object); an error reading or parsing it is raised. The first record is read
    whole, however long (a head of 1 MiB, doubled until it holds the record's end): a first record
    longer than a fixed probe would hide its ``id`` field and switch every input to positional
    ids without a word."""
    size = 1 << 20
    while True:
        head = _fs.head(src.path, src.compression, size)
        lines = head.split(b"\n")
        complete = len(head) < size  # the whole file: its last line is complete too
        first = next((ln for i, ln in enumerate(lines) if ln.strip() and (complete or i < len(lines) - 1)), None)
        if first is not None or complete:
            break
        size *= 2
    record = json.loads(first) if first else {}
    return list(record) if isinstance(record, dict) else []
