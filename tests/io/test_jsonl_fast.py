"""The compiled JSONL scanner (neardup.kernels.jsonl) against pyarrow's reader and json.loads.

It must read every record it accepts exactly as the slower path reads it, and hand every block
with anything unusual back (None), so that the slower path's messages stay the messages.
"""

import json

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.errors import InputError
from neardup.io import Source, read_source
from neardup.io.batch import ReadContext
from neardup.io.formats.jsonl import _JsonlParser
from neardup.kernels.jsonl import extract
from neardup.kernels.lines import line_bounds


def _fast(block: bytes, text="text", id_column="id"):
    starts, ends = line_bounds(block)
    return extract(block, starts, ends, np.arange(len(starts)), text, id_column)


def _slow(block: bytes, text="text", id_column="id"):
    """What the reader made of the block before the scanner: pyarrow, else json.loads."""
    ctx = ReadContext(Source(path="x", name="x", relpath="x", format="jsonl"), 0, text, id_column, None, "fail", 100)
    p = _JsonlParser(ctx)
    starts, ends = line_bounds(block)
    good = np.arange(len(starts))
    table = p._arrow(block, len(good), int((ends - starts).max()))
    if table is not None:
        t, ids, _, keep = p._from_arrow(table, block, starts, ends, good, {})
    else:
        t, ids, _, keep = p._line_by_line(block, starts, ends, good, {})
    assert len(keep) == len(good)
    return t, ids


_json_scalars = st.none() | st.booleans() | st.integers(-10**30, 10**30) | st.floats(allow_nan=False, allow_infinity=False) | st.text()
_json_values = st.recursive(_json_scalars, lambda inner: st.lists(inner, max_size=3)
                            | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8)
_ids = st.integers(-(10**18 - 1), 10**18 - 1) | st.text(max_size=12)


@st.composite
def _records(draw):
    n = draw(st.integers(1, 6))
    ascii_only = draw(st.booleans())
    seps = draw(st.sampled_from([(",", ":"), (", ", ": "), (" , ", " : ")]))
    lines = []
    for _ in range(n):
        rec = {"text": draw(st.text(max_size=40)), "id": draw(_ids)}
        extra = draw(st.dictionaries(st.text(max_size=6).filter(lambda k: k not in ("text", "id")), _json_values,
                                     max_size=3))
        items = list(rec.items()) + list(extra.items())
        order = draw(st.permutations(items))
        lines.append(json.dumps(dict(order), ensure_ascii=ascii_only, separators=seps))
    return "\n".join(lines) + "\n"


@pytest.mark.slow  # 300 generated blocks through three readers
@settings(max_examples=300, deadline=None)
@given(_records())
def test_the_scanner_reads_what_pyarrow_and_json_read(block):
    data = block.encode("utf-8")
    fast = _fast(data)
    text, ids = _slow(data)
    if fast is None:
        # only for what it leaves to the slower path on purpose here: a NUL
        assert "\\u0000" in block or "\x00" in block, block
        return
    assert fast[0].type == pa.large_string() and fast[1].type == pa.string()
    assert fast[0].to_pylist() == text.to_pylist()
    assert fast[1].to_pylist() == ids.to_pylist()
    assert fast[0].to_pylist() == [json.loads(line)["text"] for line in block.split("\n")[:-1]]


def test_integer_ids_in_decimal_and_escapes_decoded():
    data = (b'{"id": -0, "text": "a\\"b\\\\c\\/d\\b\\f\\n\\r\\t"}\n'
            b'{"text": "caf\\u00e9 \\u20ac \\ud83d\\ude00", "id": 999999999999999999}\n'
            b'{"text":"\xc3\xa9t\xc3\xa9","id":-123, "x": [1, {"y": [true, false, null, -1.5e+3]}], "z": {}}\n'
            b'  {"text" : "" , "id" : "\\u00e9"}  \r\n'
            b'{"te\\u0078t": "x", "\\u0069d": 5, "\\u00e9": 1}\n')
    text, ids = _fast(data)
    assert text.to_pylist() == ['a"b\\c/d\b\f\n\r\t', "café € \U0001F600", "été", "", "x"]
    assert ids.to_pylist() == ["0", "999999999999999999", "-123", "é", "5"]
    assert _fast(data, id_column=None)[1] is None


