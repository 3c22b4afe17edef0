"""`neardup audit`: the measured S-curve agrees with theory on a corpus of known similarities,
and the audit notices when the LSH does not behave as the theory says."""

from __future__ import annotations

import argparse
import json
import math

import numpy as np
import pytest

from neardup.errors import InputError

from neardup.report.audit import audit_texts, format_audit, wilson_interval

from helpers import run_cli


# ---- a corpus of disjoint pairs with similarities spread over (0, 1] --------------------------

NGRAM = 5


def make_pairs(n_pairs=1500, words=200, seed=11):
    """Documents 2i and 2i+1 are a pair: random words, then a random share f of the words of the
    copy replaced by random words. With q = (1 - f)^5 a copy keeps about q of the 5-grams, so
    J ~ q / (2 - q); f is drawn so that the target J is uniform on (0.02, 0.99)."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocab = ["".join(rng.choice(letters, size=7)) for _ in range(20_000)]
    texts, targets = [], []
    for _ in range(n_pairs):
        base = rng.integers(len(vocab), size=words)
        target = rng.uniform(0.02, 0.99)
        q = 2 * target / (1 + target)
        f = 1 - q ** (1 / NGRAM)
        copy = base.copy()
        swap = rng.random(words) < f
        copy[swap] = rng.integers(len(vocab), size=int(swap.sum()))
        texts.append(" ".join(vocab[w] for w in base))
        texts.append(" ".join(vocab[w] for w in copy))
        targets.append(target)
    return texts, np.array(targets)


def word_ngrams(text, n=NGRAM):
    w = text.split()
    return {tuple(w[i:i + n]) for i in range(len(w) - n + 1)}


@pytest.fixture(scope="module")
def corpus():
    return make_pairs()


@pytest.fixture(scope="module")
def result(corpus):
    texts, _ = corpus
    return audit_texts(texts, sample=3000, threshold=0.8, num_perm=128, seed=42)


# ---- agreement with theory -------------------------------------------------------------------

def test_parameters_are_the_dedup_defaults(result):
    assert (result.bands, result.rows, result.num_perm, result.threshold) == (18, 7, 128, 0.8)
    assert result.documents == 3000 and result.empty_documents == 0
    assert result.sampled_pairs <= 3000


def test_every_similarity_range_is_sampled(result):
    # stratification: the rare similar pairs are represented, not just random (J ~ 0) pairs
    counts = [b.pairs for b in result.bins]
    assert all(c >= 40 for c in counts[1:]), counts
    assert counts[0] >= 300  # random pairs land in [0, 0.1)


def test_measured_rates_agree_with_theory(result):
    # 95% intervals: allow one bin of ten outside by chance (with this fixed seed none or one)
    assert result.bins_outside <= 1, format_audit(result)
    for b in result.bins:
        assert b.pairs > 0
        assert b.ci_low <= b.measured <= b.ci_high
        # the bin's theory is the mean of 1 - (1 - s^r)^b over its own pairs
        mask = np.minimum((result.pairs["similarity"] * 10 + 1e-9).astype(int), 9) == round(b.lo * 10)
        s = result.pairs["similarity"][mask]
        assert b.theory == pytest.approx(np.mean(1 - (1 - s ** 7) ** 18), rel=1e-9, abs=1e-15)
        assert b.candidates == int(result.pairs["candidate"][mask].sum())
    # the S-curve's steep part is really measured: low below 0.5, high above 0.8
    assert result.bins[4].measured < 0.1 and result.bins[8].measured > 0.9


def test_miss_rate_consistent_with_theory(result):
    nd = result.near_duplicates
    assert nd["pairs"] >= 150
    assert nd["ci_low"] <= nd["theory"] <= nd["ci_high"] and nd["consistent"]
    # theory: 1 - P(candidate) averaged over the near-duplicate pairs (weighted), a few percent
    near = result.pairs["similarity"] >= 0.8
    w = result.pairs["weight"][near]
    s = result.pairs["similarity"][near]
    assert nd["theory"] == pytest.approx(np.dot(w, (1 - s ** 7) ** 18) / w.sum(), rel=1e-9)
    assert 0.0 <= nd["miss_rate"] < 0.05
    assert nd["missed"] == int((~result.pairs["candidate"][near]).sum())


def test_exact_similarity_and_candidates_checked_independently(result, corpus):
    texts, _ = corpus
    rng = np.random.default_rng(0)
    pairs = result.pairs
    idx = rng.choice(len(pairs["left"]), size=60, replace=False)
    # the planted pairs carry most of the signal: check some of them too
    planted = np.flatnonzero(pairs["right"] == pairs["left"] + 1)
    idx = np.concatenate([idx, planted[:: max(1, len(planted) // 60)]])
    from neardup.kernels.minhash import MinHasher
    sig = MinHasher(num_perm=128, ngram=5, seed=42).signatures(texts)
    for i in idx:
        a, b = int(pairs["left"][i]), int(pairs["right"][i])
        A, B = word_ngrams(texts[a]), word_ngrams(texts[b])
        assert pairs["similarity"][i] == pytest.approx(len(A & B) / len(A | B), abs=1e-12)
        # candidate iff some band of 7 rows is equal (band keys are a hash of the band)
        bands_equal = any(np.array_equal(sig[a, j * 7:(j + 1) * 7], sig[b, j * 7:(j + 1) * 7]) for j in range(18))
        assert bool(pairs["candidate"][i]) == bands_equal


def test_deterministic_for_a_seed(corpus, result):
    texts, _ = corpus
    again = audit_texts(texts, sample=3000, threshold=0.8, num_perm=128, seed=42)
    a, b = result.to_dict(), again.to_dict()
    a.pop("seconds"), b.pop("seconds")
    assert a == b
    other = audit_texts(texts, sample=3000, threshold=0.8, num_perm=128, seed=7)
    assert not np.array_equal(other.pairs["left"], result.pairs["left"]) or \
        not np.array_equal(other.pairs["candidate"], result.pairs["candidate"])


def test_detects_an_lsh_that_is_not_what_the_theory_says(corpus, monkeypatch):
    """Band keys that never match in half of the bands: the real curve is 1 - (1 - s^8)^7, not
    ^13. The audit must flag the S-curve's steep bins and the miss rate."""
    import neardup.kernels.bands as bands_mod
    real = bands_mod.band_keys

    def broken(signatures, bands, rows, seed=42):
        keys = real(signatures, bands, rows, seed).copy()
        n = keys.shape[0]
        keys[:, 7:] = (np.arange(n, dtype=np.uint64)[:, None] << np.uint64(8)) + np.arange(7, bands, dtype=np.uint64)
        return keys

    monkeypatch.setattr(bands_mod, "band_keys", broken)
    texts, _ = corpus
    r = audit_texts(texts, sample=3000, threshold=0.8, num_perm=128, seed=42)
    assert r.bins_outside >= 2, format_audit(r)
    assert any(b.outside and b.measured < b.theory for b in r.bins[5:8])
    assert not r.near_duplicates["consistent"]


