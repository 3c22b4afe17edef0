"""Hostile or broken input met by the readers (neardup.io): a CSV quote never closed, CSV records
of the wrong width, JSON nested a thousand deep, file names that are not UTF-8, credentials in input
URLs, and inputs that are no regular files (named pipes, devices, folders, link loops). Each is one
line naming the file (and the row or line), exit 2, or with --on-error skip a rejected record whose
counts add up; never a traceback, a hang, a silently merged record or a printed password."""

from __future__ import annotations

import csv
import functools
import http.server
import io
import json
import os
import socket
import stat
import threading
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup.errors import InputError
from neardup.io import Source, discover, read_source
from neardup.io.batch import one_line
from neardup.io.formats import csv as csv_format
from neardup.io.formats import jsonl as jsonl_format
import io_inputs
from helpers import fail_message, run_in_process as neardup


# --------------------------------------------------------------------------- helpers


def one_error_line(err: str) -> str:
    """The single ``neardup: error: ...`` line of a failed run (no traceback, nothing else)."""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("neardup: error: "), err
    assert "Traceback" not in err
    return lines[0][len("neardup: error: "):]


def counts(out: Path) -> dict:
    c = json.loads((out / "stats.json").read_text())["counts"]
    assert c["input"] == c["kept"] + c["removed"] + c["rejected"]
    return c


def rejected(out: Path):
    return pq.read_table(out / "rejected.parquet").to_pylist()


def read_all(src, **kw):
    """(texts, rows, rejected) of a whole source."""
    texts, rows, _ids, _scores, rejected = io_inputs.read_all(src, **kw)
    return texts, rows, rejected


def source(path: Path) -> Source:
    """The source of a file, named by its base name (as the messages then say)."""
    from neardup.io.sources import detect_format

    fmt, comp = detect_format(path.name)
    return Source(path=str(path), name=path.name, relpath=path.name, format=fmt, compression=comp)


WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()


def doc(i: int) -> str:
    return " ".join(WORDS[(i + k) % len(WORDS)] + str(i) for k in range(8))


# --------------------------------------------------------------------------- 1. a CSV quote never closed


def test_csv_unterminated_quote_fails_naming_row_and_line(tmp_path):
    # before: the open quote took the following records into one, exit 0, the others gone
    (tmp_path / "u.csv").write_text(
        f'id,text\n0,{doc(0)}\n1,"{doc(1)}\n2,{doc(2)}\n3,{doc(3)}\n')
    code, _, err = neardup("dedup", "u.csv", "-o", "out", "-q", cwd=tmp_path)
    assert code == 2
    msg = one_error_line(err)
    assert msg.startswith("u.csv: row 1: unterminated quoted field: the quote opened on line 3 is never "
                          "closed"), msg
    assert "lines 3-5" in msg
    assert not (tmp_path / "out" / "stats.json").exists()


@pytest.mark.parametrize("header,record,tail", [
    ("id,text", '1,"{t}', ""),                        # in the last column, text column
    ("id,text,meta", '1,"{t},m', ""),                 # in a middle column: the record loses fields
    ("id,text,meta", '1,{t},"m', ""),                 # in a column not read
    ("text", '"{t}', ""),                             # a file of one column
    ("id,text", '1,"{t}', "no final line break"),
    ("id,text", '1,"{t}', "crlf"),
])
def test_csv_unterminated_quote_skip_rejects_one_record(tmp_path, header, record, tail):
    ncols = header.count(",") + 1
    good = [doc(i) if ncols == 1 else ",".join([str(i), doc(i), "m"][:ncols]) for i in (0, 2)]
    lines = [header, good[0], record.format(t=doc(1)), good[1], "last line"]
    nl = "\r\n" if tail == "crlf" else "\n"
    data = nl.join(lines) + ("" if tail == "no final line break" else nl)
    (tmp_path / "u.csv").write_bytes(data.encode())
    code, _, err = neardup("dedup", "u.csv", "-o", "out", "-q", "--on-error", "skip", cwd=tmp_path)
    assert code == 0, err
    c = counts(tmp_path / "out")
    assert (c["input"], c["kept"], c["rejected"]) == (2, 1, 1)
    (rej,) = rejected(tmp_path / "out")
    assert rej["source"] == "u.csv" and rej["row"] == 1
    assert rej["reason"].startswith("unterminated quoted field: the quote opened on line 3 is never closed")
    assert "lines 3-5" in rej["reason"]
    with open(tmp_path / "out" / "kept" / "u.csv", newline="", encoding="utf-8") as f:
        kept = list(csv.reader(f))
    assert len(kept) == 2 and doc(0) in kept[1]


