"""The Bloom tier of the index (``--kind bloom``): the filters' false-positive rate against the
formula, every added document answered yes, dedup --against a bloom index, refusals."""

import json
import math

import numpy as np
import pyarrow.parquet as pq
import pytest

import neardup
from neardup.cli import main
from neardup.errors import ConfigError
from neardup.index import Index, Match
from neardup.index import bloom
from neardup.kernels import lookup

from helpers import write_dumps, write_jsonl
from index_corpus import make_split


def _random_keys(n, bands, seed):
    return np.random.default_rng(seed).integers(0, 2 ** 63, size=(n, bands), dtype=np.uint64) * np.uint64(2) + \
        np.uint64(1)


def _binomial_ok(hits, trials, p):
    """hits within 5 standard deviations of trials * p (and of 5 expected hits when p is tiny)."""
    mean = trials * p
    return abs(hits - mean) <= 5 * math.sqrt(trials * p * (1 - p)) + 5


@pytest.mark.parametrize("rate", [1e-2, 1e-3])
def test_a_filter_answers_a_key_it_was_never_given_at_the_rate_of_the_formula(rate):
    n, trials = 20_000, 400_000
    bits, hashes = bloom.geometry(n, rate)
    assert 1 <= bits / (64 * math.ceil(math.ceil(n * math.log(1 / rate) / math.log(2) ** 2) / 64)) < 1.01
    assert hashes == round(bits / n * math.log(2))
    keys = _random_keys(n, 1, seed=1)
    words = lookup.build_filters(keys, bits, hashes)
    expected = bloom.filter_rate(bits, hashes, n)
    assert expected <= rate  # the geometry meets the rate asked for
    # the bits set are those of n keys placed at random: E[set] = m (1 - e^{-kn/m})
    fill = lookup.bits_set(words)[0]
    assert abs(fill - bits * (1 - math.exp(-hashes * n / bits))) < 5 * math.sqrt(bits * 0.25)
    others = _random_keys(trials, 1, seed=2)
    found = np.zeros(trials, dtype=bool)
    lookup.test_filters(others, np.ones(trials, bool), words, bits, hashes, found)
    assert _binomial_ok(int(found.sum()), trials, expected), (int(found.sum()), trials * expected)
    # the rate from the bits actually set (what index stats reports) agrees too
    assert _binomial_ok(int(found.sum()), trials, (fill / bits) ** hashes)
    given = np.zeros(n, dtype=bool)
    lookup.test_filters(keys, np.ones(n, bool), words, bits, hashes, given)
    assert given.all()  # no false negatives
    inactive = np.zeros(n, dtype=bool)
    lookup.test_filters(keys, np.zeros(n, bool), words, bits, hashes, inactive)
    assert not inactive.any()  # a document not active (empty) is never tested


def test_the_index_wide_extra_rate_of_stats_is_what_queries_measure(tmp_path):
    """Three segments of 13 filters at p = 1e-3: F = 1 - prod (1 - f^k) ~ 39 p; unrelated
    documents (random keys) are answered yes at that rate."""
    idx = Index(str(tmp_path / "b.ndx"), kind="bloom", false_positive_rate=1e-3, bands=13, rows=7)
    bands = idx.config.bands
    sig = np.zeros((1, idx.config.num_perm), np.uint32)  # not empty
    for seg in range(3):
        keys = _random_keys(5000 * (seg + 1), bands, seed=10 + seg)
        idx.add_arrays(keys, [f"d{i}" for i in range(len(keys))], "s", signatures=np.repeat(sig, len(keys), 0))
    stats = idx.stats()
    rate = stats["extra_false_positive_rate"]
    assert stats["segments"] == 3 and 0.5 * 39e-3 < rate < 1.05 * 39e-3
    trials = 100_000
    m = idx.match(_random_keys(trials, bands, seed=99), signatures=np.repeat(sig, trials, 0))
    assert _binomial_ok(len(m), trials, rate), (len(m), trials * rate)


