"""A small corpus with planted near-duplicates for the index tests: an "old" part A (indexed)
and a "new" part B whose copies of A's documents are known."""

from __future__ import annotations


from dataclasses import dataclass
from typing import List

import numpy as np

from neardup.testing.synth import generate_corpus
from neardup.kernels.verify import exact_jaccard_python
from neardup.testing.synth import word_ngram_set


@dataclass
class Split:
    a_texts: List[str]
    a_ids: List[str]
    b_texts: List[str]
    b_ids: List[str]
    b_original: List[int]       # for each B document, the position in A of its original, or -1
    b_jaccard: np.ndarray       # word-5-gram Jaccard with that original (0 when none)


def make_split(n: int = 600, seed: int = 7) -> Split:
    """Originals go to A; every copy of an original goes to B, with unrelated new documents."""
    corpus = generate_corpus(n, seed=seed)
    cluster = corpus.cluster_of
    is_orig = cluster == np.arange(n)
    a_pos = {int(i): k for k, i in enumerate(np.flatnonzero(is_orig))}
    a_texts = [corpus.texts[i] for i in np.flatnonzero(is_orig)]
    extra = generate_corpus(n // 4, seed=seed + 1000, dup_fraction=0.0)  # unrelated new documents
    b_texts, b_original, b_j = [], [], []
    for i in np.flatnonzero(~is_orig):
        b_texts.append(corpus.texts[i])
        b_original.append(a_pos[int(cluster[i])])
        b_j.append(exact_jaccard_python(word_ngram_set(corpus.texts[i]), word_ngram_set(corpus.texts[cluster[i]])))
    for t in extra.texts:
        b_texts.append(t)
        b_original.append(-1)
        b_j.append(0.0)
    return Split(a_texts=a_texts, a_ids=[f"a{i}" for i in range(len(a_texts))], b_texts=b_texts,
                 b_ids=[f"b{i}" for i in range(len(b_texts))], b_original=b_original, b_jaccard=np.array(b_j))
