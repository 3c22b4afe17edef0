"""Bad input and wrong options through the real command: exit code 2, one line naming the file and
line, no traceback, nothing written as if complete; or, with --on-error skip, rejected.parquet."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
# the command in this process; a few tests run it as a process, to check the exit status too
from helpers import child_env, neardup_command, run_in_process as neardup, run_process as neardup_process

GOOD = [json.dumps({"id": f"g{i}", "text": f"good document number {i} with a few more words in it"})
        for i in range(5)]


def lines_file(path: Path, lines, raw_tail: bytes = b""):
    path.write_bytes(("\n".join(lines) + "\n").encode() + raw_tail)
    return path


def truncated_gzip(path: Path):
    data = gzip.compress(("\n".join(GOOD * 400) + "\n").encode(), mtime=0)
    path.write_bytes(data[: len(data) // 2])
    return path


def truncated_zstd(path: Path):
    data = zstandard.ZstdCompressor().compress(("\n".join(GOOD * 400) + "\n").encode())
    path.write_bytes(data[: len(data) // 2])
    return path


CASES = {
    # name: (file name, builder, expected words in the message)
    "broken_json": ("a.jsonl", lambda p: lines_file(p, GOOD[:2] + ['{"text": "oops"'] + GOOD[2:]),
                    ["a.jsonl:3", "JSON"]),
    "bad_utf8": ("a.jsonl", lambda p: lines_file(p, GOOD[:3], raw_tail=b'{"text": "caf\xe9"}\n'),
                 ["a.jsonl:4", "UTF-8"]),
    "missing_text": ("a.jsonl", lambda p: lines_file(p, GOOD[:1] + ['{"body": "no text here"}']),
                     ["a.jsonl:2", "text"]),
    "null_text": ("a.jsonl", lambda p: lines_file(p, ['{"text": null}'] + GOOD[:1]), ["a.jsonl:1", "null"]),
    "text_not_string": ("a.jsonl", lambda p: lines_file(p, GOOD[:2] + ['{"text": 42}']),
                        ["a.jsonl:3", "not a string"]),
    "not_an_object": ("a.jsonl", lambda p: lines_file(p, GOOD[:1] + ['[1, 2, 3]']), ["a.jsonl:2", "JSON object"]),
    "truncated_gzip": ("a.jsonl.gz", truncated_gzip, ["a.jsonl.gz", "truncated"]),
    "truncated_zstd": ("a.jsonl.zst", truncated_zstd, ["a.jsonl.zst", "truncated"]),
    "not_gzip": ("a.jsonl.gz", lambda p: p.write_bytes(b'{"text": "plain"}\n'), ["a.jsonl.gz", "gzip"]),
    "bad_parquet": ("a.parquet", lambda p: p.write_bytes(b"PAR1 this is not parquet"), ["a.parquet", "Parquet"]),
    "missing_column": ("a.parquet", lambda p: pq.write_table(pa.table({"body": ["x", "y"]}), p),
                       ["a.parquet", "'text'"]),
}


@pytest.mark.slow  # fresh Python processes
def test_bad_input_real_process_exit_status(tmp_path):
    CASES["broken_json"][1](tmp_path / "a.jsonl")
    res = neardup_process("dedup", "a.jsonl", "--output", tmp_path / "out", cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.rstrip("\n").splitlines()[-1].startswith("neardup: error: a.jsonl:3: broken JSON")
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_fails_with_one_line(tmp_path, case):
    name, build, expected = CASES[case]
    build(tmp_path / name)
    out = tmp_path / "out"
    res = neardup("dedup", name, "--output", out, cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    # progress bars may precede it; the error itself is one line, the last one
    err = [line for line in res.stderr.splitlines() if "error" in line]
    assert len(err) == 1, res.stderr
    assert err[0].startswith("neardup: error: ")
    assert res.stderr.rstrip("\n").splitlines()[-1] == err[0]
    assert "Traceback" not in res.stderr
    for word in expected:
        assert word in err[0], (word, err[0])
    # nothing that looks like a finished result
    assert not (out / "stats.json").exists() and not (out / "removed.parquet").exists()


@pytest.mark.parametrize("case", sorted(c for c in CASES if c not in ("bad_parquet", "missing_column")))
def test_bad_input_skipped_and_reported(tmp_path, case):
    name, build, expected = CASES[case]
    build(tmp_path / name)
    good = lines_file(tmp_path / "good.jsonl", GOOD)
    out = tmp_path / "out"
    # (ids repeat across the files: positions)
    res = neardup("dedup", name, good.name, "--output", out, "--on-error", "skip", "--quiet", "--id-column", "",
                  cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    stats = json.loads((out / "stats.json").read_text())
    rejected = pq.read_table(out / "rejected.parquet").to_pylist()
    assert rejected, "the bad record must be reported"
    assert all(r["source"] == name for r in rejected)
    assert any(expected[-1].lower() in r["reason"].lower() for r in rejected), rejected
    c = stats["counts"]
    assert c["rejected"] == len(rejected)
    assert c["input"] == c["kept"] + c["removed"] + c["rejected"]
    assert c["input"] >= len(GOOD) + len(rejected)


@pytest.mark.parametrize("case", ["bad_parquet", "missing_column"])
def test_bad_parquet_skipped_as_whole_file(tmp_path, case):
    name, build, expected = CASES[case]
    build(tmp_path / name)
    lines_file(tmp_path / "good.jsonl", GOOD)
    out = tmp_path / "out"
    res = neardup("dedup", name, "good.jsonl", "--output", out, "--on-error", "skip", "--quiet", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    rejected = pq.read_table(out / "rejected.parquet").to_pylist()
    assert len(rejected) == 1 and rejected[0]["source"] == name and rejected[0]["row"] is None
    stats = json.loads((out / "stats.json").read_text())
    assert stats["counts"]["kept"] + stats["counts"]["removed"] == len(GOOD)


def test_duplicate_ids_fail_naming_both_places(tmp_path):
    lines_file(tmp_path / "a.jsonl", GOOD[:3])
    lines_file(tmp_path / "b.jsonl", GOOD[3:] + [json.dumps({"id": "g1", "text": "another text entirely here"})])
    res = neardup_process("dedup", "a.jsonl", "b.jsonl", "--output", tmp_path / "out", "--id-column", "id", "--quiet",
                  cwd=tmp_path)
    assert res.returncode == 2
    err = res.stderr.strip().splitlines()
    assert len(err) == 1
    assert "b.jsonl:3" in err[0] and "a.jsonl:2" in err[0] and "'g1'" in err[0]


def test_duplicate_ids_skipped(tmp_path):
    lines_file(tmp_path / "a.jsonl", GOOD[:3])
    lines_file(tmp_path / "b.jsonl", GOOD[3:] + [json.dumps({"id": "g1", "text": "another text entirely here"})])
    out = tmp_path / "out"
    res = neardup("dedup", "a.jsonl", "b.jsonl", "--output", out, "--id-column", "id", "--on-error", "skip",
                  "--quiet", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    rejected = pq.read_table(out / "rejected.parquet").to_pylist()
    assert rejected == [{"source": "b.jsonl", "row": 2, "reason": "duplicate id 'g1' (first at a.jsonl:2)"}]
    kept = [json.loads(x)["id"] for f in ("a.jsonl", "b.jsonl") for x in (out / "kept" / f).read_text().splitlines()]
    assert sorted(kept) == sorted(f"g{i}" for i in range(5))


@pytest.mark.parametrize("args, words", [
    (["--threshold", "1.5"], ["threshold", "(0.0, 1.0]"]),
    (["--threshold", "0"], ["threshold"]),
    (["--bands", "20", "--rows", "10"], ["exceeds num_perm", "128"]),
    (["--bands", "20"], ["bands and rows go together"]),
    (["--num-perm", "0"], ["num_perm"]),
    (["--keep", "biggest"], ["keep"]),
])
def test_wrong_options_exit_2_with_one_line(tmp_path, args, words):
    # in this process: the cases differ in their message, not in how the process exits (which
    # test_missing_input_exit_2 and test_bad_input_real_process_exit_status check in a fresh one)
    lines_file(tmp_path / "a.jsonl", GOOD)
    res = neardup("dedup", "a.jsonl", "--output", tmp_path / "out", *args, cwd=tmp_path)
    assert res.returncode == 2
    err = res.stderr.strip().splitlines()
    assert len(err) == 1, res.stderr
    for w in words:
        assert w in err[0]


def test_missing_input_exit_2(tmp_path):
    res = neardup_process("dedup", "nope.jsonl", "--output", tmp_path / "out", cwd=tmp_path)
    assert res.returncode == 2
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and "nope.jsonl" in err[0]


def test_output_folder_with_foreign_files_is_refused(tmp_path):
    lines_file(tmp_path / "a.jsonl", GOOD)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "precious.txt").write_text("keep me")
    res = neardup("dedup", "a.jsonl", "--output", "out", cwd=tmp_path)
    assert res.returncode == 2 and "precious.txt" in res.stderr
    assert (tmp_path / "out" / "precious.txt").read_text() == "keep me"


@pytest.mark.slow  # a fresh Python process
def test_a_reader_that_goes_away_is_not_an_error():
    """`neardup ... | head`: the reader closes the pipe; neardup stops quietly, exit 0, no
    traceback and no 'this is a bug' (a BrokenPipeError is an OSError, which the command line
    otherwise reports)."""
    import subprocess
    p = subprocess.Popen(neardup_command("params", "--threshold", "0.8"), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=child_env())
    p.stdout.close()  # before neardup writes anything: its first write fails with EPIPE
    err = p.stderr.read().decode()
    p.stderr.close()
    assert p.wait(timeout=120) == 0
    assert err == ""


@pytest.mark.parametrize("id_column", [None, "id"])
def test_a_number_and_a_string_of_its_digits_are_one_id_and_the_error_says_so(tmp_path, id_column):
    """1 and "1" are the same id (ids are compared as text, as every output writes them): the
    one-line error says so, since the two lines look different; ids that are not numbers do not
    get the remark."""
    lines_file(tmp_path / "a.jsonl", [json.dumps({"id": 1, "text": "alpha beta gamma delta epsilon"}),
                                      json.dumps({"id": "1", "text": "one two three four five six"})])
    lines_file(tmp_path / "b.jsonl", [json.dumps({"id": "x", "text": "alpha beta gamma delta epsilon"}),
                                      json.dumps({"id": "x", "text": "one two three four five six"})])
    extra = ["--id-column", id_column] if id_column else []
    res = neardup("dedup", "a.jsonl", "--output", tmp_path / "out", "--quiet", *extra, cwd=tmp_path)
    err = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(err) == 1, res.stderr
    assert "a.jsonl:2: duplicate id '1'" in err[0] and "compared as text" in err[0], err
    res = neardup("dedup", "b.jsonl", "--output", tmp_path / "out2", "--quiet", *extra, cwd=tmp_path)
    assert res.returncode == 2 and "duplicate id 'x'" in res.stderr and "compared as text" not in res.stderr, res.stderr