@pytest.mark.parametrize("docs", [1, 2, 10, 100])
def test_a_small_segment_answers_unrelated_documents_at_the_rate_stats_gives(tmp_path, docs):
    """A segment of a few documents (an add of one small file, --update-index after a small run)
    has filters of 64 to a few thousand bits at the default rate. Its probes must fall as
    independently as the formula assumes: with double hashing h1 + i h2 mod m they formed an
    arithmetic progression, and a Bloom index of 2 documents answered 3.7% of unrelated documents
    yes (F in stats: 9e-9; 1.7% for 1 document, 1e-4 for 10, 1.4e-5 for 100)."""
    idx = Index(str(tmp_path / "b.ndx"), kind="bloom")
    bands = idx.config.bands
    sig = np.zeros((1, idx.config.num_perm), np.uint32)  # not empty
    idx.add_arrays(_random_keys(docs, bands, seed=docs), [f"d{i}" for i in range(docs)], "s",
                   signatures=np.repeat(sig, docs, 0))
    rate = idx.stats()["extra_false_positive_rate"]
    assert rate < 1e-4 / 100  # one segment's share of the default's bound
    trials = 1_000_000
    m = idx.match(_random_keys(trials, bands, seed=1000 + docs), signatures=np.repeat(sig, trials, 0))
    assert _binomial_ok(len(m), trials, rate), (len(m), trials * rate)


@pytest.mark.parametrize("bands,most_bytes", [(13, 56), (18, 79)])  # 18: the default at 0.8 since issue 30
def test_the_default_rate_keeps_the_extra_rate_below_1e4_up_to_100_segments(bands, most_bytes):
    p = bloom.default_rate(bands)
    bits, hashes = bloom.geometry(1_000_000, p)
    per_segment = 1 - (1 - bloom.filter_rate(bits, hashes, 1_000_000)) ** bands
    assert 1 - (1 - per_segment) ** 100 < 1e-4
    assert bands * bits / 8 / 1_000_000 <= most_bytes  # bytes a document


@pytest.fixture(scope="module")
def split():
    return make_split(600, seed=7)


def test_a_bloom_index_answers_yes_for_every_document_it_was_given(tmp_path, split):
    idx = Index(str(tmp_path / "b.ndx"), kind="bloom")
    idx.add(split.a_texts[:300], ids=split.a_ids[:300], name="A")
    idx.add(split.a_texts[300:] + [""], ids=split.a_ids[300:] + ["empty"], name="A")  # an empty one too
    res = Index(str(tmp_path / "b.ndx")).query(split.a_texts + ["", "   "])
    where = f"bloom:{tmp_path / 'b.ndx'}"
    assert all(r == [Match("", where, None)] for r in res[:-2])
    assert res[-2:] == [[], []]  # an empty document matches nothing
    stats = idx.stats()
    assert stats["kind"] == "bloom" and stats["documents"] == len(split.a_texts) + 1 and stats["segments"] == 2
    assert stats["bytes_per_document"] <= 80 and stats["extra_false_positive_rate"] < 1e-4  # 18 bands (issue 30)
    assert stats["sources"] == {"A": len(split.a_texts) + 1}
    manifest = idx.storage.read_manifest()
    assert [s["bloom"]["keys"] for s in manifest["segments"]] == [300, len(split.a_texts) - 300]  # not the empty
    assert idx.verify()["problems"] == []


