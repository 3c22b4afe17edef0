"""Synthetic corpora with known near-duplicate clusters, for tests and benchmarks.

:func:`generate_corpus` makes ``n_docs`` documents of lower-case pseudo-words separated by single
spaces (so lower-casing, punctuation removal and ``re.findall(r"\\w+")`` all give the same words).
Most documents are *originals*: independent random word sequences. A share ``dup_fraction`` are
*near-duplicates*, each an edited copy of one original chosen at random (so an original has a
Poisson number of copies, and copies of one original are also near-duplicates of each other).
Documents are laid out in random order; a copy may come before its original.

Vocabulary. ``vocab_size`` distinct pseudo-words of 2-9 letters, drawn with Zipf-Mandelbrot
frequencies p(rank) ~ 1 / (rank + 10). The offset keeps the commonest word near 1 % of tokens, so
two unrelated documents share a word 5-gram with probability ~1e-10: unrelated documents are at
Jaccard ~0, and every similarity in the corpus comes from the planted copies.

Calibration of the copies (word 5-gram sets, exactly as the tests measure them). Scattered
single-word substitutions at rate p keep a 5-gram only when its 5 words are all untouched, so
with q = (1 - p)^5 the copy shares about q*G of the G original 5-grams and
J = q / (2 - q); but scattered edits land close together and the formula is only approximate.
Here edits are instead *runs*: replace L words by L new ones, insert L new words, or delete L
words (probabilities 1/2, 1/4, 1/4, L uniform in 1..8), placed at random positions with at least
4 untouched words between two runs and at both ends of the document. Then the 5-grams touched by
different runs are disjoint and counting is exact: a run that deletes d words and inserts i words
removes d + 4 of the original's 5-grams and creates i + 4 new ones (a pure deletion creates the 4
5-grams spanning the join). With D = sum(d + 4) and I = sum(i + 4) over the runs,

    J(original, copy) = (G - D) / (G + I)          (G = number of 5-grams of the original)

For each copy a target J is drawn uniformly from ``jaccard_range``; runs are added while J stays
above the target, then a last run (a replace or an insertion of L words, placed after all those
runs or instead of the last one, whichever lands closest) is sized to hit it. ``design_jaccard`` is
the formula's value, within ~1/G of the target. A replaced word is never replaced by itself (that
would keep its 5-grams); the true J can still differ from the design when new random words happen
to recreate an existing 5-gram, which is rare. Measured on 3000 copies (bench/synth_check.py,
results in bench/results/synth_calibration.json): mean |J - target| = 0.0004, max 0.007;
J = design exactly for ~99 % of copies.

Everything is vectorised with numpy in chunks of documents (strings are built with one
``" ".join`` per document): about 50k documents/s on one idle core of the 2-core dev machine,
so 1M documents take ~20 s and ~3 GB of memory (mostly the returned strings). The result depends
only on the arguments and numpy's PCG64 streams (same seed, same corpus, on every machine).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Iterable, List, Optional, Sequence, Tuple

import numpy as np

__all__ = ["SynthCorpus", "generate_corpus", "write_jsonl", "word_ngram_set", "exact_jaccard",
           "design_jaccard_formula", "clusters_of", "NGRAM", "GENERATOR_VERSION"]

NGRAM = 5
"""The calibration counts word n-grams of this size (the library default)."""

GENERATOR_VERSION = 2
"""Bumped whenever the same arguments start producing a different corpus (cached corpora are stale)."""

_ZIPF_OFFSET = 10.0
_ZIPF_EXPONENT = 1.0
_LOOKUP_BITS = 22          # inverse-CDF table for sampling words: 4M entries
_CHUNK_DOCS = 8192         # documents built per vectorised step (fixed: the output depends on it)
_WORD_DRAW_CHUNK = 1 << 24  # original tokens drawn per RNG call
_EDIT_KIND_P = (0.5, 0.25, 0.25)  # replace, insert, delete
_MAX_RUN = 8
_LENGTH_SPREAD = 0.25      # document lengths uniform in doc_words * [0.75, 1.25]


@dataclass
class SynthCorpus:
    """A generated corpus and its ground truth.

    texts: the documents.
    cluster_of: int64, for every document the index of its original (an original points to itself).
    target_jaccard: float64, the word-5-gram Jaccard each copy was drawn to have with its original
        (1.0 for originals).
    design_jaccard: float64, the Jaccard the chosen edits give by exact counting (1.0 for originals).

    ``texts, cluster_of = generate_corpus(...)`` unpacks the first two fields.
    """

    texts: List[str]
    cluster_of: np.ndarray
    target_jaccard: np.ndarray
    design_jaccard: np.ndarray
    params: dict = field(default_factory=dict)

    def __iter__(self):
        return iter((self.texts, self.cluster_of))

    @property
    def n_docs(self) -> int:
        return len(self.texts)

    @property
    def is_duplicate(self) -> np.ndarray:
        """True for the edited copies."""
        return self.cluster_of != np.arange(len(self.cluster_of))

    def clusters(self, min_size: int = 2) -> List[np.ndarray]:
        """Members (sorted document indices) of every cluster with at least ``min_size`` documents."""
        return clusters_of(self.cluster_of, min_size)


def clusters_of(cluster_of: np.ndarray, min_size: int = 2) -> List[np.ndarray]:
    """Group document indices by cluster label; clusters smaller than ``min_size`` are left out."""
    cluster_of = np.asarray(cluster_of)
    order = np.argsort(cluster_of, kind="stable")
    labels = cluster_of[order]
    bounds = np.flatnonzero(np.diff(labels)) + 1
    starts = np.concatenate([[0], bounds])
    ends = np.concatenate([bounds, [len(labels)]])
    keep = (ends - starts) >= min_size
    return [order[s:e] for s, e in zip(starts[keep], ends[keep])]


def generate_corpus(n_docs: int, *, dup_fraction: float = 1 / 3, doc_words: int = 330,
                    jaccard_range: Tuple[float, float] = (0.5, 0.95), seed: int = 0,
                    vocab_size: int = 50_000) -> SynthCorpus:
    """Generate ``n_docs`` documents, a share ``dup_fraction`` of them near-duplicates of others.

    doc_words: mean words per document (lengths uniform within +-25 %); 330 words are ~2.2 KB.
    jaccard_range: (low, high) of the word-5-gram Jaccard between a copy and its original,
        drawn uniformly; (1, 1) makes exact copies. low must be at least 0.05.
    See the module documentation for how the edits are calibrated.
    """
    n_docs, lo, hi = _checked(n_docs, dup_fraction, jaccard_range, doc_words, vocab_size)
    params = dict(n_docs=n_docs, dup_fraction=dup_fraction, doc_words=doc_words,
                  jaccard_range=[lo, hi], seed=seed, vocab_size=vocab_size,
                  generator_version=GENERATOR_VERSION)

    n_dup = int(round(n_docs * dup_fraction))
    n_orig = n_docs - n_dup
    if n_orig == 0 and n_dup:
        raise ValueError("no original documents: raise n_docs or lower dup_fraction")

    ss_vocab, ss_layout, ss_words = np.random.SeedSequence(seed).spawn(3)
    vocab, table = _make_vocab(vocab_size, np.random.default_rng(ss_vocab))
    id_dtype = np.uint16 if vocab_size <= 1 << 16 else np.uint32

    # Layout: which positions are originals, which original each copy comes from, targets, lengths.
    rng = np.random.default_rng(ss_layout)
    perm = rng.permutation(n_docs)
    orig_pos = np.sort(perm[:n_orig])
    dup_pos = perm[n_orig:]
    dup_src = rng.integers(0, n_orig, n_dup) if n_dup else np.zeros(0, np.int64)
    targets = rng.uniform(lo, hi, n_dup) if hi > lo else np.full(n_dup, lo)
    lmin = int(round(doc_words * (1 - _LENGTH_SPREAD)))
    lmax = int(round(doc_words * (1 + _LENGTH_SPREAD)))
    orig_len = rng.integers(lmin, lmax + 1, n_orig).astype(np.int64)
    orig_start = np.cumsum(orig_len) - orig_len

    src_of_pos = np.empty(n_docs, np.int64)          # the original (index into orig_*) of each doc
    src_of_pos[orig_pos] = np.arange(n_orig)
    src_of_pos[dup_pos] = dup_src
    cluster_of = orig_pos[src_of_pos] if n_docs else np.zeros(0, np.int64)
    target_of_pos = np.ones(n_docs)
    target_of_pos[dup_pos] = targets
    is_dup = np.zeros(n_docs, bool)
    is_dup[dup_pos] = True

    # The originals' words, drawn in fixed-size pieces (deterministic, bounded temporary memory).
    rng_words = np.random.default_rng(ss_words)
    total = int(orig_len.sum())
    words = np.empty(total, id_dtype)
    for a in range(0, total, _WORD_DRAW_CHUNK):
        b = min(total, a + _WORD_DRAW_CHUNK)
        words[a:b] = _sample_words(table, rng_words, b - a)

    texts: List[str] = []
    design = np.ones(n_docs)
    for ci, a in enumerate(range(0, n_docs, _CHUNK_DOCS)):
        b = min(n_docs, a + _CHUNK_DOCS)
        rng_chunk = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(7, ci)))
        chunk, design[a:b] = _chunk_texts(words, orig_start[src_of_pos[a:b]], orig_len[src_of_pos[a:b]],
                                          is_dup[a:b], target_of_pos[a:b], vocab, table, vocab_size, rng_chunk)
        texts.extend(chunk)

    return SynthCorpus(texts=texts, cluster_of=cluster_of.astype(np.int64),
                       target_jaccard=target_of_pos, design_jaccard=design, params=params)


def _checked(n_docs, dup_fraction, jaccard_range, doc_words, vocab_size):
    """(n_docs, low, high) once every argument of :func:`generate_corpus` is checked."""
    n_docs = int(n_docs)
    if n_docs < 0:
        raise ValueError(f"n_docs must be >= 0, got {n_docs}")
    if not 0.0 <= dup_fraction < 1.0:
        raise ValueError(f"dup_fraction must be in [0, 1), got {dup_fraction}")
    lo, hi = (float(x) for x in jaccard_range)
    if not 0.05 <= lo <= hi <= 1.0:
        raise ValueError(f"jaccard_range must satisfy 0.05 <= low <= high <= 1, got {jaccard_range}")
    if doc_words < 20:
        raise ValueError(f"doc_words must be >= 20, got {doc_words}")
    if not 2 <= vocab_size <= 2_000_000:
        raise ValueError(f"vocab_size must be in [2, 2000000], got {vocab_size}")
    return n_docs, lo, hi


def _chunk_texts(words, starts, lens, dmask, targets, vocab, table, vocab_size, rng):
    """The texts of a chunk of documents (originals: their stored words; copies: edited
    versions, built together) in document order, and the design Jaccard of each (1 for
    originals)."""
    o_idx = np.flatnonzero(~dmask)
    d_idx = np.flatnonzero(dmask)
    o_flat = _ragged_gather(words, starts[o_idx], lens[o_idx])
    d_flat, d_lens, d_j = _edit_copies(words, starts[d_idx], lens[d_idx], targets[d_idx], table, vocab_size, rng)
    design = np.ones(len(dmask))
    design[d_idx] = d_j
    # Interleave both back into document order.
    seg_len = np.empty(len(dmask), np.int64)
    seg_len[o_idx] = lens[o_idx]
    seg_len[d_idx] = d_lens
    seg_start = np.empty(len(dmask), np.int64)
    seg_start[o_idx] = np.cumsum(lens[o_idx]) - lens[o_idx]
    seg_start[d_idx] = len(o_flat) + np.cumsum(d_lens) - d_lens
    flat = _ragged_gather(np.concatenate([o_flat, d_flat]), seg_start, seg_len)
    tokens = vocab[flat].tolist()
    bounds = np.concatenate([[0], np.cumsum(seg_len)]).tolist()
    return [" ".join(tokens[bounds[i]:bounds[i + 1]]) for i in range(len(dmask))], design



def design_jaccard_formula(grams: int, deleted: Sequence[int], inserted: Sequence[int]) -> float:
    """J = (G - sum(d + 4)) / (G + sum(i + 4)) for runs separated by >= ngram - 1 untouched words."""
    g = NGRAM - 1
    dd = sum(int(d) + g for d in deleted)
    ii = sum(int(i) + g for i in inserted)
    return (grams - dd) / (grams + ii)


def word_ngram_set(text: str, n: int = NGRAM) -> set:
    """The set of word n-grams (tuples) of a whitespace-tokenised text, plain Python."""
    words = text.split()
    return set(zip(*[words[i:] for i in range(n)]))


def exact_jaccard(a: str, b: str, n: int = NGRAM) -> float:
    """Exact Jaccard of the word n-gram sets of two texts (1.0 when both are empty)."""
    sa, sb = word_ngram_set(a, n), word_ngram_set(b, n)
    union = len(sa | sb)
    return len(sa & sb) / union if union else 1.0


def write_jsonl(path, texts: Iterable[str], ids: Optional[Sequence] = None) -> int:
    """Write ``{"id": ..., "text": ...}`` lines (id defaults to the line number); returns the count."""
    if ids is not None and hasattr(ids, "tolist"):
        ids = ids.tolist()
    tmp = f"{os.fspath(path)}.tmp-{os.getpid()}"
    n = 0
    dumps = json.dumps
    with open(tmp, "w", encoding="utf-8") as f:
        buf: List[str] = []
        for i, text in enumerate(texts):
            buf.append(dumps({"id": i if ids is None else ids[i], "text": text}, ensure_ascii=False))
            if len(buf) >= 10_000:
                f.write("\n".join(buf))
                f.write("\n")
                n += len(buf)
                buf = []
        if buf:
            f.write("\n".join(buf))
            f.write("\n")
            n += len(buf)
    os.replace(tmp, path)
    return n


# --------------------------------------------------------------------------- internals

def _make_vocab(vocab_size: int, rng: np.random.Generator) -> Tuple[np.ndarray, np.ndarray]:
    """(words as an object array, inverse-CDF lookup table word id by uniform 22-bit number)."""
    seen = set()
    out: List[str] = []
    while len(out) < vocab_size:
        m = int((vocab_size - len(out)) * 1.3) + 64
        lens = rng.integers(2, 10, m)
        letters = rng.integers(97, 123, (m, 9), dtype=np.uint8)
        for row, n in zip(letters, lens.tolist()):
            w = row[:n].tobytes().decode("ascii")
            if w not in seen:
                seen.add(w)
                out.append(w)
                if len(out) == vocab_size:
                    break
    vocab = np.empty(vocab_size, dtype=object)
    vocab[:] = out
    rank = np.arange(1, vocab_size + 1, dtype=np.float64)
    weights = (rank + _ZIPF_OFFSET) ** -_ZIPF_EXPONENT
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    size = 1 << _LOOKUP_BITS
    table = np.searchsorted(cdf, (np.arange(size) + 0.5) / size)
    table = np.minimum(table, vocab_size - 1).astype(np.uint16 if vocab_size <= 1 << 16 else np.uint32)
    return vocab, table


def _sample_words(table: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
    return table[rng.integers(0, len(table), n, dtype=np.uint32)]


def _ragged_gather(src: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenate src[starts[i]:starts[i] + lengths[i]] over i, without a Python loop."""
    lengths = np.asarray(lengths, np.int64)
    total = int(lengths.sum())
    if total == 0:
        return src[:0].copy()
    out_starts = np.cumsum(lengths) - lengths
    idx = np.repeat(np.asarray(starts, np.int64) - out_starts, lengths) + np.arange(total)
    return src[idx]


