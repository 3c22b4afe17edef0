"""A plain JSONL file cut into byte ranges of whole lines (neardup.io.splits): the ranges cover the
file once, each starts at a line, each knows its first line; reading the ranges one by one gives
the documents, rows, ids and errors of reading the file whole."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup.errors import InputError
from neardup.io import discover, read_source
from neardup.io import splits
from neardup.io.splits import count_span, first_lines, nominal_ranges, split_bytes, splittable

BOM = b"\xef\xbb\xbf"


def spans_of(path, size: int, every: int):
    """(first, stop, first line) of each range, as the read stage makes them."""
    counted = [count_span(str(path), s, e) for s, e in nominal_ranges(size, every)]
    return [(a, b, line) for (a, b, _n), line in zip(counted, first_lines(counted))]


def check_spans(data: bytes, spans) -> None:
    """The ranges cover the file once, in order, each starts a line and knows its first line."""
    assert spans[0][0] == 0 and spans[-1][1] == len(data)
    for (a, b, line), nxt in zip(spans, spans[1:] + [None]):
        assert a <= b
        assert a in (0, len(data)) or data[a - 1:a] == b"\n"  # a line start, or the end (empty)
        assert line == data[:a].count(b"\n")
        if nxt is not None:
            assert b == nxt[0]


def lines_file(lines, crlf=False, last_newline=True, bom=False) -> bytes:
    end = b"\r\n" if crlf else b"\n"
    data = end.join(lines) + (end if last_newline else b"")
    return (BOM if bom else b"") + data


LINE = st.one_of(st.just(b""), st.just(b"  "),
                 st.integers(0, 300).map(lambda n: json.dumps({"id": n, "text": "w" * n}).encode()))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(LINE, min_size=1, max_size=40), crlf=st.booleans(), last_newline=st.booleans(),
       bom=st.booleans(), every=st.integers(1, 400))
def test_ranges_cover_the_file_at_line_starts(tmp_path, lines, crlf, last_newline, bom, every):
    """Guards: a range starting at its nominal offset rather than after the next newline
    (``_line_start`` returning ``nominal``) cuts a line in two; first lines not summed
    (``out.append(0)``) number rows from each range's start."""
    data = lines_file(lines, crlf, last_newline, bom)
    p = tmp_path / "a.jsonl"
    p.write_bytes(data)
    check_spans(data, spans_of(p, len(data), every))


def test_line_exactly_at_a_boundary_and_a_line_spanning_ranges(tmp_path):
    """A range whose nominal start is the first byte of a line starts after that line's end (the
    first newline at or after the start); a line longer than several ranges leaves them empty."""
    first = b'{"text": "aaaa"}'  # 16 bytes + newline: the second line starts at 17
    data = first + b"\n" + b'{"text": "bbbb"}\n' + b'{"text": "' + b"c" * 100 + b'"}\n' + b'{"text": "d' + \
        b"d" * 9 + b'"}\n'
    p = tmp_path / "a.jsonl"
    p.write_bytes(data)
    assert len(data) == 10 * 17  # ten ranges of 17 bytes: range k's nominal start is 17 * k
    spans = spans_of(p, len(data), 17)
    check_spans(data, spans)
    assert spans[0] == (0, 34, 0)  # range 1's nominal start 17 is a line start: that line stays in range 0
    assert any(a == b for a, b, _ in spans)  # empty ranges under the long line
    assert [s for s in spans if s[0] < s[1]][-1] == (147, len(data), 3)  # the last line, its number


def test_a_range_is_counted_in_pieces_of_one_buffer(tmp_path, monkeypatch):
    """A range longer than the buffer it is read into is counted piece by piece, each read into
    the same buffer: every newline once (the last piece short). Guards: counting the whole
    buffer, not the bytes the last read put in (``count_newlines(buf)``), counts the bytes a
    previous read left there."""
    monkeypatch.setattr(splits, "_SCAN_BYTES", 7)
    data = b"".join(b"%d\n" % i + b"x" * (i % 5) for i in range(60))  # text after the last newline
    p = tmp_path / "a.jsonl"
    p.write_bytes(data)
    for start, end in [(0, len(data)), (0, 50), (3, 101), (40, len(data))]:
        first, stop, newlines = count_span(str(p), start, end)
        assert newlines == data[first:stop].count(b"\n")
    assert count_span(str(p), 0, len(data))[2] == 60


def read_all(src, **kw):
    """(rows, texts, ids, rejected rows) of reading ``src`` (with ``span``: one range)."""
    rows, texts, ids, rejected = [], [], [], []
    for b in read_source(src, **kw):
        rows += b.rows.tolist()
        texts += b.text.to_pylist()
        ids += b.ids.to_pylist() if b.ids is not None else []
        rejected += [r for r, _ in b.rejected]
    return rows, texts, ids, rejected


@pytest.mark.parametrize("id_column", [None, "id"])
@pytest.mark.parametrize("crlf,last_newline,bom", [(False, True, False), (True, False, True), (True, True, False)])
def test_reading_the_ranges_reads_the_file(tmp_path, id_column, crlf, last_newline, bom):
    """Guards: the range's byte offset ignored (``f.seek`` left out of raw_chunks) or the
    first line not added to rows (``line0 = 0`` in read_jsonl): rows and texts differ."""
    rng = np.random.default_rng(3)
    lines = [json.dumps({"id": f"x{i}", "text": "w " * int(rng.integers(0, 40))}).encode() for i in range(200)]
    lines[50:50] = [b"", b"   ", b"not json"]
    data = lines_file(lines, crlf, last_newline, bom)
    p = tmp_path / "a.jsonl"
    p.write_bytes(data)
    src = discover([str(p)])[0]
    kw = dict(id_column=id_column, on_error="skip", batch_size=7)
    whole = read_all(src, **kw)
    for every in (97, 500, 4096):
        spans = spans_of(p, len(data), every)
        assert len(spans) > 1
        parts = [read_all(src, span=s, **kw) for s in spans]
        assert tuple(sum((p[k] for p in parts), []) for k in range(4)) == whole


