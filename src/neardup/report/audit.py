"""``neardup audit``: measure the LSH S-curve on the user's own corpus.

The theory says a pair of Jaccard similarity s becomes a candidate with probability
1 - (1 - s^r)^b. The audit checks that on real documents, with the real tokeniser, MinHash and
band keys, and says how many near-duplicate pairs a dedup with these parameters would miss.

Method
------
1. Read up to ``max_docs`` documents; compute their MinHash signatures and band keys exactly as
   the dedup does (same ``num_perm``, ``ngram``, ``seed``, bands, rows), and their shingle sets.
   Empty documents and documents whose shingle set equals an earlier one's are left out.
2. Build a *pool* of pairs: uniform random pairs (which cover the low similarities) plus the
   pairs of documents that share one value of an **auxiliary** min-hash sketch (``aux_perm``
   values from hash functions independent of the dedup's) at one of ``probe_positions``
   positions; a pair of similarity s is found that way with probability 1 - (1 - s)^8, so the
   rare similar pairs are nearly all in the pool.
3. Estimate each pool pair's similarity from the auxiliary sketch, split the pool into ``bins``
   strata by that estimate and sample up to ``sample / bins`` pairs per stratum (the budget that
   small strata leave is shared by the others), so every similarity range is represented.
4. For each sampled pair: the exact Jaccard of the shingle sets, and whether it is an LSH
   candidate (shares at least one band key). Group by exact Jaccard; per bin: the measured
   candidate rate with its Wilson 95% interval, and the theory, the mean of 1 - (1 - s^r)^b over
   the same pairs. A bin whose theory lies outside the interval is flagged.
5. Among the sampled pairs with exact J >= threshold: the share that is not a candidate (would
   be missed), weighted by stratum (pool pairs / sampled pairs) so that it estimates the share
   over the corpus' pairs, with a Wilson interval on the effective sample size, and its theory.

Why an auxiliary sketch: if the pairs were found and stratified with the dedup's own signature,
a pair of similarity s whose signature happens to agree more than s (and so is more likely a
candidate) would also be more likely to be sampled, and the measured rate would be biased
upwards. With independent hash functions, whether a pair is sampled says nothing about whether
it is a candidate, given its similarity.

This module measures texts given (:func:`audit_texts`) and says what it found (:class:`AuditResult`,
:func:`format_audit`, :func:`plot_audit`); :mod:`.audit_files` reads the texts of files and runs
the whole ``neardup audit``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from ..errors import ConfigError, InputError
from ..config.params import candidate_probability, midpoint
from ..kernels.sampling import aux_sketch, run_pairs, set_fingerprints
from ..progress import check_interrupt

__all__ = ["AuditBin", "AuditResult", "audit_texts", "wilson_interval", "format_audit",
           "plot_audit"]

Z95 = 1.959963984540054


# --------------------------------------------------------------------------------------------
# Statistics


def wilson_interval(successes: float, n: float, z: float = Z95, *, continuity: bool = True):
    """The Wilson score interval (low, high) of a binomial proportion; (nan, nan) when n == 0.

    With ``continuity`` (the default) the continuity-corrected form (Newcombe 1998, method 4),
    whose coverage stays near 95% for the small counts of the S-curve's tails, where the plain
    Wilson interval is too narrow. ``n`` may be an effective (non-integer) sample size.
    """
    if n <= 0:
        return float("nan"), float("nan")
    p = min(max(successes / n, 0.0), 1.0)
    z2 = z * z
    if continuity:
        denom = 2.0 * (n + z2)
        if p == 0.0:
            lo = 0.0
        else:
            lo = (2 * n * p + z2 - 1 - z * math.sqrt(max(z2 - 2 - 1 / n + 4 * p * (n * (1 - p) + 1), 0.0))) / denom
        if p == 1.0:
            hi = 1.0
        else:
            hi = (2 * n * p + z2 + 1 + z * math.sqrt(max(z2 + 2 - 1 / n + 4 * p * (n * (1 - p) - 1), 0.0))) / denom
        return max(0.0, lo), min(1.0, hi)
    denom = 1.0 + z2 / n
    center = (p + z2 / (2.0 * n)) / denom
    half = z * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n)) / denom
    lo, hi = center - half, center + half
    # p = 0 or 1 gives an end exactly at 0 or 1 up to rounding.
    if p == 0.0:
        lo = 0.0
    if p == 1.0:
        hi = 1.0
    return max(0.0, lo), min(1.0, hi)


# --------------------------------------------------------------------------------------------
# Results


@dataclass
class AuditBin:
    """One bin of exact Jaccard similarity [lo, hi) (the last one closed)."""

    lo: float
    hi: float
    pairs: int
    candidates: int
    measured: float          # candidates / pairs (nan when empty)
    ci_low: float
    ci_high: float
    theory: float            # mean of 1 - (1 - s^r)^b over the bin's pairs
    mean_similarity: float
    outside: bool            # theory outside [ci_low, ci_high]

    @property
    def label(self) -> str:
        return f"[{self.lo:.2f}, {self.hi:.2f}{']' if self.hi >= 1.0 else ')'}"


@dataclass
class AuditResult:
    """What :func:`audit_texts` measured. ``to_dict()`` is JSON-ready."""

    threshold: float
    num_perm: int
    bands: int
    rows: int
    ngram: int
    char_ngrams: bool
    seed: int
    documents: int
    empty_documents: int
    duplicate_documents: int  # same shingle set as an earlier document: left out
    sample: int
    pool_pairs: int
    pool_random_pairs: int
    pool_bucket_pairs: int
    bins: List[AuditBin]
    near_duplicates: Dict[str, Any]
    pairs: Dict[str, np.ndarray] = field(repr=False)
    seconds: Dict[str, float] = field(default_factory=dict)
    options: Dict[str, Any] = field(default_factory=dict)
    ids: Optional[Sequence[str]] = field(default=None, repr=False)  # of the documents, when given

    @property
    def sampled_pairs(self) -> int:
        return int(len(self.pairs["left"]))

    @property
    def bins_outside(self) -> int:
        return sum(1 for b in self.bins if b.outside)

    @property
    def bins_with_pairs(self) -> int:
        return sum(1 for b in self.bins if b.pairs > 0)

    @property
    def miss_rate(self) -> float:
        return float(self.near_duplicates["miss_rate"])

    def summary(self) -> str:
        """The table ``neardup audit`` prints (:func:`format_audit`)."""
        return format_audit(self)

    def to_json(self) -> str:
        """:meth:`to_dict` as the JSON text ``neardup audit --json`` prints or writes."""
        return json.dumps(self.to_dict(), indent=1)

    def to_dict(self, include_pairs: bool = True) -> dict:
        d = {
            "threshold": self.threshold, "num_perm": self.num_perm, "bands": self.bands,
            "rows": self.rows, "midpoint": midpoint(self.bands, self.rows),
            "p_at_threshold": float(candidate_probability(self.threshold, self.bands, self.rows)),
            "ngram": self.ngram, "char_ngrams": self.char_ngrams, "seed": self.seed,
            "documents": self.documents, "empty_documents": self.empty_documents,
            "duplicate_documents": self.duplicate_documents,
            "sample": self.sample, "sampled_pairs": self.sampled_pairs,
            "pool_pairs": self.pool_pairs, "pool_random_pairs": self.pool_random_pairs,
            "pool_bucket_pairs": self.pool_bucket_pairs,
            "bins": [dict(dataclasses.asdict(b), label=b.label) for b in self.bins],
            "bins_outside": self.bins_outside, "bins_with_pairs": self.bins_with_pairs,
            "near_duplicates": dict(self.near_duplicates),
            "options": dict(self.options), "seconds": dict(self.seconds),
        }
        if include_pairs:
            d["pairs"] = {
                "columns": ["left", "right", "similarity", "estimated", "candidate", "weight"],
                "left": self.pairs["left"].tolist(), "right": self.pairs["right"].tolist(),
                "similarity": self.pairs["similarity"].tolist(),
                "estimated": self.pairs["estimated"].tolist(),
                "candidate": self.pairs["candidate"].astype(bool).tolist(),
                "weight": self.pairs["weight"].tolist(),
            }
            if self.ids is not None:
                d["pairs"]["columns"][2:2] = ["left_id", "right_id"]
                d["pairs"]["left_id"] = [self.ids[i] for i in d["pairs"]["left"]]
                d["pairs"]["right_id"] = [self.ids[i] for i in d["pairs"]["right"]]
        return _json_safe(d)


def _json_safe(obj):
    """NaN / inf become None (strict JSON)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    if isinstance(obj, (np.floating,)):
        return _json_safe(float(obj))
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