def _edit_copies(words, starts, lens, targets, table, vocab_size, rng):
    """Edited copies of the originals words[starts[k]:starts[k] + lens[k]], vectorised over k.

    Returns (flat word ids of all copies, length of each copy, design Jaccard of each copy).
    Three steps: draw edit runs until each copy would cross its target, size the last run so
    that the copy lands on it, place the runs at random in the copy and apply them.
    """
    m = len(starts)
    if m == 0:
        return words[:0].copy(), np.zeros(0, np.int64), np.zeros(0)
    g = NGRAM - 1
    G = (lens - g).astype(np.float64)[:, None]
    t = np.asarray(targets, np.float64)[:, None]
    d, i, cum_d, cum_i, crossed = _draw_runs(m, G, t, g, rng)
    design, d_all, i_all, valid = _size_runs(d, i, cum_d, cum_i, crossed, G[:, 0], t[:, 0], g)
    d_all, i_all, base, pos = _place_runs(d_all, i_all, valid, lens, g, rng)
    out, out_lens = _apply_runs(words, starts, lens, base, pos, d_all, i_all, valid, table, vocab_size, rng)
    return out, out_lens.astype(np.int64), design


def _draw_runs(m, G, t, g, rng):
    """Runs of edits (0 replace, 1 insert, 2 delete; 1 to _MAX_RUN words each) drawn until every
    copy has one that would take J to or below its target: (deleted and inserted words of each
    run, their cumulative sums with the g 5-grams each run breaks, where J crossed the target)."""
    kinds = np.zeros((m, 0), np.int8)
    runs = np.zeros((m, 0), np.int64)
    while True:
        cols = max(16, kinds.shape[1])
        kinds = np.concatenate([kinds, rng.choice(3, (m, cols), p=_EDIT_KIND_P).astype(np.int8)], axis=1)
        runs = np.concatenate([runs, rng.integers(1, _MAX_RUN + 1, (m, cols))], axis=1)
        d = np.where(kinds != 1, runs, 0)          # 0 replace, 1 insert, 2 delete
        i = np.where(kinds != 2, runs, 0)
        cum_d = np.cumsum(d + g, axis=1)
        cum_i = np.cumsum(i + g, axis=1)
        crossed = (G - cum_d) / (G + cum_i) <= t
        if crossed.any(axis=1).all():
            return d, i, cum_d, cum_i, crossed


