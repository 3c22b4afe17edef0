"""The persistent index on a folder: adds, queries, the pipeline seam, parameters, compaction, errors."""

import json
import os
import subprocess

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import neardup
from neardup.kernels.bands import band_keys
from neardup.errors import ConfigError, StorageError
from neardup.index import Index
from neardup.kernels.lookup import fingerprints
from neardup.kernels.verify import exact_jaccard

from helpers import child_env as env, neardup_command as cli, run_in_process, run_process, write_jsonl
from index_corpus import make_split


@pytest.fixture(scope="module")
def split():
    return make_split(600, seed=7)


@pytest.fixture(scope="module")
def built(tmp_path_factory, split):
    path = str(tmp_path_factory.mktemp("ix") / "a.ndx")
    idx = Index(path)
    idx.add(split.a_texts, ids=split.a_ids, name="A")
    return path


def test_query_finds_planted_near_duplicates_and_not_unrelated_documents(built, split):
    idx = Index(built)
    results = idx.query(split.b_texts)
    assert len(results) == len(split.b_texts)
    found = missed = 0
    for matches, orig, j in zip(results, split.b_original, split.b_jaccard):
        if orig < 0:
            assert matches == [], "an unrelated document matched"
            continue
        for m in matches:
            assert m.similarity >= 0.8 and m.source == "A"
        if j >= 0.8:
            hit = [m for m in matches if m.id == f"a{orig}"]
            found += bool(hit)
            missed += not hit
            if hit:  # the similarity is the exact Jaccard of the shingle sets (fingerprints: within 1e-3)
                assert abs(hit[0].similarity - j) < 1e-3
        else:
            assert all(m.id != f"a{orig}" or m.similarity >= 0.8 for m in matches)
    assert found > 50
    assert missed <= 0.05 * (found + missed)


def test_an_indexed_document_finds_itself_at_similarity_one(built, split):
    res = Index(built).query(split.a_texts[:20])
    assert [r[0].id for r in res] == split.a_ids[:20]
    assert all(r[0].similarity == 1.0 and r[0].source == "A" for r in res)


def test_empty_document_matches_nothing_and_is_stored(tmp_path):
    idx = Index(str(tmp_path / "e"))
    r = idx.add(["", "!!!", "one two three four five six"], name="x")
    assert r["added"] == 3 and r["empty"] == 2
    assert idx.query(["", "..."]) == [[], []]
    assert idx.stats()["documents"] == 3


def test_match_seam_equals_query(built, split):
    """match() over pre-hashed arrays (what the pipeline calls) gives each document its best query() match."""
    idx = Index(built)
    cfg = idx.config
    hasher = neardup.MinHasher.from_config(cfg)
    sigs, off, raw = hasher.signatures_and_shingles(split.b_texts)  # raw: text order, repeats
    off, raw = off.copy(), raw.copy()
    keys = band_keys(sigs, cfg.bands, cfg.rows, cfg.seed)
    m = idx.match(keys, sigs, (off, raw))
    q = idx.query(split.b_texts)
    expected = [(i, r[0].id, r[0].source, r[0].similarity) for i, r in enumerate(q) if r]
    got = list(zip(m.doc.tolist(), m.id.to_pylist(), m.source.to_pylist(), m.similarity.tolist()))
    assert got == expected
    assert m.to_table().num_rows == len(expected)
    with pytest.raises(ConfigError, match="shingles"):
        idx.match(keys, sigs)  # an exact index cannot verify from signatures alone
    with pytest.raises(ConfigError, match="keys must be"):
        idx.match(keys[:, :3], sigs, (off, raw))


