"""End to end: `neardup dedup` over real files, from the command line and the Python API."""

from __future__ import annotations

import gzip
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

import neardup

from helpers import ROOT, child_env, neardup_command, run_cli, run_in_process, write_jsonl


# --------------------------------------------------------------------------- corpora

def _words(rng, n, vocab=4000):
    return [f"w{rng.randrange(vocab)}" for _ in range(n)]


def make_docs(n_base=60, copies=2, seed=0, words=80, edit=0.008):
    """Base documents and near-copies (a few words changed). Returns list of dicts with
    'id', 'text' and 'base' (the base document's index)."""
    rng = random.Random(seed)
    docs = []
    bases = [_words(rng, words) for _ in range(n_base)]
    for b, w in enumerate(bases):
        docs.append({"id": f"d{len(docs)}", "text": " ".join(w), "base": b})
        for _ in range(copies):
            c = list(w)
            for i in range(len(c)):
                if rng.random() < edit:
                    c[i] = f"x{rng.randrange(10**6)}"
            docs.append({"id": f"d{len(docs)}", "text": " ".join(c), "base": b})
    rng.shuffle(docs)
    return docs


def read_outputs(out):
    out = Path(out)
    removed = pq.read_table(out / "removed.parquet").to_pylist()
    clusters = pq.read_table(out / "clusters.parquet").to_pylist()
    stats = json.loads((out / "stats.json").read_text())
    return removed, clusters, stats


