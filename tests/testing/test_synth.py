"""The synthetic corpus generator: determinism, sizes, and calibrated word-5-gram Jaccard."""

import json
import re

import numpy as np
import pytest

from neardup.testing.synth import SynthCorpus, generate_corpus, write_jsonl


def grams(text, n=5):
    words = text.split()
    return set(zip(*[words[i:] for i in range(n)]))


def jaccard(a, b):
    sa, sb = grams(a), grams(b)
    return len(sa & sb) / len(sa | sb)


@pytest.fixture(scope="module")
def corpus():
    return generate_corpus(3000, seed=11)


def test_deterministic_and_seed_dependent(corpus):
    again = generate_corpus(3000, seed=11)
    assert again.texts == corpus.texts
    assert np.array_equal(again.cluster_of, corpus.cluster_of)
    assert np.array_equal(again.target_jaccard, corpus.target_jaccard)
    other = generate_corpus(300, seed=12)
    assert other.texts != corpus.texts[:300]


def test_sizes_and_labels(corpus):
    assert isinstance(corpus, SynthCorpus)
    texts, cluster_of = corpus                      # unpacks like a tuple
    assert len(texts) == 3000 and cluster_of.shape == (3000,) and cluster_of.dtype == np.int64
    dup = corpus.is_duplicate
    assert dup.sum() == 1000                         # a third by default
    originals = np.flatnonzero(~dup)
    assert np.array_equal(cluster_of[originals], originals)
    assert not dup[cluster_of[dup]].any()            # copies point at originals
    assert np.all(corpus.target_jaccard[~dup] == 1.0)
    t = corpus.target_jaccard[dup]
    assert t.min() >= 0.5 and t.max() <= 0.95
    mean_bytes = np.mean([len(s) for s in texts])
    assert 1700 < mean_bytes < 2600                  # about 2 KB
    # Lower-case words separated by single spaces: every tokeniser agrees.
    sample = texts[0]
    assert re.findall(r"\w+", sample.lower()) == sample.split()
    assert "  " not in sample and sample == sample.strip()
    sizes = [len(c) for c in corpus.clusters()]
    assert sum(sizes) - len(sizes) == 1000


def test_jaccard_tracks_target(corpus):
    dup = np.flatnonzero(corpus.is_duplicate)[:600]
    real = np.array([jaccard(corpus.texts[i], corpus.texts[corpus.cluster_of[i]]) for i in dup])
    target = corpus.target_jaccard[dup]
    assert np.abs(real - target).mean() < 0.05
    assert np.abs(real - target).mean() < 0.005     # what the calibration actually achieves
    assert np.abs(real - target).max() < 0.02
    assert real.min() >= 0.5 - 0.01 and real.max() <= 0.95 + 0.01
    # Roughly uniform over the range: each fifth of it holds a fair share of the pairs.
    hist, _ = np.histogram(real, bins=5, range=(0.5, 0.95))
    assert hist.min() > 0.1 * len(real)
    assert np.abs(real - corpus.design_jaccard[dup]).mean() < 0.002


def test_unrelated_documents_share_nothing(corpus):
    originals = np.flatnonzero(~corpus.is_duplicate)[:40]
    sets = [grams(corpus.texts[i]) for i in originals]
    shared = sum(len(sets[i] & sets[j]) for i in range(len(sets)) for j in range(i + 1, len(sets)))
    assert shared == 0


def test_other_ranges_and_exact_copies():
    c = generate_corpus(400, jaccard_range=(0.2, 0.4), doc_words=200, seed=3, dup_fraction=0.5)
    dup = np.flatnonzero(c.is_duplicate)
    real = np.array([jaccard(c.texts[i], c.texts[c.cluster_of[i]]) for i in dup])
    assert np.abs(real - c.target_jaccard[dup]).mean() < 0.02
    exact = generate_corpus(300, jaccard_range=(1.0, 1.0), seed=4)
    for i in np.flatnonzero(exact.is_duplicate):
        assert exact.texts[i] == exact.texts[exact.cluster_of[i]]
    assert generate_corpus(0).texts == []
    assert len(generate_corpus(7, dup_fraction=0.0).texts) == 7


def test_bad_arguments():
    with pytest.raises(ValueError):
        generate_corpus(10, jaccard_range=(0.9, 0.5))
    with pytest.raises(ValueError):
        generate_corpus(10, dup_fraction=1.0)
    with pytest.raises(ValueError):
        generate_corpus(10, doc_words=5)


def test_write_jsonl(tmp_path, corpus):
    path = tmp_path / "c.jsonl"
    assert write_jsonl(path, corpus.texts[:50]) == 50
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in rows] == list(range(50))
    assert [r["text"] for r in rows] == corpus.texts[:50]
    write_jsonl(path, ["a b", "c"], ids=np.array([7, 9]))
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert rows == [{"id": 7, "text": "a b"}, {"id": 9, "text": "c"}]