@pytest.mark.parametrize("line", [
    b'{"text": "a", "id": 1, "x": NaN}',           # json.loads accepts NaN, pyarrow does not
    b'{"text": "a", "id": 1,}',                    # trailing comma
    b'{"text": "a", "id": 1} x',                   # trailing garbage
    b'{"text": 5, "id": 1}',                       # text not a string
    b'{"text": null, "id": 1}',
    b'{"id": 1}',                                  # no text
    b'{}',
    b'{"text": "a", "text": "b", "id": 1}',        # the text twice
    b'{"text": "a", "id": 1, "id": 2}',
    b'{"te\\u0078t": "a", "text": "b", "id": 1}',  # the text twice (once escaped)
    b'{"' + b"\\u00e9" * 130 + b'": 1, "text": "b", "id": 1}',  # a key over 256 bytes with escapes
    b'{"text": "a\\u0000b", "id": 1}',             # NUL
    b'{"text": "a\\ud800b", "id": 1}',             # unpaired high surrogate
    b'{"text": "a\\udc00", "id": 1}',              # unpaired low surrogate
    b'{"text": "a\\ud83d\\u0041", "id": 1}',       # high surrogate, then no low one
    b'{"text": "a\\x", "id": 1}',                  # bad escape
    b'{"text": "a\\u12g4", "id": 1}',
    b'{"text": "a\tb", "id": 1}',                  # a raw control character
    b'{"text": "a", "id": 1.0}',                   # a float id
    b'{"text": "a", "id": 1e3}',
    b'{"text": "a", "id": 1234567890123456789}',   # 19 digits
    b'{"text": "a", "id": true}',
    b'{"text": "a", "id": null}',
    b'{"text": "a", "id": [1]}',
    b'{"text": "a"}',                              # no id (asked for)
    b'{"text": "a", "id": 01}',                    # a leading zero
    b'{"text": "a", "id": -}',
    b'{"text": "a", "id": 1, "x": [1 2]}',
    b'{"text": "a", "id": 1, "x": {"k" 1}}',
    b'{"text": "a", "id": 1, "x": {1: 2}}',
    b'{"text": "a", "id": 1, "x": [1, ]}',
    b'{"text": "a", "id": 1, "x": tru}',
    b'{"text": "a", "id": 1, "x": 1.}',
    b'{"text": "a", "id": 1, "x": 1e}',
    b'{"text": "a", "id": 1, "x": ' + b"[" * 65 + b"1" + b"]" * 65 + b"}",  # deeper than 64
    b'\xef\xbb\xbf{"text": "a", "id": 1}',         # a byte order mark
    b'["text", "a"]',
    b'"text"',
    b'{"text": "a", "id": 1',
    b'{"text": "a, "id": 1}',
])
def test_anything_unusual_goes_back_to_the_slower_path(line):
    good = b'{"text": "fine", "id": 7}\n'
    assert _fast(good * 3) is not None
    assert _fast(good + line + b"\n" + good) is None


def test_nesting_up_to_the_limit_is_read():
    deep = b'{"text": "a", "id": 1, "x": ' + b"[" * 64 + b"1" + b"]" * 64 + b', "y": ' + b'{"k":' * 64 + b"1" + \
        b"}" * 64 + b"}\n"
    text, ids = _fast(deep)
    assert text.to_pylist() == ["a"] and ids.to_pylist() == ["1"]


def test_the_reader_uses_it_and_still_names_the_bad_line(tmp_path):
    p = tmp_path / "c.jsonl"
    good = [json.dumps({"id": i, "text": f"document number {i} \u00e9"}) for i in range(50)]
    p.write_text("\n".join(good) + "\n")
    src = Source(path=str(p), name="c.jsonl", relpath="c.jsonl", format="jsonl")
    batches = list(read_source(src, id_column="id"))
    assert sum(len(b) for b in batches) == 50
    assert batches[0].text[3].as_py() == "document number 3 \u00e9" and batches[0].ids[3].as_py() == "3"
    p.write_text("\n".join(good[:20] + ['{"id": 20, "text": 5}'] + good[21:]) + "\n")
    with pytest.raises(InputError, match=r"^c\.jsonl:21: text field 'text' is not a string \(got int\)$"):
        list(read_source(src, id_column="id"))


def test_plain_runs_skipped_64_bytes_at_a_time_stop_at_every_special_byte():
    """The strings are scanned 64 bytes at a time (kernels.lanes.string_stop): a quote, a
    backslash escape or a control character (escaped) at any offset of a vector, and a raw
    control byte anywhere, must be seen; near the end of the block (less than a vector left)
    the scan goes on byte by byte."""
    lines, texts = [], []
    for k in range(0, 150, 3):
        for special in ('"', "\\", "\n", "\x1f", "é", "\U0001F600"):
            t = "a" * k + special + "b" * (140 - k) + special * (k % 3)
            texts.append(t)
            lines.append(json.dumps({"id": k, "text": t}, ensure_ascii=bool(k % 2)))
    for lead in range(0, 64, 7):  # the block's start shifted against the vectors
        data = (" " * lead + ("\n" + " " * lead).join(lines) + "\n").encode("utf-8")
        got = _fast(data)
        assert got is not None and got[0].to_pylist() == texts
    for k in range(150):  # a raw control byte at every offset sends the block to the slower path
        bad = ('{"id": 1, "text": "' + "a" * k + "\x01" + "b" * 140 + '"}').encode()
        assert _fast(bad + b"\n") is None