def kept_ids_jsonl(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    if str(path).endswith(".zst"):
        data = zstandard.ZstdDecompressor().decompressobj().decompress(Path(path).read_bytes())
        lines = data.decode().splitlines()
    else:
        with opener(path, "rt") as f:
            lines = f.read().splitlines()
    return [json.loads(x)["id"] for x in lines if x.strip()]


def file_bytes(folder):
    folder = Path(folder)
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file() and ".neardup-work" not in p.parts:
            rel = str(p.relative_to(folder))
            data = p.read_bytes()
            if rel == "stats.json":
                d = json.loads(data)
                d.pop("seconds")
                data = json.dumps(d, sort_keys=True).encode()
            out[rel] = data
    return out


# --------------------------------------------------------------------------- happy paths

@pytest.fixture(scope="module")
def docs():
    return make_docs()


def check_conservation(out, input_ids, kept_ids, stats):
    removed, clusters, _ = read_outputs(out)
    removed_ids = [r["id"] for r in removed]
    rejected_ids = []
    c = stats["counts"]
    assert c["input"] == c["kept"] + c["removed"] + c["rejected"]
    assert len(kept_ids) == c["kept"] and len(removed_ids) == c["removed"]
    assert sorted(kept_ids + removed_ids + rejected_ids) == sorted(input_ids)
    assert len(set(kept_ids) | set(removed_ids)) == len(input_ids)
    # every representative is kept and shares the cluster
    kept = set(kept_ids)
    cluster_of = {r["id"]: r["cluster"] for r in clusters}
    for r in removed:
        assert r["representative"] in kept
        assert cluster_of[r["id"]] == cluster_of[r["representative"]] == r["cluster"]
        assert r["similarity"] >= stats["params"]["threshold"]


@pytest.mark.parametrize("name", ["c.jsonl", "c.json", "c.jsonl.gz", "c.jsonl.zst"])
def test_jsonl_formats_end_to_end(tmp_path, docs, name):
    src = write_jsonl(tmp_path / name, docs)
    out = tmp_path / "out"
    assert run_cli("dedup", src, "--output", out, "--id-column", "id", "--quiet") == 0
    removed, clusters, stats = read_outputs(out)
    kept_file = out / "kept" / name
    assert kept_file.exists()
    kept = kept_ids_jsonl(kept_file)
    check_conservation(out, [d["id"] for d in docs], kept, stats)
    # every removed document is a near-copy of its representative: same base document
    base = {d["id"]: d["base"] for d in docs}
    for r in removed:
        assert base[r["id"]] == base[r["representative"]]
    # at 0.8% word edits nearly every group collapses to one document
    assert stats["counts"]["removed"] >= 0.8 * (len(docs) - 60)
    # kept lines are the input lines, byte for byte
    raw = {json.loads(line)["id"]: line for line in
           (gzip.decompress(src.read_bytes()) if name.endswith(".gz") else
            zstandard.ZstdDecompressor().decompressobj().decompress(src.read_bytes()) if name.endswith(".zst")
            else src.read_bytes()).decode().splitlines()}
    kept_raw = (gzip.decompress(kept_file.read_bytes()) if name.endswith(".gz") else
                zstandard.ZstdDecompressor().decompressobj().decompress(kept_file.read_bytes())
                if name.endswith(".zst") else kept_file.read_bytes()).decode().splitlines()
    assert kept_raw == [raw[i] for i in kept]
    # the report's sample: texts of the largest clusters' members, exactly as in the input
    sample = pq.read_table(out / "texts_sample.parquet").to_pylist()
    text_of = {d["id"]: d["text"] for d in docs}
    assert sample and all(r["text"] == text_of[r["id"]] for r in sample)
    in_clusters = {r["id"] for r in clusters}
    assert {r["id"] for r in sample} <= in_clusters


def test_default_ids_are_file_and_line(tmp_path, docs):
    src = tmp_path / "c.jsonl"
    lines = [json.dumps({"text": d["text"]}) for d in docs]
    lines.insert(5, "")  # a blank line is not a record but counts as a line
    src.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    assert run_cli("dedup", src, "--output", out, "--quiet") == 0
    removed, clusters, stats = read_outputs(out)
    assert stats["counts"]["input"] == len(docs)
    for r in removed:
        name, line = r["id"].rsplit(":", 1)
        assert name == "c.jsonl" and r["source"] == str(src)  # the id: the path below kept/'s root
        line = int(line)  # 1-based, as in the error messages; the row column is 0-based
        assert lines[line - 1] != "" and line != 6 and r["row"] == line - 1


def test_parquet_end_to_end_keeps_every_field(tmp_path, docs):
    table = pa.table({"id": [d["id"] for d in docs], "text": [d["text"] for d in docs],
                      "base": [d["base"] for d in docs], "score": [float(i) for i in range(len(docs))]})
    pq.write_table(table, tmp_path / "c.parquet")
    out = tmp_path / "out"
    assert run_cli("dedup", tmp_path / "c.parquet", "--output", out, "--id-column", "id", "--quiet") == 0
    kept = pq.read_table(out / "kept" / "c.parquet")
    assert kept.schema == table.schema
    removed, clusters, stats = read_outputs(out)
    check_conservation(out, table.column("id").to_pylist(), kept.column("id").to_pylist(), stats)
    by_id = {r["id"]: r for r in table.to_pylist()}
    for row in kept.to_pylist():
        assert row == by_id[row["id"]]


def test_text_folder_end_to_end(tmp_path, docs):
    folder = tmp_path / "texts"
    for i, d in enumerate(docs[:40]):
        sub = folder / f"part{i % 3}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"{d['id']}.txt").write_text(d["text"])
    (folder / "part0" / "empty.txt").write_text("")
    out = tmp_path / "out"
    assert run_cli("dedup", folder, "--output", out, "--quiet") == 0
    removed, clusters, stats = read_outputs(out)
    all_files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*.txt"))
    kept_files = sorted(str(p.relative_to(out / "kept")) for p in (out / "kept").rglob("*.txt"))
    removed_files = sorted(r["id"] for r in removed)  # ids: the paths below kept/'s root
    assert sorted(kept_files + removed_files) == all_files
    assert "part0/empty.txt" in kept_files  # an empty document is kept, never a duplicate
    assert stats["counts"]["empty_documents"] == 1
    for p in kept_files:
        assert (out / "kept" / p).read_bytes() == (folder / p).read_bytes()


def test_many_files_and_output_conversion(tmp_path, docs):
    a = write_jsonl(tmp_path / "in" / "a.jsonl", docs[:90]) if (tmp_path / "in").mkdir() is None else None
    b = write_jsonl(tmp_path / "in" / "sub" / "b.jsonl.gz", docs[90:]) if (tmp_path / "in" / "sub").mkdir() is None else None
    out = tmp_path / "out"
    assert run_cli("dedup", tmp_path / "in", "--output", out, "--id-column", "id", "--output-format", "parquet",
                   "--quiet") == 0
    ka = pq.read_table(out / "kept" / "a.parquet")
    kb = pq.read_table(out / "kept" / "sub" / "b.parquet")
    removed, clusters, stats = read_outputs(out)
    check_conservation(out, [d["id"] for d in docs], ka.column("id").to_pylist() + kb.column("id").to_pylist(), stats)
    assert {r["source"] for r in removed} <= {str(a), str(b)}


@pytest.mark.parametrize("verify", ["exact", "estimate", "none"])
def test_verify_modes(tmp_path, docs, verify):
    src = write_jsonl(tmp_path / "c.jsonl", docs)
    out = tmp_path / "out"
    assert run_cli("dedup", src, "--output", out, "--id-column", "id", "--verify", verify, "--quiet") == 0
    removed, clusters, stats = read_outputs(out)
    assert stats["params"]["verify"] == verify
    assert stats["counts"]["removed"] > 0
    if verify == "none":
        assert stats["counts"]["verified_pairs"] == stats["counts"]["candidate_pairs"]


def test_keep_longest_and_score(tmp_path):
    docs = [{"id": "short", "text": "a b c d e f g h i j k l m", "q": 1.0},
            {"id": "long", "text": "a b c d e f g h i j k l m n", "q": 5.0},
            {"id": "mid", "text": "a b c d e f g h i j k l m", "q": None}]
    src = write_jsonl(tmp_path / "c.jsonl", docs)
    out = tmp_path / "o1"
    assert run_cli("dedup", src, "--output", out, "--id-column", "id", "--keep", "longest", "--quiet",
                   "--threshold", "0.5") == 0
    assert kept_ids_jsonl(out / "kept" / "c.jsonl") == ["long"]
    out = tmp_path / "o2"
    assert run_cli("dedup", src, "--output", out, "--id-column", "id", "--keep", "score:q", "--quiet",
                   "--threshold", "0.5") == 0
    assert kept_ids_jsonl(out / "kept" / "c.jsonl") == ["long"]
    out = tmp_path / "o3"
    assert run_cli("dedup", src, "--output", out, "--id-column", "id", "--quiet", "--threshold", "0.5") == 0
    assert kept_ids_jsonl(out / "kept" / "c.jsonl") == ["short"]


def test_chain_guard_end_to_end(tmp_path):
    # A~B and B~C (J = 0.8 each) but A and C share much less: C must survive.
    rng = random.Random(3)
    base = _words(rng, 200)
    a = list(base)
    b = list(base)
    for i in range(0, 200, 40):
        b[i] = "bb%d" % i
    c = list(b)
    for i in range(20, 200, 40):
        c[i] = "cc%d" % i
    docs = [{"id": "A", "text": " ".join(a)}, {"id": "B", "text": " ".join(b)}, {"id": "C", "text": " ".join(c)}]
    src = write_jsonl(tmp_path / "c.jsonl", docs)
    out = tmp_path / "out"
    assert run_cli("dedup", src, "--output", out, "--id-column", "id", "--threshold", "0.75", "--quiet") == 0
    removed, clusters, stats = read_outputs(out)
    sims = {r["id"]: r for r in removed}
    assert "C" in kept_ids_jsonl(out / "kept" / "c.jsonl")
    assert sims["B"]["representative"] == "A"


# --------------------------------------------------------------------------- determinism and resume

def test_same_input_same_bytes(tmp_path, docs):
    src = write_jsonl(tmp_path / "c.jsonl.gz", docs)
    for o in ("o1", "o2"):
        assert run_cli("dedup", src, "--output", tmp_path / o, "--id-column", "id", "--quiet") == 0
    one, two = file_bytes(tmp_path / "o1"), file_bytes(tmp_path / "o2")
    assert one.keys() == two.keys()
    assert {"kept/c.jsonl.gz", "removed.parquet", "clusters.parquet", "stats.json", "report.html"} <= one.keys()
    for k in one:
        assert one[k] == two[k], k


def test_different_seed_still_finds_the_same_duplicates(tmp_path, docs):
    src = write_jsonl(tmp_path / "c.jsonl", docs)
    sets = []
    for seed in (1, 2):
        out = tmp_path / f"o{seed}"
        assert run_cli("dedup", src, "--output", out, "--id-column", "id", "--seed", seed, "--quiet") == 0
        sets.append({r["id"] for r in read_outputs(out)[0]})
    assert len(sets[0] ^ sets[1]) <= 0.05 * len(sets[0])


def _synthetic_jsonl(path, n):
    from neardup.testing.synth import generate_corpus, write_jsonl as wj
    c = generate_corpus(n, seed=5)
    texts = c[0] if isinstance(c, tuple) else c.texts
    wj(path, texts)
    return path


@pytest.mark.slow
def test_resume_after_kill_gives_the_same_output(tmp_path):
    src = _synthetic_jsonl(tmp_path / "big.jsonl", 6000)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    ref = tmp_path / "ref"
    assert run_cli("dedup", src, "--output", ref, "--quiet") == 0  # the reference: in this process
    out = tmp_path / "out"
    work = tmp_path / "work"
    cmd = [sys.executable, "-m", "neardup", "dedup", str(src), "--output", str(out), "--work-dir", str(work),
           "--quiet", "--batch-size", "500"]
    proc = subprocess.Popen(cmd, env=env)
    state = work / "state.json"
    deadline = time.time() + 120
    killed_after = None
    while time.time() < deadline and proc.poll() is None:
        try:
            done = json.loads(state.read_text()).get("done", {})
        except (OSError, ValueError):
            done = {}
        if "read" in done:
            proc.send_signal(signal.SIGKILL)
            killed_after = sorted(done)
            break
        time.sleep(0.01)
    proc.wait()
    assert killed_after is not None, "the run ended before it could be killed"
    assert not (out / "stats.json").exists(), "killed run must not look complete"
    # resume: the finished stages are not run again, and the result is the same
    assert run_cli(*cmd[3:], "--resume") == 0
    assert file_bytes(ref) == file_bytes(out)


SLOW_READ = """
import time
import neardup.stages.read as _read
_process = _read._process
def _slow(*args, **kwargs):  # each call of the kernels, then a pause: the run is still reading when the signal comes
    _process(*args, **kwargs)
    open({marker!r}, "a").close()
    time.sleep(0.2)
_read._process = _slow
"""


@pytest.mark.slow
def test_interrupt_exits_130_and_resume_gives_the_bytes_of_an_uninterrupted_run(tmp_path):
    """SIGINT (Ctrl-C) while the read stage runs: exit 130 at the next batch, a one-line message,
    no result published; --resume then finishes it with the bytes of a run never interrupted.
    The read stage is slowed by a pause after each batch, so the signal always comes mid-run."""
    src = _synthetic_jsonl(tmp_path / "big.jsonl", 3000)
    out, work, marker = tmp_path / "out", tmp_path / "work", tmp_path / "a-batch-was-read"
    args = ["dedup", str(src), "--output", str(out), "--work-dir", str(work), "--batch-size", "100"]
    proc = subprocess.Popen(neardup_command(*args, setup=SLOW_READ.format(marker=str(marker))), env=child_env(),
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not marker.exists() and proc.poll() is None:
        time.sleep(0.01)
    assert marker.exists(), "the run never read a batch"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "--resume" in err and "Traceback" not in err, err
    assert not (out / "stats.json").exists()
    assert run_cli(*args, "--resume", "--quiet") == 0
    ref = tmp_path / "ref"
    assert run_cli("dedup", str(src), "--output", str(ref), "--batch-size", "100", "--quiet") == 0
    assert file_bytes(ref) == file_bytes(out)
    assert json.loads((out / "stats.json").read_text())["counts"]["input"] == 3000


# --------------------------------------------------------------------------- Python API

def test_api_paths_table_pandas_hf(tmp_path, docs):
    import pandas as pd
    table = pa.table({"id": [d["id"] for d in docs], "text": [d["text"] for d in docs]})
    src = write_jsonl(tmp_path / "c.jsonl", docs)
    r_path = neardup.dedup(str(src), output=str(tmp_path / "o1"), id_column="id", quiet=True)
    assert r_path.kept == [str(tmp_path / "o1" / "kept" / "c.jsonl")]
    expected_removed = set(r_path.removed.column("id").to_pylist())

    r_table = neardup.dedup(table, output=str(tmp_path / "o2"), id_column="id")
    assert isinstance(r_table.kept, pa.Table)
    assert set(r_table.removed.column("id").to_pylist()) == expected_removed
    assert r_table.kept.num_rows + r_table.removed.num_rows == table.num_rows

    df = table.to_pandas()
    r_df = neardup.dedup(df, id_column="id")
    assert isinstance(r_df.kept, pd.DataFrame)
    assert set(df["id"]) - set(r_df.kept["id"]) == expected_removed
    assert list(r_df.kept.index) == [i for i, x in enumerate(df["id"]) if x not in expected_removed]

    import datasets
    ds = datasets.Dataset.from_pandas(df)
    r_ds = neardup.dedup(ds, id_column="id")
    assert isinstance(r_ds.kept, datasets.Dataset)
    assert set(r_ds.kept["id"]) == set(df["id"]) - expected_removed
    assert r_ds.stats["counts"]["removed"] == len(expected_removed)


def test_api_rejects_bad_options():
    with pytest.raises(neardup.ConfigError, match="threshold"):
        neardup.dedup(pa.table({"text": ["a"]}), threshold=1.5)
    with pytest.raises(neardup.ConfigError, match="unknown option"):
        neardup.dedup(pa.table({"text": ["a"]}), treshold=0.5)
    with pytest.raises(neardup.ConfigError, match="exceeds num_perm"):
        neardup.dedup(pa.table({"text": ["a"]}), bands=20, rows=10)


# --------------------------------------------------------------------------- the real command

@pytest.mark.slow  # a fresh Python process
def test_console_script_runs_on_the_example_corpus(tmp_path):
    exe = Path(sys.executable).with_name("neardup")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "neardup"]
    res = subprocess.run(cmd + ["dedup", str(ROOT / "examples" / "corpus.jsonl"), "--output", str(tmp_path / "o")],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "documents in" in res.stderr and "removed" in res.stderr
    stats = json.loads((tmp_path / "o" / "stats.json").read_text())
    assert stats["counts"]["input"] == 300
    assert stats["counts"]["removed"] >= 40


def test_help_explains_every_option():
    res = run_in_process("dedup", "--help")  # the text argparse prints: no fresh Python needed
    assert res.returncode == 0
    for opt in ("--threshold", "--num-perm", "--bands", "--rows", "--ngram", "--char-ngrams", "--text-column",
                "--id-column", "--verify", "--seed", "--keep", "--on-error", "--output-format", "--workers",
                "--work-dir", "--resume", "--quiet", "--engine", "--ray-address"):
        assert opt in res.stdout


def test_collector_paused_in_the_run_and_restored(tmp_path, monkeypatch):
    """Python's garbage collector is made rare during a run over files (its young generation's
    threshold raised, not turned off: cyclic garbage stays bounded) and set back after it exactly
    as the caller had it, an error included (api.collector_paused); a run over a table is left as
    it is."""
    import gc
    import pyarrow as pa
    import neardup.api as api
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(3):
        (folder / f"{i}.txt").write_text(f"document number {i} " * 20, encoding="utf-8")
    seen = []
    real = api.run

    def run(*args, **kwargs):
        seen.append((gc.isenabled(), gc.get_threshold()))
        if kwargs.get("keep_work") == "fail":
            raise RuntimeError("boom")
        return real(*args, **{**kwargs, "keep_work": False})

    monkeypatch.setattr(api, "run", run)
    was, threshold = gc.isenabled(), gc.get_threshold()
    try:
        gc.enable()
        gc.set_threshold(700, 11, 12)
        api.run_dedup(str(folder), str(tmp_path / "o1"), quiet=True)
        assert gc.get_threshold() == (700, 11, 12) and gc.isenabled()
        assert seen == [(True, (api.RUN_GC_THRESHOLD, 11, 12))]
        with pytest.raises(RuntimeError):
            api.run_dedup(str(folder), str(tmp_path / "o2"), quiet=True, keep_work="fail")
        assert gc.get_threshold() == (700, 11, 12) and seen[-1] == (True, (api.RUN_GC_THRESHOLD, 11, 12))
        api.run_dedup(pa.table({"text": ["a b c d e f"] * 3}), None, quiet=True)
        assert seen[-1] == (True, (700, 11, 12))  # an in-memory input: as the caller has it
        gc.disable()
        api.run_dedup(str(folder), str(tmp_path / "o3"), quiet=True)
        assert not gc.isenabled() and gc.get_threshold() == (700, 11, 12)
    finally:
        gc.set_threshold(*threshold)
        (gc.enable if was else gc.disable)()



@pytest.mark.parametrize("names,fmt,kept", [(("a.csv", "a.jsonl"), "parquet", "a.parquet"),
                                            (("a.csv", "a.jsonl"), "jsonl", "a.jsonl"),
                                            (("a.py", "a.py.jsonl"), "jsonl", "a.py.jsonl")])
def test_output_format_names_that_clash_are_refused(tmp_path, names, fmt, kept):
    # before: a.jsonl and a.csv were both written to kept/a.parquet, the second over the first:
    # exit 0, `kept` counted both, kept_files named a.parquet twice, one file's records lost
    (tmp_path / "d").mkdir()
    for i, name in enumerate(names):
        body = {".csv": f"text\ndoc number {i} of the clash\n", ".jsonl": json.dumps({"text": f"doc {i}"}) + "\n"}
        (tmp_path / "d" / name).write_text(body.get(Path(name).suffix, f"doc number {i} of the clash\n"))
    code, _, err = run_in_process("dedup", "d", "-o", "out", "-q", "--output-format", fmt, cwd=tmp_path)
    assert code == 2, err
    assert err.strip() == (f"neardup: error: two inputs would be written to the same output name {kept!r} "
                           f"(output format {fmt}): d/{names[0]} and d/{names[1]}")
    assert not (tmp_path / "out" / "stats.json").exists()


def test_mark_names_that_clash_are_refused(tmp_path):
    # before: the text file a.py (marked as marked/a.py.jsonl) and the input a.py.jsonl were
    # written to one file, the second over the first: exit 0, one input's documents lost
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.py").write_text("print('a text file of code, one document')\n")
    (tmp_path / "d" / "a.py.jsonl").write_text(json.dumps({"text": "a record of a data file"}) + "\n")
    code, _, err = run_in_process("dedup", "d", "-o", "out", "-q", "--mark", cwd=tmp_path)
    assert code == 2, err
    assert err.strip() == ("neardup: error: two inputs would be written to the same name in marked/ 'a.py.jsonl' "
                           "(a text file is marked as JSON Lines): d/a.py and d/a.py.jsonl")
    assert not (tmp_path / "out" / "stats.json").exists()