def _size_runs(d, i, cum_d, cum_i, crossed, Gv, tv, g):
    """The runs each copy keeps and the size of its last one (nothing, a replace or an
    insertion), whichever lands nearest its target: (design J, deleted and inserted words of
    each kept run, which runs are kept)."""
    m = len(Gv)
    n_pre = crossed.argmax(axis=1)                  # runs that keep J above the target
    rows = np.arange(m)

    def state(n_keep):
        """(D, I) after the first n_keep runs."""
        D = np.where(n_keep > 0, cum_d[rows, np.maximum(n_keep - 1, 0)], 0).astype(np.float64)
        I = np.where(n_keep > 0, cum_i[rows, np.maximum(n_keep - 1, 0)], 0).astype(np.float64)
        return D, I

    def sizing(D0, I0):
        """J after nothing, after a replace of L_rep words, after an insertion of L_ins words."""
        j_none = (Gv - D0) / (Gv + I0)
        L_rep = np.maximum(1, np.rint((Gv - D0 - tv * (Gv + I0)) / (1 + tv) - g))
        j_rep = (Gv - D0 - L_rep - g) / (Gv + I0 + L_rep + g)
        L_ins = np.maximum(1, np.rint((Gv - D0 - g) / tv - Gv - I0 - g))
        j_ins = (Gv - D0 - g) / (Gv + I0 + L_ins + g)
        return [j_none, j_rep, j_ins], L_rep, L_ins

    # The sizing run follows either all n_pre runs or the first n_pre - 1: the last kept run may
    # leave J just above the target by less than the smallest run moves it (~9/G); dropping it
    # leaves room for a sizing run of a few words, which lands within ~1/G.
    ja, La_rep, La_ins = sizing(*state(n_pre))
    jb, Lb_rep, Lb_ins = sizing(*state(np.maximum(n_pre - 1, 0)))
    cand = np.stack(ja + jb)
    err = np.abs(cand - tv)
    err[3:, n_pre == 0] = np.inf
    choice = np.argmin(err, axis=0)
    design = cand[choice, rows]
    use_b = choice >= 3
    kind = choice % 3                                # 0 nothing, 1 replace, 2 insertion
    n_keep = n_pre - use_b
    L_rep = np.where(use_b, Lb_rep, La_rep)
    L_ins = np.where(use_b, Lb_ins, La_ins)

    C = d.shape[1] + 1
    col = np.arange(C)[None, :]
    d_all = np.concatenate([d, np.zeros((m, 1), np.int64)], axis=1)
    i_all = np.concatenate([i, np.zeros((m, 1), np.int64)], axis=1)
    d_all[rows, n_keep] = np.where(kind == 1, L_rep, 0).astype(np.int64)
    i_all[rows, n_keep] = np.choose(kind, [0, L_rep, L_ins]).astype(np.int64)
    count = n_keep + (kind != 0)
    valid = col < count[:, None]
    d_all[~valid] = 0
    i_all[~valid] = 0
    return design, d_all, i_all, valid