def test_other_parameters_and_char_ngrams(corpus):
    texts, _ = corpus
    r = audit_texts(texts[:600], sample=800, bins=5, threshold=0.5, num_perm=64, bands=16, rows=4,
                    seed=3)
    assert (r.bands, r.rows, len(r.bins)) == (16, 4, 5)
    assert [round(b.lo, 2) for b in r.bins] == [0.0, 0.2, 0.4, 0.6, 0.8]
    assert r.bins_outside <= 1, format_audit(r)
    c = audit_texts(texts[:200], sample=300, char_ngrams=True, ngram=8, num_perm=64, seed=1)
    assert c.char_ngrams and c.ngram == 8 and c.sampled_pairs > 0


def test_empty_documents_are_left_out():
    texts = ["", "one two three four five six", "   ", "one two three four five seven", "!!"]
    r = audit_texts(texts, sample=50, seed=1)
    assert r.documents == 5 and r.empty_documents == 3
    assert set(r.pairs["left"]) | set(r.pairs["right"]) == {1, 3}
    assert r.pairs["similarity"][0] == pytest.approx(1 / 3)  # 5-grams: {12345, 23456} vs {12345, 23457}
    with pytest.raises(InputError):
        audit_texts(["", "only one", "  "], sample=10)


def test_copies_of_one_shingle_set_count_once(corpus):
    """A corpus with many exact copies: each distinct set is audited once, so the same
    comparison is never sampled twice (its outcomes would be perfectly correlated)."""
    texts, _ = corpus
    base = texts[:400]
    copies = base + [t.upper() for t in base[:200]] + base[:100]  # upper case: the same after lower-casing
    r = audit_texts(copies, sample=2000, seed=4)
    first = {}
    for i, t in enumerate(base):
        first.setdefault(t, i)  # the corpus' own exact copies (unchanged "near-duplicates") too
    assert r.documents == 700 and r.empty_documents == 0
    assert r.duplicate_documents == 700 - len(first)
    used = set(r.pairs["left"].tolist()) | set(r.pairs["right"].tolist())
    assert used <= set(first.values())
    assert len(set(zip(r.pairs["left"].tolist(), r.pairs["right"].tolist()))) == r.sampled_pairs
    assert r.bins_outside <= 1
    with pytest.raises(InputError, match="different"):
        audit_texts(["the same five words here"] * 50, sample=10)


