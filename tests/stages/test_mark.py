"""``--mark`` / ``dedup(..., mark=True)`` (:mod:`neardup.stages.mark`,
:mod:`neardup.io.formats.marked`): every document written once, in input order, its own fields
as they were, with duplicate_of / cluster / similarity / duplicate_reason; in memory, the type
given with those columns, whose rows with ``duplicate_of`` None are exactly the kept ones. (The
Ray engine's same bytes: tests/engines/test_ray_engine.py, whose Ray instance it shares.)"""

from __future__ import annotations

import gzip
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import neardup
from helpers import outputs, run_in_process

MARKS = ["duplicate_of", "cluster", "similarity", "duplicate_reason"]
BASE = ("the quick brown fox jumps over the lazy dog while the cat sleeps on the warm mat by the door "
        "of the old house in the village")
TEXTS = [BASE, "something else entirely, a text that shares nothing with the first one at all here",
         BASE + " again", "a third text about rivers, mountains and the long road home across the plains",
         BASE + " once more", "something else entirely, a text that shares nothing with the first one at all there"]


def raw_lines(texts, ids):
    """JSONL lines with odd spacing, a nested field and a \\r: the bytes a mark must keep."""
    out = []
    for i, (t, k) in enumerate(zip(texts, ids)):
        rec = {"id": k, "text": t, "meta": {"n": [i, i * 1.5], "s": "é\u2028"}}
        line = json.dumps(rec, ensure_ascii=i % 2 == 0)
        out.append(line.replace(": ", " :  ", 1) + (" \r" if i == 3 else ""))
    return out


@pytest.fixture(scope="module")
def marked(tmp_path_factory):
    """One JSONL input (and a copy as gzip) run with --mark from the command line, and without."""
    tmp = tmp_path_factory.mktemp("mark")
    lines = raw_lines(TEXTS, [f"d{i}" for i in range(len(TEXTS))])
    (tmp / "a.jsonl").write_bytes(("\n".join(lines) + "\n").encode())
    ran = run_in_process("dedup", tmp / "a.jsonl", "-o", tmp / "out", "--mark", "--threshold", "0.5", "--quiet")
    assert ran.returncode == 0, ran.stderr
    plain = neardup.dedup(str(tmp / "a.jsonl"), output=str(tmp / "plain"), threshold=0.5)
    return tmp, lines, plain


def test_jsonl_lines_keep_their_bytes_and_get_the_columns(marked):
    tmp, lines, plain = marked
    out = (tmp / "out" / "marked" / "a.jsonl").read_bytes().split(b"\n")
    assert out[-1] == b"" and len(out) - 1 == len(lines)  # every document once, in input order
    removed = {r["id"]: r for r in pq.read_table(tmp / "out" / "removed.parquet").to_pylist()}
    clusters = {r["id"]: r["cluster"] for r in pq.read_table(tmp / "out" / "clusters.parquet").to_pylist()}
    assert removed and set(removed) == {r["id"] for r in plain.removed.to_pylist()}
    for line, got in zip(lines, out):
        body = line.encode().rstrip()
        assert got.startswith(body[:-1])  # every byte before the closing brace as it was
        assert got.endswith(b"} \r" if line.endswith("\r") else b"}")
        rec = json.loads(got)
        orig = json.loads(line)
        assert {k: rec[k] for k in orig} == orig and list(rec)[len(orig):] == MARKS
        r = removed.get(orig["id"])
        assert rec["duplicate_of"] == (r and r["representative"])
        assert rec["similarity"] == (r and r["similarity"])
        assert rec["duplicate_reason"] == ("near_duplicate" if r else None)
        assert rec["cluster"] == clusters.get(orig["id"])
    stats = json.loads((tmp / "out" / "stats.json").read_text())
    assert stats["counts"]["kept"] == plain.stats["counts"]["kept"] and stats["marked_files"] == ["a.jsonl"]
    assert not (tmp / "out" / "kept").exists()
    a, b = outputs(tmp / "out"), outputs(tmp / "plain")  # the rest of the output as without --mark
    for name in ("removed.parquet", "clusters.parquet"):
        assert a[name] == b[name]


def test_hf_marks_filter_to_the_kept_rows_and_agree_with_the_cli(marked):
    datasets = pytest.importorskip("datasets")
    tmp, lines, _ = marked
    ds = datasets.Dataset.from_list([json.loads(x) for x in lines])
    got = neardup.dedup(ds, mark=True, threshold=0.5).kept
    assert got.column_names == ds.column_names + MARKS and len(got) == len(ds)
    kept = got.filter(lambda r: r["duplicate_of"] is None).remove_columns(MARKS)
    assert kept.to_list() == neardup.dedup(ds, threshold=0.5).kept.to_list()
    cli = [json.loads(x) for x in (tmp / "out" / "marked" / "a.jsonl").read_text().split("\n")[:-1]]  # not splitlines: a U+2028
    assert [{k: r[k] for k in MARKS} for r in cli] == [{k: r[k] for k in MARKS} for r in got.to_list()]