def test_csv_one_column_file_reads_as_before(tmp_path):
    # the reader's end-of-file record is one field: in a file of one column it is a valid row,
    # never a document
    (tmp_path / "one.csv").write_text("text\n" + "\n".join(doc(i) for i in range(5)) + "\n")
    texts, rows, rej = read_all(source(tmp_path / "one.csv"))
    assert texts == [doc(i) for i in range(5)] and rows == list(range(5)) and rej == []
    (tmp_path / "head.csv").write_text("text\n")
    assert [b.skipped for b in read_source(source(tmp_path / "head.csv"))] == ["empty file (no records)"]
    (tmp_path / "head2.csv").write_text("id,text")
    assert [b.skipped for b in read_source(source(tmp_path / "head2.csv"))] == ["empty file (no records)"]


def test_csv_closed_quote_at_the_end_is_fine(tmp_path):
    (tmp_path / "a.csv").write_text('id,text\n1,"a ""quoted"" word"\n2,"two\nlines"')
    texts, rows, rej = read_all(source(tmp_path / "a.csv"))
    assert texts == ['a "quoted" word', "two\nlines"] and rows == [0, 1] and rej == []


@pytest.mark.parametrize("mode", ["fail", "skip"])
def test_csv_unterminated_quote_longer_than_a_block(tmp_path, monkeypatch, mode):
    # what follows the quote is longer than pyarrow's block: it gave up with "a record longer than
    # 32 MB" after the last whole block, the records before the quote partly unread
    monkeypatch.setattr(csv_format, "_CSV_BLOCK", 1 << 12)  # the rest spans more than two blocks
    lines = ["id,text"] + [f"{i},{doc(i)}" for i in range(2000)]
    lines[301] = f'300,"{doc(300)}'
    (tmp_path / "big.csv").write_text("\n".join(lines) + "\n")
    src = source(tmp_path / "big.csv")
    if mode == "fail":
        msg = fail_message(src)
        assert msg.startswith("big.csv: row 300: unterminated quoted field: the quote opened on line 302"), msg
        assert "lines 302-2001" in msg
        return
    lines[11] = "10,x,y"  # reported once, though read twice
    (tmp_path / "big.csv").write_text("\n".join(lines) + "\n")
    texts, rows, rej = read_all(src, on_error="skip", batch_size=7)
    assert rows == list(range(299)) and texts == [doc(i) for i in range(300) if i != 10]
    assert rej[0] == (10, "a record of 3 fields, the header has 2: '10,x,y'")
    assert len(rej) == 2 and rej[1][0] == 300 and "line 302 is never closed" in rej[1][1]


def test_csv_unterminated_quote_gzip(tmp_path):
    import gzip

    data = f'id,text\n0,{doc(0)}\n1,"{doc(1)}\n2,{doc(2)}\n'.encode()
    (tmp_path / "u.csv.gz").write_bytes(gzip.compress(data, mtime=0))
    msg = fail_message(source(tmp_path / "u.csv.gz"))
    assert msg.startswith("u.csv.gz: row 1: unterminated quoted field: the quote opened on line 3"), msg


# --------------------------------------------------------------------------- 2. CSV records of the wrong width


def test_csv_field_count_error_names_the_row(tmp_path):
    # before: "not a readable CSV file (CSV parse error: ...)" and `row None` in rejected.parquet
    rows = ["id,text", f"0,{doc(0)}", "1,x,y", f"2,{doc(2)}", "3", f"4,{doc(4)}", f"5,{doc(5)}"]
    (tmp_path / "w.csv").write_text("\n".join(rows) + "\n")
    code, _, err = neardup("dedup", "w.csv", "-o", "o1", "-q", cwd=tmp_path)
    assert code == 2
    assert one_error_line(err) == "w.csv: row 1: a record of 3 fields, the header has 2: '1,x,y'"
    code, _, err = neardup("dedup", "w.csv", "-o", "o2", "-q", "--on-error", "skip", cwd=tmp_path)
    assert code == 0, err
    c = counts(tmp_path / "o2")
    assert (c["input"], c["kept"], c["rejected"]) == (6, 4, 2)
    assert rejected(tmp_path / "o2") == [
        {"source": "w.csv", "row": 1, "reason": "a record of 3 fields, the header has 2: '1,x,y'"},
        {"source": "w.csv", "row": 3, "reason": "a record of 1 fields, the header has 2: '3'"},
    ]
    kept = (tmp_path / "o2" / "kept" / "w.csv").read_text()
    assert [r[0] for r in csv.reader(io.StringIO(kept))] == ["id", "0", "2", "4", "5"]


