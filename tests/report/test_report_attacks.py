"""report.html and ``neardup audit`` / ``neardup report`` under the conditions a user meets by
accident (issue 17): a run whose every removal is against an index, degenerate output folders,
clusters kept by the chain guard, output files that already exist or are the command's own
inputs, credentials in URLs, a folder that cannot be written and a full disk."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup.errors import ConfigError, NeardupError
from neardup.io.storage import outfile
from neardup.report.html import write_report

from helpers import run_cli as cli, write_jsonl

PLOT_MODES = ["svg", "matplotlib"]


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("neardup: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


def texts_of(n, seed, words=60):
    rng = random.Random(seed)
    return [" ".join(f"w{rng.randrange(5000)}" for _ in range(words)) for _ in range(n)]


def leftovers(folder):
    """Temporary files a writer left in ``folder`` (neardup's are '.NAME.PID.XXXX.tmp')."""
    return sorted(p.name for p in Path(folder).iterdir() if p.name.endswith(".tmp"))


def cluster_rows(page):
    """{member id: what the report says happened to it} from the 'Largest clusters' tables."""
    import re
    return {m.group(1): re.sub(r"<[^>]+>", "", m.group(2))
            for m in re.finditer(r'<tr(?: class="\w+")?><td><code>([^<]*)</code></td><td>(.*?)</td></tr>', page)}


# ---- 1. a run whose every removal is against an index ----------------------------------------

@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    """An index of 30 documents (added from corpus.jsonl)."""
    d = tmp_path_factory.mktemp("indexed")
    texts = texts_of(30, 1)
    write_jsonl(d / "corpus.jsonl", texts)
    assert cli("index", "add", d / "IDX", d / "corpus.jsonl") == 0
    return d, texts


def test_update_index_run_with_every_document_in_the_index(indexed, tmp_path, capsys):
    """The same texts again: every document matches the index, no cluster forms inside the run.
    Before: the report's cluster-size bins were empty and the run ended in a traceback."""
    d, texts = indexed
    idx = tmp_path / "IDX"
    shutil.copytree(d / "IDX", idx)
    copy = write_jsonl(tmp_path / "corpus_copy.jsonl", texts)
    out = tmp_path / "out"
    code = cli("dedup", copy, "-o", out, "--against", idx, "--update-index", "--quiet")
    err = capsys.readouterr().err
    assert code == 0, err
    assert "Traceback" not in err
    counts = json.loads((out / "stats.json").read_text())["counts"]
    assert counts["removed"] == counts["removed_against_index"] == 30 and counts["kept"] == 0
    assert counts["clusters"] == 0
    page = (out / "report.html").read_text()
    assert "No duplicate clusters in this run: every removed document was removed against an index" in page
    assert "30 documents of this run were removed as near-duplicates of 30 documents already in an index" in page
    # ids: this run's, the path below the inputs' common folder; the indexed one's by the index's
    # rule, the file as the add named it (its source there)
    assert f"<code>corpus_copy.jsonl:1</code></td><td>removed</td><td><code>{d / 'corpus.jsonl'}:1</code>" in page
    for mode in PLOT_MODES:  # neardup report redraws it, with either kind of picture
        assert cli("report", out, "--plots", mode) == 0
        assert "removed as near-duplicates of 30 documents" in (out / "report.html").read_text()


def test_against_and_clusters_of_the_run_together(indexed, tmp_path, capsys):
    """Index matches and a cluster of the run's own: the cluster is shown as one, the matched
    documents apart (their representative is not a document of the run)."""
    d, texts = indexed
    new = texts_of(1, 99, words=80)[0]
    edited = new.split()
    edited[40] = "changed"
    docs = texts[:5] + [new, " ".join(edited)]
    src = write_jsonl(tmp_path / "b.jsonl", docs)
    out = tmp_path / "out"
    assert cli("dedup", src, "-o", out, "--against", d / "IDX", "--quiet") == 0
    page = (out / "report.html").read_text()
    assert "cluster <code>b.jsonl:6</code>: 2 documents" in page
    assert f"cluster <code>{d / 'corpus.jsonl'}:" not in page  # an indexed document heads no cluster here
    assert "1 cluster, 2 documents in it;" in page  # (issue 22: plurals)
    assert "5 documents of this run were removed as near-duplicates of 5 documents already in an index" in page
    rows = cluster_rows(page)
    assert rows["b.jsonl:6"].startswith("kept: the representative")
    sim = {r["id"]: r["similarity"] for r in pq.read_table(out / "removed.parquet").to_pylist()}["b.jsonl:7"]
    assert rows["b.jsonl:7"] == f"removed, similarity {sim:.3f} to the representative b.jsonl:6"


# ---- degenerate folders -------------------------------------------------------------------

def _stats(folder, counts, **extra):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kept").mkdir(exist_ok=True)
    stats = {"counts": counts, "params": {"threshold": 0.8, "num_perm": 128, "bands": 13, "rows": 7}}
    stats.update(extra)
    (folder / "stats.json").write_text(json.dumps(stats))
    return folder


def _parquet(folder, name, columns):
    pq.write_table(pa.table(columns), folder / name)


EMPTY_REMOVED = {"id": pa.array([], pa.string()), "representative": pa.array([], pa.string()),
                 "cluster": pa.array([], pa.string()), "similarity": pa.array([], pa.float64()),
                 "source": pa.array([], pa.string()), "row": pa.array([], pa.int64()),
                 "representative_source": pa.array([], pa.string())}
EMPTY_CLUSTERS = {"id": pa.array([], pa.string()), "cluster": pa.array([], pa.string()),
                  "is_representative": pa.array([], pa.bool_())}


def build_degenerate(folder: Path, case: str) -> Path:
    if case == "no removals":
        _stats(folder, {"input": 3, "kept": 3, "removed": 0, "rejected": 0, "clusters": 0})
        _parquet(folder, "removed.parquet", EMPTY_REMOVED)
        _parquet(folder, "clusters.parquet", EMPTY_CLUSTERS)
        (folder / "kept" / "a.jsonl").write_text('{"text": "x"}\n' * 3)
    elif case == "nothing kept, all against an index":
        _stats(folder, {"input": 2, "kept": 0, "removed": 2, "removed_against_index": 2, "clusters": 0})
        _parquet(folder, "removed.parquet", {
            "id": ["n:1", "n:2"], "representative": ["o:1", "o:1"], "cluster": ["o:1", "o:1"],
            "similarity": [1.0, 0.9], "source": ["n", "n"], "row": [0, 1], "representative_source": ["o", "o"]})
        _parquet(folder, "clusters.parquet", {"id": ["n:1", "n:2"], "cluster": ["o:1", "o:1"],
                                              "is_representative": [False, False]})
    elif case == "all against an index, no clusters.parquet":
        build_degenerate(folder, "nothing kept, all against an index")
        (folder / "clusters.parquet").unlink()
    elif case == "all rejected":
        _stats(folder, {"input": 2, "kept": 0, "removed": 0, "rejected": 2})
        _parquet(folder, "removed.parquet", EMPTY_REMOVED)
        _parquet(folder, "clusters.parquet", EMPTY_CLUSTERS)
        _parquet(folder, "rejected.parquet", {"source": ["a.jsonl", "a.jsonl"], "row": [0, 1],
                                              "reason": ["broken JSON", "broken JSON"]})
    elif case == "empty input":
        _stats(folder, {"input": 0, "kept": 0, "removed": 0, "rejected": 0})
    elif case == "no similarities recorded":
        _stats(folder, {"input": 2, "kept": 1, "removed": 1}, params={"verify": "none"})
        _parquet(folder, "removed.parquet", {"id": ["b"], "representative": ["a"], "cluster": ["a"],
                                             "similarity": pa.array([None], pa.float64())})
    elif case == "a cluster of one (foreign clusters.parquet)":
        _stats(folder, {"input": 1, "kept": 1, "removed": 0})
        _parquet(folder, "clusters.parquet", {"id": ["a"], "cluster": ["a"]})  # no is_representative
    elif case == "odd stats values":
        _stats(folder, {"input": "many", "kept": None, "removed": "1e999", "weird": [1]},
               inputs=[{"name": 3}, "plain", 7, {"documents": 2}], params="not a dict", seconds=[1])
        _parquet(folder, "removed.parquet", {"id": ["b"], "representative": ["a"], "cluster": [5],
                                             "similarity": [float("nan")]})
    else:  # pragma: no cover
        raise AssertionError(case)
    return folder


DEGENERATE = ["no removals", "nothing kept, all against an index", "all against an index, no clusters.parquet",
              "all rejected", "empty input", "no similarities recorded",
              "a cluster of one (foreign clusters.parquet)", "odd stats values"]


@pytest.mark.parametrize("case", DEGENERATE)
@pytest.mark.parametrize("mode", PLOT_MODES)
@pytest.mark.slow
def test_report_of_degenerate_folders(tmp_path, case, mode):
    out = build_degenerate(tmp_path / "out", case)
    page = write_report(out, plots=mode).read_text()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert leftovers(out) == []


@pytest.mark.slow
def test_real_degenerate_runs(tmp_path, capsys):
    """Outputs of real runs: nothing removed, every record rejected, blank documents only."""
    (tmp_path / "distinct.jsonl").write_text('{"text": "one two three four five six"}\n'
                                             '{"text": "seven eight nine ten eleven twelve"}\n')
    (tmp_path / "blank.jsonl").write_text('{"text": ""}\n{"text": ""}\n')
    (tmp_path / "bad.jsonl").write_text('not json\n{broken\n')
    for name in ("distinct", "blank", "bad"):
        out = tmp_path / f"o_{name}"
        cli("dedup", tmp_path / f"{name}.jsonl", "-o", out, "--quiet", "--on-error", "skip")
        capsys.readouterr()
        if not (out / "stats.json").exists():
            continue  # a run that refused (every record rejected) publishes no stats.json
        for mode in PLOT_MODES:
            assert cli("report", out, "--plots", mode) == 0, name
        assert "Traceback" not in capsys.readouterr().err


def test_damaged_parquet_files_are_one_line(tmp_path, capsys):
    out = build_degenerate(tmp_path / "out", "all rejected")
    (out / "rejected.parquet").write_bytes(b"PAR1 not really")
    assert cli("report", out) == 2
    assert "rejected.parquet" in one_line_error(capsys)
    out = build_degenerate(tmp_path / "out2", "no removals")
    (out / "clusters.parquet").write_bytes(b"garbage")
    assert cli("report", out) == 2
    assert "clusters.parquet" in one_line_error(capsys)


# ---- 2. what happened to each member of a cluster -------------------------------------------

def chain_docs():
    """A ~ B (0.81), B ~ C, A not ~ C at 0.75, D a near-copy of C: A kept, B removed for A, C
    kept by the chain guard, D removed for C."""
    rng = random.Random(3)
    base = [f"w{rng.randrange(4000)}" for _ in range(200)]
    a, b = list(base), list(base)
    for i in range(0, 200, 40):
        b[i] = "bb%d" % i
    c = list(b)
    for i in range(20, 200, 40):
        c[i] = "cc%d" % i
    d = list(c)
    d[7] = "dd"
    return [" ".join(x) for x in (a, b, c, d)]


@pytest.fixture(scope="module")
def chain_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("chain")
    src = write_jsonl(d / "c.jsonl", chain_docs(), ids=["A", "B", "C", "D"])
    out = d / "out"
    assert cli("dedup", src, "-o", out, "--id-column", "id", "--threshold", "0.75", "--quiet") == 0
    return out


def test_chain_guard_members_are_shown_as_kept(chain_run, tmp_path):
    out = chain_run
    clusters = pq.read_table(out / "clusters.parquet").to_pylist()
    removed = {r["id"]: r for r in pq.read_table(out / "removed.parquet").to_pylist()}
    kept = [json.loads(x)["id"] for x in (out / "kept" / "c.jsonl").read_text().splitlines()]
    assert kept == ["A", "C"] and set(removed) == {"B", "D"}  # the case this test is about
    for folder in (out, tmp_path / "no_clusters_file"):
        if folder != out:  # without clusters.parquet the report still knows C was kept (D's representative)
            shutil.copytree(out, folder)
            (folder / "clusters.parquet").unlink()
        page = write_report(folder, plots="svg").read_text()
        rows = cluster_rows(page)
        assert rows["C"].startswith("kept: not similar enough") and "chain guard" in rows["C"]
        assert rows["A"].startswith("kept: the representative")
        assert rows["B"] == f"removed, similarity {removed['B']['similarity']:.3f} to the representative A"
        assert rows["D"] == f"removed, similarity {removed['D']['similarity']:.3f} to C"
        assert "n/a" not in "".join(rows.values())
        # every member as the outputs say: kept ones in kept/ and flagged, removed ones with their similarity
        for r in clusters:
            assert rows[r["id"]].startswith("kept") == r["is_representative"] == (r["id"] in kept)
        # D is shown side by side with its own representative C, not with A
        i = page.index("removed <code>D</code>")
        assert page.rindex('<div class="h">representative <code>', 0, i) == page.rindex(
            '<div class="h">representative <code>C</code>', 0, i)
        assert "kept (chain guard) <code>C</code>" in page


# ---- 3. files written where the user says -------------------------------------------------

@pytest.fixture(scope="module")
def audit_corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("audit")
    base = texts_of(40, 5, words=80)
    docs = []
    for t in base:
        docs.append(t)
        w = t.split()
        w[10] = "x"
        docs.append(" ".join(w))
    return write_jsonl(d / "docs.jsonl", docs)


AUDIT = ("--sample", "200", "--max-docs", "80")


def test_audit_json_refuses_its_own_input(audit_corpus, tmp_path, capsys):
    src = tmp_path / "docs.jsonl"
    shutil.copy(audit_corpus, src)
    before = src.read_bytes()
    link = tmp_path / "link.json"
    link.symlink_to(src)
    for target in (src, tmp_path / "sub" / ".." / "docs.jsonl", link):
        (tmp_path / "sub").mkdir(exist_ok=True)
        for extra in ((), ("--overwrite",)):
            assert cli("audit", src, *AUDIT, "--json", target, *extra) == 2
            assert "input" in one_line_error(capsys)
            assert src.read_bytes() == before
    # a file inside an input folder: the next run would read it as an input
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(audit_corpus, folder / "docs.jsonl")
    assert cli("audit", folder, *AUDIT, "--json", folder / "audit.json") == 2
    assert "inside" in one_line_error(capsys)
    assert sorted(os.listdir(folder)) == ["docs.jsonl"]


def test_audit_json_refuses_an_existing_file_without_overwrite(audit_corpus, tmp_path, capsys):
    target = tmp_path / "audit.json"
    target.write_text("precious")
    # refused before any work: a broken input is not even read
    broken = tmp_path / "broken.jsonl"
    broken.write_text("not json\n")
    assert cli("audit", broken, "--json", target) == 2
    assert "--overwrite" in one_line_error(capsys)
    assert cli("audit", audit_corpus, *AUDIT, "--json", target) == 2
    err = one_line_error(capsys)
    assert "--overwrite" in err and str(target) in err
    assert target.read_text() == "precious"
    assert cli("audit", audit_corpus, *AUDIT, "--json", target, "--overwrite") == 0
    capsys.readouterr()
    assert json.loads(target.read_text())["documents"] == 80
    assert leftovers(tmp_path) == []
    # a new file needs no --overwrite; a folder is refused
    assert cli("audit", audit_corpus, *AUDIT, "--json", tmp_path / "new.json") == 0
    assert json.loads((tmp_path / "new.json").read_text())["documents"] == 80
    capsys.readouterr()
    assert cli("audit", audit_corpus, *AUDIT, "--json", tmp_path, "--overwrite") == 2
    assert "folder" in one_line_error(capsys)


def test_audit_plot_follows_the_same_rules(audit_corpus, tmp_path, capsys):
    plot = tmp_path / "a.png"
    plot.write_bytes(b"old")
    assert cli("audit", audit_corpus, *AUDIT, "--plot", plot) == 2
    assert "--overwrite" in one_line_error(capsys) and plot.read_bytes() == b"old"
    assert cli("audit", audit_corpus, *AUDIT, "--json", tmp_path / "x.svg", "--plot", tmp_path / "x.svg") == 2
    assert "same file" in one_line_error(capsys)
    assert cli("audit", audit_corpus, *AUDIT, "--plot", plot, "--overwrite") == 0
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert leftovers(tmp_path) == []


def test_report_output_rules(chain_run, tmp_path, capsys):
    out = tmp_path / "out"
    shutil.copytree(chain_run, out)
    stats = (out / "stats.json").read_bytes()
    kept = (out / "kept" / "c.jsonl").read_bytes()
    (tmp_path / "stats_link.html").symlink_to(out / "stats.json")
    for target in (out / "stats.json", out / "removed.parquet", out / "kept" / "c.jsonl", tmp_path / "stats_link.html",
                   out / "kept" / "new.html"):
        for extra in ((), ("--overwrite",)):
            assert cli("report", out, "-o", target, *extra) == 2, target
            one_line_error(capsys)
    assert (out / "stats.json").read_bytes() == stats and (out / "kept" / "c.jsonl").read_bytes() == kept
    assert not (out / "kept" / "new.html").exists()
    other = tmp_path / "other.html"
    other.write_text("precious")
    assert cli("report", out, "-o", other) == 2
    assert "--overwrite" in one_line_error(capsys) and other.read_text() == "precious"
    damaged = tmp_path / "damaged"
    shutil.copytree(out, damaged)
    (damaged / "removed.parquet").write_bytes(b"garbage")
    assert cli("report", damaged, "-o", other) == 2  # refused before the folder is read
    assert "--overwrite" in one_line_error(capsys)
    assert cli("report", out, "-o", other, "--overwrite", "--plots", "svg") == 0
    assert other.read_text().startswith("<!DOCTYPE html>")
    # the folder's own report.html is neardup's: replaced, by default or when named
    for argv in ((), ("-o", out / "report.html"), ("-o", out / "." / "report.html")):
        assert cli("report", out, "--plots", "svg", *argv) == 0
    capsys.readouterr()
    assert leftovers(out) == [] and leftovers(tmp_path) == []
    with pytest.raises(ConfigError):
        write_report(out, tmp_path / "other.html", plots="svg")


# ---- 4. credentials ---------------------------------------------------------------------------

SECRETS = ("SECRETZZ", "pwQQ", "pw2WW", "tokenYY")
URLS = ("s3://KEY:SECRETZZ@bucket/x.jsonl", "http://u:pwQQ@h/x.jsonl")


def test_report_never_shows_credentials(tmp_path):
    out = _stats(tmp_path / "out", {"input": 4, "kept": 1, "removed": 2, "rejected": 1, "removed_against_index": 1,
                                    "hdfs://tokenYY@h/p": 1},
                 inputs=[{"name": URLS[0], "documents": 2}, URLS[1]],
                 against=["redis://:pw2WW@h:6379/0"], output="s3://KEY:SECRETZZ@bucket/out",
                 index_update={"index": "redis://:pw2WW@h:6379/0", "added": 1})
    stats = json.loads((out / "stats.json").read_text())
    stats["params"]["against"] = ["redis://:pw2WW@h:6379/0"]
    (out / "stats.json").write_text(json.dumps(stats))
    a, b = f"{URLS[0]}:1", f"{URLS[1]}:1"
    _parquet(out, "removed.parquet", {
        "id": [f"{URLS[0]}:2", b], "representative": [a, "old:1"], "cluster": [a, "old:1"],
        "similarity": [0.9, 0.95], "source": [URLS[0], URLS[1]], "row": [1, 0],
        "representative_source": [None, "redis://:pw2WW@h:6379/0"]})
    _parquet(out, "clusters.parquet", {"id": [a, f"{URLS[0]}:2", b], "cluster": [a, a, "old:1"],
                                       "is_representative": [True, False, False]})
    _parquet(out, "rejected.parquet", {"source": [URLS[1]], "row": [3], "reason": [f"{URLS[1]}:4: broken JSON"]})
    _parquet(out, "texts_sample.parquet", {"id": [a, f"{URLS[0]}:2"], "text": ["one two three", "one two four"]})
    for mode in PLOT_MODES:
        page = write_report(out, plots=mode).read_text()
        for secret in SECRETS:
            assert secret not in page, (mode, secret)
        assert "s3://KEY:***@bucket/x.jsonl" in page and "http://u:***@h/x.jsonl" in page
        assert "one two <ins>four</ins>" in page  # the members are still matched with their texts


def test_messages_never_show_credentials(audit_corpus, tmp_path, capsys):
    assert cli("audit", audit_corpus, *AUDIT, "--json", "http://u:pwQQ@h/a.json") == 2
    err = one_line_error(capsys)
    assert "pwQQ" not in err and "http://u:***@h/a.json" in err
    out = build_degenerate(tmp_path / "out", "no removals")
    # a store that cannot be reached (nothing listens on port 1): the error names the URL, redacted
    for argv in ((out, "-o", "http://u:pwQQ@127.0.0.1:1/r.html"), ("http://u:pwQQ@127.0.0.1:1/out",)):
        assert cli("report", *argv, "--plots", "svg") == 2
        err = one_line_error(capsys)
        assert "pwQQ" not in err and "http://u:***@127.0.0.1:1/" in err
    # the exceptions themselves, for API users (the command line redacts what it prints again)
    with pytest.raises(NeardupError) as exc:
        write_report("http://u:pwQQ@127.0.0.1:1/out", plots="svg")
    assert "pwQQ" not in str(exc.value) and str(exc.value).startswith("http://u:***@127.0.0.1:1/out: ")
    with pytest.raises(ConfigError) as exc:
        outfile.check_output_file(f"{tmp_path}/nowhere/http://u:pwQQ@h/r.html")
    assert str(exc.value).startswith(f"cannot write {tmp_path}/nowhere/http://u:***@h/r.html: ")


# ---- 5. a folder that cannot be written, a full disk --------------------------------------------

def test_report_into_a_path_under_a_file(tmp_path, capsys):
    out = build_degenerate(tmp_path / "out", "no removals")
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    target = blocker / "r.html"
    assert cli("report", out, "-o", target) == 2
    err = one_line_error(capsys)
    assert str(target) in err and "not a folder" in err
    with pytest.raises(ConfigError, match="Not a directory"):  # the writer alone: the system's word
        outfile.publish_file(target, b"x")
    assert leftovers(tmp_path) == [] and blocker.read_text() == "x"


@pytest.fixture
def small_disk(tmp_path):
    """A 64 KiB tmpfs (as root); skipped where it cannot be mounted."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {r.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def fill(folder: Path, leave: int = 0):
    """Fill the file system of ``folder`` but for about ``leave`` bytes."""
    with open(folder / "filler", "wb", buffering=0) as fh:
        while True:
            try:
                fh.write(b"\0" * 1024)
            except OSError:
                break
    if leave:
        size = (folder / "filler").stat().st_size
        os.truncate(folder / "filler", max(0, size - leave))


def test_report_on_a_full_disk(small_disk, capsys):
    out = build_degenerate(small_disk / "out", "no removals")
    write_report(out, plots="svg")
    old = (out / "report.html").read_bytes()
    fill(small_disk)
    (out / "kept" / "a.jsonl").write_text("")  # a little room: the page does not fit in it
    with pytest.raises(ConfigError, match="No space left") as exc:
        write_report(out, plots="svg")
    assert str(out / "report.html") in str(exc.value) and "\n" not in str(exc.value)
    assert (out / "report.html").read_bytes() == old  # the old page, whole
    assert leftovers(out) == []
    assert cli("report", out, "--plots", "svg") == 2
    assert "No space left" in one_line_error(capsys)
    assert leftovers(out) == []


def test_audit_json_on_a_full_disk_keeps_the_old_file(audit_corpus, small_disk, capsys):
    target = small_disk / "audit.json"
    target.write_text('{"old": true}')
    fill(small_disk, leave=2048)  # the JSON (about 40 KB) does not fit
    assert cli("audit", audit_corpus, *AUDIT, "--json", target, "--overwrite") == 2
    told, err = capsys.readouterr().err.split("\n", 1)  # the audit's first line, then the error alone
    assert told.startswith("neardup: audit: reads the first documents")
    assert err.startswith("neardup: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert "No space left" in err and str(target) in err
    assert json.loads(target.read_text()) == {"old": True}
    assert leftovers(small_disk) == []


def test_publish_file_replaces_nothing_without_overwrite(tmp_path):
    """The writer itself (a file that appeared after the checks): linked to its name, never
    renamed over a file, and made with the permissions of any new file (not 0600)."""
    target = tmp_path / "f.json"
    target.write_text("old")
    with pytest.raises(ConfigError, match="exists"):
        outfile.publish_file(target, b"new")
    assert target.read_text() == "old" and leftovers(tmp_path) == []
    outfile.publish_file(target, b"new", overwrite=True)
    assert target.read_text() == "new"
    old_mask = os.umask(0o022)
    try:
        outfile.publish_file(tmp_path / "g.json", b"x")
    finally:
        os.umask(old_mask)
    assert (os.stat(tmp_path / "g.json").st_mode & 0o777) == 0o644
    assert leftovers(tmp_path) == []