def test_polars_in_and_out():
    pl = pytest.importorskip("polars")
    df = pl.DataFrame({"text": TEXTS, "n": list(range(len(TEXTS))), "when": [1.5] * len(TEXTS)})
    kept = neardup.dedup(df, threshold=0.5).kept
    assert isinstance(kept, pl.DataFrame) and kept.columns == df.columns and kept.schema == df.schema
    assert kept["n"].to_list() == [0, 1, 3]  # positions as ids, the first of each cluster kept, in order
    marked = neardup.dedup(df, threshold=0.5, mark=True).kept
    assert isinstance(marked, pl.DataFrame) and marked.columns == df.columns + MARKS
    assert marked.filter(pl.col("duplicate_of").is_null()).drop(MARKS).equals(kept)
    assert marked["duplicate_of"].to_list()[2] == "<table>:0"  # the rule of a pyarrow table: positions
    with_ids = neardup.dedup(df.with_columns(id=pl.Series([f"k{i}" for i in range(6)])), threshold=0.5, mark=True)
    assert with_ids.kept["duplicate_of"].to_list() == [None, None, "k0", None, "k0", "k1"]
    with pytest.raises(neardup.ConfigError, match="LazyFrame: collect it first"):
        neardup.dedup(df.lazy())


def test_pandas_and_arrow_marks():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"text": TEXTS}, index=[10, 20, 30, 40, 50, 60])
    got = neardup.dedup(df, threshold=0.5, mark=True).kept
    assert list(got.index) == list(df.index) and got["duplicate_of"].tolist()[:3] == [None, None, 10]
    assert got[got["duplicate_of"].isna()].drop(columns=MARKS).equals(neardup.dedup(df, threshold=0.5).kept)
    table = neardup.dedup(pa.table({"text": TEXTS}), threshold=0.5, mark=True).kept
    assert table.column_names == ["text"] + MARKS and table.num_rows == len(TEXTS)


def test_dataset_dict_and_empty_inputs():
    datasets = pytest.importorskip("datasets")
    pl = pytest.importorskip("polars")
    dd = datasets.DatasetDict({"a": datasets.Dataset.from_dict({"text": TEXTS[:3]}),
                               "b": datasets.Dataset.from_dict({"text": TEXTS[3:]})})
    got = neardup.dedup(dd, threshold=0.5, mark=True).kept
    assert [r["duplicate_of"] for r in got["b"]] == [None, "a:0", "a:1"]  # a split against the other
    for empty in (pa.table({"text": pa.array([], pa.string())}), pl.DataFrame({"text": []}, schema={"text": pl.String}),
                  datasets.Dataset.from_dict({"text": []})):
        kept = neardup.dedup(empty, mark=True).kept
        assert list(getattr(kept, "column_names", None) or kept.columns) == ["text"] + MARKS and len(kept) == 0


def test_an_input_with_a_mark_column_is_refused(tmp_path):
    with pytest.raises(neardup.InputError, match="already has the field 'cluster'"):
        neardup.dedup(pa.table({"text": TEXTS, "cluster": [1] * 6}), mark=True)
    (tmp_path / "a.jsonl").write_text("".join(json.dumps({"text": t, "similarity": 1}) + "\n" for t in TEXTS))
    ran = run_in_process("dedup", tmp_path / "a.jsonl", "-o", tmp_path / "out", "--mark", "--quiet")
    assert ran.returncode == 2 and "already has the field 'similarity'" in ran.stderr
    assert len(ran.stderr.strip().splitlines()) == 1