def test_a_bloom_index_says_yes_where_lsh_finds_a_candidate_and_no_elsewhere(tmp_path, split):
    """Against an exact index of the same documents: every verified match is a yes; a yes
    without one is an unverified LSH candidate (a band key shared with an indexed document)."""
    exact = Index(str(tmp_path / "e.ndx"))
    bl = Index(str(tmp_path / "b.ndx"), kind="bloom")
    exact.add(split.a_texts, ids=split.a_ids, name="A")
    bl.add(split.a_texts, ids=split.a_ids, name="A")
    verified = [bool(r) for r in exact.query(split.b_texts)]
    said = [bool(r) for r in bl.query(split.b_texts)]
    a_keys = set(exact.hash_texts(split.a_texts)["keys"].ravel().tolist())
    b_keys = exact.hash_texts(split.b_texts)["keys"]
    candidate = [bool(a_keys & set(row.tolist())) for row in b_keys]
    assert sum(verified) > 50
    assert all(s for s, v in zip(said, verified) if v)
    assert said == candidate  # no extra false positive at this size (F ~ 1e-6)


def test_a_bloom_index_on_a_lost_file_or_damaged_bits_is_refused(tmp_path, split):
    idx = Index(str(tmp_path / "b.ndx"), kind="bloom")
    idx.add(split.a_texts[:100], name="A")
    seg = next((tmp_path / "b.ndx" / "segments").iterdir())
    raw = bytearray((seg / "bloom.u64").read_bytes())
    raw[10] ^= 0xFF
    (seg / "bloom.u64").write_bytes(bytes(raw))
    problems = Index(str(tmp_path / "b.ndx")).verify()["problems"]
    assert len(problems) == 1 and "bloom.u64" in problems[0] and "checksum" in problems[0]


# --------------------------------------------------------------------------- dedup --against

@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    """Dump A, then dump B with copies of A's documents and of its own."""
    return write_dumps(tmp_path_factory.mktemp("dumps"))


def test_dedup_against_a_bloom_index_removes_what_the_exact_tier_removes(tmp_path, dumps):
    a, b = str(dumps / "a.jsonl"), str(dumps / "b.jsonl")
    assert main(["dedup", a, "-o", str(tmp_path / "A"), "--quiet"]) == 0
    kept = str(tmp_path / "A" / "kept")
    assert main(["index", "add", str(tmp_path / "exact"), kept, "--name", "dumpA"]) == 0
    assert main(["index", "add", str(tmp_path / "bloom"), kept, "--name", "dumpA", "--kind", "bloom"]) == 0
    for kind in ("exact", "bloom"):
        assert main(["dedup", b, "-o", str(tmp_path / f"B-{kind}"), "--against", str(tmp_path / kind),
                     "--quiet"]) == 0
    removed = {k: pq.read_table(tmp_path / f"B-{k}" / "removed.parquet").to_pylist() for k in ("exact", "bloom")}
    against = {k: {r["id"]: r for r in removed[k] if r["representative_source"] is not None} for k in removed}
    assert len(against["exact"]) > 50
    assert set(against["exact"]) <= set(against["bloom"])  # every verified match is removed by the bloom tier
    # the others are unverified LSH candidates: each shares a band key with an indexed document
    extra = set(against["bloom"]) - set(against["exact"])
    idx = Index(str(tmp_path / "exact"))
    a_kept = [json.loads(x)["text"] for x in (tmp_path / "A" / "kept" / "a.jsonl").read_text().splitlines()]
    indexed = set(idx.hash_texts(a_kept)["keys"].ravel().tolist())
    b_texts = [json.loads(x)["text"] for x in (dumps / "b.jsonl").read_text().splitlines()]
    b_keys = idx.hash_texts(b_texts)["keys"]
    candidates = {f"b.jsonl:{i + 1}" for i, row in enumerate(b_keys) if indexed & set(row.tolist())}
    assert extra and extra <= candidates and set(against["bloom"]) == candidates
    for r in against["bloom"].values():
        assert r["representative"] == "" and r["representative_source"] == f"bloom:{tmp_path / 'bloom'}"
        assert r["similarity"] is None or math.isnan(r["similarity"])
    stats = json.loads((tmp_path / "B-bloom" / "stats.json").read_text())
    assert stats["counts"]["removed_against_index"] == len(against["bloom"])
    assert stats["counts"]["input"] == stats["counts"]["kept"] + stats["counts"]["removed"]


