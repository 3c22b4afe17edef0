"""Issue 13: a newcomer's first hour. One test (or a few) per point, named after it:
test_13_<point>_<what>. Points 1, 3, 4 and the API parts of 5 are tested with the engines and the
API; point 7 with the report."""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers import ROOT, run_in_process as neardup

EXAMPLE = ROOT / "examples" / "corpus.jsonl"
WORDS = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho "
         "sigma tau upsilon phi chi psi omega").split()


def documents(n, twins=()):
    """n documents of 40 words each, all different; each i in twins is a copy of document 0
    with one word changed (Jaccard of the 5-gram sets well above 0.8)."""
    import random
    rng = random.Random(13)
    texts = [" ".join(rng.choice(WORDS) + str(rng.randrange(1000)) for _ in range(40)) for _ in range(n)]
    for i in twins:
        words = texts[0].split()
        words[-1] = "changed"
        texts[i] = " ".join(words)
    return texts


# --------------------------------------------------------------------------- point 2


def test_13_2_missing_text_column_lists_fields(tmp_path):
    rows = [{"id": i, "content": t} for i, t in enumerate(documents(5))]
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    pq.write_table(pa.table({"id": list(range(5)), "content": documents(5)}), tmp_path / "c.parquet")
    code, _, err = neardup("dedup", "c.jsonl", "-o", "o1", "-q", cwd=tmp_path)
    assert code == 2
    assert err.strip() == ("neardup: error: c.jsonl:1: text field 'text' is missing "
                           "(fields: id, content; name the text field with --text-column content)")
    code, _, err = neardup("dedup", "c.parquet", "-o", "o2", "-q", cwd=tmp_path)
    assert code == 2
    assert err.strip() == ("neardup: error: c.parquet: no column 'text' "
                           "(columns: id, content; name the text column with --text-column content)")
    # and the suggestion works
    code, _, err = neardup("dedup", "c.jsonl", "-o", "o3", "-q", "--text-column", "content", cwd=tmp_path)
    assert code == 0, err


def test_13_2_run_that_rejects_every_record_exits_nonzero(tmp_path):
    rows = [{"id": i, "content": t} for i, t in enumerate(documents(30))]
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, _, err = neardup("dedup", "c.jsonl", "-o", "out", "--on-error", "skip", "-q", cwd=tmp_path)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("neardup: error: every record was rejected (30 of 30; see out/rejected.parquet); "
                               "the first: c.jsonl:1: text field 'text' is missing (fields: id, content")
    # one good record among bad ones is a run that did something: exit 0
    rows.append({"id": 99, "text": "one good record"})
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, _, err = neardup("dedup", "c.jsonl", "-o", "out2", "--on-error", "skip", "-q", cwd=tmp_path)
    assert code == 0, err


# --------------------------------------------------------------------------- point 5 (CSV/TSV)


def _write_table(path, header, rows, delimiter=","):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wt", newline="", encoding="utf-8") as f:
        w = csv.writer(f, delimiter=delimiter)
        w.writerow(header)
        w.writerows(rows)


def test_13_5_csv_is_read_as_a_table(tmp_path):
    texts = documents(61, twins=(7, 30))
    texts[3] = "a text over two lines,\nwith a comma and \"quotes\" " + texts[3]
    _write_table(tmp_path / "corpus.csv", ["id", "source", "text"],
                 [[f"d{i}", "web", t] for i, t in enumerate(texts)])
    code, _, err = neardup("dedup", "corpus.csv", "-o", "out", "-q", "--id-column", "id", cwd=tmp_path)
    assert code == 0, err
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert stats["counts"]["input"] == 61
    assert stats["counts"]["removed"] == 2
    removed = pq.read_table(tmp_path / "out" / "removed.parquet").column("id").to_pylist()
    assert sorted(removed) == ["d30", "d7"]
    with open(tmp_path / "out" / "kept" / "corpus.csv", newline="", encoding="utf-8") as f:
        kept = list(csv.reader(f))
    assert kept[0] == ["id", "source", "text"]
    assert [r[0] for r in kept[1:]] == [f"d{i}" for i in range(61) if i not in (7, 30)]
    assert kept[4][2] == texts[3]  # a quoted newline, comma and quotes survive