def test_parquet_csv_gzip_and_text_inputs(tmp_path):
    inp = tmp_path / "in"
    inp.mkdir()
    pq.write_table(pa.table({"text": TEXTS[:3], "x": [1, 2, 3]}), inp / "p.parquet", compression="zstd")
    (inp / "c.csv").write_text("text,y\n" + "".join(f'"{t}",{i}\n' for i, t in enumerate(TEXTS[3:])))
    (inp / "g.jsonl.gz").write_bytes(gzip.compress(b'{"text": "%s"}\n' % BASE.encode()))
    (inp / "t.txt").write_text(BASE + " again")
    res = neardup.dedup(str(inp), output=str(tmp_path / "out"), threshold=0.5, mark=True)
    m = tmp_path / "out" / "marked"
    assert sorted(p.name for p in m.iterdir()) == ["c.csv", "g.jsonl.gz", "p.parquet", "t.txt.jsonl"]
    assert sorted(res.kept) == sorted(str(p) for p in m.iterdir())
    p = pq.ParquetFile(m / "p.parquet")
    assert p.schema_arrow.names == ["text", "x"] + MARKS and p.metadata.row_group(0).column(0).compression == "ZSTD"
    assert p.read().column("x").to_pylist() == [1, 2, 3]
    import pyarrow.csv as pcsv
    c = pcsv.read_csv(m / "c.csv")
    assert c.column_names == ["text", "y"] + MARKS and c.num_rows == 3
    g = json.loads(gzip.decompress((m / "g.jsonl.gz").read_bytes()))
    t = json.loads((m / "t.txt.jsonl").read_text())
    assert t["text"] == BASE + " again" and set(t) == {"id", "text", *MARKS}
    marks = ([g["duplicate_of"], t["duplicate_of"]] + pq.read_table(m / "p.parquet").column("duplicate_of").to_pylist()
             + c.column("duplicate_of").to_pylist())
    counts = res.stats["counts"]
    assert len(marks) == counts["input"] and sum(x is not None for x in marks) == counts["removed"] > 0


def test_overwrite_between_mark_and_not(tmp_path):
    (tmp_path / "a.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS))
    out = str(tmp_path / "out")
    neardup.dedup(str(tmp_path / "a.jsonl"), output=out, threshold=0.5, mark=True)
    (tmp_path / "out" / "marked" / "notes.txt").write_text("mine")
    with pytest.raises(neardup.ConfigError, match="marked/notes.txt was not written by neardup"):
        neardup.dedup(str(tmp_path / "a.jsonl"), output=out, threshold=0.5, overwrite=True)
    (tmp_path / "out" / "marked" / "notes.txt").unlink()
    neardup.dedup(str(tmp_path / "a.jsonl"), output=out, threshold=0.5, overwrite=True)
    assert (tmp_path / "out" / "kept").is_dir() and not (tmp_path / "out" / "marked").exists()
    with pytest.raises(neardup.ConfigError, match="cannot be combined with output_format parquet"):
        neardup.dedup(str(tmp_path / "a.jsonl"), output_format="parquet", mark=True)


_KILL_AFTER_ONE_FILE = """
import os, signal
import neardup.stages.mark as mark
_write = mark.write_marked_source
def _write_then_die(*args, **kwargs):
    _write(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)
mark.write_marked_source = _write_then_die
"""


@pytest.mark.slow  # a Python started and killed: 3-7 s
def test_resume_after_a_kill_in_the_marked_write(marked):
    """A run killed (SIGKILL) once it has written one marked file resumes to the same bytes as
    a run never killed; nothing of the killed run is in the output before."""
    import subprocess
    from helpers import child_env, neardup_command
    tmp, _, _ = marked
    out = tmp / "killed"
    args = ("dedup", tmp / "a.jsonl", "-o", out, "--mark", "--threshold", "0.5", "--quiet")
    p = subprocess.run(neardup_command(*args, setup=_KILL_AFTER_ONE_FILE), env=child_env(), capture_output=True)
    assert p.returncode == -9 and not (out / "marked").exists() and not (out / "stats.json").exists()
    ran = run_in_process(*args, "--resume")
    assert ran.returncode == 0, ran.stderr
    assert (out / "marked" / "a.jsonl").read_bytes() == (tmp / "out" / "marked" / "a.jsonl").read_bytes()


def test_a_match_in_an_index_is_marked_against_index(tmp_path):
    (tmp_path / "old.jsonl").write_text(json.dumps({"id": "old", "text": TEXTS[0]}) + "\n")
    (tmp_path / "new.jsonl").write_text("".join(json.dumps({"id": f"n{i}", "text": t}) + "\n"
                                                for i, t in enumerate(TEXTS[1:3] + TEXTS[5:])))
    assert run_in_process("index", "add", tmp_path / "ix", tmp_path / "old.jsonl", "--id-column", "id",
                          "--threshold", "0.5").returncode == 0
    res = neardup.dedup(str(tmp_path / "new.jsonl"), output=str(tmp_path / "out"), against=[str(tmp_path / "ix")],
                        threshold=0.5, mark=True)
    got = [json.loads(x) for x in (tmp_path / "out" / "marked" / "new.jsonl").read_text().split("\n")[:-1]]
    assert [(r["duplicate_of"], r["duplicate_reason"]) for r in got] == [
        (None, None), ("old", "against_index"), ("n0", "near_duplicate")]
    assert res.stats["counts"]["kept"] == 1