def test_add_arrays_equals_add(tmp_path, split):
    a = Index(str(tmp_path / "texts"))
    a.add(split.a_texts, ids=split.a_ids, name="A")
    b = Index(str(tmp_path / "arrays"))
    cfg = b.config
    hasher = neardup.MinHasher.from_config(cfg)
    with b.writer() as w:  # two batches, one commit
        for lo, hi in ((0, 150), (150, len(split.a_texts))):
            sigs, off, raw = hasher.signatures_and_shingles(split.a_texts[lo:hi])
            w.add_arrays(band_keys(sigs, cfg.bands, cfg.rows, cfg.seed), split.a_ids[lo:hi], "A",
                         signatures=sigs, shingles=(off.copy(), raw.copy()))
    assert b.stats()["segments"] == 1
    assert a.query(split.b_texts[:80]) == b.query(split.b_texts[:80])


def test_writer_error_leaves_nothing(tmp_path, split):
    path = str(tmp_path / "w")
    idx = Index(path)
    idx.add(split.a_texts[:10], name="A")
    before = open(os.path.join(path, "manifest.json"), "rb").read()
    with pytest.raises(RuntimeError):
        with idx.writer() as w:
            w.add(split.a_texts[10:40], name="A")
            raise RuntimeError("boom")
    assert open(os.path.join(path, "manifest.json"), "rb").read() == before
    assert len(os.listdir(os.path.join(path, "segments"))) == 1
    # a first add that fails leaves no index: only the writers' lock file, which is never removed
    with pytest.raises(ConfigError):
        Index(str(tmp_path / "new")).add(split.a_texts[:3], ids=["x"], name="A")
    assert os.listdir(tmp_path / "new") == [".lock"]


def test_compact_keeps_query_results_identical(tmp_path, split):
    path = str(tmp_path / "c")
    idx = Index(path)
    for k in range(0, len(split.a_texts), 100):
        idx.add(split.a_texts[k:k + 100], ids=split.a_ids[k:k + 100], name=f"part{k // 100}")
    assert idx.stats()["segments"] > 3
    before = idx.query(split.b_texts)
    stats_before = idx.stats()
    reader = Index(path, refresh=3600)
    assert reader.query(split.b_texts) == before
    r = Index(path).compact()
    assert reader.query(split.b_texts) == before  # a reader keeps answering through a compaction
    assert r["segments_after"] == 1
    after = Index(path).query(split.b_texts)
    assert after == before
    s = Index(path).stats()
    assert s["documents"] == stats_before["documents"] and s["sources"] == stats_before["sources"]
    assert sorted(os.listdir(os.path.join(path, "segments"))) == [Index(path).storage.read_manifest()["segments"][0]["name"]]


def test_estimate_store(tmp_path, split):
    idx = Index(str(tmp_path / "est"), verify="estimate")
    idx.add(split.a_texts, ids=split.a_ids, name="A")
    s = idx.stats()
    assert s["store"] == "estimate" and "sig.u32" in s["bytes_per_document_by_file"]
    res = idx.query(split.b_texts)
    hits = sum(any(m.id == f"a{o}" for m in r) for r, o, j in zip(res, split.b_original, split.b_jaccard)
               if o >= 0 and j >= 0.85)
    total = sum(1 for o, j in zip(split.b_original, split.b_jaccard) if o >= 0 and j >= 0.85)
    assert hits >= 0.9 * total
    assert all(r == [] for r, o in zip(res, split.b_original) if o < 0)


def test_parameters_recorded_and_mismatch_refused(built, tmp_path):
    idx = Index(built)
    assert idx.params["ngram"] == 5 and idx.params["bands"] == 18 and idx.params["rows"] == 7
    with pytest.raises(ConfigError) as e:
        Index(built, ngram=3, seed=1)
    assert "ngram 5 (this run: 3)" in str(e.value) and "seed 42 (this run: 1)" in str(e.value)
    # a whole Config (a dedup run's) keeps its bands and rows for its own pairs: the index's are its own
    ix = Index(built, neardup.Config(threshold=0.7))
    assert (ix.config.bands, ix.config.rows, ix.config.threshold) == (18, 7, 0.7)
    with pytest.raises(ConfigError, match="bands 18 .*rows 7"):
        Index(built, bands=17, rows=5)  # options name them: compared
    Index(built, threshold=0.7)  # options: only what is given is compared, and threshold is free
    assert Index(built, neardup.Config(threshold=0.7, bands=18, rows=7)).config.threshold == 0.7