_FIELD = st.text(alphabet=st.sampled_from(list('ab ,"\né')), max_size=8)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ncols=st.integers(1, 3),
       records=st.lists(st.tuples(st.integers(-1, 1), st.lists(_FIELD, min_size=3, max_size=3)), max_size=25),
       crlf=st.booleans(),
       tail=st.one_of(st.none(), st.text(alphabet=st.sampled_from(list("ab ,\n")), max_size=300)),
       block=st.sampled_from([256, 1 << 12, 32 << 20]))
def test_property_csv_every_record_accounted_for(tmp_path, monkeypatch, ncols, records, crlf, tail, block):
    """Records written by Python's csv module, some of the wrong width, maybe a last one whose quote
    is never closed: the reader gives the good ones in order (rows counted without the bad ones)
    and rejects each bad one at its place among the records."""
    monkeypatch.setattr(csv_format, "_CSV_BLOCK", block)
    names = ["id", "text", "meta"][:ncols] if ncols > 1 else ["text"]
    buf = io.StringIO(newline="")
    w = csv.writer(buf, lineterminator="\r\n" if crlf else "\n")
    w.writerow(names)
    want_texts, want_bad = [], []
    n_records = 0
    for delta, fields in records:
        width = max(1, ncols + delta)
        row = (fields * 2)[:width]
        if width == 1 and row == [""]:
            row = ["a"]
        w.writerow(row)
        if width == ncols:
            want_texts.append(row[names.index("text")])
        else:
            want_bad.append(n_records)
        n_records += 1
    data = buf.getvalue()
    open_line = None
    if tail is not None:
        open_line = data.count("\n") + 1
        data += ",".join(["x"] * (ncols - 1) + ['"' + tail])
        want_bad.append(n_records)
    if not want_texts and not want_bad:
        return
    path = tmp_path / "p.csv"
    path.write_bytes(data.encode())
    texts, rows, rej = read_all(source(path), on_error="skip", batch_size=5)
    assert texts == want_texts
    assert rows == list(range(len(want_texts)))
    assert [r for r, _ in rej] == want_bad
    if tail is not None:
        assert rej[-1][1].startswith(f"unterminated quoted field: the quote opened on line {open_line} ")
    assert all(not r.startswith("unterminated") for _, r in rej[: len(rej) - (tail is not None)])


# --------------------------------------------------------------------------- 3. JSON nested too deeply


def deep_json_file(path: Path, depth: int, line: int = 2):
    lines = [json.dumps({"text": doc(i)}) for i in range(4)]
    lines.insert(line - 1, '{"text": "deep", "x": ' + "[" * depth + "]" * depth + "}")
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("output_format", ["same", "parquet"])
def test_deep_json_fails_one_line(tmp_path, output_format):
    # before: pyarrow read it (exit 0); --output-format parquet then died in json.loads (RecursionError)
    deep_json_file(tmp_path / "d.jsonl", 1000)
    code, _, err = neardup("dedup", "d.jsonl", "-o", "o1", "-q", "--output-format", output_format, cwd=tmp_path)
    assert code == 2
    assert one_error_line(err) == "d.jsonl:2: JSON nested too deeply (more than 512 levels of arrays and objects)"
    code, _, err = neardup("dedup", "d.jsonl", "-o", "o2", "-q", "--on-error", "skip",
                        "--output-format", output_format, cwd=tmp_path)
    assert code == 0, err
    assert counts(tmp_path / "o2")["rejected"] == 1
    assert rejected(tmp_path / "o2") == [{"source": "d.jsonl", "row": 1, "reason":
                                           "JSON nested too deeply (more than 512 levels of arrays and objects)"}]


