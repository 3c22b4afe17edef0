"""``neardup params`` (the S-curve of a (bands, rows) choice) and the HTML run report.

* :func:`params_summary` / :func:`format_params`: what ``neardup params`` prints.
* :func:`write_report`: one self-contained ``report.html`` (inline CSS and images, no scripts,
  no external URLs) from a dedup output folder; ``neardup report DIR`` regenerates it.
"""

from __future__ import annotations

import difflib
import html
import json
import math
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..kernels.arrays import arrow, to_numpy
from ..config import PUNCTUATION_MODES, Config, Shingling, Similarity, Sketch
from ..errors import ConfigError, InputError
from ..progress import plural
from ..kernels.params import (DEFAULT_MIN_RECALL, alternatives, candidate_probability, choose_params, describe,
                     false_negative_area, false_positive_area, midpoint)

__all__ = ["params_summary", "format_params", "write_report", "word_diff_html",
           "REPORT_NAME"]

REPORT_NAME = "report.html"


# ============================================================================================
# neardup params


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


# ============================================================================================
# The HTML report


_CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 0;
       background: #f4f6f8; color: #1d232a; }
main { max-width: 1200px; margin: 0 auto; padding: 24px 28px 60px; }
h1 { font-size: 26px; margin: 8px 0 2px; }
h2 { font-size: 19px; margin: 34px 0 10px; border-bottom: 2px solid #d7dde3; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 20px 0 6px; }
.sub { color: #5b6570; font-size: 13px; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin-top: 18px; }
.card { background: #fff; border: 1px solid #d7dde3; border-radius: 8px; padding: 12px 16px;
        min-width: 130px; }
.card .n { font-size: 28px; font-weight: 700; }
.card .l { font-size: 12px; color: #5b6570; text-transform: uppercase; letter-spacing: .04em; }
.card.removed .n { color: #b03a2e; }
.card.kept .n { color: #1e8449; }
table { border-collapse: collapse; background: #fff; font-size: 13px; }
th, td { border: 1px solid #d7dde3; padding: 4px 9px; text-align: left; vertical-align: top; }
th { background: #eef1f4; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.grid2 { display: flex; flex-wrap: wrap; gap: 16px; }
.fig { display: inline-block; vertical-align: top; background: #fff; border: 1px solid #d7dde3; border-radius: 8px; padding: 8px; }
.fig img, .fig svg { display: block; max-width: 100%; height: auto; }
.cluster { background: #fff; border: 1px solid #d7dde3; border-radius: 8px; padding: 8px 14px 14px;
           margin: 14px 0; }
.pair { display: grid; grid-template-columns: 1fr 1fr; gap: 10px; margin-top: 10px; }
.doc { border: 1px solid #d7dde3; border-radius: 6px; padding: 8px 10px; background: #fbfcfd;
       font-size: 13px; line-height: 1.45; max-height: 320px; overflow: auto; white-space: pre-wrap;
       word-wrap: break-word; }
.doc .h { font-weight: 700; font-size: 12px; color: #3d4650; margin-bottom: 4px; white-space: normal; }
del { background: #fadbd8; color: #922b21; text-decoration: line-through; }
ins { background: #d5f5e3; color: #1d6f42; text-decoration: none; }
.note { color: #5b6570; font-size: 13px; }
tr.kept td:last-child { color: #1d6f42; }
tr.removed td:last-child { color: #922b21; }
code { background: #eef1f4; padding: 0 3px; border-radius: 3px; }
"""


from ..io.storage.outfile import check_output_file, publish_file, same_file as _same_file  # noqa: E402


def _red(text: Any) -> str:
    """``text`` (a path, a URL, an id, a message) with the credentials of every URL in it hidden:
    everything a path or URL can reach the page or a message through goes through here."""
    from ..io.storage.fs import redact
    return redact(str(text))


def _esc(text: Any) -> str:
    """``text`` for the page: credentials hidden, then HTML-escaped."""
    return html.escape(_red(text))


def _one_line(exc: BaseException) -> str:
    return _red(" ".join(str(exc).split()) or type(exc).__name__)


def _fmt_int(v: Any) -> str:
    if v is None:
        return "n/a"
    try:
        return f"{int(v):,}"
    except (TypeError, ValueError, OverflowError):
        return _esc(v)


def _fmt_value(v: Any) -> str:
    """A parameter as a reader writes it: yes / no, a dash for nothing, never a Python repr."""
    if v is None:
        return "\u2014"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, (dict, list)):
        return _esc(json.dumps(v, sort_keys=True, default=str))
    return _esc(v)


def _read_parquet(path: Path, columns: Optional[Sequence[str]] = None, filters=None):
    import pyarrow.parquet as pq
    try:
        schema = pq.read_schema(path)
        if columns is not None:
            missing = [c for c in columns if c not in schema.names]
            if missing:
                raise InputError(f"{_red(path)}: missing column(s) {', '.join(missing)}; "
                                 f"it has {', '.join(schema.names)}")
        if filters is None:  # ParquetFile: the dataset reader behind read_table imports pandas
            return pq.ParquetFile(path).read(columns=list(columns) if columns else None)
        return pq.read_table(path, columns=list(columns) if columns else None, filters=filters)
    except InputError:
        raise
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise InputError(f"{_red(path)}: cannot read it as Parquet: {_one_line(exc)}") from None


def diff_units(text: str, *, punctuation: str = Shingling.punctuation) -> List[Tuple[str, int, int]]:
    """The words of ``text`` as the tokenizer cuts them, with where they lie in the text.

    Returns (key, start, end) per token: ``text[start:end]`` is the token as written and ``key``
    its normalised form (NFKC, lower case) that the diff compares. The rules are those of
    :mod:`neardup.kernels.shingles` (a word is a run of letters, digits, _ and the marks on them; a
    character of a script written without spaces, and under ``keep`` a symbol or a punctuation
    mark, are tokens of their own; white space, non-text code points, symbols and under ``split``
    punctuation separate), applied
    to the text as written so that the diff can show it as written.
    """
    return _diff_units(text, punctuation, None)


# The class of each character for the diff (by the classes of neardup.kernels.shingles), one letter: S
# separates, K is skipped (inside a token but not part of its key), W is a word character, M a
# mark, O a token of its own.
_DIFF_LETTERS = {"split": b"SWMOSSKSW", "delete": b"SWMOSKKSW", "keep": b"SWMOOOKSO"}
# A token: a one-character token with the marks that follow it, or a run of word characters and
# marks (under keep a mark may begin it; otherwise a mark on no token is skipped); skipped
# characters inside either, and at its end up to the character that closes it, belong to its span.
_DIFF_TOKEN = {}


def _diff_units(text: str, punctuation: str, limit: Optional[int]) -> List[Tuple[str, int, int]]:
    """:func:`diff_units`, the first ``limit`` tokens only when limit is not None.

    The characters are classed in one numpy lookup and cut into tokens by one regular expression
    over a string of class letters (one per character); only the tokens cost Python work.
    """
    import re
    import unicodedata
    from itertools import islice

    from ..kernels.shingles import char_classes
    punctuation = Shingling(punctuation=punctuation).punctuation  # checked
    if punctuation not in _DIFF_TOKEN:
        _DIFF_TOKEN[punctuation] = re.compile(r"O[MK]*|[WM][WMK]*" if punctuation == "keep" else r"O[MK]*|W[WMK]*")
    if not text:
        return []
    cps = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")
    lut = np.frombuffer(_DIFF_LETTERS[punctuation], dtype=np.uint8)
    classes = lut[char_classes()[cps]].tobytes().decode("ascii")
    matches = _DIFF_TOKEN[punctuation].finditer(classes)
    if limit is not None:
        matches = islice(matches, limit)
    out: List[Tuple[str, int, int]] = []
    normalize = unicodedata.normalize
    for m in matches:
        start, end = m.span()
        piece = text[start:end]
        if "K" in m.group():
            piece = "".join(ch for ch, c in zip(piece, m.group()) if c != "K")
        out.append((piece.lower() if piece.isascii() else normalize("NFKC", piece).lower(), start, end))
    return out


def word_diff_html(left: str, right: str, *, max_words: int = 600,
                   punctuation: str = Shingling.punctuation) -> Tuple[str, str]:
    """Word-level diff of two texts, HTML-escaped, with the words of the tokenizer.

    Returns (left_html, right_html): words of ``left`` missing from ``right`` are wrapped in
    ``<del>``, words of ``right`` missing from ``left`` in ``<ins>``; the text between words
    (white space, punctuation) is shown as written. Words are those of :func:`diff_units`, so a
    Chinese or Japanese sentence is compared character by character and only the changed
    characters are marked. Texts longer than ``max_words`` words are cut there (a note says so).
    """
    # one token past the cut says whether there is a cut; the rest of a long text is never cut up
    ua, ub = _diff_units(left, punctuation, max_words + 1), _diff_units(right, punctuation, max_words + 1)
    cut_a, cut_b = len(ua) > max_words, len(ub) > max_words
    ua, ub = ua[:max_words], ub[:max_words]
    sm = difflib.SequenceMatcher(None, [u[0] for u in ua], [u[0] for u in ub], autojunk=False)
    changed_a = []
    changed_b = []
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op != "equal":
            changed_a.append((i1, i2))
            changed_b.append((j1, j2))
    note = ' <span class="note">[... cut at {} words]</span>'.format(max_words)
    return (_render_diff(left, ua, changed_a, "del", cut_a) + (note if cut_a else ""),
            _render_diff(right, ub, changed_b, "ins", cut_b) + (note if cut_b else ""))


def _render_diff(text: str, units, changed, tag: str, cut: bool) -> str:
    """The text with each run of changed words in <tag> (the text between two changed words of a
    run goes inside too); after the last word, the rest of the text unless it was cut.

    ``changed``: the (first, past the last) unit indexes of the changed runs, in order (those of
    ``SequenceMatcher.get_opcodes``; runs that touch are one run). The text between two runs is
    escaped in one piece (escaping is per character, so this is the same as word by word).
    """
    out: List[str] = []
    pos = 0
    k = 0
    n = len(units)
    while k < len(changed):
        first, past = changed[k]
        k += 1
        while k < len(changed) and changed[k][0] == past:  # an insert next to a replace, say
            past = changed[k][1]
            k += 1
        if first >= past:  # nothing of this side changed (an insert on the other side)
            continue
        start, end = units[first][1], units[past - 1][2]
        out.append(html.escape(text[pos:start]))
        out.append(f"<{tag}>{html.escape(text[start:end])}</{tag}>")
        pos = end
    if not cut:
        out.append(html.escape(text[pos:]))
    elif n:
        out.append(html.escape(text[pos:max(pos, units[n - 1][2])]))
    return "".join(out).strip()


def _size_bins(max_size: int, min_size: int = 2) -> List[Tuple[int, int]]:
    """Bins of cluster sizes: one per size up to 10, then ranges; from ``min_size`` (2, or 1 when
    a cluster of one is there), so that every size up to ``max_size`` falls in a bin."""
    bins = [(s, s) for s in range(max(1, min(min_size, 2)), min(max_size, 10) + 1)]
    edges = [11, 21, 51, 101, 201, 501, 1001, 10001, 100001]
    lo = 11
    for hi_next in edges[1:]:
        if lo > max_size:
            break
        bins.append((lo, hi_next - 1))
        lo = hi_next
    if lo <= max_size:
        bins.append((lo, max_size))
    return bins


class _Figures:
    """Charts as inline HTML: matplotlib PNGs (base64) when available, else hand-made SVG."""

    def __init__(self, mode: str):
        from .plots import have_matplotlib
        if mode not in ("auto", "matplotlib", "svg"):
            raise ConfigError(f"plots must be 'auto', 'matplotlib' or 'svg', got {mode!r}")
        self.use_mpl = mode == "matplotlib" or (mode == "auto" and have_matplotlib())

    def _img(self, fig, alt: str) -> str:
        from .plots import figure_to_data_uri
        return f'<img alt="{html.escape(alt)}" src="{figure_to_data_uri(fig, "png")}">'

    def s_curve(self, bands: int, rows: int, threshold: float) -> str:
        from . import plots
        if self.use_mpl:
            fig = plots.s_curve_figure(bands, rows, threshold, figsize=(6.4, 4.0))
            return self._img(fig, f"S-curve {bands} bands x {rows} rows")
        return plots.svg_line_chart(bands, rows, threshold, width=600, height=380)

    def bars(self, labels: List[str], values: List[float], *, title: str, xlabel: str, ylabel: str,
             marker: Optional[Tuple[int, str]] = None, log: bool = False) -> str:
        from . import plots
        if self.use_mpl:
            plt = plots.require_matplotlib()
            fig, ax = plt.subplots(figsize=(6.4, 4.0))
            x = np.arange(len(values))
            ax.bar(x, values, width=0.9, color=plots.BAR)
            step = max(1, int(math.ceil(len(values) / 10)))
            ax.set_xticks(x[::step])
            ax.set_xticklabels([labels[i] for i in range(0, len(values), step)], fontsize=8,
                               rotation=30 if max((len(s) for s in labels), default=0) > 5 else 0)
            if marker is not None:
                ax.axvline(marker[0] - 0.5, color=plots.THRESHOLD, ls="--", lw=1.4, label=marker[1])
                ax.legend(loc="upper left", fontsize=8)
            if log and max(values, default=0) > 0:
                ax.set_yscale("log")
            ax.set_title(title)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.grid(True, axis="y", alpha=0.3)
            fig.tight_layout()
            return self._img(fig, title)
        return plots.svg_bar_chart(labels, values, title=title, xlabel=xlabel, ylabel=ylabel,
                                   width=600, height=380, marker=marker)


def _load_stats(out: Path) -> dict:
    path = out / "stats.json"
    if not path.is_file():
        raise InputError(f"{_red(out)}: no stats.json here; is it a neardup output folder?")
    try:
        with open(path, "r", encoding="utf-8") as fh:
            stats = json.load(fh)
    except (OSError, ValueError) as exc:
        raise InputError(f"{_red(path)}: cannot read it as JSON: {_one_line(exc)}") from None
    if not isinstance(stats, dict):
        raise InputError(f"{_red(path)}: expected a JSON object, got {type(stats).__name__}")
    return stats


def _schema_names(path: Path) -> List[str]:
    import pyarrow.parquet as pq
    try:
        return list(pq.read_schema(path).names)
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise InputError(f"{_red(path)}: cannot read it as Parquet: {_one_line(exc)}") from None


def _strings(col):
    """A (chunked) Arrow column as one string array (cluster ids may be stored as numbers)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks else pa.array([], type=col.type)
    return col if pa.types.is_string(col.type) else pc.cast(col, pa.string())


def _cluster_sizes(out: Path):
    """(cluster ids as an Arrow string array, sizes) of the clusters of this run, largest first
    (ties: first seen first), or None when no cluster file exists.

    A cluster of documents removed against an index (``--against``) is not one of them: its
    representative is an indexed document, not a document of this run. In clusters.parquet such
    a cluster has no kept member; in removed.parquet its rows have a ``representative_source``.
    Those documents are shown by :func:`_index_section`.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    clusters_path = out / "clusters.parquet"
    removed_path = out / "removed.parquet"
    kept = None
    if clusters_path.is_file():
        names = _schema_names(clusters_path)
        t = _read_parquet(clusters_path, ["cluster"] + (["is_representative"] if "is_representative" in names else []))
        if "is_representative" in names:
            kept = t["is_representative"]
        extra = 0
    elif removed_path.is_file():
        # Without clusters.parquet: every removed document plus its representative.
        names = _schema_names(removed_path)
        t = _read_parquet(removed_path, ["cluster"] + (["representative_source"] if "representative_source" in names else []))
        if "representative_source" in names:
            t = t.filter(pc.is_null(t["representative_source"]))
        extra = 1
    else:
        return None
    col = _strings(t["cluster"])
    valid = pc.is_valid(col)
    if col.null_count:
        col = col.filter(valid)
        kept = None if kept is None else _filter(kept, valid)
    if len(col) == 0:
        return pa.array([], type=pa.string()), np.zeros(0, dtype=np.int64)
    enc = pc.dictionary_encode(col)
    codes = np.asarray(to_numpy(enc.indices), dtype=np.int64)
    heads = enc.dictionary
    sizes = np.bincount(codes, minlength=len(heads)).astype(np.int64) + extra
    order = np.lexsort((np.arange(len(sizes)), -sizes))
    if kept is not None:  # only the clusters with a kept member: the run's own
        kept = kept.combine_chunks() if isinstance(kept, pa.ChunkedArray) else kept
        # null counts as not kept; a Python fill value would make a pyarrow scalar, which imports pandas
        flags = to_numpy(pc.and_kleene(kept, pc.is_valid(kept)))
        own = np.bincount(codes, weights=flags.astype(np.float64), minlength=len(heads)) > 0
        order = order[own[order]]
    return heads.take(arrow(order.astype(np.int64))), sizes[order]


def _filter(arr, mask):
    import pyarrow as pa
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks else pa.array([], type=arr.type)
    return arr.filter(mask)


def _only(table, column: str, values: List[str]):
    """The rows of ``table`` whose ``column`` (as a string) is one of ``values`` (filtered in
    Arrow, so that a removed.parquet of millions of rows never becomes Python objects)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    col = table[column]
    if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
        col = pc.cast(col, pa.string())
    mask = pc.is_in(col, value_set=arrow(list(values), type=col.type))
    return table.filter(mask)


def _only_clusters(table, cluster_ids: List[str]):
    """The rows of ``table`` whose cluster is one of ``cluster_ids``."""
    return _only(table, "cluster", cluster_ids)


# What happened to a member of a cluster (``role`` of :func:`_members`).
HEAD, KEPT, REMOVED, MEMBER = "head", "kept", "removed", "member"


def _members(out: Path, cluster_ids: List[str], limit: int) -> Dict[str, dict]:
    """What the report can say of the members of each cluster.

    For each cluster id: ``representative`` (the kept document that heads it: the first in keep
    order, whose id names the cluster in a real output), ``members`` (up to ``limit`` ids, the
    representative first, then in file order) and ``info`` {id: (role, representative,
    similarity)} for each listed member, role one of:

    * ``head``: kept, the representative;
    * ``kept``: kept too, by the chain guard (no verified pair at or above the threshold with a
      document of the cluster kept before it); ``is_representative`` true in clusters.parquet,
      or the representative of a removed document;
    * ``removed``: removed, with its own representative (the most similar kept document of the
      cluster: not always the head) and the similarity to it (None when not recorded);
    * ``member``: in clusters.parquet, which says no more, and no removed.parquet to ask.
    """
    result: Dict[str, dict] = {c: {"representative": None, "members": [], "info": {}} for c in cluster_ids}
    if not cluster_ids:
        return result
    clusters_path = out / "clusters.parquet"
    removed_path = out / "removed.parquet"
    removed = clusters = None
    if removed_path.is_file():
        removed = _only_clusters(_read_parquet(removed_path, ["id", "representative", "cluster", "similarity"]),
                                 cluster_ids)
    if clusters_path.is_file():
        names = _schema_names(clusters_path)
        cols = ["id", "cluster"] + (["is_representative"] if "is_representative" in names else [])
        clusters = _only_clusters(_read_parquet(clusters_path, cols), cluster_ids)
    # rows by cluster in Python (the tables hold the top clusters only): Arrow's comparisons with a
    # Python scalar import pandas
    listed_of: Dict[str, List[str]] = {}
    kept_of: Dict[str, List[str]] = {}
    if clusters is not None:
        flags_col = clusters["is_representative"].to_pylist() if "is_representative" in clusters.column_names else None
        ids_col = clusters["id"].to_pylist()
        for i, c in enumerate(clusters["cluster"].to_pylist()):
            c = str(c)
            if flags_col is not None and flags_col[i]:
                kept_of.setdefault(c, []).append(str(ids_col[i]))
            lst = listed_of.setdefault(c, [])
            if len(lst) <= limit:
                lst.append(str(ids_col[i]))
    removed_rows: Dict[str, List[Tuple[str, Optional[str], Any]]] = {}
    if removed is not None:
        if clusters is not None:  # the removal records of the listed members only
            wanted = set()
            for c in cluster_ids:
                wanted.update(listed_of.get(c, []))
            removed = _only(removed, "id", sorted(wanted))
        for i, r, c, s in zip(removed["id"].to_pylist(), removed["representative"].to_pylist(),
                              removed["cluster"].to_pylist(), removed["similarity"].to_pylist()):
            rows = removed_rows.setdefault(str(c), [])
            if clusters is not None or len(rows) <= limit:
                rows.append((str(i), None if r is None else str(r), s))
    flagged = clusters is not None and "is_representative" in clusters.column_names
    for c in cluster_ids:
        entry = result[c]
        kept = kept_of.get(c, [])
        rows = removed_rows.get(c, [])
        reps = [r for _, r, _ in rows if r is not None]
        if c in kept or (clusters is None and c in reps):
            head = c  # a real output: the cluster is named by its first kept document
        elif kept:
            head = kept[0]
        elif reps:
            head = reps[0]
        else:
            head = None
        entry["representative"] = head
        info: Dict[str, Tuple[str, Optional[str], Any]] = {}
        order: List[str] = [head] if head is not None else []
        if head is not None:
            info[head] = (HEAD, None, None)
        kept_set = set(kept)
        removal = {i: (r, s) for i, r, s in rows}
        if clusters is not None:
            for m in listed_of.get(c, []):
                if m in info:
                    continue
                if m in removal:
                    info[m] = (REMOVED,) + removal[m]
                elif flagged:
                    info[m] = (KEPT, None, None) if m in kept_set else (REMOVED, None, None)
                elif removed is not None:  # not in removed.parquet, which lists every removal
                    info[m] = (KEPT, None, None)
                else:
                    info[m] = (MEMBER, None, None)
                order.append(m)
        else:
            for m, r, s in rows:
                if r is not None and r not in info:  # a representative: kept
                    info[r] = (KEPT, None, None)
                    order.append(r)
                if m not in info:
                    info[m] = (REMOVED, r, s)
                    order.append(m)
        entry["members"] = order[:limit]
        entry["info"] = {m: info[m] for m in entry["members"]}
    return result


def _texts(out: Path, ids: set) -> Dict[str, str]:
    path = out / "texts_sample.parquet"
    if not path.is_file() or not ids:
        return {}
    t = _read_parquet(path, ["id", "text"])
    return {str(i): ("" if x is None else str(x)) for i, x in zip(t["id"].to_pylist(), t["text"].to_pylist())
            if str(i) in ids}


def _section_counts(counts: dict, verify: Any = None) -> str:
    items = [("input", "input documents", ""), ("kept", "kept", "kept"), ("removed", "removed", "removed"),
             ("rejected", "rejected records", ""), ("clusters", "duplicate clusters", ""),
             ("candidate_pairs", "candidate pairs", ""), ("verified_pairs", "verified pairs", "")]
    if verify == "none":
        items[-1] = ("verified_pairs", "pairs taken unverified (verify = none)", "")
    cards = []
    for key, label, cls in items:
        value = counts.get(key)
        extra = ""
        if key == "removed" and counts.get("input"):
            try:
                extra = f' <span class="sub">({int(value) / int(counts["input"]):.1%})</span>'
            except (TypeError, ValueError, ZeroDivisionError):
                extra = ""
        cards.append(f'<div class="card {cls}" id="count-{key}"><div class="l">{html.escape(label)}</div>'
                     f'<div class="n">{_fmt_int(value)}{extra}</div></div>')
    known = {k for k, _, _ in items}
    for key in sorted(k for k in counts if k not in known):
        cards.append(f'<div class="card" id="count-{_esc(key)}"><div class="l">'
                     f'{_esc(str(key).replace("_", " "))}</div>'
                     f'<div class="n">{_fmt_int(counts[key])}</div></div>')
    return '<div class="cards">' + "".join(cards) + "</div>"


def _inputs_line(stats: dict) -> str:
    inputs = stats.get("inputs")
    names = []
    if isinstance(inputs, list):
        for item in inputs[:5]:
            if isinstance(item, dict) and "name" in item:
                n = item.get("documents")
                names.append(_esc(item["name"]) + (f" ({_fmt_int(n)} {_docs(n)})" if n is not None else ""))
            elif isinstance(item, str):
                names.append(_esc(item))
        if len(inputs) > 5:
            names.append(f"and {len(inputs) - 5:,} more")
    version = stats.get("neardup_version")
    parts = []
    if names:
        parts.append("input: " + ", ".join(names))
    if version:
        parts.append(f"neardup {_esc(version)}")
    return " &middot; ".join(parts) or "a neardup dedup run"


def _docs(n: Any) -> str:
    return plural(n, "document") if isinstance(n, int) else "documents"


def _kv_table(d: dict, caption: Optional[str] = None) -> str:
    rows = "".join(f"<tr><th>{_esc(k)}</th><td>{_fmt_value(v)}</td></tr>" for k, v in d.items())
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f"<table>{cap}{rows}</table>"


def _resolve_bands(params: dict) -> Optional[Tuple[float, int, int]]:
    try:
        t = float(params.get("threshold"))
        b, r = params.get("bands"), params.get("rows")
        if b is None or r is None:
            k = int(params.get("num_perm", Sketch.num_perm))
            c = choose_params(t, k, min_recall=float(params.get("min_recall", DEFAULT_MIN_RECALL)))
            b, r = c.bands, c.rows
        b, r = int(b), int(r)
        candidate_probability(t, b, r)
        if not 0 < t <= 1:
            return None
        return t, b, r
    except (TypeError, ValueError):
        return None


def _similarity_histogram(out: Path, figs: _Figures, threshold: Optional[float]) -> str:
    path = out / "removed.parquet"
    if not path.is_file():
        return '<p class="note">No removed.parquet in this folder.</p>'
    col = _read_parquet(path, ["similarity"])["similarity"]
    sims = np.asarray(to_numpy(col) if hasattr(col, "to_numpy") else col, dtype=np.float64)
    sims = sims[np.isfinite(sims)]
    if sims.size == 0:
        return '<p class="note">No similarities recorded (no removed documents, or verification was off).</p>'
    lo = float(np.floor(min(sims.min(), threshold if threshold is not None else 1.0) * 20) / 20)
    lo = min(max(lo, 0.0), 0.95)
    nbins = int(round((1.0 - lo) / 0.01))
    edges = np.linspace(lo, 1.0, nbins + 1)
    counts, _ = np.histogram(np.clip(sims, 0.0, 1.0), bins=edges)
    labels = [f"{e:.2f}" for e in edges[:-1]]
    marker = None
    if threshold is not None and lo <= threshold <= 1.0:
        marker = (int(round((threshold - lo) / 0.01)), f"threshold {threshold:g}")
    chart = figs.bars(labels, counts.tolist(), title="Similarity of removed documents to their representative",
                      xlabel="similarity (bin start)", ylabel="removed documents", marker=marker)
    q = np.quantile(sims, [0.0, 0.5, 1.0])
    below = int(np.sum(sims < threshold)) if threshold is not None else 0
    note = (f'<p class="note">{sims.size:,} removed documents with a similarity: min {q[0]:.3f}, '
            f'median {q[1]:.3f}, max {q[2]:.3f}'
            + (f"; {below:,} below the threshold (kept in a cluster through another member)"
               if below else "") + ".</p>")
    return f'<div class="fig">{chart}</div>{note}'


def _punctuation_of(params: dict) -> str:
    """The run's punctuation mode from stats.json params (the default when it names none)."""
    mode = params.get("punctuation")
    return mode if mode in PUNCTUATION_MODES else Shingling.punctuation


def _role_html(role: str, rep: Optional[str], sim: Any, head: Optional[str]) -> str:
    """What happened to one member of a cluster, in words."""
    if role == HEAD:
        return "kept: the representative (the cluster's first document in keep order)"
    if role == KEPT:
        return ("kept: not similar enough (below the threshold) to any document of the cluster kept "
                "before it to be removed (chain guard)")
    if role == REMOVED:
        s_txt = f"{sim:.3f}" if isinstance(sim, float) and math.isfinite(sim) else "not recorded"
        if rep is None:
            return f"removed, similarity {s_txt} (no row in removed.parquet)"
        to = "the representative " if rep == head else ""
        return f"removed, similarity {s_txt} to {to}<code>{_esc(rep)}</code>"
    return "member (removed.parquet is missing: kept or removed is not known)"


def _cluster_section(out: Path, figs: _Figures, max_clusters: int, max_members: int, max_side_by_side: int,
                     punctuation: str = Shingling.punctuation, against: bool = False) -> Tuple[str, str]:
    """(size distribution html, largest clusters html) of the clusters of this run."""
    sized = _cluster_sizes(out)
    if sized is None:
        msg = '<p class="note">No clusters.parquet or removed.parquet in this folder.</p>'
        return msg, msg
    ids, sizes = sized
    if len(sizes) == 0:
        msg = ('<p class="note">No duplicate clusters in this run'
               + (': every removed document was removed against an index (below).' if against else '.') + '</p>')
        return msg, msg
    bins = _size_bins(int(sizes.max()), int(sizes.min()))
    labels = [str(a) if a == b else f"{a}-{b}" for a, b in bins]
    values = [int(np.sum((sizes >= a) & (sizes <= b))) for a, b in bins]
    nonzero = [v for v in values if v]
    chart = figs.bars(labels, values, title="Cluster sizes", xlabel="documents in the cluster",
                      ylabel="clusters", log=bool(nonzero) and max(nonzero) > 50 * max(1, min(nonzero)))
    rows = "".join(f'<tr><td>{html.escape(l)}</td><td class="num">{v:,}</td></tr>'
                   for l, v in zip(labels, values) if v)
    size_html = (f'<div class="grid2"><div class="fig">{chart}</div><div><table><tr><th>cluster size</th>'
                 f'<th>clusters</th></tr>{rows}</table><p class="note">{len(sizes):,} {plural(len(sizes), "cluster")}, '
                 f'{int(sizes.sum()):,} documents in {"it" if len(sizes) == 1 else "them"}; largest: {int(sizes.max()):,}; '
                 f'mean: {sizes.mean():.2f}.</p></div></div>')

    top = [str(c) for c in ids.slice(0, max_clusters).to_pylist()]
    members = _members(out, top, max(max_members, max_side_by_side + 1))
    wanted = set()
    for c in top:
        entry = members[c]
        for m in entry["members"][:max_side_by_side + 1]:
            wanted.add(m)
            rep = entry["info"][m][1]
            if rep is not None:
                wanted.add(rep)
    texts = _texts(out, wanted)
    parts = []
    if not texts:
        parts.append('<p class="note">Texts are not shown: this folder has no texts_sample.parquet '
                     '(or it holds none of these documents); only ids are listed.</p>')
    for c, size in zip(top, sizes[:max_clusters]):
        entry = members[c]
        head = entry["representative"]
        mem = entry["members"]
        info = entry["info"]
        lis = []
        for m in mem[:max_members]:
            role, rep, sim = info[m]
            cls = ' class="kept"' if role in (HEAD, KEPT) else (' class="removed"' if role == REMOVED else "")
            lis.append(f"<tr{cls}><td><code>{_esc(m)}</code></td><td>{_role_html(role, rep, sim, head)}</td></tr>")
        more = (f'<p class="note">... and {int(size) - len(mem[:max_members]):,} more.</p>'
                if int(size) > len(mem[:max_members]) else "")
        block = [f'<div class="cluster"><h3>cluster <code>{_esc(c)}</code>: '
                 f'{int(size):,} documents</h3><table><tr><th>id</th><th>what happened to it</th></tr>'
                 f'{"".join(lis)}</table>{more}']
        # each member side by side with the document it was compared with: a removed one with its
        # own representative, a kept one (chain guard) with the cluster's representative
        for m in [m for m in mem if m != head][:max_side_by_side]:
            role, rep, sim = info[m]
            left_id = rep if role == REMOVED and rep is not None else head
            if left_id is None or m not in texts or left_id not in texts:
                continue
            left, right = word_diff_html(texts[left_id], texts[m], punctuation=punctuation)
            s_txt = f", similarity {sim:.3f}" if isinstance(sim, float) and math.isfinite(sim) else ""
            what = {REMOVED: "removed", KEPT: "kept (chain guard)"}.get(role, "member")
            block.append(
                f'<div class="pair"><div class="doc"><div class="h">representative '
                f'<code>{_esc(left_id)}</code> (<del>deleted</del> in the member)</div>{left}</div>'
                f'<div class="doc"><div class="h">{what} <code>{_esc(m)}</code>{s_txt} '
                f'(<ins>inserted</ins>)</div>{right}</div></div>')
        block.append("</div>")
        parts.append("".join(block))
    return size_html, "".join(parts)


def _index_section(out: Path, counts: dict, max_rows: int = 20) -> str:
    """The documents removed against an index (``--against``): their representatives are indexed
    documents, outside this run, so they are in no cluster of it. Empty when there are none."""
    path = out / "removed.parquet"
    n_counted = counts.get("removed_against_index")
    if not path.is_file() or "representative_source" not in _schema_names(path):
        if isinstance(n_counted, int) and n_counted > 0:
            return (f'<h2>Removed against an index</h2><p class="note">{n_counted:,} {_docs(n_counted)} '
                    f'{"was" if n_counted == 1 else "were"} removed as near-duplicates of indexed documents; removed.parquet does not say which.</p>')
        return ""
    import pyarrow.compute as pc
    t = _read_parquet(path, ["id", "representative", "similarity", "representative_source"])
    t = t.filter(pc.is_valid(t["representative_source"]))
    if len(t) == 0:
        return ""
    indexed = len(pc.unique(_strings(t["representative"])))
    head = t.slice(0, max_rows)
    body = []
    for i, r, s, src in zip(head["id"].to_pylist(), head["representative"].to_pylist(),
                            head["similarity"].to_pylist(), head["representative_source"].to_pylist()):
        s_txt = f"{s:.3f}" if isinstance(s, float) and math.isfinite(s) else "not recorded"
        body.append(f"<tr><td><code>{_esc(i)}</code></td><td>removed</td><td><code>{_esc(r)}</code></td>"
                    f"<td>{_esc(src)}</td><td class=\"num\">{s_txt}</td></tr>")
    return (f'<h2>Removed against an index</h2><p class="note">{len(t):,} {_docs(len(t))} of this run '
            f'{"was" if len(t) == 1 else "were"} removed as near-duplicates of {indexed:,} {_docs(indexed)} already in an index (<code>--against</code>). '
            f'Their representatives are not documents of this run, so they form no cluster above '
            f'(first {min(max_rows, len(t))} shown; all in <code>removed.parquet</code>, with '
            f'<code>representative_source</code>).</p><table><tr><th>document</th><th>what happened to it</th>'
            f'<th>indexed representative</th><th>added to the index as</th><th>similarity</th></tr>'
            f'{"".join(body)}</table>')


def _rejected_section(out: Path, counts: dict) -> str:
    path = out / "rejected.parquet"
    if not path.is_file():
        n = counts.get("rejected")
        return f'<p class="note">{"No rejected records." if not n else "rejected.parquet is missing."}</p>'
    names = _schema_names(path)
    cols = [c for c in ("source", "row", "reason") if c in names]
    t = _read_parquet(path, cols)
    if len(t) == 0:
        return '<p class="note">No rejected records.</p>'
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{_esc(_WHOLE_FILE if v is None and c == 'row' else v)}</td>"
                                    for c, v in zip(cols, row)) + "</tr>"
                   for row in zip(*(t[c].to_pylist()[:20] for c in cols)))
    return (f'<p class="note">{len(t):,} {plural(len(t), "record")} could not be read (first {min(20, len(t))} shown; '
            f'all in <code>rejected.parquet</code>).</p><table><tr>{head}</tr>{body}</table>')


_WHOLE_FILE = "(whole file)"  # the row of a rejection that is about a whole file, not one of its records
_LIST_SHOWN = 5  # items of a recorded list shown in the report (stats.json has them all)


def _bounded(value: Any) -> Any:
    """A recorded value as the report shows it: a list longer than _LIST_SHOWN as its length and
    its first items (stats.json's ``inputs`` and ``kept_files`` list every file of a run)."""
    if isinstance(value, list) and len(value) > _LIST_SHOWN:
        return f"{len(value):,} entries; the first {_LIST_SHOWN}: " + json.dumps(value[:_LIST_SHOWN], default=str)
    return value


def _kept_note(out: Path) -> str:
    kept = out / "kept"
    if not kept.is_dir():
        return ""
    files = [p for p in kept.rglob("*") if p.is_file()]
    size = sum(p.stat().st_size for p in files)
    return (f'<p class="note">Kept documents: {len(files):,} {plural(len(files), "file")}, {size / 1e6:,.1f} MB in '
            f'<code>kept/</code>.</p>')


def render_report(output_dir, *, plots: str = "auto", max_clusters: int = 10, max_members: int = 8,
                  max_side_by_side: int = 3, stats: Optional[dict] = None) -> str:
    """The report of a dedup output folder as one HTML string (see :func:`write_report`)."""
    out = Path(output_dir)
    if not out.is_dir():
        raise InputError(f"{_red(out)}: not a folder")
    stats = _load_stats(out) if stats is None else stats
    counts = stats.get("counts") if isinstance(stats.get("counts"), dict) else {}
    params = stats.get("params") if isinstance(stats.get("params"), dict) else {}
    seconds = stats.get("seconds") if isinstance(stats.get("seconds"), dict) else {}
    figs = _Figures(plots)
    resolved = _resolve_bands(params) if params else None
    threshold = resolved[0] if resolved else None

    sections = []
    # Nothing here depends on when or where the report is written (no clock, no output path, no
    # timings): the same run gives the same bytes.
    sections.append(f'<h1>neardup report</h1><div class="sub">{_inputs_line(stats)}</div>')
    sections.append(_section_counts(counts, params.get("verify")))
    sections.append(_kept_note(out))

    sections.append("<h2>Parameters</h2>")
    left = _kv_table(params) if params else '<p class="note">No parameters recorded.</p>'
    right = ""
    if resolved:
        t, b, r = resolved
        right = _kv_table({
            "bands x rows": f"{b} x {r}",
            "midpoint (1/b)^(1/r)": f"{midpoint(b, r):.4f}",
            f"P(candidate | J = {t:g})": f"{candidate_probability(t, b, r):.4f}",
            f"false-positive area [0, {t:g}]": f"{false_positive_area(t, b, r):.4f}",
            f"false-negative area [{t:g}, 1]": f"{false_negative_area(t, b, r):.4f}",
        })
    sections.append(f'<div class="grid2"><div>{left}</div><div>{right}</div></div>')
    if seconds:
        sections.append('<p class="note">Time per stage: see <code>seconds</code> in stats.json (left '
                        'out here so that the same run always gives the same report).</p>')

    sections.append("<h2>S-curve</h2>")
    if resolved:
        t, b, r = resolved
        sections.append(
            f'<div class="grid2"><div class="fig">{figs.s_curve(b, r, t)}</div><div class="note" '
            f'style="max-width:420px">Probability that two documents of Jaccard similarity J become a '
            f'candidate pair: 1 - (1 - J<sup>{r}</sup>)<sup>{b}</sup>. At the threshold {t:g} it is '
            f'{candidate_probability(t, b, r):.3f}; the curve is steepest near the midpoint '
            f'{midpoint(b, r):.3f}. Run <code>neardup audit</code> to measure it on this corpus.</div></div>')
    else:
        sections.append('<p class="note">The parameters (threshold, bands, rows) are not recorded.</p>')

    sections.append("<h2>Similarity of removed documents</h2>")
    sections.append(_similarity_histogram(out, figs, threshold))
    index_html = _index_section(out, counts)
    size_html, largest_html = _cluster_section(out, figs, max_clusters, max_members, max_side_by_side,
                                               _punctuation_of(params), against=bool(index_html))
    sections.append("<h2>Cluster sizes</h2>")
    sections.append(size_html)
    sections.append("<h2>Largest clusters</h2>")
    sections.append(largest_html)
    sections.append(index_html)
    sections.append("<h2>Rejected records</h2>")
    sections.append(_rejected_section(out, counts))
    extra = {k: v for k, v in stats.items() if k not in ("counts", "params", "seconds")}
    if extra:
        sections.append("<h2>Other recorded values</h2>" + _kv_table({k: _bounded(v) for k, v in extra.items()}))

    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>neardup report</title><style>{_CSS}</style></head>"
            "<body><main>\n" + "\n".join(sections) + "\n</main></body></html>\n")


def write_report(output_dir, output=None, *, plots: str = "auto", overwrite: bool = False,
                 stats: Optional[dict] = None) -> Union[Path, str]:
    """Write ``report.html`` (or ``output``) for a dedup output folder and return its path (a
    Path, or the URL of a report written to a store).

    The folder must hold ``stats.json``; ``removed.parquet``, ``clusters.parquet``,
    ``texts_sample.parquet``, ``rejected.parquet`` and ``kept/`` are used when present. The file is
    self-contained: inline CSS, images as base64 PNG (matplotlib) or inline SVG (without it), no
    scripts, no external links. ``plots``: ``auto`` (matplotlib when installed), ``matplotlib``
    or ``svg`` (never import matplotlib; faster).

    The folder and ``output`` may each be local or on a store (a URL): a remote folder's files are
    read from a local copy (:meth:`~neardup.io.storage.folder.Folder.local_view`). The folder's own
    ``report.html`` is always replaced. ``output`` is refused (ConfigError, before any work) when
    it is one of the folder's files or under its ``kept/``, and when it exists, unless
    ``overwrite``. The page appears whole or not at all: written under a temporary name in the
    same folder, then renamed (on a store: one upload); a failed write (a folder that cannot be
    written, a full disk) is a one-line ConfigError naming the path and leaves no temporary file.
    """
    from ..io.storage import fs
    from ..io.storage.folder import Folder

    folder = Folder.of(output_dir)
    folder.require_folder()
    given = fs.local_path(folder.shown)  # the folder as the user named it: what is shown
    default = fs.join(given, REPORT_NAME)
    path = os.fspath(output) if output is not None else default
    owned = _same_file(path, default)  # the folder's own report: neardup's to replace
    check_output_file(path, inputs=[fs.join(given, n) for n in _REPORT_INPUTS], inside=[fs.join(given, "kept")],
                      overwrite=overwrite or owned, option="--output", remote_ok=True)
    with folder.local_view(_REPORT_INPUTS, sizes_only=("kept",)) as local:
        text = render_report(local, plots=plots, stats=stats)
    return publish_file(path, text.encode("utf-8"), overwrite=overwrite or owned, option="--output")


_REPORT_INPUTS = ("stats.json", "removed.parquet", "clusters.parquet", "texts_sample.parquet", "rejected.parquet")