def test_fingerprint_jaccard_equals_exact_jaccard_on_pairs(split):
    """32-bit fingerprints change a pair's Jaccard only by a collision of low bits (tiny)."""
    mh = neardup.MinHasher()
    off, hashes = mh.shingle_sets(split.a_texts[:60] + split.b_texts[:60])
    fo, fv = fingerprints(off, hashes)
    left = np.arange(60)
    right = np.arange(60, 120)
    full = exact_jaccard(off, hashes, left, right)
    short = exact_jaccard(fo, fv, left, right)
    assert np.max(np.abs(full - short)) < 1e-3


# ---------------------------------------------------------------------------- command line

def run(*args, check_rc=None, runner=run_process):
    p = runner(*args)
    if check_rc is not None:
        assert p.returncode == check_rc, p.stderr
    return p


def run_here(*args, check_rc=None):
    """:func:`run` in this process (a test of what the commands do, not of the process)."""
    return run(*args, check_rc=check_rc, runner=run_in_process)


@pytest.mark.slow
def test_cli_add_query_stats_compact(tmp_path, split):
    a = write_jsonl(str(tmp_path / "a.jsonl"), split.a_texts, split.a_ids)
    b = write_jsonl(str(tmp_path / "b.jsonl"), split.b_texts, split.b_ids)
    ix = str(tmp_path / "ix")
    run_here("index", "add", ix, a, "--name", "dumpA", "--id-column", "id", check_rc=0)
    run_here("index", "add", ix, b, "--name", "dumpB", "--id-column", "", check_rc=0)  # ids FILE:LINE, asked for
    s = json.loads(run_here("index", "stats", ix, check_rc=0).stdout)
    assert s["documents"] == len(split.a_texts) + len(split.b_texts)
    assert s["source_count"] == 2 and "sources" not in s  # bounded by default (issue 30)
    s = json.loads(run("index", "stats", ix, "--full", check_rc=0).stdout)
    assert s["sources"] == {"dumpA": len(split.a_texts), "dumpB": len(split.b_texts)}
    assert s["segments"] == 2 and s["params"]["ngram"] == 5
    out = str(tmp_path / "q.parquet")
    run_here("index", "query", ix, b, "--output", out, check_rc=0)  # b's records have an id field: their ids
    t = pq.read_table(out).to_pylist()
    assert len(t) == len(split.b_texts) and t[0]["id"] == split.b_ids[0]
    assert [m["id"] for m in t[0]["matches"]][:1] == ["dumpB/b.jsonl:1"]  # positions in an index: NAME/FILE:LINE with --name
    for row in t:  # every B document finds itself in dumpB first
        assert row["matches"][0]["source"] == "dumpB" and row["matches"][0]["similarity"] == 1.0
    j = run_here("index", "query", ix, a, check_rc=0).stdout.splitlines()
    first = json.loads(j[0])
    assert first["matches"][0] == {"id": "a0", "source": "dumpA", "similarity": 1.0}
    run_here("index", "compact", ix, check_rc=0)
    assert json.loads(run_here("index", "stats", ix, check_rc=0).stdout)["segments"] == 1