@pytest.mark.parametrize("scanner", ["0", "1"])
def test_deep_json_limit_is_the_same_on_every_path(tmp_path, monkeypatch, scanner):
    monkeypatch.setenv("NEARDUP_JSONL_SCANNER", scanner)
    for depth, ok in ((511, True), (512, False), (100_000, False)):  # + 1: the record's object
        path = tmp_path / f"d{depth}.jsonl"
        deep_json_file(path, depth)
        texts, rows, rej = read_all(source(path), on_error="skip")
        if ok:
            assert len(texts) == 5 and rej == []
        else:
            assert rows == [0, 2, 3, 4] and rej == [(1, jsonl_format._too_deep())]
    # brackets inside strings are text, not nesting
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps({"text": "[" * 5000 + "{" * 5000, "x": '\\"' + "[" * 600}) + "\n")
    assert read_all(source(path))[0] == ["[" * 5000 + "{" * 5000]


# --------------------------------------------------------------------------- 4. file names that are not UTF-8


def test_file_name_not_utf8_is_read_and_shown_escaped(tmp_path):
    # before: UnicodeEncodeError (a traceback) when the names went into removed.parquet / stats
    folder = tmp_path / "in"
    folder.mkdir()
    same = json.dumps({"text": doc(1)})
    (folder / "a.jsonl").write_text(same + "\n")
    bad = os.path.join(os.fsencode(str(folder)), b"bad\xff.jsonl")
    with open(bad, "wb") as f:
        f.write((same + "\n" + json.dumps({"text": doc(2)}) + "\n{broken\n").encode())
    code, _, err = neardup("dedup", "in", "-o", "out", "-q", "--on-error", "skip", cwd=tmp_path)
    assert code == 0, err
    out = tmp_path / "out"
    c = counts(out)
    assert (c["input"], c["kept"], c["removed"], c["rejected"]) == (4, 2, 1, 1)
    stats = json.loads((out / "stats.json").read_text())
    assert [i["name"] for i in stats["inputs"]] == ["in/a.jsonl", "in/bad\\xff.jsonl"]
    assert sorted(stats["kept_files"]) == ["a.jsonl", "bad\\xff.jsonl"]
    (removed,) = pq.read_table(out / "removed.parquet").to_pylist()
    assert removed["source"] == "in/bad\\xff.jsonl" and removed["id"] == "bad\\xff.jsonl:1"  # id: as kept/ names it
    assert rejected(out)[0]["source"] == "in/bad\\xff.jsonl"
    kept = (out / "kept" / "bad\\xff.jsonl").read_text().splitlines()
    assert kept == [json.dumps({"text": doc(2)})]
    # and in a message
    with open(bad, "ab") as f:
        f.write(b"[1]\n")
    code, _, err = neardup("dedup", "in", "-o", "out2", "-q", cwd=tmp_path)
    assert code == 2 and one_error_line(err).startswith("in/bad\\xff.jsonl:3: broken JSON")


# --------------------------------------------------------------------------- 5. credentials in input URLs


@pytest.fixture
def http_folder(tmp_path):
    """A local HTTP server (no authentication: the credentials in the URL are simply ignored)
    serving tmp_path/web; yields (folder, port)."""
    import aiohttp  # noqa: F401
    web = tmp_path / "web"
    web.mkdir()
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):  # stderr is what the test reads
            pass

    handler = functools.partial(Quiet, directory=str(web))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield web, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def assert_no_secret(secret: str, out: Path, err: str):
    assert secret not in err
    if out.exists():
        for p in out.rglob("*"):
            if p.is_file():
                assert secret.encode() not in p.read_bytes(), p


def test_password_in_input_url_is_never_shown_or_stored(tmp_path, http_folder):
    web, port = http_folder
    lines = [json.dumps({"text": doc(1)}), json.dumps({"text": doc(1)}), json.dumps({"text": doc(2)}), "{broken"]
    (web / "x.jsonl").write_text("\n".join(lines) + "\n")
    url = f"http://user:S3CRETPW@127.0.0.1:{port}/x.jsonl"
    code, _, err = neardup("dedup", url, "-o", "out", "-q", "--on-error", "skip", cwd=tmp_path)
    assert code == 0, err
    out = tmp_path / "out"
    assert_no_secret("S3CRETPW", out, err)
    shown = f"http://user:***@127.0.0.1:{port}/x.jsonl"
    assert json.loads((out / "stats.json").read_text())["inputs"][0]["name"] == shown
    (removed,) = pq.read_table(out / "removed.parquet").to_pylist()
    assert removed["source"] == shown
    assert rejected(out)[0]["source"] == shown
    # the message of a bad record names the file without the password
    code, _, err = neardup("dedup", url, "-o", "out2", "-q", cwd=tmp_path)
    assert code == 2 and one_error_line(err).startswith(f"{shown}:4: broken JSON")
    assert_no_secret("S3CRETPW", tmp_path / "out2", err)


