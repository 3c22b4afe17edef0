"""The LSH S-curve and the choice of bands and rows.

A MinHash signature of k values is cut into b bands of r rows (b * r <= k). Two
documents whose Jaccard similarity is s agree on one signature value with
probability s, on a whole band with probability s**r, and so share at least one
band key (become a *candidate pair*) with probability

    P(candidate | J = s) = 1 - (1 - s**r)**b                     (Leskovec, Rajaraman, Ullman,
                                                                  Mining of Massive Datasets, 3.4)

an S-curve whose steepest point is close to (1/b)**(1/r).

Around a threshold t, the *false-positive area* is the integral of P over [0, t]
(how much dissimilar mass still becomes a candidate) and the *false-negative area*
the integral of 1 - P over [t, 1] (how much similar mass is missed).

The usual optimiser (datasketch's) minimises 0.5 * FP + 0.5 * FN. Because the FN
integral covers only the short interval [t, 1], it favours steep curves placed
*above* t: at t = 0.8 and k = 128 it picks 9 bands x 13 rows, which finds only
about 40% of the pairs whose similarity is exactly 0.8. neardup's default instead
demands P(candidate | J = t) >= min_recall (0.985) and, among the (b, r) that meet it,
takes the one with the smallest false-positive area (the fewest wasted candidates): 18 bands
x 7 rows at t = 0.8 and k = 128, P = 0.986.
The weighted optimiser stays available as ``method="weighted"``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import List, Optional, Tuple

import numpy as np

from .recall import DEFAULT_MIN_RECALL

__all__ = [
    "DEFAULT_MIN_RECALL", "candidate_probability", "midpoint", "false_positive_area", "false_negative_area",
    "ParamChoice", "choose_params", "alternatives", "describe",
]


def candidate_probability(similarity, bands: int, rows: int):
    """P(two documents of Jaccard ``similarity`` share at least one band key) = 1 - (1 - s^r)^b.

    Accepts a scalar or an array; returns the same shape (float64).
    """
    _check_band_rows(bands, rows)
    s = np.asarray(similarity, dtype=np.float64)
    if np.any((s < 0) | (s > 1)):
        raise ValueError("similarity must lie in [0, 1]")
    return _probability(s, bands, rows)


def _probability(s: np.ndarray, bands: int, rows: int):
    """:func:`candidate_probability` of checked arguments (``s`` a float64 array or 0-d array)."""
    # 1 - (1 - x)^b computed as -expm1(b * log1p(-x)) keeps precision for tiny s^r.
    x = np.power(s, rows)
    with np.errstate(divide="ignore"):
        p = -np.expm1(bands * np.log1p(-x))
    p = np.where(x >= 1.0, 1.0, p)
    return float(p) if p.ndim == 0 else p


def midpoint(bands: int, rows: int) -> float:
    """The similarity (1/b)^(1/r), near which the S-curve is steepest (P is about 1 - 1/e there)."""
    _check_band_rows(bands, rows)
    return float((1.0 / bands) ** (1.0 / rows))


@lru_cache(maxsize=1)
def _gauss_legendre(order: int = 256):
    """Gauss-Legendre nodes (ascending) and weights on [-1, 1], by Newton's method on the Legendre
    recurrence from Tricomi's first guesses. numpy's leggauss solves an eigenproblem instead,
    which took a second of start-up when BLAS threads compete for the cores."""
    n = order
    x = np.cos(np.pi * (np.arange(1, n + 1) - 0.25) / (n + 0.5))
    for _ in range(100):
        p0, p1 = np.ones_like(x), x.copy()
        for k in range(2, n + 1):
            p0, p1 = p1, ((2 * k - 1) * x * p1 - (k - 1) * p0) / k
        dp = n * (x * p1 - p0) / (x * x - 1.0)
        step = p1 / dp
        x = x - step
        if np.max(np.abs(step)) < 1e-15:
            break
    p0, p1 = np.ones_like(x), x.copy()
    for k in range(2, n + 1):
        p0, p1 = p1, ((2 * k - 1) * x * p1 - (k - 1) * p0) / k
    dp = n * (x * p1 - p0) / (x * x - 1.0)
    weights = 2.0 / ((1.0 - x * x) * dp * dp)
    return x[::-1].copy(), weights[::-1].copy()


def _integrate(f, lo: float, hi: float) -> float:
    if hi <= lo:
        return 0.0
    # Split into pieces: the S-curve can be very steep, Gauss-Legendre per piece stays exact enough.
    # ``f`` (elementwise) is taken once over every piece's nodes, each piece summed as before:
    # the same sums, 16 times fewer calls (`neardup params` made ~21,000 of them: 0.7 s)
    nodes, weights = _gauss_legendre()
    edges = np.linspace(lo, hi, 17)
    half, mid = 0.5 * (edges[1:] - edges[:-1]), 0.5 * (edges[:-1] + edges[1:])
    values = f((half[:, None] * nodes + mid[:, None]).ravel()).reshape(len(half), len(nodes))
    total = 0.0
    for k in range(len(half)):
        total += half[k] * float(np.dot(weights, values[k]))
    return float(total)


def false_positive_area(threshold: float, bands: int, rows: int) -> float:
    """Integral of P(candidate | s) over s in [0, threshold]."""
    _check_threshold(threshold)
    return _integrate(lambda s: candidate_probability(s, bands, rows), 0.0, threshold)


def false_negative_area(threshold: float, bands: int, rows: int) -> float:
    """Integral of 1 - P(candidate | s) over s in [threshold, 1]."""
    _check_threshold(threshold)
    return _integrate(lambda s: 1.0 - candidate_probability(s, bands, rows), threshold, 1.0)


@dataclass(frozen=True)
class ParamChoice:
    """A (bands, rows) choice with the numbers that justify it."""

    threshold: float
    num_perm: int
    bands: int
    rows: int
    method: str
    midpoint: float
    p_at_threshold: float
    false_positive_area: float
    false_negative_area: float
    reason: str

    def to_dict(self) -> dict:
        return asdict(self)


def _evaluate(threshold: float, num_perm: int, bands: int, rows: int, method: str, reason: str) -> ParamChoice:
    return ParamChoice(
        threshold=float(threshold), num_perm=int(num_perm), bands=int(bands), rows=int(rows),
        method=method, midpoint=midpoint(bands, rows),
        p_at_threshold=float(candidate_probability(threshold, bands, rows)),
        false_positive_area=false_positive_area(threshold, bands, rows),
        false_negative_area=false_negative_area(threshold, bands, rows),
        reason=reason)


def _least_fp_area(threshold: float, grid: List[tuple], chunk: int = 64) -> List[tuple]:
    """The (b, r) of ``grid`` whose false-positive area may be the least: the area of every one
    computed at once (a matrix of the S-curves at the integration nodes, ``chunk`` curves at a
    time), those within a relative 1e-9 of the least kept. The matrix sums in another order than
    :func:`false_positive_area` (a few ulps apart), so the caller compares the few kept with it
    (exactly as before: the same choice), not the hundreds of the grid one by one (0.1-0.2 s of
    every run's start-up)."""
    if len(grid) <= 1 or not threshold > 0:
        return list(grid)
    nodes, weights = _gauss_legendre()
    edges = np.linspace(0.0, threshold, 17)
    half = 0.5 * (edges[1:] - edges[:-1])
    xs = (half[:, None] * nodes[None, :] + (0.5 * (edges[:-1] + edges[1:]))[:, None]).ravel()
    w = (half[:, None] * weights[None, :]).ravel()
    bands = np.array([b for b, _ in grid], dtype=np.float64)
    rows = np.array([r for _, r in grid], dtype=np.float64)
    areas = np.empty(len(grid))
    with np.errstate(divide="ignore"):
        for i in range(0, len(grid), chunk):
            x = np.power(xs[None, :], rows[i:i + chunk, None])
            p = -np.expm1(bands[i:i + chunk, None] * np.log1p(-x))
            p = np.where(x >= 1.0, 1.0, p)
            areas[i:i + chunk] = p @ w
    least = areas.min()
    return [g for g, a in zip(grid, areas.tolist()) if a <= least + 1e-9 * abs(least) + 1e-300]


def _grid(num_perm: int):
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            yield b, r


def choose_params(threshold: float, num_perm: int, *, min_recall: float = DEFAULT_MIN_RECALL, method: str = "recall",
                  fp_weight: float = 0.5, fn_weight: float = 0.5,
                  bands: Optional[int] = None, rows: Optional[int] = None) -> ParamChoice:
    """Choose (bands, rows) with bands * rows <= num_perm (see :func:`_choose_params`); the answer
    of the same arguments is kept (a search over every (b, r) takes ~0.2 s, and every run, index
    and report asks it)."""
    if (method == "recall" and bands is None and rows is None and not isinstance(threshold, bool)
            and not isinstance(num_perm, bool) and (threshold, num_perm, min_recall) == KNOWN_DEFAULT_KEY):
        return KNOWN_DEFAULT
    try:
        return _choose_params(threshold, num_perm, min_recall=min_recall, method=method, fp_weight=fp_weight,
                              fn_weight=fn_weight, bands=bands, rows=rows)
    except TypeError:  # an argument that cannot be a key (a list...): checked, uncached, as given
        return _choose_params.__wrapped__(threshold, num_perm, min_recall=min_recall, method=method,
                                          fp_weight=fp_weight, fn_weight=fn_weight, bands=bands, rows=rows)


# The choice every run with the default threshold, num_perm and min_recall asks for, as the search
# below makes it (tests/config/test_params.py compares the two): the search and the Gauss-Legendre
# nodes of its areas cost 8-10 CPU-ms of each such run's start-up, and the report's parameters
# table reads its areas (:func:`areas`).
KNOWN_DEFAULT_KEY = (0.8, 128, DEFAULT_MIN_RECALL)
KNOWN_DEFAULT = ParamChoice(
    threshold=0.8, num_perm=128, bands=18, rows=7, method="recall", midpoint=0.6617216689362398,
    p_at_threshold=0.985542096498926, false_positive_area=0.18405554215876715,
    false_negative_area=0.0002869799315584507,
    reason="the fewest false positives (smallest FP area) among the (bands, rows) with bands*rows <= 128 that "
           "find a pair at J = 0.8 with probability >= 0.985 (this one: 0.986)")


def areas(threshold: float, bands: int, rows: int) -> Tuple[float, float]:
    """(:func:`false_positive_area`, :func:`false_negative_area`) of ``threshold``, ``bands`` and
    ``rows``; those of :data:`KNOWN_DEFAULT` as it holds them."""
    k = KNOWN_DEFAULT
    if (threshold, bands, rows) == (k.threshold, k.bands, k.rows) and not isinstance(threshold, bool):
        return k.false_positive_area, k.false_negative_area
    return false_positive_area(threshold, bands, rows), false_negative_area(threshold, bands, rows)


@lru_cache(maxsize=256, typed=True)  # typed: True is not 1 here (a bool is refused)
def _choose_params(threshold: float, num_perm: int, *, min_recall: float = DEFAULT_MIN_RECALL, method: str = "recall",
                   fp_weight: float = 0.5, fn_weight: float = 0.5,
                   bands: Optional[int] = None, rows: Optional[int] = None) -> ParamChoice:
    """Choose (bands, rows) with bands * rows <= num_perm.

    method="recall" (default): among all (b, r) with P(candidate | threshold) >= min_recall, the one
    with the smallest false-positive area; ties go to the larger b * r, then to fewer bands. When no
    (b, r) reaches min_recall (tiny num_perm), the one with the highest P(candidate | threshold).

    method="weighted": minimise fp_weight * FP area + fn_weight * FN area (the common optimiser).

    Explicit ``bands`` and ``rows`` override the choice (and are only evaluated).
    """
    _check_threshold(threshold)
    if isinstance(num_perm, bool) or int(num_perm) != num_perm or num_perm < 1:
        raise ValueError(f"num_perm must be a positive integer, got {num_perm!r}")
    num_perm = int(num_perm)
    if (bands is None) != (rows is None):
        raise ValueError("bands and rows go together: give both or neither")
    if bands is not None:
        _check_band_rows(bands, rows)
        if bands * rows > num_perm:
            raise ValueError(f"bands x rows = {bands * rows} exceeds num_perm = {num_perm}")
        return _evaluate(threshold, num_perm, bands, rows, "given",
                         f"given by the user: {bands} bands x {rows} rows")
    if method == "recall":
        if not 0 < min_recall <= 1:
            raise ValueError(f"min_recall must be in (0, 1], got {min_recall}")
        best_key, best = None, None
        fallback_key, fallback = None, None
        recalling = []
        # For a given r, more bands raise P(candidate | s) at every s: a larger b of the same r has
        # a larger FP area and cannot be chosen, so each r offers only its fewest bands that reach
        # min_recall (the search then weighs ~10 curves, not ~350, and asks P ~430 times, not
        # ~650, its arguments checked once: 19 ms of every run's start-up before, 2.5 now). The
        # fallback, wanted only when no (b, r) reaches min_recall, is then the best of the whole
        # grid: every b of every r was seen.
        at = np.asarray(threshold, dtype=np.float64)  # checked above; b and r by the loops
        for r in range(1, num_perm + 1):
            for b in range(1, num_perm // r + 1):
                p = _probability(at, b, r)
                fkey = (-p, b)
                if fallback_key is None or fkey < fallback_key:
                    fallback_key, fallback = fkey, (b, r)
                if p >= min_recall:
                    recalling.append((b, r))
                    break
        for b, r in _least_fp_area(threshold, recalling):
            key = (false_positive_area(threshold, b, r), -(b * r), b)
            if best_key is None or key < best_key:
                best_key, best = key, (b, r)
        if best is not None:
            b, r = best
            p = candidate_probability(threshold, b, r)
            reason = (f"the fewest false positives (smallest FP area) among the (bands, rows) with "
                      f"bands*rows <= {num_perm} that find a pair at J = {threshold:g} with probability "
                      f">= {min_recall:g} (this one: {p:.3f})")
        else:
            b, r = fallback
            reason = (f"no (bands, rows) with bands*rows <= {num_perm} reaches P >= {min_recall:g} at "
                      f"J = {threshold:g}; this one has the highest P there; raise num_perm")
        return _evaluate(threshold, num_perm, b, r, "recall", reason)
    if method == "weighted":
        best_key, best = None, None
        for b, r in _grid(num_perm):
            err = fp_weight * false_positive_area(threshold, b, r) + fn_weight * false_negative_area(threshold, b, r)
            key = (err, b)
            if best_key is None or key < best_key:
                best_key, best = key, (b, r)
        b, r = best
        return _evaluate(threshold, num_perm, b, r, "weighted",
                         f"minimises {fp_weight:g} * FP area + {fn_weight:g} * FN area")
    raise ValueError(f"method must be 'recall' or 'weighted', got {method!r}")


def alternatives(threshold: float, num_perm: int, *, min_recall: float = DEFAULT_MIN_RECALL, limit: int = 8) -> List[ParamChoice]:
    """A short table of sensible (b, r) for this k: for each rows value, the fewest bands that use
    at most num_perm values and the most bands that fit; sorted by rows."""
    _check_threshold(threshold)
    rows_seen = []
    out = []
    for r in range(1, num_perm + 1):
        b = num_perm // r
        if b < 1:
            break
        rows_seen.append((r, b))
    # Keep the rows values whose curve passes through a useful range around the threshold.
    scored = []
    for r, b in rows_seen:
        p = candidate_probability(threshold, b, r)
        if 0.05 <= p or r <= 2:
            scored.append((abs(midpoint(b, r) - threshold), r, b))
    scored.sort()
    for _, r, b in sorted(scored[:limit], key=lambda t: t[1]):
        out.append(_evaluate(threshold, num_perm, b, r, "alternative", f"{b} bands x {r} rows uses {b * r} of {num_perm}"))
    return out


def describe(choice: ParamChoice, similarities=(0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)) -> dict:
    """The choice plus P(candidate) at a few similarities, as a plain dict (JSON-ready)."""
    d = choice.to_dict()
    sims = sorted(set(float(s) for s in similarities) | {choice.threshold})
    d["p_at"] = {f"{s:g}": float(candidate_probability(s, choice.bands, choice.rows)) for s in sims}
    return d


def _check_threshold(threshold: float) -> None:
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float, np.floating)) or not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold!r}")


def _check_band_rows(bands: int, rows: int) -> None:
    for name, v in (("bands", bands), ("rows", rows)):
        if isinstance(v, bool) or int(v) != v or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