def test_13_5_tsv_gz_with_text_column_and_conversion(tmp_path):
    texts = documents(20, twins=(5,))
    _write_table(tmp_path / "c.tsv.gz", ["id", "content"], [[f"d{i}", t] for i, t in enumerate(texts)],
                 delimiter="\t")
    code, _, err = neardup("dedup", "c.tsv.gz", "-o", "o1", "-q", cwd=tmp_path)
    assert code == 2 and "--text-column content" in err
    code, _, err = neardup("dedup", "c.tsv.gz", "-o", "o2", "-q", "--text-column", "content", cwd=tmp_path)
    assert code == 0, err
    with gzip.open(tmp_path / "o2" / "kept" / "c.tsv.gz", "rt", newline="", encoding="utf-8") as f:
        kept = list(csv.reader(f, delimiter="\t"))
    assert len(kept) == 1 + 19 and kept[0] == ["id", "content"]
    code, _, err = neardup("dedup", "c.tsv.gz", "-o", "o3", "-q", "--text-column", "content",
                           "--output-format", "jsonl", cwd=tmp_path)
    assert code == 0, err
    lines = (tmp_path / "o3" / "kept" / "c.jsonl").read_text().splitlines()
    assert json.loads(lines[0]) == {"id": "d0", "content": texts[0]} and len(lines) == 19


def test_13_5_csv_record_with_wrong_field_count(tmp_path):
    (tmp_path / "bad.csv").write_text("id,text\n1,one two three\n2,x,y\n3,four five six\n")
    code, _, err = neardup("dedup", "bad.csv", "-o", "o1", "-q", cwd=tmp_path)
    assert code == 2 and err.strip() == "neardup: error: bad.csv: row 1: a record of 3 fields, the header has 2: '2,x,y'"
    code, _, err = neardup("dedup", "bad.csv", "-o", "o2", "-q", "--on-error", "skip", cwd=tmp_path)
    assert code == 0, err
    rejected = pq.read_table(tmp_path / "o2" / "rejected.parquet").to_pylist()
    assert rejected == [{"source": "bad.csv", "row": 1,
                         "reason": "a record of 3 fields, the header has 2: '2,x,y'"}]
    kept = (tmp_path / "o2" / "kept" / "bad.csv").read_text()
    assert kept == '"id","text"\n"1","one two three"\n"3","four five six"\n'


def test_13_5_csv_suffixes_decide_the_format():
    from neardup.io.sources import detect_format
    assert detect_format("a.csv") == ("csv", None)
    assert detect_format("A.CSV.GZ") == ("csv", "gzip")
    assert detect_format("a.tsv.zst") == ("tsv", "zstd")
    assert detect_format("a.tsv") == ("tsv", None)
    assert detect_format("a.csv.txt") == ("text", None)


# --------------------------------------------------------------------------- point 6