def test_password_in_unreachable_url_is_not_shown(tmp_path):
    import aiohttp  # noqa: F401
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, _, err = neardup("dedup", f"http://user:S3CRETPW@127.0.0.1:{port}/x.jsonl", "-o", "out", "-q",
                        cwd=tmp_path)
    assert code == 2
    one_error_line(err)
    assert_no_secret("S3CRETPW", tmp_path / "out", err)


def test_remote_file_gone_after_discovery_stops_even_with_skip(tmp_path, http_folder):
    # before: with --on-error skip the file was one rejected record, the run went on without it
    web, port = http_folder
    (web / "g.jsonl").write_text(json.dumps({"text": doc(0)}) + "\n")
    (src,) = discover([f"http://user:S3CRETPW@127.0.0.1:{port}/g.jsonl"])
    (web / "g.jsonl").unlink()
    for mode in ("fail", "skip"):
        assert fail_message(src, on_error=mode) == \
            f"http://user:***@127.0.0.1:{port}/g.jsonl: cannot read file (No such file or directory)"


def test_messages_hide_credentials_whatever_the_source_name(tmp_path):
    # a Source made by hand (the API allows it) with credentials in its name
    path = tmp_path / "b.jsonl"
    path.write_text("{broken\n")
    src = Source(path=str(path), name="s3://KEY:S3CRET@bucket/b.jsonl", relpath="b.jsonl", format="jsonl")
    assert fail_message(src).startswith("s3://KEY:***@bucket/b.jsonl:1: broken JSON")
    assert one_line("cannot open http://u:S3CRET@h/x: refused") == "cannot open http://u:***@h/x: refused"


def test_source_name_hides_credentials_path_keeps_them():
    from neardup.io.sources import display_name, table_source

    assert display_name("s3://KEY:SECRET@bucket/x.jsonl") == "s3://KEY:***@bucket/x.jsonl"
    assert table_source(__import__("pyarrow").table({"text": ["a"]}), name="http://u:pw@h/t").name == \
        "http://u:***@h/t"


# --------------------------------------------------------------------------- 6. missing paths, spaces