# --------------------------------------------------------------------------------------------
# The audit


def _make_config(config, options: Dict[str, Any]):
    from ..config import Config
    config = Config(**options) if config is None else config.replace(**options)
    return config.resolved()


def _allocate(pool_counts: np.ndarray, budget: int) -> np.ndarray:
    """Water-filling: up to budget / strata per stratum, what small strata leave goes to the rest."""
    take = np.zeros_like(pool_counts)
    remaining = int(budget)
    order = np.argsort(pool_counts, kind="stable")
    left = int(np.sum(pool_counts > 0))
    for s in order:
        c = int(pool_counts[s])
        if c == 0:
            continue
        share = remaining // max(left, 1)
        t = min(c, share)
        take[s] = t
        remaining -= t
        left -= 1
    return take


def audit_texts(texts, config=None, *, sample: int = 5000, bins: int = 10, aux_perm: int = 32,
                probe_positions: int = 8, uniform_pairs: Optional[int] = None, run_cap: int = 2000,
                ids: Optional[Sequence[str]] = None, **options) -> AuditResult:
    """Measure the S-curve of (bands, rows) on ``texts`` (a list of str or a pyarrow string array).

    ``config``: a :class:`neardup.config.Config` (threshold, num_perm, bands, rows, ngram,
    char_ngrams, seed, normalisation, min_recall); keyword ``options`` named like Config fields
    override it (e.g. ``audit_texts(texts, threshold=0.7, num_perm=64)``). Bands and rows default
    to what the dedup would choose.

    sample: pairs to check (split over ``bins`` strata of estimated similarity).
    bins: equal-width similarity bins on [0, 1] (for sampling and for the result).
    aux_perm, probe_positions: the auxiliary sketch's length and how many of its positions are
        used to find similar pairs.
    uniform_pairs: random pairs in the pool (default: max(20 * sample, 50000)).
    run_cap: at most this many pairs from the documents that share one sketch value.
    ids: one id per text (``read_texts(..., with_ids=True)``); ``to_dict()`` then names the
        sampled pairs by id too (``left_id``, ``right_id``), not only by position.
    """
    t_start = time.perf_counter()
    cfg = _make_config(config, options)
    _check_options(texts, ids, sample=sample, bins=bins, aux_perm=aux_perm, probe_positions=probe_positions,
                   run_cap=run_cap)
    seconds: Dict[str, float] = {}
    t0 = time.perf_counter()
    docs = _Documents.of(texts, cfg)
    seconds["signatures"] = time.perf_counter() - t0
    check_interrupt()  # between the phases (and the probes of the pool): a signal stops the audit there

    t0 = time.perf_counter()
    rng = np.random.default_rng([int(cfg.seed), 0xA0D17])  # the pool's, then the sample's draws
    n_uniform = int(uniform_pairs) if uniform_pairs is not None else max(20 * int(sample), 50_000)
    pool = _Pool.of(docs, cfg, rng, n_uniform=n_uniform, aux_perm=aux_perm, probe_positions=probe_positions,
                    run_cap=run_cap)
    seconds["pool"] = time.perf_counter() - t0
    check_interrupt()

    t0 = time.perf_counter()
    chosen, weight = _stratified_sample(pool.estimated, bins, int(sample), rng)
    left, right = pool.left[chosen], pool.right[chosen]
    similarity, candidate = _measure(docs, cfg, left, right)
    seconds["measure"] = time.perf_counter() - t0

    theory = candidate_probability(np.clip(similarity, 0.0, 1.0), cfg.bands, cfg.rows)
    theory = np.atleast_1d(np.asarray(theory, dtype=np.float64))
    result_bins = _bins(similarity, candidate, theory, bins)
    near = _near_duplicates(similarity, candidate, weight, theory, cfg.threshold)
    seconds["total"] = time.perf_counter() - t_start
    return AuditResult(
        threshold=float(cfg.threshold), num_perm=int(cfg.num_perm), bands=int(cfg.bands),
        rows=int(cfg.rows), ngram=int(cfg.ngram), char_ngrams=bool(cfg.char_ngrams), seed=int(cfg.seed),
        documents=docs.n, empty_documents=int(docs.n - docs.nonempty),
        duplicate_documents=int(docs.nonempty - len(docs.eligible)), sample=int(sample),
        pool_pairs=len(pool.left), pool_random_pairs=pool.random_pairs,
        pool_bucket_pairs=pool.bucket_pairs, bins=result_bins, near_duplicates=near,
        pairs={"left": left.astype(np.int64), "right": right.astype(np.int64),
               "similarity": similarity, "estimated": pool.estimated[chosen], "candidate": candidate,
               "weight": weight},
        seconds=seconds,
        options={"bins": int(bins), "aux_perm": int(aux_perm), "probe_positions": int(probe_positions),
                 "uniform_pairs": pool.uniform_pairs, "run_cap": int(run_cap),
                 "min_recall": float(cfg.min_recall), "punctuation": cfg.punctuation},
        ids=None if ids is None else [str(i) for i in ids])