def _place_runs(d_all, i_all, valid, lens, g, rng):
    """The kept runs of each copy shuffled and placed left to right with random gaps:
    (deleted and inserted words of each run in their new order, each copy's first word in the
    flat words, each run's first deleted word or insertion point)."""
    m, C = d_all.shape
    keys = rng.random((m, C))
    keys[~valid] = 2.0
    order = np.argsort(keys, axis=1)
    d_all = np.take_along_axis(d_all, order, axis=1)
    i_all = np.take_along_axis(i_all, order, axis=1)
    span = np.where(valid, d_all + g, 0)            # valid runs stay a prefix after the shuffle
    slack = lens - g - span.sum(axis=1)             # >= 0 because J > 0
    assert (slack >= 0).all()
    u = rng.random((m, C))
    u[~valid] = 2.0
    u.sort(axis=1)
    offset = np.floor(np.where(valid, u, 0) * (slack[:, None] + 1)).astype(np.int64)
    pos = g + offset + np.cumsum(span, axis=1) - span   # first deleted word / insertion point
    return d_all, i_all, np.cumsum(lens) - lens, pos


def _apply_runs(words, starts, lens, base, pos, d_all, i_all, valid, table, vocab_size, rng):
    """The copies with their runs applied: (flat word ids of all copies, length of each copy).
    A replaced or inserted word is drawn from the vocabulary, never the word it replaces."""
    m = len(starts)
    tok = _ragged_gather(words, starts, lens)
    T = len(tok)
    s_flat = (base[:, None] + pos)[valid]
    d_flat = d_all[valid]
    i_flat = i_all[valid]
    delta = np.bincount(s_flat, minlength=T + 1) - np.bincount(s_flat + d_flat, minlength=T + 1)
    keep = np.cumsum(delta[:T]) == 0
    ins = np.bincount(s_flat, weights=i_flat, minlength=T).astype(np.int64)
    counts = ins + keep
    rep = np.repeat(np.arange(T), counts)
    within = np.arange(len(rep)) - np.repeat(np.cumsum(counts) - counts, counts)
    is_new = within < ins[rep]
    out = tok[rep]
    new_at = np.flatnonzero(is_new)
    fresh = _sample_words(table, rng, len(new_at))
    # A replaced word must not come back as itself (the commonest word is ~1 % of draws): that
    # would keep its 5-grams and leave J above the design by up to 10/G.
    dels = np.bincount(s_flat, weights=d_flat, minlength=T).astype(np.int64)
    r, w = rep[new_at], within[new_at]
    replaces = w < dels[r]
    same = np.zeros(len(new_at), bool)
    same[replaces] = fresh[replaces] == tok[(r + w)[replaces]]
    fresh[same] = (fresh[same].astype(np.int64) + 1) % vocab_size
    out[new_at] = fresh
    out_lens = np.add.reduceat(counts, base) if T else np.zeros(m, np.int64)
    return out, out_lens