def test_a_verified_match_of_another_index_wins_over_a_bloom_yes(tmp_path, dumps):
    a, b = str(dumps / "a.jsonl"), str(dumps / "b.jsonl")
    neardup.Index(str(tmp_path / "bloom"), kind="bloom").add(a, name="dumpA")
    neardup.Index(str(tmp_path / "exact")).add(a, name="dumpA")
    res = neardup.dedup(b, output=str(tmp_path / "B"), against=[str(tmp_path / "bloom"), str(tmp_path / "exact")])
    rows = [r for r in pq.read_table(tmp_path / "B" / "removed.parquet").to_pylist()
            if r["representative_source"] is not None]
    assert res.stats["counts"]["removed_against_index"] == len(rows) > 50
    neardup.dedup(b, output=str(tmp_path / "E"), against=[str(tmp_path / "exact")])
    alone = {r["id"]: r for r in pq.read_table(tmp_path / "E" / "removed.parquet").to_pylist()
             if r["representative_source"] is not None}
    verified = {r["id"]: r for r in rows if r["representative_source"] == "dumpA"}
    assert verified == alone and len(verified) > 50  # the exact index's matches, though the bloom one comes first
    assert all(r["representative"] == "" for r in rows if r["id"] not in verified)


def test_update_index_adds_the_kept_documents_to_a_bloom_index(tmp_path, dumps):
    a, b = str(dumps / "a.jsonl"), str(dumps / "b.jsonl")
    idx = str(tmp_path / "bloom")
    neardup.Index(idx, kind="bloom").add(a, name="dumpA")
    res = neardup.dedup(b, output=str(tmp_path / "B"), against=[idx], update_index=True)
    assert neardup.Index(idx).stats()["documents"] == 1200 + res.stats["counts"]["kept"]
    again = neardup.dedup(b, output=str(tmp_path / "B2"), against=[idx])
    assert again.stats["counts"]["kept"] == 0  # every document of B is now in the filters


# --------------------------------------------------------------------------- refusals

def _one_line_error(capsys, *args):
    code = main(list(args))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    return err


def test_the_kind_of_an_existing_index_cannot_change(tmp_path, dumps, capsys):
    a = str(dumps / "a.jsonl")
    ex, bl = str(tmp_path / "ex"), str(tmp_path / "bl")
    assert main(["index", "add", ex, a]) == 0
    assert main(["index", "add", bl, a, "--kind", "bloom", "--false-positive-rate", "1e-6"]) == 0
    capsys.readouterr()
    assert "is an exact index, not bloom" in _one_line_error(capsys, "index", "add", ex, a, "--kind", "bloom")
    assert "is a bloom index, not exact" in _one_line_error(capsys, "index", "add", bl, a, "--kind", "exact")
    assert "false_positive_rate 1e-06 (this run: 0.001)" in _one_line_error(
        capsys, "index", "add", bl, a, "--false-positive-rate", "1e-3")
    assert "for a Bloom index" in _one_line_error(capsys, "index", "add", ex, a, "--false-positive-rate", "1e-3")
    assert "for a Bloom index" in _one_line_error(capsys, "index", "add", str(tmp_path / "new"), a,
                                                  "--false-positive-rate", "1e-3")
    assert "verifies nothing" in _one_line_error(capsys, "index", "add", str(tmp_path / "new"), a, "--kind", "bloom",
                                                 "--verify", "estimate")
    assert "keeps Bloom filters" in _one_line_error(capsys, "index", "add", bl, a, "--verify", "exact")
    assert "between 0 and 1" in _one_line_error(capsys, "index", "add", str(tmp_path / "new"), a, "--kind", "bloom",
                                                "--false-positive-rate", "0")
    assert "not compacted" in _one_line_error(capsys, "index", "compact", bl)
    assert "threshold has no effect" in _one_line_error(capsys, "index", "query", bl, a, "--threshold", "0.7")
    assert not (tmp_path / "new").exists()
    # the adds refused changed nothing; the ones accepted added 1200 documents each
    assert Index(ex).stats()["documents"] == 1200 and Index(bl).stats()["documents"] == 1200
    assert main(["index", "add", bl, a]) == 0  # the same kind: accepted without --kind
    assert "warning" not in capsys.readouterr().err  # 2 segments of 13 filters at 1e-6: F ~ 2.6e-5
    assert main(["index", "add", str(tmp_path / "loose"), a, "--kind", "bloom", "--false-positive-rate", "1e-3"]) == 0
    err = capsys.readouterr().err
    assert "warning: the extra false-positive rate" in err and "above 0.0001" in err  # 13 filters at 1e-3