def test_config_and_option_errors(corpus):
    from neardup.config import Config
    from neardup.errors import ConfigError
    texts, _ = corpus
    cfg = Config(threshold=0.7, num_perm=64)
    r = audit_texts(texts[:200], cfg, sample=200, seed=5)  # options override the config
    assert (r.threshold, r.num_perm, r.seed) == (0.7, 64, 5)
    for bad in ({"sample": 0}, {"bins": 0}, {"threshold": 1.5}, {"bands": 20, "rows": 8},
                {"no_such_option": 1}):
        with pytest.raises(ConfigError):
            audit_texts(texts[:50], **bad)


def test_wilson_interval_known_values():
    # plain Wilson score interval
    lo, hi = wilson_interval(5, 10, continuity=False)
    assert (round(lo, 4), round(hi, 4)) == (0.2366, 0.7634)
    assert wilson_interval(0, 10, continuity=False)[1] == pytest.approx(1.959964 ** 2 / (10 + 1.959964 ** 2), rel=1e-6)
    # continuity-corrected (Newcombe 1998, table I: 0/10 and 5/10)
    assert tuple(round(v, 4) for v in wilson_interval(0, 10)) == (0.0, 0.3445)
    assert tuple(round(v, 4) for v in wilson_interval(5, 10)) == (0.2014, 0.7986)
    assert wilson_interval(10, 10)[1] == 1.0
    assert all(math.isnan(v) for v in wilson_interval(0, 0))


def test_json_is_strict_and_complete(result):
    d = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    for key in ("bins", "near_duplicates", "pairs", "bands", "rows", "threshold", "bins_outside"):
        assert key in d
    assert len(d["bins"]) == 10 and {"lo", "hi", "pairs", "candidates", "measured", "ci_low", "ci_high",
                                     "theory", "outside", "label"} <= set(d["bins"][0])
    assert len(d["pairs"]["left"]) == result.sampled_pairs


def test_table_text(result):
    text = format_audit(result)
    assert "18 bands x 7 rows" in text and "[0.90, 1.00]" in text
    for b in result.bins:
        assert f"{b.measured:.3f}" in text and f"{b.theory:.3f}" in text
    assert "expected share of near-duplicate pairs missed" in text


# ---- the command ------------------------------------------------------------------------------

def test_cli_audit_jsonl(tmp_path, corpus, capsys):
    texts, _ = corpus
    path = tmp_path / "docs.jsonl"
    with open(path, "w") as fh:
        for i, t in enumerate(texts[:1000]):
            fh.write(json.dumps({"id": i, "body": t}) + "\n")
    out_json = tmp_path / "audit.json"
    plot = tmp_path / "audit.png"
    argv = ["audit", str(path), "--text-column", "body", "--sample", "1500", "--seed", "42",
            "--max-docs", "800", "--json", str(out_json), "--plot", str(plot)]
    assert run_cli(*argv) == 0
    out = capsys.readouterr().out
    assert "neardup audit: 800 documents" in out and "exact J" in out
    d = json.loads(out_json.read_text())
    assert d["documents"] == 800 and d["bands"] == 18 and len(d["bins"]) == 10
    # same as the API on the same 800 texts
    api = audit_texts(texts[:800], sample=1500, seed=42).to_dict()
    assert d["bins"] == json.loads(json.dumps(api["bins"]))
    data = plot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


