"""Rules of the pipeline that a one-line change of the code must not pass unnoticed: the
threshold is inclusive, the keep rule is the one asked for, the counts are checked before the
run is published, the work directory goes away, calls in threads stay independent."""

from __future__ import annotations

import json
import threading

import numba
import numpy as np
import pyarrow as pa
import pyarrow.parquet  # noqa: F401  (pa.parquet)
import pytest

import neardup
from neardup.kernels.minhash import shingle_sets
from neardup.stages import write


def _jaccard(a: str, b: str) -> float:
    off, vals = shingle_sets([a, b])
    sa, sb = set(vals[off[0]:off[1]].tolist()), set(vals[off[1]:off[2]].tolist())
    return len(sa & sb) / len(sa | sb)


def _words(n, seed):
    rng = np.random.default_rng(seed)
    return [f"w{x}" for x in rng.integers(0, 100000, n)]


@pytest.mark.parametrize("verify", ["exact", "estimate"])
def test_a_pair_at_exactly_the_threshold_is_removed(tmp_path, verify):
    base = _words(120, 1)
    other = base[:100] + _words(20, 2)          # shares a prefix: J well above 0.5
    a, b = " ".join(base), " ".join(other)
    table = pa.table({"text": [a, b, " ".join(_words(120, 3))]})
    if verify == "exact":
        t = _jaccard(a, b)
    else:  # the estimate is what is compared: the share of equal signature values
        sig = neardup.MinHasher().signatures([a, b])
        t = float(np.mean(sig[0] == sig[1]))
    assert 0.5 < t < 0.95
    # many short bands: the pair is a candidate for sure, so only the verification decides
    opts = dict(verify=verify, bands=64, rows=2)
    at = neardup.dedup(table, threshold=t, **opts)
    assert at.stats["counts"]["removed"] == 1
    assert at.removed.column("similarity")[0].as_py() == t
    above = neardup.dedup(table, threshold=np.nextafter(t, 1.0), **opts)
    assert above.stats["counts"]["removed"] == 0