def _check_options(texts, ids, **values) -> None:
    """The sizes :func:`audit_texts` is given: whole numbers >= 1 (ConfigError otherwise)."""
    if ids is not None and len(ids) != len(texts):
        raise ConfigError(f"ids must have one id per text: {len(ids)} ids for {len(texts)} texts")
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
    if values["bins"] > 1000:
        raise ConfigError(f"bins must be at most 1000, got {values['bins']}")
    if values["probe_positions"] > values["aux_perm"]:
        raise ConfigError(f"probe_positions ({values['probe_positions']}) must not exceed aux_perm "
                          f"({values['aux_perm']})")


def _kernels():
    """The dedup's MinHash, band and similarity kernels (ConfigError on a broken install)."""
    try:
        from ..kernels.bands import band_keys
        from ..kernels.minhash import MinHasher
        from ..kernels.verify import estimated_jaccard, exact_jaccard
    except ImportError as exc:  # pragma: no cover - a broken install
        raise ConfigError(f"the audit needs neardup's MinHash kernels: {exc}") from None
    return MinHasher, band_keys, estimated_jaccard, exact_jaccard


@dataclass
class _Documents:
    """The documents as the dedup sees them: signatures, shingle sets (``offsets`` into
    ``hashes``), and those audited (``eligible``: non-empty, and not the same shingle set as an
    earlier document)."""

    signatures: np.ndarray
    offsets: np.ndarray
    hashes: np.ndarray
    n: int               # documents
    nonempty: int        # of them with a shingle
    eligible: np.ndarray

    @staticmethod
    def of(texts, cfg) -> "_Documents":
        MinHasher = _kernels()[0]
        mh = MinHasher.from_config(cfg)
        sigs = mh.signatures(texts)
        check_interrupt()
        offsets, hashes = mh.shingle_sets(texts)
        offsets = np.asarray(offsets, dtype=np.int64)
        n = int(sigs.shape[0])
        nonempty = np.flatnonzero(np.diff(offsets) > 0)
        # Documents with the same shingle set as an earlier one are left out: their pairs are all
        # at J = 1 (always candidates), and repeated copies would make the sampled pairs repeat the
        # same comparison (perfectly correlated outcomes, too-narrow intervals).
        fingerprints = set_fingerprints(offsets, np.ascontiguousarray(hashes, dtype=np.uint64))
        _, first = np.unique(fingerprints[nonempty], return_index=True)
        eligible = nonempty[np.sort(first)]
        if len(eligible) < 2:
            raise InputError(f"the audit needs at least 2 documents with different, non-empty sets of "
                             f"shingles (of {cfg.ngram} {'characters' if cfg.char_ngrams else 'words'}); "
                             f"got {len(eligible)} among {n} documents")
        return _Documents(sigs, offsets, hashes, n, len(nonempty), eligible)