@pytest.mark.slow
def test_a_small_input_does_not_compile_the_scanner(tmp_path):
    """Compiling the scanner takes ~10 s once per version: a first run on a small input (a
    newcomer's) reads it with pyarrow instead; a large input, or a compiled scanner, uses it."""
    import os
    import subprocess
    import sys

    from helpers import SRC

    p = tmp_path / "c.jsonl"
    p.write_text("".join(json.dumps({"id": i, "text": f"words {i}"}) + "\n" for i in range(30)))
    code = f"""
import sys
from neardup.io import Source, read_source
from neardup.kernels import jsonl as J
src = Source(path={str(p)!r}, name="c.jsonl", relpath="c.jsonl", format="jsonl")
n = sum(len(b) for b in read_source(src, id_column="id"))
print(n, J.worth_it(10), J.worth_it(J.COMPILE_FROM_BYTES), bool(J._scan_block.signatures))
"""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), PYTHONPATH=SRC)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["30", "False", "True", "False"]
    for value, want in (("1", "True True"), ("0", "False False")):  # the environment decides
        check = "from neardup.kernels import jsonl as J; print(J.worth_it(10), J.worth_it(J.COMPILE_FROM_BYTES))"
        r = subprocess.run([sys.executable, "-c", check], env=dict(env, NEARDUP_JSONL_SCANNER=value),
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0 and r.stdout.strip() == want, r.stdout + r.stderr


def test_text_buffers_used_again_only_once_nothing_sees_them(monkeypatch):
    """A block's texts are gathered into a kept buffer that no array still sees: the texts of a
    block still held stay as they were while later blocks are read; once they are dropped, their
    buffer is the next block's."""
    from neardup.kernels import jsonl as scanner
    monkeypatch.setattr(scanner, "text_buffers", scanner.TextBuffers())
    one = b'{"text": "first block \\u00e9", "id": 1}\n{"text": "more", "id": 2}\n'
    two = b'{"text": "second", "id": "a"}\n{"text": "x\\ny", "id": 3}\n'
    held, _ = _fast(one)
    want = held.to_pylist()
    for _ in range(3):
        other, _ = _fast(two)
        assert held.to_pylist() == want and other.to_pylist() == ["second", "x\ny"]
    first = np.frombuffer(held.buffers()[2], np.uint8).ctypes.data
    kept = len(scanner.text_buffers._free)
    assert kept == 3  # the held block's, and two taken in turn by the other (each held while the next was read)
    del held, other
    again, _ = _fast(two)
    assert again.to_pylist() == ["second", "x\ny"]
    assert np.frombuffer(again.buffers()[2], np.uint8).ctypes.data == first  # the first kept buffer, free now
    assert len(scanner.text_buffers._free) == kept
    scanner.text_buffers.clear()
    assert scanner.text_buffers._free == []


def _two_passes(block: bytes, text="text", id_column="id"):
    """The lines' bounds, ASCII flag, and extract's texts and ids of a block, as two passes make them."""
    from neardup.kernels.lines import line_bounds_ascii
    starts, ends, is_ascii = line_bounds_ascii(block)
    fast = extract(block, starts, ends, np.arange(len(starts)), text, id_column)
    return starts, ends, is_ascii, fast


_BLOCKS = [
    b'{"id": 1, "text": "a b c"}\n{"id": 2, "text": "d e"}\n',
    b'{"id": 1, "text": "no newline at the end"}',
    b'{"id": "x", "text": "crlf"}\r\n{"text": "spaces after", "id": 7}   \n',
    '{"id": 3, "text": "caf\u00e9 na\u00efve"}\n{"id": 4, "text": "plain"}\n'.encode(),
    b'{"id": 5, "text": "esc \\"q\\" \\u00e9 \\n"}\n',
    # lines longer than a vector, a non-ASCII byte past the first 64 of a line and in its last bytes
    ('{"id": 6, "text": "' + "w " * 70 + '\u00e9"}\n{"id": 7, "text": "' + "v " * 40 + '"}\n').encode(),
    ('{"id": 8, "text": "' + "u " * 40 + '"}\n{"id": 9, "text": "\u00e9"}').encode(),
    "".join(json.dumps({"id": i, "text": f"t{i}"}) + "\n" for i in range(70)).encode(),  # the room for lines grown
]


@pytest.mark.parametrize("block", _BLOCKS)
def test_scan_block_finds_the_lines_and_spans_of_two_passes(block):
    from neardup.kernels.jsonl import scan_block
    starts, ends, is_ascii, (text, ids) = _two_passes(block)
    for data in (block, bytearray(block)):
        scanned = scan_block(data, "text", "id")
        assert scanned.stop is None and len(scanned) == len(starts)
        assert scanned.ascii == is_ascii
        t, i = scanned.extract()
        assert t.to_pylist() == text.to_pylist() and i.to_pylist() == ids.to_pylist()


@pytest.mark.parametrize("block, stop", [
    (b"", 0), (b"\n", 0), (b'{"id": 1, "text": "a"}\n\n{"id": 2, "text": "b"}\n', 1),
    (b'{"id": 1, "text": "a"}\n{"id": 2}\n', 1), (b'{"id": 1, "text": "a"}\n[1]\n', 1),
    (b'{"id": 1, "text": "a"}\n{"id": 2, "text": "b"}\n{"id": 3, "text": "c"},\n{"id": 4}\n', 2)])
def test_scan_block_hands_back_the_first_line_not_a_plain_record(block, stop):
    from neardup.kernels.jsonl import scan_block
    scanned = scan_block(block, "text", "id")
    assert scanned.stop == stop and len(scanned) == 0


def _parse(block: bytes, fused: bool, monkeypatch, text_spans=False):
    from neardup.kernels import jsonl as scanner
    ctx = ReadContext(Source(path="x", name="x", relpath="x", format="jsonl"), 0, "text", "id", None, "skip", 100)
    ctx.text_spans = text_spans
    p = _JsonlParser(ctx)
    p.fast = True
    with monkeypatch.context() as m:
        if not fused:
            m.setattr(scanner, "scan_block", lambda *a: None)
        n_lines, n_records, text, rows, ids, scores, bad, bounds = p.parse(block, 10)
    texts = text.to_pylist()
    lines = [block[a:e] for a, e in bounds.tolist()]  # each document's line (the write stage copies them)
    return n_lines, n_records, texts, rows.tolist(), ids.to_pylist(), scores, bad, p.seen_record, lines


@pytest.mark.parametrize("block", _BLOCKS + [
    b'{"id": 1, "text": "a"}\n\n{"id": 2, "text": "b"}\n',  # a blank line: the two passes
    b'{"id": 1, "text": "a"}\n{"id": 2}\n{"id": 3, "text": "c"}\n',  # a bad line
    b'{"id": 1, "text": "ok \xc3\xa9"}\n{"id": 2, "text": "bad \xff byte"}\n',  # invalid UTF-8
    b'{"id": 1, "text": "' + b"x" * 80 + b'"}\n{"id": 2, "text": "' + b"y" * 70 + b'\xe9' + b"z" * 90 + b'"}\n',
])
@pytest.mark.parametrize("text_spans", [False, True])
def test_a_block_parses_the_same_with_its_lines_found_while_scanned(block, text_spans, monkeypatch):
    # the fused pass (kernels.jsonl.scan_block) or the line bounds first, then the scan: the same
    # lines, rows, texts, ids and rejected lines (invalid UTF-8 found though the block is scanned)
    assert _parse(block, True, monkeypatch, text_spans) == _parse(block, False, monkeypatch, text_spans)


@pytest.mark.parametrize("block, extracted", [
    (b'{"id": 1, "text": "a"}\n{"id": 2}\n{"id": 3, "text": "c"}\n', False),  # extract would stop there too
    (b'{"id": 1, "text": "a"}\n \n{"id": 3, "text": "c"}\n', True),  # a blank line: the others are records
])
def test_a_block_scan_block_stopped_in_is_extracted_only_past_a_blank_line(block, extracted, monkeypatch):
    from neardup.kernels import jsonl as scanner
    calls = []
    real = scanner.extract
    monkeypatch.setattr(scanner, "extract", lambda *a, **k: calls.append(real(*a, **k)) or calls[-1])
    _, _, texts, rows, _, _, bad, _, lines = _parse(block, True, monkeypatch)
    assert texts == ["a", "c"] and rows == [10, 12]
    assert lines == [b'{"id": 1, "text": "a"}', b'{"id": 3, "text": "c"}']
    assert [c is not None for c in calls] == ([True] if extracted else [])


def test_a_line_of_a_gigabyte_or_more_goes_to_json_loads():
    # before: pyarrow's block size (twice the longest line) overflowed its int32 for a line of
    # 1 GiB or more (a sparse .jsonl of NUL bytes): an OverflowError, a traceback (exit 1)
    ctx = ReadContext(Source(path="x", name="x", relpath="x", format="jsonl"), 0, "text", "id", None, "fail", 100)
    assert _JsonlParser(ctx)._arrow(b'{"id": 1, "text": "a"}\n', 1, 1 << 30) is None