def test_exact_verification_through_the_work_dir_is_the_jaccard_of_the_fingerprint_sets(tmp_path):
    """Every verified pair's similarity, computed from the work dir's coded fingerprints, is the
    plain Python Jaccard of the two documents' sets of fingerprints (the high 32 bits of their
    64-bit shingle hashes), repeats and all; documents of all lengths, short and empty ones among
    them (mutation: decode one bucket off, or lose a repeat -> similarities differ)."""
    from neardup.testing.synth import generate_corpus
    texts = generate_corpus(300, seed=3, doc_words=40, jaccard_range=(0.3, 1.0)).texts
    texts += [texts[0] + " " + texts[0], "", "one two three", texts[1][: len(texts[1]) // 3]]
    texts += [" ".join(["same words again"] * 50), " ".join(["same words again"] * 49)]  # repeats
    texts += generate_corpus(12, seed=4, doc_words=900, dup_fraction=0.5).texts  # codes of 8+ high bits
    src = tmp_path / "c.jsonl"
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    work = tmp_path / "work"
    neardup.dedup(str(src), output=str(tmp_path / "out"), work_dir=str(work), threshold=0.3, bands=40, rows=3)
    pairs = pa.concat_tables([pa.ipc.open_file(pa.memory_map(str(p))).read_all()
                              for p in sorted((work / "pairs").glob("part-*.arrow"))])
    assert pairs.num_rows > 100
    off, vals = shingle_sets(texts)
    fp = [set((vals[off[i]:off[i + 1]] >> np.uint64(32)).tolist()) for i in range(len(texts))]
    for left, right, sim in zip(*(pairs.column(c).to_pylist() for c in ("left", "right", "similarity"))):
        a, b = fp[left], fp[right]
        assert sim == len(a & b) / len(a | b), (left, right)
    assert max(len(fp[d]) for d in pairs.column("left").to_pylist()) > 600


def test_keep_score_picks_by_the_column_not_by_length_or_order(tmp_path):
    words = _words(60, 7)
    texts = [" ".join(words), " ".join(words + ["extra", "words", "here"]), " ".join(words + ["x"])]
    # by order the first would stay, by length the second; the score says the third
    table = pa.table({"text": texts, "q": [1.0, 2.0, 9.0]})
    res = neardup.dedup(table, keep="score:q", threshold=0.8)
    assert res.kept.column("q").to_pylist() == [9.0]
    assert neardup.dedup(table, keep="longest", threshold=0.8).kept.column("q").to_pylist() == [2.0]
    assert neardup.dedup(table, threshold=0.8).kept.column("q").to_pylist() == [1.0]


def test_counts_that_do_not_add_up_stop_the_run_before_stats_are_published(tmp_path, monkeypatch):
    from neardup import io as nio
    lines = [json.dumps({"text": " ".join(_words(50, i))}) for i in range(20)]
    (tmp_path / "c.jsonl").write_text("\n".join(lines) + "\n")
    real = nio.write_kept

    def loses_a_row(src, keep_rows, out_path, **kw):  # a writer with a bug: one row short
        return real(src, np.asarray(keep_rows)[1:], out_path, **kw)

    monkeypatch.setattr(nio, "write_kept", loses_a_row)
    monkeypatch.setattr(write, "copies_lines", lambda *a: False)  # the lines copied from their bounds: not here
    with pytest.raises(RuntimeError, match="counts do not add up.*report this bug"):
        neardup.dedup(str(tmp_path / "c.jsonl"), output=str(tmp_path / "out"))
    assert not (tmp_path / "out" / "stats.json").exists()


def test_the_work_dir_is_gone_after_a_run_unless_asked_for(tmp_path):
    lines = [json.dumps({"text": " ".join(_words(50, i % 7))}) for i in range(30)]
    (tmp_path / "c.jsonl").write_text("\n".join(lines) + "\n")
    neardup.dedup(str(tmp_path / "c.jsonl"), output=str(tmp_path / "out"))
    assert not (tmp_path / "out" / ".neardup-work").exists()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        ".neardup", ".neardup.lock", "clusters.parquet", "kept", "removed.parquet", "report.html", "stats.json",
        "texts_sample.parquet"]
    neardup.dedup(str(tmp_path / "c.jsonl"), output=str(tmp_path / "out2"), work_dir=str(tmp_path / "w"))
    assert (tmp_path / "w" / "state.json").exists()


def test_the_fingerprints_go_from_the_write_stage_on_the_rest_after(tmp_path, monkeypatch):
    """The read stage's .fp files go in a thread begun by the write stage and joined before the
    run returns, the rest of the work dir after the publish; a signal during the report leaves
    a work dir that --resume finishes (mutations: no removal begun -> no thread and the files
    there during the report; no join -> the thread outlives the run (a slow one here);
    state.json or the .arrow blocks removed with them -> no resume; a kept work dir's removed
    too -> its .fp files gone)."""
    import threading
    import time

    from neardup.report import html
    from neardup.stages import workdir

    lines = [json.dumps({"text": " ".join(_words(50, i % 7))}) for i in range(30)]
    (tmp_path / "c.jsonl").write_text("\n".join(lines) + "\n")
    work = tmp_path / "out" / ".neardup-work"
    seen, done = [], []
    real_report, real_remove = html.write_report, workdir.WorkDir._remove_fingerprints

    def report(*a, **k):
        seen.append(any(t.name == "neardup-work-removal" for t in threading.enumerate())
                    or not list(work.glob("read/*.fp")))
        return real_report(*a, **k)

    def slow(self):
        time.sleep(0 if done else 0.3)  # the first run: a slow removal
        real_remove(self)
        done.append(1)

    monkeypatch.setattr(html, "write_report", report)
    monkeypatch.setattr(workdir.WorkDir, "_remove_fingerprints", slow)
    neardup.dedup(str(tmp_path / "c.jsonl"), output=str(tmp_path / "out"))
    assert seen == [True] and done == [1] and not work.exists()
    fresh = (tmp_path / "out" / "removed.parquet").read_bytes()

    def interrupted(*a, **k):
        for t in threading.enumerate():
            if t.name == "neardup-work-removal":
                t.join()
        raise KeyboardInterrupt

    monkeypatch.setattr(html, "write_report", interrupted)
    with pytest.raises(KeyboardInterrupt):
        neardup.dedup(str(tmp_path / "c.jsonl"), output=str(tmp_path / "o2"))
    w2 = tmp_path / "o2" / ".neardup-work"
    assert not list(w2.glob("read/*.fp")) and list(w2.glob("read/*.arrow")) and (w2 / "state.json").exists()
    monkeypatch.setattr(html, "write_report", real_report)
    neardup.dedup(str(tmp_path / "c.jsonl"), output=str(tmp_path / "o2"), resume=True)
    assert (tmp_path / "o2" / "removed.parquet").read_bytes() == fresh and not w2.exists()
    # a work dir kept (given, or --keep-work) keeps them
    neardup.dedup(str(tmp_path / "c.jsonl"), output=str(tmp_path / "o3"), work_dir=str(tmp_path / "w3"))
    assert list((tmp_path / "w3").glob("read/*.fp")) and len(done) == 3  # the three runs before


def test_calls_in_two_threads_are_independent(tmp_path):
    from neardup.testing.synth import generate_corpus
    tables = [pa.table({"text": generate_corpus(800, seed=s, doc_words=50).texts}) for s in (1, 2)]
    options = [dict(workers=1, verify="exact"), dict(workers=2, verify="estimate", threshold=0.7)]
    alone = [neardup.dedup(t, **o) for t, o in zip(tables, options)]
    threads_before, arrow_before = numba.get_num_threads(), pa.cpu_count()
    results = [None, None]

    def run(i):
        results[i] = neardup.dedup(tables[i], **options[i])

    workers = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    for got, want in zip(results, alone):
        assert got.removed.equals(want.removed) and got.kept.equals(want.kept)
        assert got.stats["counts"] == want.stats["counts"]
    assert numba.get_num_threads() == threads_before and pa.cpu_count() == arrow_before


def test_more_documents_than_a_run_can_index_is_a_clear_error(tmp_path, monkeypatch):
    from neardup.stages import read
    monkeypatch.setattr(read, "MAX_DOCUMENTS", 10)
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"text": f"doc {i}"}) + "\n" for i in range(12)))
    with pytest.raises(neardup.InputError, match="fewer than 2\\^32"):
        neardup.dedup(str(tmp_path / "c.jsonl"), output=str(tmp_path / "out"))


