"""What a word is, end to end (issue 9): punctuation ends a word in every path that hashes text,
and on a corpus of realistic copies neardup's similarity is the usual one (words = runs of
letters and digits), so its MinHash estimate of it is within 0.03."""

import dataclasses
import sys

import numpy as np
import pytest

from neardup import Config, ConfigError, MinHasher
from neardup.audit import audit_texts
from neardup.cli import build_parser
from neardup.verify import exact_jaccard

from helpers import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import words as bench_words  # noqa: E402  (bench/words.py: the corpus generator and the usual words)


# ----------------------------------------------------------------------------- the knob

def test_config_punctuation_default_and_modes():
    assert Config().punctuation == "split"
    with pytest.raises(ConfigError, match="punctuation must be one of split, delete, keep; got 'remove'"):
        Config(punctuation="remove")
    for mode in ("split", "delete", "keep"):
        c = Config(punctuation=mode)
        assert dataclasses.replace(c, workers=1).punctuation == mode
        assert c.resolved().punctuation == mode
        assert MinHasher.from_config(c).shingling.punctuation == mode
    assert dataclasses.replace(Config(punctuation="delete"), punctuation="split").punctuation == "split"


@pytest.mark.parametrize("command", ["dedup", "audit"])
def test_cli_punctuation_flags(command):
    parser = build_parser()
    extra = ["--output", "o"] if command == "dedup" else []
    assert parser.parse_args([command, "x", *extra]).punctuation == "split"
    assert parser.parse_args([command, "x", *extra, "--punctuation", "delete"]).punctuation == "delete"
    with pytest.raises(SystemExit):
        parser.parse_args([command, "x", *extra, "--punctuation", "remove"])


def test_audit_hashes_with_the_same_rules():
    base = "the quick brown fox jumps over the lazy dog near a well-known river bank today " * 3
    texts = [base, base.replace("well-known", "well known")] + [f"unrelated {i} words here and there" for i in range(6)]
    split = audit_texts(texts, sample=50, seed=1)
    delete = audit_texts(texts, sample=50, seed=1, punctuation="delete")
    assert split.options["punctuation"] == "split" and delete.options["punctuation"] == "delete"
    # under split the two spellings are one shingle set (the audit counts the copy once)
    assert split.duplicate_documents == 1 and delete.duplicate_documents == 0


# ----------------------------------------------------------------------------- statistics

@pytest.fixture(scope="module")
def corpus():
    c = bench_words.generate(1500, seed=3)
    a, b = bench_words.planted_pairs(c.cluster_of)
    return c, a, b, bench_words.pair_jaccards(c.texts, a, b)


@pytest.mark.slow
def test_similarity_is_the_usual_one(corpus):
    """neardup's exact Jaccard equals the usual definition's but for symbols, which stay tokens."""
    c, a, b, j = corpus
    offsets, hashes = MinHasher().shingle_sets(c.texts)
    ours = exact_jaccard(offsets, hashes, a, b)
    diff = np.abs(ours - j)
    assert diff.mean() < 0.003 and np.quantile(diff, 0.99) < 0.02
    # the old rule (punctuation deleted inside words) is far from it on these copies
    o2, h2 = MinHasher(punctuation="delete").shingle_sets(c.texts)
    assert np.abs(exact_jaccard(o2, h2, a, b) - j).mean() > 5 * diff.mean()


@pytest.mark.slow
def test_estimate_of_the_usual_jaccard_within_003_at_k128(corpus):
    c, a, b, j = corpus
    sig = MinHasher(num_perm=128).signatures(c.texts)
    sel = j >= 0.5
    assert sel.sum() > 300
    est = (sig[a[sel]] == sig[b[sel]]).mean(axis=1)
    err = est - j[sel]
    assert np.abs(err).mean() < 0.03
    # and no bias beyond 4 standard errors of the mean
    se = np.sqrt((j[sel] * (1 - j[sel]) / 128).mean() / sel.sum())
    assert abs(err.mean()) < 4 * se + 0.003