def test_discover_missing_path_and_path_with_space(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as ei:
        discover(["nothere.jsonl"])
    assert str(ei.value) == "no such file or folder: nothere.jsonl"
    (tmp_path / "My Documents").mkdir()
    (tmp_path / "My Documents" / "corpus.jsonl").write_text(json.dumps({"text": "a b"}) + "\n")
    (src,) = discover(["My Documents/corpus.jsonl"])
    assert (src.name, src.relpath, src.format) == ("My Documents/corpus.jsonl", "corpus.jsonl", "jsonl")
    with pytest.raises(InputError) as ei:
        discover(["My Documents/other.jsonl"])
    assert str(ei.value) == "no such file or folder: My Documents/other.jsonl"


# --------------------------------------------------------------------------- the environment


def test_symlink_loop_in_a_folder_is_one_line(tmp_path):
    # before: skipped in silence (exit 0)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text(json.dumps({"text": doc(0)}) + "\n")
    os.symlink("loop", tmp_path / "in" / "loop")
    code, _, err = neardup("dedup", "in", "-o", "out", "-q", "--on-error", "skip", cwd=tmp_path)
    assert code == 2
    assert one_error_line(err) == "cannot read in/loop (Too many levels of symbolic links)"
    with pytest.raises(InputError, match="^cannot read .*loop .Too many levels"):
        discover([str(tmp_path / "in" / "loop")])


def test_broken_link_and_named_pipe_in_a_folder_are_no_documents(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text(json.dumps({"text": doc(0)}) + "\n")
    os.symlink("gone", tmp_path / "in" / "dangling.jsonl")
    os.mkfifo(tmp_path / "in" / "pipe.jsonl")
    assert [s.relpath for s in discover([str(tmp_path / "in")])] == ["a.jsonl"]


@pytest.mark.parametrize("mode", ["fail", "skip"])
def test_named_pipe_read_as_a_file_does_not_hang(tmp_path, mode):
    # before: open() waited for a writer for ever (a file replaced by a pipe after discovery)
    pipe = tmp_path / "p.jsonl"
    os.mkfifo(pipe)
    src = Source(path=str(pipe), name="p.jsonl", relpath="p.jsonl", format="jsonl")
    result = {}

    def run():
        try:
            list(read_source(src, on_error=mode))
        except Exception as e:  # noqa: BLE001 - checked below
            result["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(30)
    if t.is_alive():  # unblock the reader before failing
        with open(pipe, "wb"):
            pass
        t.join(10)
        pytest.fail("reading a named pipe blocked")
    assert isinstance(result.get("error"), InputError)
    assert str(result["error"]) == "p.jsonl: not a regular file (a named pipe)"


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet", "text"])
def test_folder_where_a_file_is_expected_stops_even_with_skip(tmp_path, fmt):
    # before: with --on-error skip, a file that cannot be read was one rejected record: the run
    # went on and published a result without it
    d = tmp_path / f"x.{fmt}"
    d.mkdir()
    src = Source(path=str(d), name=f"x.{fmt}", relpath=f"x.{fmt}", format=fmt)
    for mode in ("fail", "skip"):
        assert fail_message(src, on_error=mode) == f"x.{fmt}: not a regular file (a folder)"


def test_device_as_input_is_refused(tmp_path):
    code, _, err = neardup("dedup", "/dev/zero", "-o", "out", "-q", cwd=tmp_path)
    assert code == 2 and one_error_line(err) == "not a regular file: /dev/zero"
    # read as a source (a file replaced after discovery): /dev/null, which ends (a reader that
    # took /dev/zero would fill the memory)
    src = Source(path="/dev/null", name="/dev/null", relpath="null", format="text")
    assert fail_message(src, on_error="skip") == "/dev/null: not a regular file (a device)"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file: permissions cannot be tested")
def test_unreadable_file_stops_even_with_skip(tmp_path):  # pragma: no cover - not as root
    path = tmp_path / "a.jsonl"
    path.write_text(json.dumps({"text": doc(0)}) + "\n")
    path.chmod(0)
    try:
        code, _, err = neardup("dedup", "a.jsonl", "-o", "out", "-q", "--on-error", "skip", cwd=tmp_path)
        assert code == 2
        assert one_error_line(err) == "a.jsonl: cannot read file (Permission denied)"
    finally:
        path.chmod(stat.S_IRUSR | stat.S_IWUSR)


# --------------------------------------------------------------------------- an id that is not UTF-8


def test_csv_id_not_utf8_is_a_bad_record(tmp_path):
    # before: the bytes went on as a string id; the clusters stage decoded it: a traceback (exit 1)
    rows = [b"id,text", b"\xff," + doc(0).encode(), b"\xfe," + doc(0).encode(), b"2," + doc(0).encode()]
    (tmp_path / "b.csv").write_bytes(b"\n".join(rows) + b"\n")
    code, _, err = neardup("dedup", "b.csv", "-o", "o1", "-q", "--id-column", "id", cwd=tmp_path)
    assert code == 2, err
    assert one_error_line(err) == "b.csv: row 0: id field 'id' has invalid UTF-8 at byte 0"
    code, _, err = neardup("dedup", "b.csv", "-o", "o2", "-q", "--on-error", "skip", cwd=tmp_path)
    assert code == 0, err
    c = counts(tmp_path / "o2")
    assert (c["input"], c["kept"], c["removed"], c["rejected"]) == (3, 1, 0, 2)
    assert [r["row"] for r in rejected(tmp_path / "o2")] == [0, 1]
    assert {r["reason"] for r in rejected(tmp_path / "o2")} == {"id field 'id' has invalid UTF-8 at byte 0"}


# --------------------------------------------------------------------------- a blank line before a CSV header


@pytest.mark.parametrize("nl", ["\n", "\r\n"])
def test_csv_blank_lines_before_the_header_are_not_an_empty_file(tmp_path, nl):
    # before: the header was taken from the first line, blank: the file was "empty file (no
    # records)", an error named alone, and in a folder skipped and counted, its records lost
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.csv").write_bytes(nl.join(["", "", "id,text", f"1,{doc(1)}", "", f"2,{doc(2)}", ""]).encode())
    (tmp_path / "d" / "b.csv").write_bytes(nl.join(["id,text", f"3,{doc(3)}", ""]).encode())
    code, _, err = neardup("dedup", "d", "-o", "out", "-q", cwd=tmp_path)
    assert code == 0, err
    c = counts(tmp_path / "out")
    assert (c["input"], c["kept"]) == (3, 3)
    with open(tmp_path / "out" / "kept" / "a.csv", newline="", encoding="utf-8") as f:
        assert list(csv.reader(f)) == [["id", "text"], ["1", doc(1)], ["2", doc(2)]]