@pytest.mark.slow
def test_cli_errors_one_line_exit_2_nothing_written(tmp_path, split):
    a = write_jsonl(str(tmp_path / "a.jsonl"), split.a_texts[:30], split.a_ids[:30])
    ix = str(tmp_path / "ix")
    run_here("index", "add", ix, a, check_rc=0)
    manifest = open(os.path.join(ix, "manifest.json"), "rb").read()
    segs = sorted(os.listdir(os.path.join(ix, "segments")))

    def one_line(p, pattern):
        assert p.returncode == 2, p.stderr
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("neardup: error: ") and pattern in lines[0], p.stderr

    # the exit status and the one line of a process: here, and for an unreachable server below;
    # the other errors take the same path out of main(), in this process
    one_line(run("index", "add", ix, a, "--ngram", "3"), "ngram 5 (this run: 3)")
    one_line(run_here("index", "add", ix, a, "--bands", "4", "--rows", "8"), "bands 18 (this run: 4)")
    one_line(run_here("index", "add", ix, str(tmp_path / "missing.jsonl")), "no such file")
    out = str(tmp_path / "q.jsonl")
    one_line(run_here("index", "query", str(tmp_path / "nope"), a, "-o", out), "no index at")
    assert not os.path.exists(out) and not os.path.exists(tmp_path / "nope")
    one_line(run_here("index", "stats", str(tmp_path / "nope")), "no index at")
    one_line(run("index", "query", "redis://127.0.0.1:1/0", a, "-o", out), "cannot reach Redis")
    one_line(run_here("index", "add", "redis://127.0.0.1:1/0", a), "cannot reach Redis")
    assert not os.path.exists(out)
    assert open(os.path.join(ix, "manifest.json"), "rb").read() == manifest
    assert sorted(os.listdir(os.path.join(ix, "segments"))) == segs

    # a damaged manifest, a lost or truncated segment file: one line each
    bad = str(tmp_path / "bad")
    run_here("index", "add", bad, a, check_rc=0)
    mpath = os.path.join(bad, "manifest.json")
    good = open(mpath, "rb").read()
    open(mpath, "wb").write(good.replace(b'"docs": 30', b'"docs": 31'))
    one_line(run_here("index", "stats", bad), "does not match its checksum")
    open(mpath, "wb").write(good[:40])
    one_line(run_here("index", "query", bad, a), "manifest is not readable")
    open(mpath, "wb").write(good)
    seg = os.path.join(bad, "segments", os.listdir(os.path.join(bad, "segments"))[0])
    fp = open(os.path.join(seg, "fp.u32"), "rb").read()
    with open(os.path.join(seg, "fp.u32"), "r+b") as f:
        f.truncate(100)
    one_line(run_here("index", "query", bad, a), "file fp.u32 has 100 bytes")
    open(os.path.join(seg, "fp.u32"), "wb").write(fp)
    run_here("index", "query", bad, a, check_rc=0)
    os.remove(os.path.join(seg, "keys.u64"))
    one_line(run_here("index", "query", bad, a), "has lost its file keys.u64")
    notix = tmp_path / "notix"
    notix.mkdir()
    (notix / "x.txt").write_text("hello")
    one_line(run_here("index", "add", str(notix), a), "is not a neardup index")
    assert sorted(os.listdir(notix)) == ["x.txt"]


def test_api_errors(tmp_path):
    with pytest.raises(StorageError, match="no index at"):
        Index(str(tmp_path / "none"), must_exist=True)
    with pytest.raises(StorageError, match="no index at"):
        Index(str(tmp_path / "none")).stats()
    with pytest.raises(ConfigError, match="list of texts"):
        Index(str(tmp_path / "none")).query("one text")
    assert isinstance(neardup.Index, type)
    t = pa.table({"text": ["a b c d e f", "g h i j k l"], "k": ["x", "y"]})
    idx = Index(str(tmp_path / "tbl"))
    idx.add(t, name="T", id_column="k")
    assert idx.query(["a b c d e f"])[0][0].id == "x"


def test_fingerprints_match_their_plain_twin():
    rng = np.random.default_rng(3)
    sizes = [0, 1, 5, 0, 40, 3]
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    # repeats, and distinct hashes sharing their high half
    raw = rng.integers(0, 1 << 64, size=offsets[-1], dtype=np.uint64, endpoint=False)
    raw[7:12] = raw[6]
    raw[20] = (raw[21] & np.uint64(0xFFFFFFFF00000000)) | np.uint64(5)
    keep = raw.copy()
    fo, fv = fingerprints(offsets, raw)
    assert np.array_equal(raw, keep)  # the caller's arrays are untouched
    for d in range(len(sizes)):
        want = sorted({int(h) >> 32 for h in raw[offsets[d]:offsets[d + 1]]})
        assert fv[fo[d]:fo[d + 1]].tolist() == want
    so, sv = neardup.kernels.minhash.sort_unique_sets(offsets, raw)
    fo2, fv2 = fingerprints(so, sv, sorted_sets=True)
    assert np.array_equal(fo2, fo) and np.array_equal(fv2, fv)