@dataclass
class _Pool:
    """The pairs the sample is drawn from (``left`` < ``right``, document positions): random
    pairs and pairs that share a value of the auxiliary sketch, with the similarity that sketch
    estimates."""

    left: np.ndarray
    right: np.ndarray
    estimated: np.ndarray
    random_pairs: int    # distinct random pairs
    bucket_pairs: int    # distinct pairs sharing a sketch value
    uniform_pairs: int   # random pairs drawn (all pairs of a small corpus)

    @staticmethod
    def of(docs: _Documents, cfg, rng, *, n_uniform: int, aux_perm: int, probe_positions: int,
           run_cap: int) -> "_Pool":
        estimated_jaccard = _kernels()[2]
        n = docs.n
        uni_l, uni_r, n_uniform = _random_pairs(docs.eligible, n_uniform, rng)
        aux = aux_sketch(docs.offsets, docs.hashes, int(aux_perm), int(cfg.seed))
        bl, br = _bucket_pairs(aux, docs.eligible, rng, probe_positions=int(probe_positions), run_cap=int(run_cap))
        bucket_codes = np.unique(bl * n + br)
        uni_codes = np.unique(uni_l * n + uni_r)
        codes = np.union1d(uni_codes, bucket_codes)
        codes = codes[(codes // n) != (codes % n)]
        pool_l, pool_r = codes // n, codes % n
        return _Pool(pool_l, pool_r, estimated_jaccard(aux, pool_l, pool_r), int(len(uni_codes)),
                     int(len(bucket_codes)), int(n_uniform))


def _random_pairs(eligible: np.ndarray, n_uniform: int, rng):
    """(left, right, how many) uniform random pairs of distinct eligible documents, left <
    right; every pair of a corpus that has no more than ``n_uniform``."""
    m = len(eligible)
    total_pairs = m * (m - 1) // 2
    if total_pairs <= n_uniform:  # a small corpus: every pair
        a, b = np.triu_indices(m, 1)
        n_uniform = total_pairs
    else:
        a = rng.integers(0, m, size=n_uniform, dtype=np.int64)
        b = rng.integers(0, m - 1, size=n_uniform, dtype=np.int64)
        b = b + (b >= a)
    return eligible[np.minimum(a, b)], eligible[np.maximum(a, b)], n_uniform


def _bucket_pairs(aux: np.ndarray, eligible: np.ndarray, rng, *, probe_positions: int, run_cap: int):
    """(left, right) pairs of eligible documents that share the value of the auxiliary sketch at
    one of its first ``probe_positions`` positions (at most ``run_cap`` pairs of one run of equal
    values), left < right."""
    bucket_l, bucket_r = [], []
    for pos in range(probe_positions):
        check_interrupt()
        values = np.ascontiguousarray(aux[eligible, pos])
        order = np.argsort(values, kind="stable").astype(np.int64)
        run_seed = int(rng.integers(0, 1 << 62))
        l, r = run_pairs(order, values, run_cap, run_seed)
        l, r = eligible[l], eligible[r]
        bucket_l.append(np.minimum(l, r))
        bucket_r.append(np.maximum(l, r))
    bl = np.concatenate(bucket_l) if bucket_l else np.zeros(0, np.int64)
    br = np.concatenate(bucket_r) if bucket_r else np.zeros(0, np.int64)
    return bl, br


def _stratified_sample(est: np.ndarray, bins: int, sample: int, rng):
    """(pool indexes drawn, the weight of each: pool pairs / sampled pairs of its stratum): the
    pool split into ``bins`` strata by estimated similarity, up to sample / bins pairs of each."""
    stratum = np.minimum((est * bins + 1e-9).astype(np.int64), bins - 1)
    pool_counts = np.bincount(stratum, minlength=bins)
    take = _allocate(pool_counts, sample)
    chosen = []
    weights = []
    for s in range(bins):
        if take[s] == 0:
            continue
        idx = np.flatnonzero(stratum == s)
        pick = idx if take[s] >= len(idx) else rng.choice(idx, size=int(take[s]), replace=False)
        chosen.append(np.sort(pick))
        weights.append(np.full(len(pick), pool_counts[s] / len(pick), dtype=np.float64))
    chosen_idx = np.concatenate(chosen) if chosen else np.zeros(0, np.int64)
    weight = np.concatenate(weights) if weights else np.zeros(0, np.float64)
    return chosen_idx, weight


def _measure(docs: _Documents, cfg, left: np.ndarray, right: np.ndarray):
    """(exact Jaccard, whether an LSH candidate under (bands, rows)) of each pair."""
    _, band_keys, _, exact_jaccard = _kernels()
    similarity = exact_jaccard(docs.offsets, docs.hashes, left, right)
    keys = band_keys(docs.signatures, cfg.bands, cfg.rows, cfg.seed)
    candidate = np.any(keys[left] == keys[right], axis=1) if len(left) else np.zeros(0, bool)
    return similarity, candidate


def _bins(similarity: np.ndarray, candidate: np.ndarray, theory: np.ndarray, bins: int) -> List[AuditBin]:
    """The pairs grouped into ``bins`` bins of exact similarity: measured rate, its interval and
    the theory of each."""
    result_bins = []
    where = np.minimum((similarity * bins + 1e-9).astype(np.int64), bins - 1)
    for s in range(bins):
        mask = where == s
        k = int(mask.sum())
        c = int(candidate[mask].sum())
        lo_edge, hi_edge = s / bins, (s + 1) / bins
        if k == 0:
            result_bins.append(AuditBin(lo_edge, hi_edge, 0, 0, float("nan"), float("nan"), float("nan"),
                                        float("nan"), float("nan"), False))
            continue
        ci_lo, ci_hi = wilson_interval(c, k)
        th = float(theory[mask].mean())
        outside = th < ci_lo - 1e-9 or th > ci_hi + 1e-9
        result_bins.append(AuditBin(lo_edge, hi_edge, k, c, c / k, ci_lo, ci_hi, th,
                                    float(similarity[mask].mean()), bool(outside)))
    return result_bins


def _near_duplicates(similarity: np.ndarray, candidate: np.ndarray, weight: np.ndarray, theory: np.ndarray,
                     threshold: float) -> Dict[str, Any]:
    """The sampled pairs at or above the threshold: how many, how many missed, and the miss rate
    weighted to the pool with its interval and theory (``near_duplicates`` of the result)."""
    near = similarity >= threshold - 1e-12
    nd: Dict[str, Any] = {"threshold": threshold, "pairs": int(near.sum()),
                          "candidates": int(candidate[near].sum()),
                          "missed": int(near.sum() - candidate[near].sum())}
    if not near.any():
        nd.update({"miss_rate": float("nan"), "ci_low": float("nan"), "ci_high": float("nan"),
                   "theory": float("nan"), "effective_pairs": 0.0, "consistent": None,
                   "sample_miss_rate": float("nan"), "sample_ci_low": float("nan"),
                   "sample_ci_high": float("nan"), "sample_theory": float("nan")})
        return nd
    w = weight[near]
    missed = (~candidate[near]).astype(np.float64)
    miss = float(np.dot(w, missed) / w.sum())
    n_eff = float(w.sum() ** 2 / np.dot(w, w))
    lo, hi = wilson_interval(miss * n_eff, n_eff)
    th_miss = float(np.dot(w, 1.0 - theory[near]) / w.sum())
    raw = float(missed.mean())
    raw_lo, raw_hi = wilson_interval(float(missed.sum()), float(len(missed)))
    nd.update({
        "miss_rate": miss, "ci_low": lo, "ci_high": hi, "theory": th_miss,
        "effective_pairs": n_eff,
        "consistent": bool(lo - 1e-9 <= th_miss <= hi + 1e-9),
        "sample_miss_rate": raw, "sample_ci_low": raw_lo, "sample_ci_high": raw_hi,
        "sample_theory": float(np.mean(1.0 - theory[near])),
    })
    return nd


# --------------------------------------------------------------------------------------------
# Output


def _pct(v) -> str:
    return "n/a" if v is None or not math.isfinite(v) else f"{v:.1%}"


def format_audit(result: AuditResult) -> str:
    """The table ``neardup audit`` prints."""
    r = result
    unit = "characters" if r.char_ngrams else "words"
    left_out = []
    if r.empty_documents:
        left_out.append(f"{r.empty_documents:,} without a shingle")
    if r.duplicate_documents:
        left_out.append(f"{r.duplicate_documents:,} with the same shingles as an earlier one")
    lines = [
        f"neardup audit: {r.documents:,} documents"
        + (f" ({', '.join(left_out)}: left out)" if left_out else "")
        + f"; {r.bands} bands x {r.rows} rows of {r.num_perm}, threshold {r.threshold:g}, "
          f"{r.ngram}-grams of {unit}, seed {r.seed}",
        f"pairs: {r.sampled_pairs:,} sampled from a pool of {r.pool_pairs:,} "
        f"({r.pool_random_pairs:,} random, {r.pool_bucket_pairs:,} sharing a sketch value), "
        f"stratified by estimated similarity",
        "",
        f"  {'exact J':<13} {'pairs':>7} {'cand.':>7} {'measured':>9}  {'95% CI':<16} {'theory':>7}",
    ]
    for b in r.bins:
        if b.pairs == 0:
            lines.append(f"  {b.label:<13} {0:>7} {'':>7} {'-':>9}")
            continue
        flag = "  <- theory outside the CI" if b.outside else ""
        lines.append(f"  {b.label:<13} {b.pairs:>7,} {b.candidates:>7,} {b.measured:>9.3f}  "
                     f"[{b.ci_low:.3f}, {b.ci_high:.3f}]   {b.theory:>7.3f}{flag}")
    nd = r.near_duplicates
    lines.append("")
    lines.append(f"measured vs theory: {r.bins_with_pairs - r.bins_outside} of {r.bins_with_pairs} bins "
                 f"with pairs agree (theory inside the 95% CI; about 1 in 20 may fall outside by chance)")
    lines.append("")
    if nd["pairs"]:
        lines.append(f"near-duplicates (exact J >= {r.threshold:g}): {nd['pairs']:,} sampled pairs, "
                     f"{nd['missed']:,} of them not candidates")
        lines.append(f"  expected share of near-duplicate pairs missed: {_pct(nd['miss_rate'])} "
                     f"(95% CI {_pct(nd['ci_low'])} - {_pct(nd['ci_high'])}); theory {_pct(nd['theory'])}"
                     + ("" if nd.get("consistent") else "  <- theory outside the CI"))
        lines.append(f"  (weighted to the pool; over the sampled pairs alone: {_pct(nd['sample_miss_rate'])}, "
                     f"theory {_pct(nd['sample_theory'])})")
    else:
        lines.append(f"near-duplicates (exact J >= {r.threshold:g}): none among the sampled pairs; "
                     "the miss rate cannot be measured on this corpus")
    return "\n".join(lines)


def audit_figure(result: AuditResult):
    """Measured candidate rates with 95% error bars over the theoretical S-curve."""
    from . import plots
    plt = plots.require_matplotlib()
    r = result
    s = np.linspace(0, 1, 501)
    fig, ax = plt.subplots(figsize=(7.0, 4.6))
    ax.plot(s, candidate_probability(s, r.bands, r.rows), color=plots.CURVE, lw=2,
            label=f"theory 1 - (1 - s^{r.rows})^{r.bands}", zorder=2)
    xs, ys, lo, hi, bad = [], [], [], [], []
    for b in r.bins:
        if b.pairs:
            xs.append(b.mean_similarity)
            ys.append(b.measured)
            lo.append(b.measured - b.ci_low)
            hi.append(b.ci_high - b.measured)
            bad.append(b.outside)
    if xs:
        xs_a, ys_a = np.array(xs), np.array(ys)
        err = np.array([lo, hi])
        ok = ~np.array(bad)
        ax.errorbar(xs_a[ok], ys_a[ok], yerr=err[:, ok], fmt="o", color="#1e8449", capsize=3,
                    label="measured (95% CI)", zorder=3)
        if (~ok).any():
            ax.errorbar(xs_a[~ok], ys_a[~ok], yerr=err[:, ~ok], fmt="s", color=plots.THRESHOLD,
                        capsize=3, label="measured, theory outside CI", zorder=3)
        th = np.array([b.theory for b in r.bins if b.pairs])
        ax.plot(xs_a, th, "x", color=plots.CURVE, ms=7, mew=1.5,
                label="theory: mean over the bin's pairs", zorder=4)
    ax.axvline(r.threshold, color=plots.THRESHOLD, ls="--", lw=1.2, label=f"threshold {r.threshold:g}")
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("exact Jaccard similarity (bin mean)")
    ax.set_ylabel("share of pairs that are LSH candidates")
    nd = r.near_duplicates
    ax.set_title(f"Audit: {r.bands} bands x {r.rows} rows, {r.sampled_pairs:,} pairs; "
                 f"missed near-dups {_pct(nd['miss_rate'])}")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    return fig


def plot_audit(result: AuditResult, path: str, *, overwrite: bool = True) -> str:
    """Write :func:`audit_figure` to ``path`` (.png or .svg), whole or not at all; without
    ``overwrite`` an existing file is left alone (ConfigError)."""
    from .plots import plot_format, save_figure
    plot_format(path)
    return save_figure(audit_figure(result), path, overwrite=overwrite)