def test_13_6_first_run_says_it_is_compiling(tmp_path, monkeypatch):
    import neardup as package
    (tmp_path / "a.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in documents(3)))
    monkeypatch.setattr(package, "kernels_cached", lambda: False)
    code, _, err = neardup("dedup", "a.jsonl", "-o", "o1", cwd=tmp_path)
    assert code == 0
    assert err.splitlines()[0].startswith("neardup: compiling the kernels (once")
    # no stage shows a rate that counts the compile time without saying so
    assert "neardup: read + signatures (compiling first) done: 3 docs in" in err
    from neardup import progress
    assert progress._compiling is False  # only for that run
    code, _, err = neardup("dedup", "a.jsonl", "-o", "o2", "-q", cwd=tmp_path)
    assert code == 0 and err == ""
    monkeypatch.setattr(package, "kernels_cached", lambda: True)
    code, _, err = neardup("dedup", "a.jsonl", "-o", "o3", cwd=tmp_path)
    assert code == 0 and "compiling" not in err


def test_13_6_terminal_bar_shows_no_rate_while_compiling():
    from tqdm import tqdm

    from neardup.progress import _NO_RATE
    buf = io.StringIO()
    with tqdm(total=300, desc="read", unit="doc", file=buf, bar_format=_NO_RATE, ncols=80) as b:
        b.update(300)
    assert buf.getvalue().rstrip().endswith("300/300 [00:00, compiling first]")
    assert "/s" not in buf.getvalue()


def test_13_6_cache_check_looks_at_the_kernels_index_files(tmp_path, monkeypatch):
    import neardup as package
    from neardup.kernels import minhash
    (tmp_path / "a.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in documents(3, twins=(2,))))
    assert neardup("dedup", "a.jsonl", "-o", "out", "-q", cwd=tmp_path)[0] == 0
    # after a run the kernels are compiled and (the cache folder being writable) on disk
    index = minhash._process_kernel._cache.files()._cache_file._index_path
    if not os.access(os.path.dirname(index), os.W_OK):
        pytest.skip("numba's cache folder is not writable here")
    assert package.kernels_cached() is True
    # a missing index, or one stamped for another state of the source file: not cached
    cache_file = minhash._process_kernel._cache.files()._cache_file
    monkeypatch.setattr(cache_file, "_index_path", index + ".missing")
    assert package.kernels_cached() is False
    monkeypatch.setattr(cache_file, "_index_path", index)
    monkeypatch.setattr(cache_file, "_source_stamp", (0.0, 0))
    assert package.kernels_cached() is False


# --------------------------------------------------------------------------- point 8


@pytest.mark.parametrize("command", ["dedup", "params", "audit"])
def test_13_8_treshold_says_did_you_mean_threshold(command, tmp_path):
    args = [command] + (["x.jsonl", "-o", "out"] if command == "dedup" else
                        ["x.jsonl"] if command == "audit" else []) + ["--treshold", "0.7"]
    code, _, err = neardup(*args, cwd=tmp_path)
    assert code == 2
    assert f"usage: neardup {command}" in err  # the subcommand's usage, not the top level's
    assert err.strip().endswith(f"neardup {command}: error: unrecognized arguments: --treshold 0.7 "
                                "(did you mean --threshold?)")


def test_13_8_treshold_with_a_required_option_missing_still_says_did_you_mean(tmp_path):
    code, _, err = neardup("dedup", "x.jsonl", "--treshold", "0.7", cwd=tmp_path)
    assert code == 2
    assert err.strip().endswith("neardup dedup: error: the following arguments are required: --output/-o; "
                                "unrecognized arguments: --treshold (did you mean --threshold?)")


def test_13_8_did_you_mean_commands_and_choices(tmp_path):
    code, _, err = neardup("dedpu", "x", cwd=tmp_path)
    assert code == 2 and "(did you mean 'dedup'?)" in err
    code, _, err = neardup("dedup", "x", "-o", "y", "--verify", "exat", cwd=tmp_path)
    assert code == 2 and "(did you mean 'exact'?)" in err
    code, _, err = neardup("report", "x", "--plot", "svg", cwd=tmp_path)
    assert code == 2 and "did you mean --plots?" in err


def test_13_8_no_abbreviations(tmp_path):
    code, _, err = neardup("params", "--thresh", "0.7")
    assert code == 2 and "unrecognized arguments: --thresh 0.7 (did you mean --threshold?)" in err
    code, _, err = neardup("params", "--num", "64")
    assert code == 2
    from neardup.cli import build_parser
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert parser.allow_abbrev is False
    assert all(p.allow_abbrev is False for p in sub.choices.values())


def test_13_8_broken_json_says_at_once(tmp_path):
    (tmp_path / "b.jsonl").write_bytes(b'{"text": "a\tb"}\n')  # a raw tab inside a string
    code, _, err = neardup("dedup", "b.jsonl", "-o", "out", "-q", cwd=tmp_path)
    assert code == 2
    assert err.strip() == "neardup: error: b.jsonl:1: broken JSON (Invalid control character at column 12)"
    assert "at at" not in err


def test_13_8_same_placeholders_in_every_subcommand():
    """One rule: a value is shown as the option's name in capitals, a path as FILE or DIR; so the
    same option has the same placeholder in every subcommand (THRESHOLD, not T here and
    THRESHOLD there)."""
    from neardup.cli import build_parser
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    seen = {}
    for name, p in sub.choices.items():
        for action in p._actions:
            if not action.option_strings or action.nargs == 0 or action.choices:
                continue
            if isinstance(action, type(sub)):
                continue
            long = max(action.option_strings, key=len)
            metavar = action.metavar or action.dest.upper()
            assert metavar in ("FILE", "DIR") or metavar == long.lstrip("-").replace("-", "_").upper(), \
                (name, long, metavar)
            if metavar not in ("FILE", "DIR"):  # dedup's --output is a folder, report's a file
                assert seen.setdefault(long, metavar) == metavar, (name, long, metavar, seen[long])
    assert seen["--threshold"] == "THRESHOLD" and seen["--num-perm"] == "NUM_PERM"


def test_13_8_audit_accepts_id_column(tmp_path):
    rows = [{"doc": f"id-{i}", "text": t} for i, t in enumerate(documents(40, twins=(9,)))]
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, out, err = neardup("audit", "a.jsonl", "--id-column", "doc", "--sample", "50", "--json", "-",
                             cwd=tmp_path)
    assert code == 0, err
    pairs = json.loads(out)["pairs"]
    assert pairs["columns"][:4] == ["left", "right", "left_id", "right_id"]
    assert pairs["left_id"] == [f"id-{i}" for i in pairs["left"]]
    assert pairs["right_id"] == [f"id-{i}" for i in pairs["right"]]
    code, out, err = neardup("audit", "a.jsonl", "--sample", "50", "--json", "-", cwd=tmp_path)
    assert code == 0, err
    pairs = json.loads(out)["pairs"]  # no id field: JSONL lines from 1, as the dedup names them
    assert pairs["left_id"] == [f"a.jsonl:{i + 1}" for i in pairs["left"]]
    # an `id` field in every record is the id, as in the dedup
    rows = [{"id": f"k{i}", "text": r["text"]} for i, r in enumerate(rows)]
    (tmp_path / "b.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, out, err = neardup("audit", "b.jsonl", "--sample", "50", "--json", "-", cwd=tmp_path)
    assert code == 0, err
    pairs = json.loads(out)["pairs"]
    assert pairs["left_id"] == [f"k{i}" for i in pairs["left"]]


def test_13_8_progress_writes_plain_lines_when_not_a_terminal(tmp_path):
    (tmp_path / "a.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in documents(20)))
    code, _, err = neardup("dedup", "a.jsonl", "-o", "out", cwd=tmp_path)  # stderr: a StringIO
    assert code == 0
    assert "\r" not in err
    assert re.search(r"^neardup: read \+ signatures( \(compiling first\))? done: 20 docs in \d+\.\d s", err,
                     re.MULTILINE), err
    # and a long stage says where it is every so often, in whole lines
    from neardup.progress import _Lines
    clock = iter([10.0, 31.0, 40.0, 65.0, 70.0])
    buf = io.StringIO()
    lines = _Lines("read", total=100, unit="doc", every=30.0, file=buf)
    lines._clock = lambda: next(clock)
    lines.start = lines._last = 0.0
    for _ in range(4):
        lines.update(25)
    lines.close()
    assert buf.getvalue().splitlines() == ["neardup: read: 50/100 docs after 31.0 s",
                                           "neardup: read: 100/100 docs after 65.0 s",
                                           "neardup: read done: 100 docs in 70.0 s"]


def test_13_8_readme_first_screen_and_example_numbers(tmp_path):
    """The README opens with exactly two commands (install and run the example; run the tests),
    and what it says of the example is what the example run gives."""
    readme = (ROOT / "README.md").read_text()
    first_screen = readme.split("\n---\n", 1)[0]
    assert first_screen.count("```bash") == 2
    assert "docs/walkthrough.md" in readme
    assert (ROOT / "docs" / "walkthrough.md").exists()
    code, _, err = neardup("dedup", EXAMPLE, "-o", tmp_path / "out", "-q")
    assert code == 0, err
    counts = json.loads((tmp_path / "out" / "stats.json").read_text())["counts"]
    said = re.search(r"It says `(\d+) documents in, (\d+) kept, (\d+) removed`", first_screen)
    assert said, "the README should say what the example run prints"
    assert tuple(map(int, said.groups())) == (counts["input"], counts["kept"], counts["removed"])


@pytest.mark.slow
def test_13_5_csv_over_object_storage_same_as_local(s3, tmp_path, monkeypatch):
    """CSV / TSV go through the same file layer as the other formats: s3:// reads and writes
    give what local files give."""
    from neardup.io import discover, read_source, write_kept
    monkeypatch.chdir(tmp_path)
    texts = documents(12)
    texts[2] = "over two lines,\nwith \"quotes\" " + texts[2]
    _write_table(tmp_path / "c.csv.gz", ["id", "text"], [[f"d{i}", t] for i, t in enumerate(texts)])
    s3.put_tree("in", {"c.csv.gz": (tmp_path / "c.csv.gz").read_bytes()})
    prefix = s3.url("") + "/"
    (local,) = discover(["c.csv.gz"])
    (remote,) = discover([prefix + "in/c.csv.gz"])
    assert (remote.format, remote.compression) == (local.format, local.compression) == ("csv", "gzip")

    def read(src):
        return [(b.rows.tolist(), b.text.to_pylist(), b.ids.to_pylist()) for b in read_source(src, id_column="id")]
    assert read(remote) == read(local) == [(list(range(12)), texts, [f"d{i}" for i in range(12)])]
    keep = [0, 2, 5]
    assert write_kept(local, keep, "out/c.csv.gz") == write_kept(remote, keep, prefix + "out/c.csv.gz") == 3
    assert s3.get("out/c.csv.gz") == (tmp_path / "out" / "c.csv.gz").read_bytes()
    with gzip.open(tmp_path / "out" / "c.csv.gz", "rt", newline="", encoding="utf-8") as f:
        assert [r[1] for r in csv.reader(f)] == ["text", texts[0], texts[2], texts[5]]


def test_dedup_help_names_every_compression_read():
    """README: gzip, zstd, bz2 and xz input; the help named gzip and zstd only (description and
    --input-format), so a reader of --help took .bz2 and .xz files for plain text documents."""
    from neardup.cli import build_parser
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    dedup = sub.choices["dedup"]
    fmt = next(a for a in dedup._actions if a.dest == "input_format")
    for text in (dedup.description, fmt.help):
        assert all(s in text for s in (".gz", ".zst", ".bz2", ".xz")), text