@pytest.mark.slow
def test_two_processes_adding_to_a_folder_at_once_lose_nothing(tmp_path, split):
    ix = str(tmp_path / "ix")
    files = [write_jsonl(str(tmp_path / f"w{w}.jsonl"), split.a_texts[w::2], [f"w{w}-{i}" for i in range(len(split.a_texts[w::2]))])
             for w in range(2)]
    procs = [subprocess.Popen(cli("index", "add", ix, f, "--name", f"w{w}", "--id-column", "id", "--batch-size", "20"),
                              env=env(), stderr=subprocess.PIPE) for w, f in enumerate(files)]
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read().decode()
    s = Index(ix).stats()
    assert s["documents"] == len(split.a_texts) and s["segments"] == 2
    assert s["sources"] == {"w0": len(split.a_texts[0::2]), "w1": len(split.a_texts[1::2])}


@pytest.mark.parametrize("case", ["random", "buckets", "edges"])
def test_key_ranges_are_searchsorted_left_and_right(case):
    """The galloping lookup of ascending query keys gives the ranges of searchsorted: keys that
    are absent, repeated (a bucket of thousands), beyond either end, across the 16,384-needle
    runs its threads take."""
    from neardup.kernels.lookup import key_ranges
    rng = np.random.default_rng({"random": 1, "buckets": 2, "edges": 3}[case])
    if case == "random":
        hay = np.sort(rng.integers(0, 2**63, 300_000, dtype=np.uint64))
        needles = np.concatenate([hay[rng.integers(0, len(hay), 30_000)], rng.integers(0, 2**63, 30_000, dtype=np.uint64)])
    elif case == "buckets":
        hay = np.sort(np.repeat(rng.integers(0, 500, 400, dtype=np.uint64), rng.integers(1, 3000, 400)))
        needles = rng.integers(0, 520, 50_000, dtype=np.uint64)
    else:
        hay = np.array([5, 5, 7, 9, 9, 9], np.uint64)
        needles = np.array([0, 4, 5, 6, 7, 8, 9, 10, 2**64 - 1], np.uint64)
    needles = np.sort(needles)
    lo, hi = key_ranges(hay, needles)
    assert np.array_equal(lo, np.searchsorted(hay, needles, side="left"))
    assert np.array_equal(hi, np.searchsorted(hay, needles, side="right"))
    lo, hi = key_ranges(np.zeros(0, np.uint64), needles)
    assert not lo.any() and not hi.any()


def test_stats_are_bounded_whatever_the_number_of_sources(tmp_path):
    # issue 30: `index stats` printed 5,526 lines after a folder --update-index (a source a file);
    # guards: maintenance.stats(full=False) giving the count and the 10 largest, not every source
    from helpers import run_in_process
    folder = tmp_path / "tree"
    folder.mkdir()
    for i in range(12):
        (folder / f"f{i:02}.txt").write_text(f"file {i} holds words of its own number {i} and more")
    (tmp_path / "big.jsonl").write_text("".join(f'{{"text": "document {i} of the big file"}}\n' for i in range(3)))
    ix = str(tmp_path / "ix")
    assert run_in_process("index", "add", ix, str(folder), str(tmp_path / "big.jsonl")).returncode == 0
    code, out, _ = run_in_process("index", "stats", ix)
    s = json.loads(out)
    assert code == 0 and s["source_count"] == 13 and "sources" not in s
    assert len(s["largest_sources"]) == 10 and next(iter(s["largest_sources"].items()))[1] == 3
    assert len(out.splitlines()) < 60
    s = json.loads(run_in_process("index", "stats", ix, "--full").stdout)
    assert len(s["sources"]) == 13 and sum(s["sources"].values()) == s["documents"] == 15