def test_index_query_on_a_bloom_index_writes_null_similarity(tmp_path, dumps, capsys):
    a = str(dumps / "a.jsonl")
    bl = str(tmp_path / "bl")
    assert main(["index", "add", bl, a, "--kind", "bloom"]) == 0
    capsys.readouterr()
    assert main(["index", "query", bl, a]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert len(lines) == 1200
    assert all(r["matches"] == [{"id": "", "source": f"bloom:{bl}", "similarity": None}] for r in lines)
    assert main(["index", "stats", bl]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["kind"] == "bloom" and stats["extra_false_positive_rate"] < 1e-4


def test_a_corrupt_bloom_manifest_is_refused(tmp_path):
    from neardup.errors import StorageError
    from neardup.index.manifest import BLOOM_FORMAT_VERSION, check_format
    m = {"format": "neardup-index", "version": BLOOM_FORMAT_VERSION, "params": dict.fromkeys(neardup.index.PARAM_NAMES),
         "store": "bloom", "segments": []}
    with pytest.raises(StorageError, match="false-positive rate"):
        check_format("x", m)
    with pytest.raises(ConfigError, match="kind must be"):
        Index(str(tmp_path / "n"), kind="fuzzy")


# --------------------------------------------------------------------------- removal

def _tree(path):
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def _bloom_with_three_sources(location, split):
    """Thirds of A added as dump1/a.jsonl, dump1/b.jsonl and dump2; returns the size of two."""
    idx, third = Index(location, kind="bloom"), len(split.a_texts) // 3
    idx.add(split.a_texts[:third], name="dump1/a.jsonl")
    idx.add(split.a_texts[third:2 * third], name="dump1/b.jsonl")
    idx.add(split.a_texts[2 * third:], name="dump2")
    return 2 * third


def test_removing_sources_from_a_bloom_index_answers_as_if_they_were_never_added(tmp_path, split, capsys):
    """A Bloom index keeps no ids, but each add is its own segment of filters: removing the
    sources of whole segments drops them, and every query then answers as an index built from
    the rest alone (the extra false-positive rate too)."""
    path = str(tmp_path / "b.ndx")
    gone = _bloom_with_three_sources(path, split)
    assert gone >= 200
    only = Index(str(tmp_path / "only.ndx"), kind="bloom")
    only.add(split.a_texts[gone:], name="dump2")
    queries = split.a_texts + split.b_texts
    assert all(Index(path).query(split.a_texts))
    assert main(["index", "remove", path, "--source", "dump1/"]) == 0
    err = capsys.readouterr().err
    assert f"removed {gone} documents" in err and "2 segments of filters dropped" in err, err
    after = [bool(r) for r in Index(path).query(queries)]
    assert after == [bool(r) for r in only.query(queries)]
    assert sum(after[:gone]) < gone // 10  # the removed documents are no longer answered yes (but for near-duplicates in dump2)
    stats, want = Index(path).stats(), only.stats()
    assert (stats["documents"], stats["segments"], stats["sources"], stats["extra_false_positive_rate"]) == \
        (want["documents"], want["segments"], want["sources"], want["extra_false_positive_rate"])
    assert len(list((tmp_path / "b.ndx" / "segments").iterdir())) == 1  # the dropped segments' files are gone
    assert Index(path).verify()["problems"] == []


def test_a_bloom_index_refuses_ids_and_a_source_that_shares_a_segment(tmp_path, split, capsys, monkeypatch):
    """Filters cannot forget one document, nor one of two sources added together: refused in
    one line, the index left as it was; the two sources together are removed."""
    folder = tmp_path / "in"
    folder.mkdir()
    write_jsonl(folder / "x.jsonl", split.a_texts[:100])
    write_jsonl(folder / "y.jsonl", split.a_texts[100:200])
    path = tmp_path / "b.ndx"
    monkeypatch.chdir(tmp_path)  # the sources are named as the input was given: in/x.jsonl
    assert main(["index", "add", str(path), "in", "--kind", "bloom"]) == 0
    entry, = Index(str(path)).storage.read_manifest()["segments"]
    assert sorted(entry["sources"]) == ["in/x.jsonl", "in/y.jsonl"], entry["sources"]
    capsys.readouterr()
    before = _tree(path)
    ids = tmp_path / "ids.txt"
    ids.write_text("0\n")
    for argv, needles in ((["--ids", str(ids)], ("keep no ids", "--source")),
                          (["--source", "in/x.jsonl"], ("in/x.jsonl", "in/y.jsonl", "cannot be separated",
                                                        "nothing was removed")),
                          (["--source", "in/z.jsonl"], ("has no source 'in/z.jsonl'",))):
        assert main(["index", "remove", str(path)] + argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("neardup: error: ") and all(n in err[0] for n in needles), err
        assert _tree(path) == before
    with pytest.raises(ConfigError, match="keep no ids"):
        Index(str(path)).remove(ids=["0"])
    assert Index(str(path)).remove(source=["in/x.jsonl", "in/y.jsonl"])["removed"] == 200
    assert Index(str(path)).stats()["documents"] == 0 and not any(Index(str(path)).query(split.a_texts[:200]))


@pytest.mark.slow
def test_a_bloom_index_on_redis_answers_like_a_folder_one(redis_server, split, tmp_path):
    import redis
    url = redis_server.url(9)
    redis.Redis.from_url(url).flushdb()
    folder, on_redis = Index(str(tmp_path / "f"), kind="bloom"), Index(url, kind="bloom")
    for k in range(0, len(split.a_texts), 200):  # several segments
        folder.add(split.a_texts[k:k + 200], name="A")
        on_redis.add(split.a_texts[k:k + 200], name="A")
    want = [bool(r) for r in folder.query(split.b_texts)]
    assert [bool(r) for r in Index(url).query(split.b_texts)] == want and sum(want) > 50
    assert all(Index(url).query(split.a_texts))
    s, r = folder.stats(), Index(url).stats()
    assert (r["bytes"], r["segments"], r["extra_false_positive_rate"]) == (s["bytes"], s["segments"],
                                                                          s["extra_false_positive_rate"])
    assert Index(url).verify()["problems"] == []
    with pytest.raises(ConfigError, match="is a bloom index, not exact"):
        Index(url, kind="exact")
    removed_url, removed_folder = redis_server.url(10), str(tmp_path / "r")
    redis.Redis.from_url(removed_url).flushdb()
    for where in (removed_url, removed_folder):
        gone = _bloom_with_three_sources(where, split)
        assert Index(where).remove(source="dump1/")["removed"] == gone
    assert [bool(r) for r in Index(removed_url).query(split.b_texts)] == \
        [bool(r) for r in Index(removed_folder).query(split.b_texts)]
    assert Index(removed_url).stats()["segments"] == 1 and Index(removed_url).verify()["problems"] == []
