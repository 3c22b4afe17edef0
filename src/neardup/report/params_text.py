"""What ``neardup params`` shows: the (bands, rows) chosen for a threshold and a signature length,
why, its S-curve numbers and the alternatives.

* :func:`params_summary`: everything as a JSON-ready dict (``neardup params --json``).
* :func:`format_params`: the same as the text and the terminal plot ``neardup params`` prints.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Tuple

from ..config import Config, Similarity, Sketch
from ..errors import ConfigError
from ..config.params import DEFAULT_MIN_RECALL, alternatives, choose_params, describe

__all__ = ["params_summary", "format_params"]


def _around(threshold: float) -> List[float]:
    """A few similarities around the threshold (inside [0, 1]), the threshold included."""
    sims = {round(threshold + d, 4) for d in (-0.3, -0.2, -0.1, -0.05, 0.0, 0.05, 0.1, 0.15)}
    return sorted(s for s in sims if 0.0 < s <= 1.0)


def _row(choice, labels: List[str]) -> dict:
    return {
        "bands": choice.bands, "rows": choice.rows, "used": choice.bands * choice.rows,
        "midpoint": choice.midpoint, "p_at_threshold": choice.p_at_threshold,
        "false_positive_area": choice.false_positive_area,
        "false_negative_area": choice.false_negative_area, "labels": labels,
    }


def params_summary(threshold: float = Similarity.threshold, num_perm: int = Sketch.num_perm, *,
                   bands: Optional[int] = None, rows: Optional[int] = None,
                   min_recall: float = DEFAULT_MIN_RECALL, method: str = "recall") -> dict:
    """Everything ``neardup params`` shows, as a JSON-ready dict.

    Keys: threshold, num_perm, bands, rows, method, reason, midpoint, p_at_threshold,
    false_positive_area, false_negative_area, p_at ({"0.8": P, ...}), min_recall, used,
    alternatives (list of dicts with bands, rows, used, midpoint, p_at_threshold, the two areas and
    ``labels``), default (the recall chooser's pick) and weighted (the weighted optimiser's pick).
    Raises ConfigError for impossible parameters.
    """
    if method not in ("recall", "weighted"):
        raise ConfigError(f"method must be 'recall' or 'weighted', got {method!r}")
    # Config validates every number with the project's one-line messages.
    Config(threshold=threshold, num_perm=num_perm, bands=bands, rows=rows, min_recall=min_recall)
    try:
        choice = choose_params(threshold, num_perm, min_recall=min_recall, method=method,
                               bands=bands, rows=rows)
        default = choose_params(threshold, num_perm, min_recall=min_recall, method="recall")
        weighted = choose_params(threshold, num_perm, method="weighted")
        alts = alternatives(threshold, num_perm, min_recall=min_recall)
    except ValueError as exc:  # pragma: no cover - Config caught it above
        raise ConfigError(str(exc)) from None

    out = describe(choice, similarities=_around(threshold))
    out["min_recall"] = float(min_recall)
    out["used"] = choice.bands * choice.rows
    labels: Dict[Tuple[int, int], List[str]] = {}
    rows_by_key: Dict[Tuple[int, int], Any] = {}
    for c in alts:
        rows_by_key.setdefault((c.bands, c.rows), c)
    for c, label in ((choice, "chosen"),
                     (default, f"default (P at threshold >= {min_recall:g}, fewest false positives)"),
                     (weighted, "weighted optimiser (0.5 FP + 0.5 FN)")):
        rows_by_key.setdefault((c.bands, c.rows), c)
        labels.setdefault((c.bands, c.rows), []).append(label)
    table = [_row(rows_by_key[k], labels.get(k, [])) for k in
             sorted(rows_by_key, key=lambda k: (k[1], k[0]))]
    out["alternatives"] = table
    out["default"] = {k: v for k, v in _row(default, []).items() if k != "labels"}
    out["weighted"] = {k: v for k, v in _row(weighted, []).items() if k != "labels"}
    return out


def format_params(summary: dict, *, plot_width: int = 60, plot_height: int = 15) -> str:
    """The human-readable text of ``neardup params``."""
    from .plots import ascii_s_curve
    t = summary["threshold"]
    b, r, k = summary["bands"], summary["rows"], summary["num_perm"]
    lines = []
    method = summary["method"]
    how = {"recall": f"default chooser, min recall {summary['min_recall']:g}",
           "weighted": "weighted optimiser", "given": "given"}.get(method, method)
    lines.append(f"neardup params: threshold {t:g}, num_perm {k} ({how})")
    lines.append("")
    lines.append(f"chosen: {b} bands x {r} rows (uses {b * r} of {k} signature values)")
    lines.append(f"why:    {summary['reason']}")
    lines.append("")
    lines.append(f"  midpoint (1/b)^(1/r)            {summary['midpoint']:.4f}")
    lines.append(f"  P(candidate | J = {t:g})".ljust(34) + f"{summary['p_at_threshold']:.4f}")
    lines.append(f"  false-positive area [0, {t:g}]".ljust(34) + f"{summary['false_positive_area']:.4f}")
    lines.append(f"  false-negative area [{t:g}, 1]".ljust(34) + f"{summary['false_negative_area']:.4f}")
    lines.append("")
    lines.append("P(candidate) = 1 - (1 - J^r)^b at similarities around the threshold:")
    for key, p in summary["p_at"].items():
        mark = "  <- threshold" if math.isclose(float(key), t) else ""
        lines.append(f"  J = {float(key):<5g}  P = {p:.4f}{mark}")
    lines.append("")
    lines.append(f"alternatives for num_perm = {k}:")
    header = f"  {'bands':>5} {'rows':>4} {'used':>4}  {'midpoint':>8}  {'P(J=' + format(t, 'g') + ')':>9}  {'FP area':>7}  {'FN area':>7}"
    lines.append(header)
    for row in summary["alternatives"]:
        tag = ("  <- " + "; ".join(row["labels"])) if row["labels"] else ""
        lines.append(f"  {row['bands']:>5} {row['rows']:>4} {row['used']:>4}  {row['midpoint']:>8.4f}  "
                     f"{row['p_at_threshold']:>9.4f}  {row['false_positive_area']:>7.4f}  "
                     f"{row['false_negative_area']:>7.4f}{tag}")
    w = summary["weighted"]
    if (w["bands"], w["rows"]) != (b, r):
        lines.append("")
        lines.append(f"note: the weighted optimiser (minimise 0.5 FP area + 0.5 FN area) would pick "
                     f"{w['bands']} x {w['rows']}, which finds a pair at J = {t:g} with probability "
                     f"{w['p_at_threshold']:.4f}, i.e. misses {1 - w['p_at_threshold']:.0%} of them.")
    lines.append("")
    lines.append(f"S-curve of {b} bands x {r} rows:")
    lines.append(ascii_s_curve(b, r, t, width=plot_width, height=plot_height))
    return "\n".join(lines)