def test_a_bug_is_reported_as_a_bug_not_as_a_user_error(tmp_path, monkeypatch, capsys):
    """An internal invariant that fails: a traceback and a request for a bug report, exit 1
    (a user's mistake is one line and exit 2)."""
    from neardup.cli import main
    from neardup.stages import write
    lines = [json.dumps({"text": " ".join(_words(50, i))}) for i in range(5)]
    (tmp_path / "c.jsonl").write_text("\n".join(lines) + "\n")

    def broken(*args, **kwargs):
        raise RuntimeError("internal error: counts do not add up; please report this bug")

    monkeypatch.setattr(write, "build_stats", broken)
    assert main(["dedup", str(tmp_path / "c.jsonl"), "-o", str(tmp_path / "out"), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "this is a bug in neardup" in err
    assert main(["dedup", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "out2"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("neardup: error:")


@pytest.mark.parametrize("partitions", [1, 3])
@pytest.mark.parametrize("verify", ["exact", "estimate", "none"])
def test_empty_documents_are_never_candidates(verify, partitions, monkeypatch):
    """An empty document (no tokens: empty, white space, punctuation or symbols only) has no
    shingles: it is never a candidate and is always kept (README, Shingles). Their signatures are
    all alike (every value the empty one), so were they eligible the estimate (or no verification)
    would call them copies of each other and remove all but one. Both paths of the pair stage: one
    partition (PairsStage.whole) and the band rows shuffled to partitions (band_rows)."""
    from neardup.engines.local import LocalEngine
    monkeypatch.setattr(LocalEngine, "partitions", lambda self, nbytes: partitions)
    empties = ["", "   ", "!!! ...", "-- >> ++", "\n\t"]
    text = " ".join(_words(60, 4))
    texts = empties + [text, text]
    res = neardup.dedup(texts, verify=verify, bands=64, rows=2)
    assert res.stats["counts"]["empty_documents"] == len(empties)
    assert res.stats["counts"]["candidate_pairs"] == 1  # the two copies only
    assert sorted(res.kept) == list(range(len(empties) + 1))