@pytest.mark.parametrize("numbered_from_zero", [False, True])
def test_a_bad_line_in_a_later_range_is_named_by_its_line(tmp_path, numbered_from_zero):
    """The error names the file's line, not the range's (guard: ``line0 = 0`` in read_jsonl),
    also for a range read with its rows numbered from 0 (the newlines before the range counted
    then; guard: ``return 0`` for the base in ReadContext.line_base)."""
    lines = [json.dumps({"text": f"doc {i}"}).encode() for i in range(100)]
    lines[77] = b'{"text": broken'
    data = lines_file(lines)
    p = tmp_path / "a.jsonl"
    p.write_bytes(data)
    src = discover([str(p)])[0]
    spans = spans_of(p, len(data), 300)
    hit = [s for s in spans if s[0] <= data.index(b"broken") < s[1]][0]
    assert hit != spans[0] and hit[0] > 0
    if numbered_from_zero:
        hit = (hit[0], hit[1], None)
    with pytest.raises(InputError, match=r"a\.jsonl:78: broken JSON"):
        read_all(src, span=hit)


@pytest.mark.parametrize("crlf,last_newline,bom", [(False, True, False), (True, False, True)])
def test_ranges_numbered_from_zero_add_up_to_the_file(tmp_path, crlf, last_newline, bom):
    """The read stage's ranges: a span whose first line is None numbers its rows from 0 and its
    last batch holds its lines; :func:`splits.range_lines` sums them into each range's first
    line, which added to its rows gives the file's rows. Guard: ``end.lines = line0`` off by
    the blank lines (``= records``) in read_jsonl, or a range's own lines in its base
    (``base[b] = at.get(si, 0) + lines``): rows differ."""
    rng = np.random.default_rng(5)
    lines = [json.dumps({"id": f"x{i}", "text": "w " * int(rng.integers(0, 40))}).encode() for i in range(150)]
    lines[40:40] = [b"", b"   ", b"not json", b""]
    data = lines_file(lines, crlf, last_newline, bom)
    p = tmp_path / "a.jsonl"
    p.write_bytes(data)
    src = discover([str(p)])[0]
    kw = dict(id_column="id", on_error="skip", batch_size=7)
    whole = read_all(src, **kw)
    for every in (97, 700):
        nominal = nominal_ranges(len(data), every)
        parts, summaries = [], []
        for s, e in nominal:
            first, stop = splits.line_span(str(p), s, e)
            assert (first, stop) == count_span(str(p), s, e)[:2]
            batches = list(read_source(src, span=(first, stop, None), **kw))
            assert batches[-1].lines is not None and all(b.lines is None for b in batches[:-1])
            summaries.append({"lines": batches[-1].lines})
            parts.append(batches)
        bases = splits.range_lines([[0]] * len(nominal), summaries, range(len(nominal)))
        # (an empty range after a last line without a newline may start a line later: no rows)
        assert [base for base, (a, b, _l) in zip(bases, spans_of(p, len(data), every)) if a < b] == \
            [line for a, b, line in spans_of(p, len(data), every) if a < b]
        rows = [r + base for bs, base in zip(parts, bases) for b in bs for r in b.rows.tolist()]
        rejected = [r + base for bs, base in zip(parts, bases) for b in bs for r, _ in b.rejected]
        assert rows == whole[0] and rejected == whole[3]


def test_a_range_without_records_is_no_empty_file(tmp_path):
    """A range of blank lines reports nothing (an 'empty file' there would count the file as
    skipped)."""
    data = b'{"text": "a"}\n' + b"\n" * 100 + b'{"text": "b"}\n'
    p = tmp_path / "a.jsonl"
    p.write_bytes(data)
    src = discover([str(p)])[0]
    spans = spans_of(p, len(data), 30)
    batches = [b for s in spans[1:-1] for b in read_source(src, span=s)]
    assert all(b.skipped is None for b in batches)


def test_what_is_split(tmp_path, monkeypatch):
    """Plain JSONL only: compressed files and walked .json files are read whole;
    $NEARDUP_SPLIT_BYTES sets the range size (a positive integer, else the default)."""
    for name in ("a.jsonl", "b.jsonl.gz", "c.jsonl.zst", "d.json"):
        (tmp_path / name).write_bytes(b"")
    found = {s.path.rsplit("/", 1)[-1]: splittable(s) for s in discover([str(tmp_path)])}
    assert found == {"a.jsonl": True, "b.jsonl.gz": False, "c.jsonl.zst": False, "d.json": False}
    assert splittable(discover([str(tmp_path / "d.json")])[0])  # named: records
    monkeypatch.setenv("NEARDUP_SPLIT_BYTES", "1000")
    assert split_bytes() == 1000
    monkeypatch.setenv("NEARDUP_SPLIT_BYTES", "nope")
    assert split_bytes() == 64 << 20
    assert nominal_ranges(10, 10) == [(0, 10)]
    # equal ranges, an even number of them: no short last range, none read alone at the end
    assert nominal_ranges(25, 10) == [(0, 6), (6, 12), (12, 18), (18, 25)]
    assert nominal_ranges(20, 10) == [(0, 10), (10, 20)]
    assert nominal_ranges(229, 64) == [(0, 57), (57, 114), (114, 171), (171, 229)]