@pytest.mark.parametrize("argv,needle", [
    (["--bands", "13"], "bands and rows go together"),  # the same message as the dedup's
    (["--threshold", "0"], "threshold"),
    (["--bands", "13", "--rows", "10"], "exceeds num_perm"),
    (["--sample", "0"], "--sample"),
    (["--plot", "x.gif"], ".png or .svg"),
])
def test_cli_errors_one_line(tmp_path, capsys, argv, needle):
    path = tmp_path / "d.jsonl"
    path.write_text('{"text": "a b c d e f g"}\n{"text": "a b c d e f h"}\n')
    assert run_cli("audit", str(path), *argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("neardup: error: ") and err.count("\n") == 1 and needle in err


def test_cli_missing_input(tmp_path, capsys):
    assert run_cli("audit", str(tmp_path / "nope.jsonl")) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_every_audit_option_has_help():
    from neardup.cli import build_parser
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    p = sub.choices["audit"]
    for action in p._actions:
        if not isinstance(action, argparse._HelpAction):
            assert action.help and len(action.help) > 15, action.dest
    text = " ".join(p.format_help().split())
    for opt in ("--sample", "--threshold", "--num-perm", "--bands", "--rows", "--ngram", "--char-ngrams",
                "--text-column", "--seed", "--bins", "--json", "--plot", "--max-docs"):
        assert opt in text


def test_read_texts_is_bounded_by_bytes(tmp_path):
    """--max-bytes bounds the UTF-8 bytes of text read (the audit holds ~12x that at its peak);
    a document that would cross the bound is not read; ``limits`` says which bound cut."""
    from neardup.report.audit_files import read_texts
    path = tmp_path / "d.jsonl"
    texts = ["\u00e9" * 50 if i % 2 else "x" * 100 for i in range(10)]  # 100 bytes each
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    for max_bytes, n, cut in ((350, 3, "max_bytes"), (300, 3, "max_bytes"), (299, 2, "max_bytes"),
                              (1000, 10, None), (None, 10, None)):
        limits = {}
        got = read_texts([str(path)], max_bytes=max_bytes, limits=limits, batch_size=4)
        assert got.to_pylist() == texts[:n] and limits["cut"] == cut, (max_bytes, limits)
    limits = {}
    assert len(read_texts([str(path)], max_docs=10, limits=limits)) == 10 and limits["cut"] is None
    assert len(read_texts([str(path)], max_docs=4, max_bytes=1000, limits=limits)) == 4 and limits["cut"] == "max_docs"


def test_cli_audit_max_bytes(tmp_path, capsys, corpus):
    texts, _ = corpus
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts[:400]))
    limit = sum(len(t.encode()) for t in texts[:150])
    assert run_cli("audit", str(path), "--sample", "200", "--max-bytes", str(limit), "--json", "-") == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["documents"] == 150
    # issue 30: which documents are read is said first, before the reading (it was said only when
    # a bound cut it, after); guards: the notify(sample_line(...)) call in audit_files
    assert captured.err.splitlines()[0] == (f"neardup: audit: reads the first documents in path order, at most "
                                            f"100,000 documents and {limit:,} bytes of text (--max-docs, "
                                            f"--max-bytes change it)"), captured.err
    assert f"audit of the first 150 documents (--max-bytes {limit:,};" in captured.err
    assert run_cli("audit", str(path), "--sample", "200", "--max-bytes", "1K") == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("neardup: audit: reads the first documents") and len(err) == 2
    assert "--max-bytes 1,024 stopped the reading" in err[1], err
    assert run_cli("audit", str(path), "--max-bytes", "0") == 2
    assert "--max-bytes must be at least 1" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        run_cli("audit", str(path), "--max-bytes", "lots")
    assert e.value.code == 2 and "not a size: 'lots'" in capsys.readouterr().err


def test_audit_size_units():
    from neardup.cli.audit import MAX_BYTES, _size
    assert [_size(s) for s in ("1000", "1K", "96M", "2G", "1.5KiB", "3mb")] == [1000, 1024, 96 << 20, 2 << 30, 1536,
                                                                                3 << 20]
    assert MAX_BYTES == 96 << 20
